package rdmanl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// ErrDumpInterrupted is returned together with the (possibly inconsistent)
// results of a dump during which the kernel's device list changed.
var ErrDumpInterrupted = errors.New("rdmanl: device list changed during the dump; results may be inconsistent")

// ErrNotFound is returned when no RDMA device has the requested name.
var ErrNotFound = errors.New("rdmanl: no such RDMA device")

// socket is what a Conn needs from a netlink socket; tests replay recorded
// traffic through it.
type socket interface {
	send(ctx context.Context, b []byte) error
	// recv reads one datagram into b and returns its length; a datagram
	// longer than b is an error, not a silent truncation. It gives up when
	// ctx ends (with ctx's error) or, where reply is true (the wait is for
	// the answer to a request) and ctx has no deadline, after
	// replyTimeout. A wait for a notification (reply false) lasts as long
	// as ctx.
	recv(ctx context.Context, b []byte, reply bool) (int, error)
	close() error
}

// Conn is a NETLINK_RDMA socket. It is not safe for concurrent use, except
// Close, which ends a wait in progress.
type Conn struct {
	sock   socket
	seq    uint32
	buf    []byte
	closed atomic.Bool
	// pending is the sequence number of a request whose answer a canceled
	// or failed call left unread; the next request reads it away first, so the
	// kernel neither mixes it in nor refuses a dump while one is open
	// (EBUSY).
	pending uint32
	// Record, if set, sees every request sent and every datagram received,
	// for capturing test data.
	Record func(sent bool, b []byte)
}

func newConn(s socket) *Conn {
	// Datagrams from rdma netlink dumps fit in a page or two; 64 KiB is
	// what libnl uses as well and leaves room.
	return &Conn{sock: s, buf: make([]byte, 64<<10)}
}

// Close closes the socket. A second Close does nothing.
func (c *Conn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	return c.sock.close()
}

// Devices dumps the RDMA devices of the caller's network namespace
// (RDMA_NLDEV_CMD_GET with NLM_F_DUMP), in the kernel's order: ascending
// device index, which is the order rdma-core's ibv_get_device_list keeps.
// If the dump was interrupted, the results come back with
// ErrDumpInterrupted.
func (c *Conn) Devices() ([]Device, error) {
	var devs []Device
	err := c.Do(context.Background(), "get devices", RDMA_NLDEV_CMD_GET, NLM_F_REQUEST|NLM_F_DUMP, nil, func(m Message) error {
		d, err := ParseDevice(m.Payload)
		if err != nil {
			return fmt.Errorf("rdmanl: get devices: %w", err)
		}
		devs = append(devs, d)
		return nil
	})
	return devs, err
}

// CharDev asks which character device the kernel client typ (e.g. "uverbs")
// offers for the device with the given index (RDMA_NLDEV_CMD_GET_CHARDEV).
func (c *Conn) CharDev(index uint32, typ string) (CharDev, error) {
	attrs := AppendU32Attr(nil, RDMA_NLDEV_ATTR_DEV_INDEX, index)
	return c.charDev(AppendStringAttr(attrs, RDMA_NLDEV_ATTR_CHARDEV_TYPE, typ), typ)
}

// GlobalCharDev asks which character device a kernel client offers that
// belongs to no device (the connection manager's "rdma_cm"). Asking loads
// the client's module, as the kernel requests it by its alias.
func (c *Conn) GlobalCharDev(typ string) (CharDev, error) {
	return c.charDev(AppendStringAttr(nil, RDMA_NLDEV_ATTR_CHARDEV_TYPE, typ), typ)
}

// LookupGlobalCharDev is GlobalCharDev on a connection of its own.
func LookupGlobalCharDev(typ string) (CharDev, error) {
	c, err := Dial()
	if err != nil {
		return CharDev{}, err
	}
	defer c.Close()
	return c.GlobalCharDev(typ)
}

func (c *Conn) charDev(attrs []byte, typ string) (CharDev, error) {
	var cd CharDev
	got := false
	op := "get chardev " + typ
	err := c.Do(context.Background(), op, RDMA_NLDEV_CMD_GET_CHARDEV, NLM_F_REQUEST|NLM_F_ACK, attrs, func(m Message) error {
		var err error
		if cd, err = ParseCharDev(m.Payload); err != nil {
			return fmt.Errorf("rdmanl: %s: %w", op, err)
		}
		got = true
		return nil
	})
	if err == nil && !got {
		err = fmt.Errorf("rdmanl: %s: the kernel acknowledged without a reply: %w", op, ErrMalformed)
	}
	return cd, err
}

