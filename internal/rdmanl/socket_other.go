//go:build !linux

package rdmanl

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

func errOS() error {
	return fmt.Errorf("rdmanl: NETLINK_RDMA on %s: %w", runtime.GOOS, unix.EPROTONOSUPPORT)
}

// Dial fails on systems other than Linux: NETLINK_RDMA is Linux's.
func Dial() (*Conn, error) { return nil, errOS() }

// DialGroups fails on systems other than Linux.
func DialGroups(uint32) (*Conn, error) { return nil, errOS() }

// DialNetns fails on systems other than Linux.
func DialNetns(int) (*Conn, error) { return nil, errOS() }
