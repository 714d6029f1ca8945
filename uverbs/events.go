package uverbs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
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
	return readEventUntil(ctx, f, w, v, nil)
}

// errStopped is readEventUntil's error when stopped reported true.
var errStopped = errors.New("the wait was stopped")

// readEventUntil is readEvent that also gives up, with errStopped, once
// stopped (nil: never) reports true: whoever makes it true then calls the
// waker's kick, which wakes a read in progress.
func readEventUntil[T any](ctx context.Context, f *os.File, w *eventWaker, v *T, stopped func() bool) error {
	buf := unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v))
	dl, _ := ctx.Deadline()
	w.watch(ctx, f)
	for {
		if err := w.setDeadline(ctx, dl, f); err != nil {
			return err
		}
		// Checked after the deadline is set: a wake-up from here on moves
		// it into the past, one before would have been overwritten.
		if ended(ctx) {
			return ctx.Err()
		}
		if stopped != nil && stopped() {
			return errStopped
		}
		n, err := w.read(f, buf)
		if err == nil {
			if n != len(buf) {
				return fmt.Errorf("uverbs: short event read: %d of %d bytes", n, len(buf))
			}
			return nil
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
		if ended(ctx) {
			return ctx.Err()
		}
		if stopped != nil && stopped() {
			return errStopped
		}
		// The read deadline is ctx's own; its timer may not have fired yet.
		now := time.Now()
		if !dl.IsZero() && !now.Before(dl) {
			return context.DeadlineExceeded
		}
		if own := w.deadline(); !own.IsZero() && !now.Before(own) {
			return os.ErrDeadlineExceeded
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
//
// It also holds the file's own deadline (CompChannel.SetDeadline), which
// applies beside the waiter's context and may move while it waits.
type eventWaker struct {
	rc syscall.RawConn // the file's (rawConn), set where the file is made

	mu   sync.Mutex
	ctx  context.Context
	stop func() bool

	dl    time.Time       // SetDeadline's; zero: none
	wctx  context.Context // the context of the last wait
	wctDL time.Time       // its deadline

	// closed: the file is closing; no registration is made any more, so
	// that a wait racing with close leaves none on a context that lives on.
	closed bool

	// applied is the file's read deadline as last set (zero, none, is
	// how a new file starts), so that a wait whose deadline did not
	// change (most waits: none before, none now) skips setting it again,
	// which takes the file's and the netpoller's locks.
	applied time.Time
}

// ended reports whether ctx is done, without the lock its Err takes.
func ended(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

// applyLocked sets f's read deadline to t unless it is already t. Holds
// w.mu.
func (w *eventWaker) applyLocked(t time.Time, f *os.File) error {
	if w.applied.Equal(t) {
		return nil
	}
	if err := f.SetReadDeadline(t); err != nil {
		return err // the file's deadline did not change
	}
	w.applied = t
	return nil
}

// rawConn is f's syscall.RawConn, which the event reads go through. An
// *os.File's SyscallConn fails only for a nil file.
func rawConn(f *os.File) syscall.RawConn {
	rc, _ := f.SyscallConn()
	return rc
}

// read reads one event from f into buf, as f.Read would, waiting on the
// netpoller while there is none. The read itself is a RawSyscall: an event
// file answers at once (an event or EAGAIN), and a Syscall would tell the Go
// scheduler that the goroutine may block, which wakes the runtime's monitor
// thread whenever the process was idle before, a thread wake-up per event
// that a C program waiting in read() does not pay (internal/transport's
// quick commands say more).
func (w *eventWaker) read(f *os.File, buf []byte) (int, error) {
	if w.rc == nil {
		return 0, os.ErrInvalid // no file, as a nil *os.File's Read says
	}
	r := rawReads.Get().(*rawRead)
	if len(buf) > len(r.data) {
		rawReads.Put(r)
		return 0, fmt.Errorf("uverbs: event of %d bytes, more than a read takes (%d)", len(buf), len(r.data))
	}
	// The event is read into r's own room and copied out, so that buf
	// (the caller's event, often on its stack) is not kept by r.
	r.want = len(buf)
	err := w.rc.Read(r.fn)
	n, errno := r.n, r.errno
	copy(buf, r.data[:n])
	rawReads.Put(r)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return 0, err
	case err != nil:
		// RawRead's other errors are the file closing under the read
		// (f.Read says os.ErrClosed for them).
		return 0, &os.PathError{Op: "read", Path: f.Name(), Err: os.ErrClosed}
	case errno != 0:
		return 0, &os.PathError{Op: "read", Path: f.Name(), Err: errno}
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// rawRead is one read's state, pooled so that reading allocates nothing:
// fn, the method value handed to RawConn.Read, is made once per rawRead.
type rawRead struct {
	data  [32]byte // the largest event descriptor is 16 bytes
	want  int
	n     int
	errno unix.Errno
	fn    func(fd uintptr) bool
}

var rawReads = sync.Pool{New: func() any {
	r := new(rawRead)
	r.fn = r.read
	return r
}}

// read makes the system call; false asks RawConn.Read to wait for the
// file to become readable.
func (r *rawRead) read(fd uintptr) bool {
	for {
		n, _, errno := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&r.data)), uintptr(r.want))
		if errno == unix.EINTR {
			continue
		}
		r.n, r.errno = int(n), errno
		if errno != 0 {
			r.n = 0
		}
		return errno != unix.EAGAIN
	}
}

// setDeadline sets f's read deadline for a wait with ctx (deadline
// ctxDL): the earlier of ctxDL and the waker's own.
func (w *eventWaker) setDeadline(ctx context.Context, ctxDL time.Time, f *os.File) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.wctx, w.wctDL = ctx, ctxDL
	return w.applyLocked(earliest(ctxDL, w.dl), f)
}

// setOwn sets the waker's own deadline and moves a current wait's.
func (w *eventWaker) setOwn(t time.Time, f *os.File) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dl = t
	eff := earliest(w.wctDL, t)
	if w.wctx != nil && ended(w.wctx) {
		eff = time.Unix(1, 0) // keep the wake-up of an ended context
	}
	return w.applyLocked(eff, f)
}

func (w *eventWaker) deadline() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dl
}

// earliest returns the earlier of two deadlines, the zero time being none.
func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}

func (w *eventWaker) watch(ctx context.Context, f *os.File) {
	if ctx.Done() == nil {
		return // never ends
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return // a wait racing with Close: the read fails on the closed file
	}
	if w.stop != nil && sameContext(w.ctx, ctx) {
		return
	}
	if w.stop != nil {
		w.stop()
	}
	w.ctx = ctx
	w.stop = context.AfterFunc(ctx, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.applyLocked(time.Unix(1, 0), f)
	})
}

// kick wakes a read in progress, as a past deadline does; the reader
// finds why (readEventUntil's stopped) or waits again.
func (w *eventWaker) kick(f *os.File) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.applyLocked(time.Unix(1, 0), f)
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
	w.wctx = nil
	w.closed = true
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