// Sys reads the RDMA subsystem's settings (RDMA_NLDEV_CMD_SYS_GET).
func (c *Conn) Sys() (Sys, error) {
	var s Sys
	got := false
	err := c.Do(context.Background(), "get system", RDMA_NLDEV_CMD_SYS_GET, NLM_F_REQUEST|NLM_F_ACK, nil, func(m Message) error {
		var err error
		if s, err = ParseSys(m.Payload); err != nil {
			return fmt.Errorf("rdmanl: get system: %w", err)
		}
		got = true
		return nil
	})
	if err == nil && !got {
		err = fmt.Errorf("rdmanl: get system: the kernel acknowledged without a reply: %w", ErrMalformed)
	}
	return s, err
}

// Do sends the nldev command cmd (RDMA_NLDEV_CMD_*) with the given flags
// and attributes and hands each reply of the same command to fn until the
// exchange ends: NLMSG_DONE for a dump, the acknowledgement otherwise. Op
// names the request in errors ("get devices"). A kernel error comes back as
// an *Error; fn's first error is returned once the exchange is over, so the
// socket is left clean for the next request. ctx bounds every wait.
func (c *Conn) Do(ctx context.Context, op string, cmd, flags uint16, attrs []byte, fn func(Message) error) error {
	typ := MsgType(cmd)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("rdmanl: %s: %w", op, err)
	}
	if c.pending != 0 {
		if err := c.drain(ctx); err != nil {
			return fmt.Errorf("rdmanl: %s: finish an abandoned request: %w", op, err)
		}
	}
	c.seq++
	seq := c.seq
	req := AppendRequest(nil, typ, flags, seq, attrs)
	if c.Record != nil {
		c.Record(true, req)
	}
	if err := c.sock.send(ctx, req); err != nil {
		return fmt.Errorf("rdmanl: %s: send: %w", op, err)
	}
	interrupted := false
	var fnErr error
	for {
		n, err := c.sock.recv(ctx, c.buf, true)
		if err != nil {
			// Unless nothing came within replyTimeout, more of the
			// answer may: the next request reads it away first.
			if ctx.Err() != nil || !errors.Is(err, os.ErrDeadlineExceeded) {
				c.pending = seq
			}
			return fmt.Errorf("rdmanl: %s: receive: %w", op, err)
		}
		if c.Record != nil {
			c.Record(false, c.buf[:n])
		}
		msgs, err := ParseMessages(c.buf[:n])
		if err != nil {
			c.pending = seq // the rest of the answer may still come
			return fmt.Errorf("rdmanl: %s: %w", op, err)
		}
		for _, m := range msgs {
			if m.Seq != seq {
				continue // a late answer to an earlier request
			}
			if m.Flags&NLM_F_DUMP_INTR != 0 {
				interrupted = true
			}
			switch m.Type {
			case NLMSG_NOOP:
			case NLMSG_ERROR:
				errno, msg, err := parseErrorMsg(m)
				if err != nil {
					return fmt.Errorf("rdmanl: %s: %w", op, err)
				}
				if errno != 0 {
					return &Error{Op: op, Errno: errno, Msg: msg}
				}
				return c.finish(fnErr, interrupted) // the acknowledgement
			case NLMSG_DONE:
				if len(m.Payload) >= 4 {
					if code := int32(ne.Uint32(m.Payload)); code < 0 {
						return &Error{Op: op, Errno: unix.Errno(-code)}
					}
				}
				return c.finish(fnErr, interrupted)
			case NLMSG_OVERRUN:
				c.pending = seq
				return fmt.Errorf("rdmanl: %s: the kernel reports a receive overrun: %w", op, ErrMalformed)
			default:
				// Any nldev command: some kernels answer a command
				// with another's type (PORT_GET with GET's).
				if m.Type>>10 != RDMA_NL_NLDEV {
					continue // not ours to interpret
				}
				// Keep reading after a bad reply so the socket is left
				// clean for the next request; report the first error.
				if fn == nil {
					continue
				}
				if err := fn(m); err != nil && fnErr == nil {
					fnErr = err
				}
				if flags&(NLM_F_DUMP|NLM_F_ACK) == 0 && m.Flags&NLM_F_MULTI == 0 {
					return c.finish(fnErr, interrupted)
				}
			}
		}
	}
}

