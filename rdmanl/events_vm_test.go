package rdmanl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
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
	if dir := os.Getenv("RDMANL_SEED_DIR"); dir != "" {
		dir = filepath.Join(dir, "FuzzParse")
		os.MkdirAll(dir, 0o755)
		n := 0
		w.c.Record = func(b []byte) {
			n++
			os.WriteFile(filepath.Join(dir, fmt.Sprintf("k%s-%d", vmenv.KernelName(), n)),
				fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", b), 0o644)
		}
	}
	// 6.12's RDMA netlink notifications, for comparison (logged).
	mon, err := NewMonitor()
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	veth(t, "rnl2", "rnl3")
	start := time.Now()
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s after %v: %v", what, time.Since(start), err)
		}
		t.Logf("%s done after %v", what, time.Since(start))
	}
	step("add rxe4", c.AddLink(ctx, "rxe4", LinkRXE, "rnl2"))
	step("rename rxe4 to rnly", c.Rename(ctx, "rxe4", "rnly"))
	step("delete rnly", c.DeleteLink(ctx, "rnly"))
	// RDMA netlink's own notifications: none on 6.1; on 6.12 registration,
	// netdev attachment and unregistration, but no rename.
	var notes []Notification
	for {
		wait, cancel := context.WithTimeout(ctx, 2*time.Second)
		n, err := mon.Next(wait)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n.DevIndex, n.NetdevIndex = 0, 0 // vary from run to run
		notes = append(notes, n)
	}
	var wantNotes []Notification
	if vmenv.KernelName() != "6.1" {
		wantNotes = []Notification{{Kind: NotifyRegister, DevName: "rxe4"},
			{Kind: NotifyNetdevAttach, DevName: "rxe4", Port: 1, Netdev: "rnl2"},
			{Kind: NotifyUnregister, DevName: "rnly"}}
	}
	if diff := cmp.Diff(wantNotes, notes); diff != "" {
		t.Errorf("kernel %s: RDMA netlink notifications (-want +got):\n%s", vmenv.KernelName(), diff)
	}
	var got []Event
	for len(got) < 3 {
		wait, cancel := context.WithTimeout(ctx, 30*time.Second)
		e, err := w.Next(wait)
		cancel()
		if err != nil {
			t.Fatalf("after %v (%v in): %v", got, time.Since(start), err)
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
