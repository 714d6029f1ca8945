//go:build !linux

package rdmanl

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// Dial fails on systems other than Linux: NETLINK_RDMA is Linux's.
func Dial() (*Conn, error) {
	return nil, fmt.Errorf("rdmanl: NETLINK_RDMA on %s: %w", runtime.GOOS, unix.EPROTONOSUPPORT)
}
