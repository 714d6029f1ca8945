package uverbs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
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
// through the file's read deadline, which w moves into the past when ctx
// ends.
func readEvent[T any](ctx context.Context, f *os.File, w *eventWaker, v *T) error {
	buf := unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v))
	dl, _ := ctx.Deadline()
	w.watch(ctx, f)
	for {
		if err := f.SetReadDeadline(dl); err != nil {
			return err
		}
		// Checked after the deadline is set: a wake-up from here on moves
		// it into the past, one before would have been overwritten.
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := f.Read(buf)
		if err == nil {
			if n != len(buf) {
				return fmt.Errorf("uverbs: short event read: %d of %d bytes", n, len(buf))
			}
			return nil
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		// The read deadline is ctx's own; its timer may not have fired yet.
		if !dl.IsZero() && !time.Now().Before(dl) {
			return context.DeadlineExceeded
		}
		// A wake-up of an earlier context, which fired as it was being
		// replaced: wait again.
	}
}

// eventWaker moves an event file's read deadline into the past when the
// context a reader waits with ends. Its registration (context.AfterFunc)
// stays while the same context is used again, so a goroutine that waits
// with one long-lived context, wait after wait, allocates nothing per
// wait; a different context replaces it.
type eventWaker struct {
	mu   sync.Mutex
	ctx  context.Context
	stop func() bool
}

func (w *eventWaker) watch(ctx context.Context, f *os.File) {
	if ctx.Done() == nil {
		return // never ends
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stop != nil && sameContext(w.ctx, ctx) {
		return
	}
	if w.stop != nil {
		w.stop()
	}
	w.ctx = ctx
	w.stop = context.AfterFunc(ctx, func() { f.SetReadDeadline(time.Unix(1, 0)) })
}

// close drops the registration, so that a closed file is not kept
// reachable from a context that lives on.
func (w *eventWaker) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stop != nil {
		w.stop()
	}
	w.ctx, w.stop = nil, nil
}

// sameContext reports whether a and b are the same context; one of a type
// that == cannot compare is taken as different rather than panicking.
func sameContext(a, b context.Context) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}