// drain reads the rest of the answer to the abandoned request c.pending:
// up to its NLMSG_DONE or NLMSG_ERROR. If none comes within replyTimeout,
// none is coming, and the request is forgotten.
func (c *Conn) drain(ctx context.Context) error {
	for c.pending != 0 {
		n, err := c.sock.recv(ctx, c.buf, true)
		if err != nil {
			if ctx.Err() == nil && errors.Is(err, os.ErrDeadlineExceeded) {
				c.pending = 0
				return nil
			}
			return err
		}
		msgs, err := ParseMessages(c.buf[:n])
		if err != nil {
			c.pending = 0 // nothing more can be learned from it
			return err
		}
		for _, m := range msgs {
			if m.Seq == c.pending && (m.Type == NLMSG_DONE || m.Type == NLMSG_ERROR) {
				c.pending = 0
			}
		}
	}
	return nil
}

// Receive waits for the next datagram from the kernel that is not an
// answer to a request (a multicast notification on a Conn from DialGroups)
// and returns its messages, which alias the Conn's buffer until the next
// call.
func (c *Conn) Receive(ctx context.Context) ([]Message, error) {
	for {
		n, err := c.sock.recv(ctx, c.buf, false)
		if err != nil {
			return nil, fmt.Errorf("rdmanl: receive: %w", err)
		}
		if c.Record != nil {
			c.Record(false, c.buf[:n])
		}
		msgs, err := ParseMessages(c.buf[:n])
		if err != nil {
			return nil, fmt.Errorf("rdmanl: receive: %w", err)
		}
		if len(msgs) > 0 && msgs[0].Seq == 0 {
			return msgs, nil
		}
	}
}

func (c *Conn) finish(fnErr error, interrupted bool) error {
	if fnErr != nil {
		return fnErr
	}
	if interrupted {
		return ErrDumpInterrupted
	}
	return nil
}

// Devices dumps the RDMA devices over a new connection; see Conn.Devices.
func Devices() ([]Device, error) {
	c, err := Dial()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.Devices()
}

// LookupCharDev finds the device called name and returns its uverbs
// character device as the kernel reports it.
func LookupCharDev(name string) (CharDev, error) {
	c, err := Dial()
	if err != nil {
		return CharDev{}, err
	}
	defer c.Close()
	return c.lookupCharDev(name)
}

func (c *Conn) lookupCharDev(name string) (CharDev, error) {
	devs, err := c.Devices()
	if err != nil && !errors.Is(err, ErrDumpInterrupted) {
		return CharDev{}, err
	}
	for _, d := range devs {
		if d.Name == name {
			return c.CharDev(d.Index, "uverbs")
		}
	}
	return CharDev{}, fmt.Errorf("%w: %q", ErrNotFound, name)
}

// ErrNoDriverID is returned by DriverID for kernels that do not report
// UVERBS_DRIVER_ID (before 5.1); match providers by name instead.
var ErrNoDriverID = errors.New("rdmanl: the kernel did not report the device's uverbs driver ID")

// DriverID returns the uverbs driver ID (enum rdma_driver_id; rxe 14,
// mlx5 1) of the device called name, as rdma-core's find_uverbs_nl_cb reads
// it for provider matching.
func DriverID(name string) (uint32, error) {
	cd, err := LookupCharDev(name)
	if err != nil {
		return 0, err
	}
	if cd.DriverID == 0 {
		return 0, fmt.Errorf("%w (%s)", ErrNoDriverID, name)
	}
	return cd.DriverID, nil
}

// CopyOnFork reports whether the kernel copies DMA-pinned pages on fork
// (RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK). Like rdma-core's get_copy_on_fork, a
// kernel that does not report it counts as false.
func CopyOnFork() (bool, error) {
	c, err := Dial()
	if err != nil {
		return false, err
	}
	defer c.Close()
	s, err := c.Sys()
	if err != nil {
		return false, err
	}
	return s.CopyOnFork, nil
}
