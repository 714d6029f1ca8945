package uverbs

import (
	"errors"
	"os"
	"testing"
)

func TestAllocBuffer(t *testing.T) {
	b, err := AllocBuffer(100)
	if err != nil {
		t.Fatal(err)
	}
	if b.Len() != 100 || b.Addr()%uint64(os.Getpagesize()) != 0 {
		t.Errorf("len %d addr %#x: want 100 bytes, page aligned", b.Len(), b.Addr())
	}
	for i, v := range b.Bytes() {
		if v != 0 {
			t.Fatalf("byte %d = %d, want zeroed memory", i, v)
		}
	}
	b.Bytes()[99] = 1
	if _, err := b.hold(0, 100); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); !errors.Is(err, ErrBusy) {
		t.Errorf("Close while registered: %v, want ErrBusy", err)
	}
	b.release()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if b.Bytes() != nil || b.Addr() != 0 {
		t.Error("closed buffer still exposes memory")
	}
	if _, err := b.hold(0, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("hold after Close: %v, want ErrClosed", err)
	}
}

func TestAllocBufferBadInput(t *testing.T) {
	for _, n := range []int{0, -1, -1 << 62} {
		if b, err := AllocBuffer(n); err == nil {
			b.Close()
			t.Errorf("AllocBuffer(%d) succeeded", n)
		}
	}
}

func TestBufferHoldRange(t *testing.T) {
	b, err := AllocBuffer(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, tc := range []struct{ off, n int }{{-1, 10}, {0, 0}, {0, 4097}, {4096, 1}, {4000, 100}, {1 << 62, 1 << 62}} {
		if _, err := b.hold(tc.off, tc.n); err == nil {
			t.Errorf("hold(%d, %d) accepted on a 4096-byte buffer", tc.off, tc.n)
			b.release()
		}
	}
}

func TestAccessString(t *testing.T) {
	for a, want := range map[Access]string{
		0:                                    "0",
		AccessLocalWrite | AccessRemoteRead:  "LOCAL_WRITE|REMOTE_READ",
		AccessRelaxedOrdering | AccessMWBind: "MW_BIND|RELAXED_ORDERING",
		Access(1 << 30):                      "0x40000000",
	} {
		if got := a.String(); got != want {
			t.Errorf("Access(%#x).String() = %q, want %q", uint32(a), got, want)
		}
	}
}
