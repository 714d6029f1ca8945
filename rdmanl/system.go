package rdmanl

import (
	"context"
	"fmt"

	"golang.org/x/sys/unix"

	nl "github.com/goverbs/goverbs/internal/rdmanl"
)

// NetnsMode is the RDMA subsystem's network namespace mode.
type NetnsMode uint8

// Network namespace modes (RDMA_NLDEV_SYS_ATTR_NETNS_MODE).
const (
	// NetnsExclusive: each device belongs to one network namespace.
	NetnsExclusive NetnsMode = 0
	// NetnsShared: every namespace sees every device (the default).
	NetnsShared NetnsMode = 1
)

func (m NetnsMode) String() string {
	switch m {
	case NetnsExclusive:
		return "exclusive"
	case NetnsShared:
		return "shared"
	}
	return fmt.Sprintf("NetnsMode(%d)", uint8(m))
}

// System is the RDMA subsystem's settings (rdma system).
type System struct {
	NetnsMode NetnsMode
	// CopyOnFork: the kernel copies DMA-pinned pages on fork (5.13+);
	// false also where the kernel does not say.
	CopyOnFork bool
	// PrivilegedQKey: only privileged users may use controlled Q_Keys
	// (RDMA_NLDEV_SYS_ATTR_PRIVILEGED_QKEY_MODE, 6.5+; false on 6.1).
	PrivilegedQKey bool
	// HavePrivilegedQKey is false where the kernel does not report it.
	HavePrivilegedQKey bool
}

// System reads the subsystem's settings (RDMA_NLDEV_CMD_SYS_GET).
func (c *Conn) System(ctx context.Context) (System, error) {
	var s System
	got := false
	err := c.do(ctx, "get system", nl.RDMA_NLDEV_CMD_SYS_GET, false, nil, func(a nl.Attrs) error {
		m, err := a.U8(nl.RDMA_NLDEV_SYS_ATTR_NETNS_MODE)
		if err != nil {
			return err
		}
		cof, err := a.OptU8(nl.RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK)
		if err != nil {
			return err
		}
		q, err := a.OptU8(nl.RDMA_NLDEV_SYS_ATTR_PRIVILEGED_QKEY_MODE)
		if err != nil {
			return err
		}
		s = System{NetnsMode: NetnsMode(m), CopyOnFork: cof != 0, PrivilegedQKey: q != 0,
			HavePrivilegedQKey: a.Has(nl.RDMA_NLDEV_SYS_ATTR_PRIVILEGED_QKEY_MODE)}
		got = true
		return nil
	})
	if err == nil && !got {
		err = fmt.Errorf("rdmanl: get system: the kernel acknowledged without a reply: %w", ErrMalformed)
	}
	return s, err
}

// SetNetnsMode switches the subsystem between shared and exclusive
// namespace mode (rdma system set netns shared|exclusive). It needs
// CAP_NET_ADMIN, and the kernel refuses with EBUSY while any network
// namespace other than the initial one exists (one just closed goes away
// asynchronously).
func (c *Conn) SetNetnsMode(ctx context.Context, m NetnsMode) error {
	if m != NetnsExclusive && m != NetnsShared {
		return fmt.Errorf("rdmanl: set netns mode: %v is neither shared nor exclusive", m)
	}
	attrs := nl.AppendU8Attr(nil, nl.RDMA_NLDEV_SYS_ATTR_NETNS_MODE, uint8(m))
	return c.do(ctx, "set netns mode "+m.String(), nl.RDMA_NLDEV_CMD_SYS_SET, false, attrs, nil)
}

// MoveToNetns moves the device called name into the network namespace of
// the file descriptor nsFD (rdma dev set NAME netns NS). The device
// disappears from this namespace's dumps and appears in the other's; when
// that namespace is destroyed, it comes back to the initial one. The
// kernel refuses with EOPNOTSUPP, given here as an error matching
// ErrNotSupported, in shared mode and for devices whose driver cannot
// disassociate user contexts: rxe and siw on 6.1 and 6.12 (only hardware
// drivers such as mlx5 can move).
func (c *Conn) MoveToNetns(ctx context.Context, name string, nsFD int) error {
	if nsFD < 0 {
		return fmt.Errorf("rdmanl: move %s: namespace fd %d is negative", name, nsFD)
	}
	d, err := c.Device(ctx, name)
	if err != nil {
		return err
	}
	attrs := nl.AppendU32Attr(nil, nl.RDMA_NLDEV_ATTR_DEV_INDEX, d.Index)
	attrs = nl.AppendU32Attr(attrs, nl.RDMA_NLDEV_NET_NS_FD, uint32(nsFD))
	op := "move " + name + " to netns"
	err = c.do(ctx, op, nl.RDMA_NLDEV_CMD_SET, false, attrs, nil)
	if errnoOf(err) == unix.EOPNOTSUPP {
		return &Error{Op: op, Kind: ErrNotSupported, Err: err}
	}
	return err
}
