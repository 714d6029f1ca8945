package uverbs

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

// uncomparableCtx is a context type that == cannot compare.
type uncomparableCtx struct {
	context.Context
	tags []string
}

// pipeWaker returns a pipe's ends and a waker for reads of r, all closed
// when t ends.
func pipeWaker(t *testing.T) (r, w *os.File, wk *eventWaker) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	wk = &eventWaker{rc: rawConn(r)}
	t.Cleanup(func() { wk.close(); r.Close(); w.Close() })
	return r, w, wk
}

// TestEventWaker checks the waker on a pipe: a wait with one long-lived
// context allocates nothing per wait, ending the context wakes a blocked
// read, a context of an uncomparable type is handled without a panic, and
// a wake-up left over from a replaced context does not end a later wait.
func TestEventWaker(t *testing.T) {
	r, w, wk := pipeWaker(t)

	ctx, cancel := context.WithCancel(context.Background())
	if n := testing.AllocsPerRun(100, func() { wk.watch(ctx, r) }); n != 0 {
		t.Errorf("watch with the same context: %v allocations a call, want 0", n)
	}

	var v [8]byte
	done := make(chan error, 1)
	go func() { done <- readEvent(ctx, r, wk, &v) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("read after cancel: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cancelling the context did not wake the read")
	}

	inner, oddCancel := context.WithCancel(context.Background())
	odd := uncomparableCtx{Context: inner, tags: []string{"x"}}
	wk.watch(odd, r)
	wk.watch(odd, r) // odd == odd panics: taken as a new context
	oddCancel()

	// The cancelled contexts' wake-ups have fired; a fresh wait with a
	// deadline still gets its data.
	if _, err := w.Write([]byte("12345678")); err != nil {
		t.Fatal(err)
	}
	dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer dcancel()
	if err := readEvent(dctx, r, wk, &v); err != nil || string(v[:]) != "12345678" {
		t.Errorf("read after replaced contexts: %q, %v", v, err)
	}
	short, scancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer scancel()
	if err := readEvent(short, r, wk, &v); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("read with nothing to read: %v, want DeadlineExceeded", err)
	}
}

// TestEventWakerOwnDeadline checks the file's own deadline
// (CompChannel.SetDeadline) on a pipe: moving it into the past wakes a
// blocked read with os.ErrDeadlineExceeded, a deadline set before the
// wait applies to it, clearing it lets data through, and it never revives
// a wait whose context has ended.
func TestEventWakerOwnDeadline(t *testing.T) {
	r, w, wk := pipeWaker(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var v [8]byte

	done := make(chan error, 1)
	go func() { done <- readEvent(ctx, r, wk, &v) }()
	time.Sleep(50 * time.Millisecond)
	if err := wk.setOwn(time.Unix(1, 0), r); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("read woken by its own deadline: %v, want os.ErrDeadlineExceeded", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a deadline in the past did not wake the read")
	}
	// Still in the past: the next wait returns at once.
	if err := readEvent(ctx, r, wk, &v); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read with the deadline passed: %v, want os.ErrDeadlineExceeded", err)
	}
	// A deadline ahead that passes during the wait.
	wk.setOwn(time.Now().Add(30*time.Millisecond), r)
	if err := readEvent(ctx, r, wk, &v); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read past a 30ms deadline: %v, want os.ErrDeadlineExceeded", err)
	}
	// Cleared: data gets through.
	wk.setOwn(time.Time{}, r)
	w.Write([]byte("abcdefgh"))
	if err := readEvent(ctx, r, wk, &v); err != nil || string(v[:]) != "abcdefgh" {
		t.Errorf("read with the deadline cleared: %q, %v", v, err)
	}
	// The context ends, then a deadline ahead is set: the wait still ends.
	go func() { done <- readEvent(ctx, r, wk, &v) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	wk.setOwn(time.Now().Add(time.Hour), r)
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("read after cancel and a later deadline: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a deadline set after the context ended kept the read waiting")
	}
}

// TestEventRead checks the raw read under readEvent: an event waiting is
// read without an allocation, and a read blocked when the file closes fails
// with os.ErrClosed, as os.File.Read's would.
func TestEventRead(t *testing.T) {
	r, w, wk := pipeWaker(t)
	ctx := context.Background()
	var v [8]byte
	if _, err := w.Write([]byte("00000000")); err != nil {
		t.Fatal(err)
	}
	if err := readEvent(ctx, r, wk, &v); err != nil || string(v[:]) != "00000000" {
		t.Fatalf("first read: %q, %v", v, err)
	}
	msg := []byte("abcdefgh")
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := w.Write(msg); err != nil {
			t.Fatal(err)
		}
		var e [8]byte // the caller's event stays where it is (here, the stack)
		if err := readEvent(ctx, r, wk, &e); err != nil || string(e[:]) != "abcdefgh" {
			t.Fatalf("read: %q, %v", e, err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per event, want 0", allocs)
	}

	done := make(chan error, 1)
	go func() { done <- readEvent(ctx, r, wk, &v) }()
	time.Sleep(50 * time.Millisecond)
	r.Close()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrClosed) {
			t.Errorf("read blocked when the file closed: %v, want os.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("closing the file did not wake the read")
	}
}

// TestEventWakerClosed: a wait that starts after the waker's close (a Wait
// racing with Close) registers nothing on its context, which may live on
// and would keep the closed file reachable.
func TestEventWakerClosed(t *testing.T) {
	r, _, wk := pipeWaker(t)
	wk.close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wk.watch(ctx, r)
	wk.mu.Lock()
	registered := wk.stop != nil
	wk.mu.Unlock()
	if registered {
		t.Error("a closed waker registered on a context")
	}
}
