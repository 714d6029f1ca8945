package rdmanl

import (
	"context"
	"fmt"

	"golang.org/x/sys/unix"

	nl "github.com/goverbs/goverbs/internal/rdmanl"
)

// Link types of software RDMA devices.
const (
	LinkRXE = "rxe" // RoCEv2 in software (rdma_rxe)
	LinkSIW = "siw" // iWARP in software (siw); Debian 12's kernels do not build it
)

// AddLink creates the software RDMA device name of type typ (LinkRXE,
// LinkSIW) on the network device netdev, as rdma link add NAME type TYPE
// netdev NETDEV does. The kernel's refusals come back as errors matching
// ErrNetdevNotFound, ErrNameTaken, ErrNetdevInUse or
// ErrLinkTypeUnavailable; a missing privilege as unix.EPERM.
func (c *Conn) AddLink(ctx context.Context, name, typ, netdev string) error {
	if err := checkName("device name", name); err != nil {
		return err
	}
	if err := checkName("link type", typ); err != nil {
		return err
	}
	if netdev == "" || len(netdev) >= unix.IFNAMSIZ {
		return fmt.Errorf("rdmanl: network device name %q is empty or longer than %d bytes", netdev, unix.IFNAMSIZ-1)
	}
	attrs := nl.AppendStringAttr(nil, nl.RDMA_NLDEV_ATTR_DEV_NAME, name)
	attrs = nl.AppendStringAttr(attrs, nl.RDMA_NLDEV_ATTR_LINK_TYPE, typ)
	attrs = nl.AppendStringAttr(attrs, nl.RDMA_NLDEV_ATTR_NDEV_NAME, netdev)
	op := fmt.Sprintf("add link %s type %s netdev %s", name, typ, netdev)
	err := c.do(ctx, op, nl.RDMA_NLDEV_CMD_NEWLINK, false, attrs, nil)
	if err == nil {
		return nil
	}
	e := &Error{Op: op, Err: err}
	// nldev_newlink: ENODEV when the netdev is not in the socket's
	// namespace; EINVAL when no driver registered the type, even after
	// request_module("rdma-link-TYPE"). rxe_newlink: EEXIST when the
	// netdev already has an rxe device. ib_register_device: ENFILE when
	// the name is taken (assign_name).
	switch errnoOf(err) {
	case unix.ENODEV:
		e.Kind = ErrNetdevNotFound
	case unix.EINVAL:
		e.Kind = ErrLinkTypeUnavailable
	case unix.EEXIST:
		e.Kind = ErrNetdevInUse
	case unix.ENFILE:
		e.Kind = ErrNameTaken
	}
	if e.Kind == ErrNetdevInUse || e.Kind == ErrLinkTypeUnavailable {
		// The same errnos have other causes; say which it was where the
		// kernel's state tells.
		if _, derr := c.Device(ctx, name); derr == nil {
			e.Kind = ErrNameTaken
		}
	}
	return e
}

// DeleteLink removes the software RDMA device called name (rdma link
// delete NAME). A device that is not a software one gives ErrNotSoftware,
// a missing one ErrNotFound.
func (c *Conn) DeleteLink(ctx context.Context, name string) error {
	d, err := c.Device(ctx, name)
	if err != nil {
		return err
	}
	attrs := nl.AppendU32Attr(nil, nl.RDMA_NLDEV_ATTR_DEV_INDEX, d.Index)
	op := "delete link " + name
	err = c.do(ctx, op, nl.RDMA_NLDEV_CMD_DELLINK, false, attrs, nil)
	if err == nil {
		return nil
	}
	e := &Error{Op: op, Err: err}
	if errnoOf(err) == unix.EINVAL {
		// nldev_dellink refuses devices without IBK_ALLOW_USER_UNREG with
		// EINVAL; a device gone in the meantime gives the same.
		if _, derr := c.DeviceByIndex(ctx, d.Index); derr == nil {
			e.Kind = ErrNotSoftware
		} else {
			e.Kind = ErrNotFound
		}
	}
	return e
}
