// Package rdmanl operates RDMA devices over the kernel's RDMA netlink
// interface (NETLINK_RDMA, the "nldev" client): what iproute2's rdma tool
// does, in pure Go.
//
//   - devices and ports: Devices, Device, Ports, Rename (rdma dev, rdma link);
//   - software devices: AddLink, DeleteLink (rdma link add/delete);
//   - namespaces: System, SetNetnsMode, MoveToNetns, DialNetns
//     (rdma system, rdma dev set DEV netns);
//   - statistics: PortCounters, QPCounters, SetQPCounterAuto
//     (rdma statistic), and HWCounters from sysfs;
//   - resources: Summary, QPs, CQs, MRs, PDs, CMIDs, Contexts (rdma res show);
//   - events: Watch, device add, remove and rename notifications.
//
// A Conn is one netlink socket; every call takes a context.Context that
// bounds its waits, which park on the runtime's netpoller. Without a
// deadline, a wait for the kernel's answer gives up after five seconds;
// Monitor.Next, which waits for notifications, waits as long as its context.
//
//	c, err := rdmanl.Dial()
//	if err != nil { ... }
//	defer c.Close()
//	devs, err := c.Devices(ctx)
//
// # Errors
//
// Errors the kernel returns wrap its errno (errors.Is(err, unix.EPERM)).
// The common ones of link and device management are also matched by the
// sentinels ErrNotFound, ErrNetdevNotFound, ErrNameTaken, ErrNetdevInUse,
// ErrLinkTypeUnavailable, ErrNotSoftware and ErrNotSupported (the module's
// one "not supported", uverbs.ErrNotSupported). Replies that are not
// well-formed netlink match ErrMalformed.
//
// # Network namespaces
//
// In the default shared mode every network namespace sees every RDMA
// device. In exclusive mode (SetNetnsMode(ctx, NetnsExclusive)) a device
// belongs to one namespace and netlink only shows a socket the devices of
// the namespace it was opened in; MoveToNetns moves one, DialNetns opens a
// Conn in another namespace. sysfs may still show other devices.
//
// # Numbers
//
// Every netlink number lives in internal/rdmanl (the wire layer this
// package is built on), checked against the kernels' BTF.
package rdmanl
