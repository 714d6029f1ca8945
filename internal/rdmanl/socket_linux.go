package rdmanl

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// replyTimeout bounds every wait for the kernel, so a lost reply cannot hang
// the caller.
const replyTimeout = 5 * time.Second

// Dial opens a NETLINK_RDMA socket. It fails with EPROTONOSUPPORT when the
// kernel has no RDMA core (ib_core not loaded).
func Dial() (*Conn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, NETLINK_RDMA)
	if err != nil {
		return nil, fmt.Errorf("rdmanl: open NETLINK_RDMA socket: %w", err)
	}
	s := &netlinkSocket{fd: fd}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		s.close()
		return nil, fmt.Errorf("rdmanl: bind NETLINK_RDMA socket: %w", err)
	}
	tv := unix.NsecToTimeval(replyTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		s.close()
		return nil, fmt.Errorf("rdmanl: set receive timeout: %w", err)
	}
	// Ask for the kernel's error strings; older kernels refuse the option,
	// which only costs the strings.
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, 1)
	return newConn(s), nil
}

type netlinkSocket struct{ fd int }

func (s *netlinkSocket) send(b []byte) error {
	return unix.Sendto(s.fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
}

func (s *netlinkSocket) recv(b []byte) (int, error) {
	for {
		// MSG_TRUNC makes recvfrom return the datagram's real length, so a
		// datagram longer than b is detected instead of silently cut.
		n, from, err := unix.Recvfrom(s.fd, b, unix.MSG_TRUNC)
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			return 0, fmt.Errorf("no reply within %v: %w", replyTimeout, os.ErrDeadlineExceeded)
		}
		if err != nil {
			return 0, err
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

func (s *netlinkSocket) close() error { return unix.Close(s.fd) }
