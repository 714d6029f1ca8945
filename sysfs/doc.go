// Package sysfs finds RDMA devices and their uverbs character devices the
// way rdma-core's libibverbs does, from /sys/class/infiniband,
// /sys/class/infiniband_verbs and /dev/infiniband, and reads what sysfs says
// about them: node type and GUIDs, firmware and board strings, the kernel
// driver, and per port the state, link layer, LIDs, rate, GID table and
// P_Key table.
//
// # Roots
//
// New("/") reads the running system. New with another directory reads a
// copy of a system, and NewFS reads any fs.FS laid out like a root
// directory; package sysfstest loads recorded trees for it, which is how
// the tests, and other packages' tests, run without RDMA hardware.
//
// # Usable devices
//
// A device is usable when a uverbs character device is bound to it, its
// node exists in /dev/infiniband with the device number sysfs gives, the
// caller may open it read-write, and the kernel's uverbs ABI is one rdma-core
// speaks. Devices lists those; AllDevices lists every device with a Problem
// saying why it cannot be used. Whether a provider (rxe, mlx5) supports the
// device is for the uverbs package to decide, using Uverbs.ABIVersion and
// the driver ID that netlink reports (package internal/rdmanl).
//
// Devices come in rdma-core's order: see FS.AllDevices.
//
// # Errors
//
// Files are parsed strictly, in the formats the kernel writes
// (drivers/infiniband/core/sysfs.c). A file that cannot be read gives an
// *fs.PathError and one that does not parse a *ParseError, both naming the
// file; either makes the device's Problem. Files that drivers may leave out
// (fw_ver, hw_rev, hca_type, board_id, node_desc, the P_Key table) are not
// errors when missing.
//
// # Cost
//
// Nothing is cached: every call reads sysfs anew. Reading a device reads
// its whole GID table, which is 1024 entries per port on rxe; FS.Uverbs
// reads only what opening the device needs.
package sysfs
