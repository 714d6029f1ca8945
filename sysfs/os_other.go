//go:build !linux

package sysfs

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

func newOSFS(root string) fs.FS { return os.DirFS(root) }

func devNumOf(st *syscall.Stat_t) DevNum { return DevNum{} }

func liveNetlink() ([]nlDevice, error) {
	return nil, errors.New("sysfs: no RDMA netlink on this system")
}
