//go:build !linux

package uevent

import (
	"context"
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// Conn is a socket on the kernel's device events; Linux only.
type Conn struct {
	// Record is never called here.
	Record func(b []byte)
}

// Open fails on systems other than Linux: device events are Linux's.
func Open() (*Conn, error) {
	return nil, fmt.Errorf("uevent: device events on %s: %w", runtime.GOOS, unix.EPROTONOSUPPORT)
}

// Close does nothing.
func (c *Conn) Close() error { return nil }

// Read fails.
func (c *Conn) Read(ctx context.Context) (Event, error) {
	return Event{}, fmt.Errorf("uevent: device events on %s: %w", runtime.GOOS, unix.EPROTONOSUPPORT)
}
