package uevent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/afterctx"
)

// Conn is a socket on the kernel's device events. Read is for one
// goroutine at a time; Close may be called from any and ends a Read.
type Conn struct {
	// Record, if set, sees every datagram the kernel sends, for capturing
	// test data.
	Record func(b []byte)
	f      *os.File
	buf    []byte
	closed atomic.Bool
}

// Open opens a socket on the kernel's own device events (group 1; udev
// re-sends on group 2). Only the initial network namespace receives them.
func Open() (*Conn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_KOBJECT_UEVENT)
	if err != nil {
		return nil, fmt.Errorf("uevent: device event socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: 1}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("uevent: device event socket: bind: %w", err)
	}
	// A burst of events (many devices at once) must not drop the one that
	// matters; if it does anyway, Read says so.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 1<<20)
	return &Conn{f: os.NewFile(uintptr(fd), "device-events"), buf: make([]byte, 16<<10)}, nil
}

// Close closes the socket; a Read in progress returns os.ErrClosed.
func (c *Conn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	return c.f.Close()
}

// Read waits, on the runtime's netpoller, for the next well-formed event
// from the kernel and returns it. Messages from user space (port id not 0)
// and malformed ones are skipped. It returns ctx's error when ctx ends,
// ErrLost after an overrun, and os.ErrClosed after Close.
func (c *Conn) Read(ctx context.Context) (Event, error) {
	if c.closed.Load() {
		return Event{}, os.ErrClosed
	}
	rc, err := c.f.SyscallConn()
	if err != nil {
		return Event{}, err
	}
	if d, ok := ctx.Deadline(); ok {
		c.f.SetReadDeadline(d)
	} else {
		c.f.SetReadDeadline(time.Time{})
	}
	defer afterctx.Func(ctx, func() { c.f.SetReadDeadline(time.Unix(1, 0)) })()
	for {
		var n int
		var from unix.Sockaddr
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			n, from, rerr = unix.Recvfrom(int(fd), c.buf, 0)
			return rerr != unix.EAGAIN
		})
		switch {
		case err != nil:
			if c.closed.Load() {
				return Event{}, os.ErrClosed
			}
			if _, has := ctx.Deadline(); has && errors.Is(err, os.ErrDeadlineExceeded) {
				<-ctx.Done() // the read deadline is ctx's; ctx ends at once
			}
			if cerr := ctx.Err(); cerr != nil {
				return Event{}, cerr
			}
			return Event{}, err
		case errors.Is(rerr, unix.ENOBUFS):
			return Event{}, ErrLost
		case errors.Is(rerr, unix.EINTR):
			continue
		case rerr != nil:
			return Event{}, fmt.Errorf("uevent: receive: %w", rerr)
		}
		// Only the kernel (port id 0) speaks for devices; root could send
		// on the group too.
		if nl, ok := from.(*unix.SockaddrNetlink); !ok || nl.Pid != 0 {
			continue
		}
		if c.Record != nil {
			c.Record(c.buf[:n])
		}
		e, err := Parse(c.buf[:n])
		if err != nil {
			continue
		}
		return e, nil
	}
}
