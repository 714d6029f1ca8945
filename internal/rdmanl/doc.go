// Package rdmanl is a minimal client of the kernel's RDMA netlink interface
// (NETLINK_RDMA, the "nldev" client): the device dump, the uverbs character
// device of a device with its driver ID, and the subsystem settings. It is
// what rdma-core's libibverbs/ibdev_nl.c asks the kernel, spoken with
// golang.org/x/sys/unix and no netlink library.
//
// Every byte that comes from the kernel is parsed with bounds checks
// (ParseMessages, ParseAttrs); malformed input gives an error matching
// ErrMalformed, never a panic.
//
// Netlink only shows the devices of the caller's network namespace when the
// RDMA subsystem is in exclusive mode; sysfs may show others.
package rdmanl
