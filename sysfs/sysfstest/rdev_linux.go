package sysfstest

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// charDevStat is what os.Stat's Sys gives for a character device on Linux,
// as far as sysfs reads it.
func charDevStat(major, minor uint32) any {
	return &syscall.Stat_t{Mode: syscall.S_IFCHR | 0o666, Rdev: unix.Mkdev(major, minor)}
}
