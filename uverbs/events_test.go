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

// TestEventWaker checks the waker on a pipe: a wait with one long-lived
// context allocates nothing per wait, ending the context wakes a blocked
// read, a context of an uncomparable type is handled without a panic, and
// a wake-up left over from a replaced context does not end a later wait.
func TestEventWaker(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	var wk eventWaker
	defer wk.close()

	ctx, cancel := context.WithCancel(context.Background())
	if n := testing.AllocsPerRun(100, func() { wk.watch(ctx, r) }); n != 0 {
		t.Errorf("watch with the same context: %v allocations a call, want 0", n)
	}

	var v [8]byte
	done := make(chan error, 1)
	go func() { done <- readEvent(ctx, r, &wk, &v) }()
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
	if err := readEvent(dctx, r, &wk, &v); err != nil || string(v[:]) != "12345678" {
		t.Errorf("read after replaced contexts: %q, %v", v, err)
	}
	short, scancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer scancel()
	if err := readEvent(short, r, &wk, &v); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("read with nothing to read: %v, want DeadlineExceeded", err)
	}
}
