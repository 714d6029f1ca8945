package rdmanl

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestVMEvents adds, renames and deletes an rxe device and expects the
// three events, in order.
func TestVMEvents(t *testing.T) {
	c := dialVM(t)
	ctx := testCtx(t)
	w, err := Watch()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	veth(t, "rnl2", "rnl3")
	if err := c.AddLink(ctx, "rxe4", LinkRXE, "rnl2"); err != nil {
		t.Fatal(err)
	}
	if err := c.Rename(ctx, "rxe4", "rnly"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteLink(ctx, "rnly"); err != nil {
		t.Fatal(err)
	}
	var got []Event
	for len(got) < 3 {
		wait, cancel := context.WithTimeout(ctx, 30*time.Second)
		e, err := w.Next(wait)
		cancel()
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		got = append(got, e)
	}
	want := []Event{{Kind: DeviceAdded, Name: "rxe4"}, {Kind: DeviceRenamed, Name: "rnly", OldName: "rxe4"}, {Kind: DeviceRemoved, Name: "rnly"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// A wait ends with its context, and Close ends a wait.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := w.Next(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Next with an expiring context: %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := w.Next(ctx); done <- err }()
	time.Sleep(50 * time.Millisecond)
	w.Close()
	if err := <-done; !errors.Is(err, os.ErrClosed) {
		t.Errorf("Next after Close: %v", err)
	}
}
