package uverbs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// eventFile wraps a uverbs event fd (completion channel or async events) so
// reads park the goroutine on the Go netpoller instead of blocking a thread.
func eventFile(fd int, name string) (*os.File, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("uverbs: %s: set non-blocking: %w", name, err)
	}
	// A non-blocking fd handed to os.NewFile is registered with the
	// netpoller, so Read waits without holding an OS thread.
	return os.NewFile(uintptr(fd), name), nil
}

// readEvent reads one event descriptor into v, waiting until one arrives or
// ctx ends. One goroutine at a time may wait on a file: cancellation works
// through the file's read deadline.
func readEvent[T any](ctx context.Context, f *os.File, v *T) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	dl, _ := ctx.Deadline()
	if err := f.SetReadDeadline(dl); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() {
		// Wake the reader now; the deadline is in the past.
		f.SetReadDeadline(time.Unix(1, 0))
	})
	defer stop()
	buf := unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v))
	n, err := f.Read(buf)
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// The read deadline is ctx's own; its timer may not have
			// fired yet.
			if !dl.IsZero() && !time.Now().Before(dl) {
				return context.DeadlineExceeded
			}
		}
		return err
	}
	if n != len(buf) {
		return fmt.Errorf("uverbs: short event read: %d of %d bytes", n, len(buf))
	}
	return nil
}
