package uverbs

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/abi"
)

// collectUntil runs the garbage collector until cond holds or a second
// has passed.
func collectUntil(cond func() bool) bool {
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
		runtime.GC()
		if cond() {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return cond()
}

// TestDroppedMRLetsGo: the cleanup of an MR the program dropped
// deregisters it and then lets go of what the registration held: the pin
// on Go memory (an unreachable Pinner that still pins is a fatal error of
// the runtime) and the Buffer's count (which would keep Buffer.Close
// failing with ErrBusy for ever).
func TestDroppedMRLetsGo(t *testing.T) {
	c, k := openRecording(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	func() {
		if _, err := pd.RegisterPinned(make([]byte, 4096), AccessLocalWrite); err != nil {
			t.Fatal(err)
		}
	}()
	if !collectUntil(func() bool { return k.count(abi.CmdDeregMR) == 1 }) {
		t.Fatalf("a dropped pinned MR: %d DEREG_MR, want 1", k.count(abi.CmdDeregMR))
	}

	buf, err := AllocBuffer(4096)
	if err != nil {
		t.Fatal(err)
	}
	func() {
		if _, err := pd.RegisterBuffer(buf, 0, 4096, AccessLocalWrite); err != nil {
			t.Fatal(err)
		}
	}()
	if err := buf.Close(); !errors.Is(err, ErrBusy) {
		t.Fatalf("Buffer.Close under a live MR: %v, want ErrBusy", err)
	}
	var closeErr error
	if !collectUntil(func() bool { closeErr = buf.Close(); return closeErr == nil }) {
		t.Fatalf("Buffer.Close after its MR was dropped: %v (%d DEREG_MR)", closeErr, k.count(abi.CmdDeregMR))
	}
	runtime.KeepAlive(pd)
}

// TestCommandsAfterContextClose: a command on an object whose context is
// closed fails with ErrClosed and never reaches the kernel, whose
// descriptor number another file may have taken.
func TestCommandsAfterContextClose(t *testing.T) {
	c, k := openRecording(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	buf, err := AllocBuffer(8192)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	mr, err := pd.RegisterBuffer(buf, 0, 4096, AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := mr.ReReg(ReregAccess, nil, AccessLocalWrite|AccessRemoteRead); !errors.Is(err, ErrClosed) {
		t.Errorf("ReReg after Context.Close: %v, want ErrClosed", err)
	}
	if err := mr.ReRegBuffer(buf, 4096, 4096); !errors.Is(err, ErrClosed) {
		t.Errorf("ReRegBuffer after Context.Close: %v, want ErrClosed", err)
	}
	if n := k.count(abi.CmdReregMR); n != 0 {
		t.Errorf("%d REREG_MR sent after Context.Close, want 0", n)
	}
	if err := mr.Close(); err != nil {
		t.Errorf("MR.Close after Context.Close: %v", err)
	}
}
