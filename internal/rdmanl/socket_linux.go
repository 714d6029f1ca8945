package rdmanl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/afterctx"
)

// replyTimeout bounds every wait for the kernel when the caller's context
// has no deadline, so a lost reply cannot hang the caller.
var replyTimeout = 5 * time.Second

// Dial opens a NETLINK_RDMA socket in the caller's network namespace. It
// fails with EPROTONOSUPPORT when the kernel has no RDMA core (ib_core not
// loaded).
func Dial() (*Conn, error) {
	s, err := openSocket(0)
	if err != nil {
		return nil, err
	}
	return newConn(s), nil
}

// DialGroups opens a NETLINK_RDMA socket that also receives the multicast
// groups in the bit mask groups (bit n-1 for group n), for notifications.
func DialGroups(groups uint32) (*Conn, error) {
	s, err := openSocket(groups)
	if err != nil {
		return nil, err
	}
	return newConn(s), nil
}

// DialNetns opens a NETLINK_RDMA socket in the network namespace of the
// file descriptor nsFD (/proc/PID/ns/net, /run/netns/NAME). A socket keeps
// the namespace it was made in, so only the opening runs there: on a locked
// OS thread that enters the namespace and returns before the thread is
// released.
func DialNetns(nsFD int) (*Conn, error) {
	type result struct {
		s   *netlinkSocket
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		// The thread is released only if it got back to its own
		// namespace; otherwise it exits with this goroutine.
		orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			ch <- result{err: fmt.Errorf("rdmanl: open the thread's network namespace: %w", err)}
			return
		}
		defer orig.Close()
		if err := unix.Setns(nsFD, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("rdmanl: enter network namespace: %w", err)}
			return
		}
		s, err := openSocket(0)
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{s, err}
	}()
	r := <-ch
	if r.err != nil {
		return nil, r.err
	}
	return newConn(r.s), nil
}

func openSocket(groups uint32) (*netlinkSocket, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, NETLINK_RDMA)
	if err != nil {
		return nil, fmt.Errorf("rdmanl: open NETLINK_RDMA socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: groups}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("rdmanl: bind NETLINK_RDMA socket: %w", err)
	}
	// Ask for the kernel's error strings; older kernels refuse the option,
	// which only costs the strings.
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, 1)
	// A non-blocking descriptor in an *os.File parks its waits on the
	// runtime's netpoller, where deadlines (and so contexts) reach them.
	f := os.NewFile(uintptr(fd), "netlink-rdma")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("rdmanl: NETLINK_RDMA socket: %w", err)
	}
	return &netlinkSocket{f: f, rc: rc}, nil
}

type netlinkSocket struct {
	f  *os.File
	rc interface {
		Read(func(fd uintptr) bool) error
		Write(func(fd uintptr) bool) error
	}
}

func (s *netlinkSocket) send(ctx context.Context, b []byte) error {
	var serr error
	err := s.rc.Write(func(fd uintptr) bool {
		serr = unix.Sendto(int(fd), b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		return serr != unix.EAGAIN
	})
	if err != nil {
		return err
	}
	return serr
}

func (s *netlinkSocket) recv(ctx context.Context, b []byte, reply bool) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	deadline, ok := ctx.Deadline()
	if !ok && reply {
		deadline = time.Now().Add(replyTimeout)
	}
	if err := s.f.SetReadDeadline(deadline); err != nil {
		return 0, err
	}
	defer afterctx.Func(ctx, func() { s.f.SetReadDeadline(time.Unix(1, 0)) })()
	for {
		var n int
		var from unix.Sockaddr
		var rerr error
		err := s.rc.Read(func(fd uintptr) bool {
			// MSG_TRUNC makes recvfrom return the datagram's real
			// length, so a datagram longer than b is detected instead
			// of silently cut.
			n, from, rerr = unix.Recvfrom(int(fd), b, unix.MSG_TRUNC)
			return rerr != unix.EAGAIN
		})
		if err != nil {
			if ok && errors.Is(err, os.ErrDeadlineExceeded) {
				<-ctx.Done() // the read deadline is ctx's; ctx ends at once
			}
			if cerr := ctx.Err(); cerr != nil {
				return 0, cerr
			}
			if errors.Is(err, os.ErrDeadlineExceeded) && !ok && reply {
				return 0, fmt.Errorf("no reply within %v: %w", replyTimeout, os.ErrDeadlineExceeded)
			}
			return 0, err
		}
		if rerr == unix.EINTR {
			continue
		}
		if rerr != nil {
			return 0, rerr
		}
		if n > len(b) {
			return 0, fmt.Errorf("datagram of %d bytes exceeds the %d-byte buffer: %w", n, len(b), ErrMalformed)
		}
		// Only the kernel (port id 0) speaks for the RDMA subsystem.
		if sa, ok := from.(*unix.SockaddrNetlink); !ok || sa.Pid != 0 {
			continue
		}
		return n, nil
	}
}

func (s *netlinkSocket) close() error { return s.f.Close() }
