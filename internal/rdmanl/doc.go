// Package rdmanl is the wire layer of the kernel's RDMA netlink interface
// (NETLINK_RDMA, the "nldev" client): every nldev number (consts.go, checked
// against the kernels' BTF), the message and attribute codec, and the
// socket (Conn.Do, on the netpoller with a context). The public package
// github.com/goverbs/goverbs/rdmanl is built on it. It also keeps the small
// discovery API sysfs and uverbs use: the device dump, the uverbs character
// device of a device with its driver ID (LookupCharDev, DriverID), and the
// subsystem settings, which is what rdma-core's libibverbs/ibdev_nl.c asks
// the kernel.
//
// Every byte that comes from the kernel is parsed with bounds checks
// (ParseMessages, ParseAttrs); malformed input gives an error matching
// ErrMalformed, never a panic.
//
// Netlink only shows the devices of the caller's network namespace when the
// RDMA subsystem is in exclusive mode; sysfs may show others.
package rdmanl
