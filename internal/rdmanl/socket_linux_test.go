package rdmanl

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// quietSocket is a netlink socket made as Dial makes one, but of
// NETLINK_ROUTE with no groups (a host without RDMA has no NETLINK_RDMA),
// so nothing ever arrives on it unasked.
func quietSocket(t *testing.T) *Conn {
	t.Helper()
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err != nil {
		t.Skipf("no netlink socket here: %v", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		t.Skipf("cannot bind a netlink socket here: %v", err)
	}
	f := os.NewFile(uintptr(fd), "netlink")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		t.Fatal(err)
	}
	c := newConn(&netlinkSocket{f: f, rc: rc})
	t.Cleanup(func() { c.Close() })
	return c
}

// TestReceiveWaitsForContext: a wait for notifications lasts as long as its
// context, not replyTimeout, which bounds only the wait for a reply.
func TestReceiveWaitsForContext(t *testing.T) {
	defer func(d time.Duration) { replyTimeout = d }(replyTimeout)
	replyTimeout = 50 * time.Millisecond

	c := quietSocket(t)
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	time.AfterFunc(400*time.Millisecond, cancel)
	_, err := c.Receive(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Receive after %v: %v, want context.Canceled", time.Since(start), err)
	}
	// replyTimeout would have ended it after 50 ms; the context ends it
	// after 400 (less a clock's jitter).
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("Receive returned after %v, before its context ended", d)
	}

	// A request's reply is still bounded when ctx has no deadline.
	start = time.Now()
	_, err = c.sock.recv(context.Background(), c.buf, true)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("recv of a reply: %v, want os.ErrDeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("recv of a reply waited %v, past replyTimeout", d)
	}
}
