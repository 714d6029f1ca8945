package rdmanl

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	nl "github.com/goverbs/goverbs/internal/rdmanl"
	"github.com/goverbs/goverbs/uverbs"
)

// Conn is a NETLINK_RDMA socket. It is not safe for concurrent use, except
// Close, which ends a call in progress.
type Conn struct {
	c *nl.Conn
}

// Dial opens a Conn in the caller's network namespace. It fails with
// EPROTONOSUPPORT when the kernel has no RDMA core (ib_core not loaded).
func Dial() (*Conn, error) {
	c, err := nl.Dial()
	if err != nil {
		return nil, err
	}
	return &Conn{c: c}, nil
}

// DialNetns opens a Conn in the network namespace of the file descriptor
// nsFD (an open /proc/PID/ns/net or /run/netns/NAME). In exclusive mode it
// shows and operates the devices of that namespace.
func DialNetns(nsFD int) (*Conn, error) {
	c, err := nl.DialNetns(nsFD)
	if err != nil {
		return nil, err
	}
	return &Conn{c: c}, nil
}

// Close closes the socket. A second Close does nothing.
func (c *Conn) Close() error { return c.c.Close() }

// ErrMalformed is matched by errors about replies that are not well-formed
// netlink or lack what the request needs.
var ErrMalformed = nl.ErrMalformed

// ErrDumpInterrupted comes back together with the results of a dump during
// which the kernel's lists changed; the results may be inconsistent.
var ErrDumpInterrupted = nl.ErrDumpInterrupted

// Sentinels for the kernel's answers to device and link management.
var (
	// ErrNotFound: no RDMA device (or port) has the name or number given.
	ErrNotFound = nl.ErrNotFound
	// ErrNetdevNotFound: AddLink named a network device the caller's
	// namespace does not have.
	ErrNetdevNotFound = errors.New("rdmanl: no such network device")
	// ErrNameTaken: another RDMA device already has the name.
	ErrNameTaken = errors.New("rdmanl: RDMA device name taken")
	// ErrNetdevInUse: the network device already carries a device of
	// this link type.
	ErrNetdevInUse = errors.New("rdmanl: network device already has an RDMA device of this type")
	// ErrLinkTypeUnavailable: the kernel has no driver for the link type
	// (its module, rdma_rxe or siw, is not loaded and cannot be).
	ErrLinkTypeUnavailable = errors.New("rdmanl: link type not available (driver module not loaded)")
	// ErrNotSoftware: DeleteLink named a device that is not a software
	// device (rxe, siw); hardware devices go with their driver.
	ErrNotSoftware = errors.New("rdmanl: not a software RDMA device")
	// ErrNotSupported: the kernel or the device cannot do what was asked
	// (the module's one "not supported" sentinel, uverbs.ErrNotSupported).
	ErrNotSupported = uverbs.ErrNotSupported
)

// Error is an error of one request: what was asked, and the kernel's
// answer or the sentinel it was mapped to. errors.Is matches both the
// sentinel (Kind) and the errno (as *internal/rdmanl.Error, through Err).
type Error struct {
	Op   string // "add link rxe2", "rename rxe1"
	Kind error  // one of the sentinels above; nil if none applies
	Err  error  // the kernel's error (wraps its unix.Errno)
}

func (e *Error) Error() string {
	if e.Kind != nil {
		return fmt.Sprintf("rdmanl: %s: %v (%v)", e.Op, e.Kind, e.Err)
	}
	return fmt.Sprintf("rdmanl: %s: %v", e.Op, e.Err)
}

// Unwrap gives both the sentinel and the kernel's error.
func (e *Error) Unwrap() []error {
	if e.Kind == nil {
		return []error{e.Err}
	}
	return []error{e.Kind, e.Err}
}

// errnoOf returns the kernel's errno inside err, 0 if none.
func errnoOf(err error) unix.Errno {
	var ke *nl.Error
	if errors.As(err, &ke) {
		return ke.Errno
	}
	return 0
}

// do runs one request and decodes each reply with fn.
func (c *Conn) do(ctx context.Context, op string, cmd uint16, dump bool, attrs []byte, fn func(nl.Attrs) error) error {
	flags := uint16(nl.NLM_F_REQUEST | nl.NLM_F_ACK)
	if dump {
		flags |= nl.NLM_F_DUMP
	}
	var handle func(nl.Message) error
	if fn != nil {
		handle = func(m nl.Message) error {
			a, err := nl.NewAttrs(m.Payload)
			if err != nil {
				return fmt.Errorf("rdmanl: %s: %w", op, err)
			}
			if err := fn(a); err != nil {
				return fmt.Errorf("rdmanl: %s: %w", op, err)
			}
			return nil
		}
	}
	return c.c.Do(ctx, op, cmd, flags, attrs, handle)
}

// handle reads the device index and name every nldev reply starts with.
func handle(a nl.Attrs) (uint32, string, error) {
	idx, err := a.U32(nl.RDMA_NLDEV_ATTR_DEV_INDEX)
	if err != nil {
		return 0, "", err
	}
	name, err := a.Str(nl.RDMA_NLDEV_ATTR_DEV_NAME)
	if err != nil {
		return 0, "", err
	}
	return idx, name, nil
}

// eachEntry hands each entry of the table attribute table (a nest of
// nested entries, as the kernel sends resources and counters) to fn.
func eachEntry(a nl.Attrs, table uint16, fn func(nl.Attrs) error) error {
	entries, err := a.Nested(table)
	if err != nil {
		return err
	}
	for _, e := range entries {
		ea, err := nl.NewAttrs(e.Data)
		if err != nil {
			return err
		}
		if err := fn(ea); err != nil {
			return err
		}
	}
	return nil
}

// u32Field is an optional u32 attribute and where it goes.
type u32Field struct {
	dst *uint32
	typ uint16
}

// optU32s reads optional u32 attributes; absent ones leave 0.
func optU32s(a nl.Attrs, fields ...u32Field) error {
	for _, f := range fields {
		v, err := a.OptU32(f.typ)
		if err != nil {
			return err
		}
		*f.dst = v
	}
	return nil
}

// deviceIndexes returns dev as a list, or every device's index for
// AllDevices.
func (c *Conn) deviceIndexes(ctx context.Context, dev int64) ([]uint32, error) {
	if dev >= 0 {
		return []uint32{uint32(dev)}, nil
	}
	all, err := c.Devices(ctx)
	if err != nil && !errors.Is(err, ErrDumpInterrupted) {
		return nil, err
	}
	idx := make([]uint32, 0, len(all))
	for _, d := range all {
		idx = append(idx, d.Index)
	}
	return idx, nil
}
