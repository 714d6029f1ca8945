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

	nl "github.com/goverbs/goverbs/internal/rdmanl"
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
	mon, err := nl.DialGroups(1 << (nl.RDMA_NL_GROUP_NOTIFY - 1))
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
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
	// RDMA netlink's own notifications: none on 6.1; on 6.12 registration,
	// netdev attachment and unregistration, but no rename.
	type note struct {
		Event          uint8
		Device, Netdev string
	}
	var notes []note
	for {
		wait, cancel := context.WithTimeout(ctx, 2*time.Second)
		msgs, err := mon.Receive(wait)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			a, err := nl.NewAttrs(m.Payload)
			if err != nil || m.Type != nl.MsgType(nl.RDMA_NLDEV_CMD_MONITOR) {
				t.Fatalf("notification %+v: %v", m, err)
			}
			ev, err := a.U8(nl.RDMA_NLDEV_ATTR_EVENT_TYPE)
			if err != nil {
				t.Fatal(err)
			}
			notes = append(notes, note{ev, a.OptStr(nl.RDMA_NLDEV_ATTR_DEV_NAME), a.OptStr(nl.RDMA_NLDEV_ATTR_NDEV_NAME)})
		}
	}
	var wantNotes []note
	if vmenv.KernelName() != "6.1" {
		wantNotes = []note{{nl.RDMA_REGISTER_EVENT, "rxe4", ""}, {nl.RDMA_NETDEV_ATTACH_EVENT, "rxe4", "rnl2"},
			{nl.RDMA_UNREGISTER_EVENT, "rnly", ""}}
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
