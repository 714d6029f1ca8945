package uverbs

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

// resources returns the kernel's count of each verbs object on rxe0, as
// iproute2's `rdma res show` reads them over netlink: what a program leaves
// behind in the kernel, whatever its own bookkeeping says.
func resources(t *testing.T) map[string]int {
	t.Helper()
	out, err := exec.Command("rdma", "-j", "res", "show").Output()
	if err != nil {
		t.Fatalf("rdma res show: %v", err)
	}
	var devs []map[string]any
	if err := json.Unmarshal(out, &devs); err != nil {
		t.Fatalf("rdma res show: %v: %s", err, out)
	}
	for _, d := range devs {
		if d["ifname"] == vmenv.RXE0 {
			m := map[string]int{}
			for _, k := range []string{"pd", "cq", "qp", "mr", "srq", "ctx"} {
				if v, ok := d[k].(float64); ok {
					m[k] = int(v)
				}
			}
			return m
		}
	}
	t.Fatalf("rdma res show has no %s: %s", vmenv.RXE0, out)
	return nil
}

func requireVM(t *testing.T) {
	t.Helper()
	vmenv.RequireRXE(t)
	if !vmenv.InVM() {
		t.Skip("counts kernel objects with iproute2's rdma tool: test VM only")
	}
}

// TestBadInputLeavesNothing: every refused create, whether we refuse it or
// the kernel does, leaves no kernel object behind.
func TestBadInputLeavesNothing(t *testing.T) {
	requireVM(t)
	for _, tr := range transports {
		t.Run(tr.String(), func(t *testing.T) {
			c := openRXE(t, tr)
			pd, err := c.AllocPD()
			if err != nil {
				t.Fatal(err)
			}
			defer pd.Close()
			cq, err := c.CreateCQ(8, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cq.Close()
			attr, err := c.QueryDevice()
			if err != nil {
				t.Fatal(err)
			}
			other := openRXE(t, tr)
			otherCQ, err := other.CreateCQ(4, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer otherCQ.Close()
			closedCQ, err := c.CreateCQ(4, nil)
			if err != nil {
				t.Fatal(err)
			}
			closedCQ.Close()
			buf, err := AllocBuffer(4096)
			if err != nil {
				t.Fatal(err)
			}
			defer buf.Close()
			before := resources(t)
			caps := QPCap{MaxSendWr: 4, MaxRecvWr: 4, MaxSendSGE: 1, MaxRecvSGE: 1}
			for _, tc := range []struct {
				name string
				do   func() error
			}{
				{"CQ of 0 entries", func() error { _, err := c.CreateCQ(0, nil); return err }},
				{"CQ of -1 entries", func() error { _, err := c.CreateCQ(-1, nil); return err }},
				{"CQ beyond max_cqe", func() error { _, err := c.CreateCQ(int(attr.MaxCQE)+1, nil); return err }},
				{"CQ on a bad vector", func() error { _, err := c.CreateCQ(4, &CQOptions{CompVector: -1}); return err }},
				{"QP without CQs", func() error { _, err := pd.CreateQP(QPInitAttr{Type: QPTypeRC, Cap: caps}); return err }},
				{"QP with another context's CQ", func() error {
					_, err := pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: otherCQ, RecvCQ: cq, Cap: caps})
					return err
				}},
				{"QP with a closed CQ", func() error {
					_, err := pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: closedCQ, RecvCQ: cq, Cap: caps})
					return err
				}},
				{"QP beyond max_qp_wr", func() error {
					_, err := pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWr: attr.MaxQPWr + 1, MaxSendSGE: 1}})
					return err
				}},
				{"QP beyond max_sge", func() error {
					_, err := pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWr: 1, MaxSendSGE: attr.MaxSGE + 1}})
					return err
				}},
				{"QP of type 0", func() error { _, err := pd.CreateQP(QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: caps}); return err }},
				{"SRQ of 0 WRs", func() error { _, err := pd.CreateSRQ(SRQAttr{MaxSGE: 1}); return err }},
				{"SRQ beyond max_srq_wr", func() error { _, err := pd.CreateSRQ(SRQAttr{MaxWr: attr.MaxSRQWr + 1, MaxSGE: 1}); return err }},
				{"AH on port 0", func() error { _, err := pd.CreateAH(AHAttr{IsGlobal: true}); return err }},
				{"AH from a missing GID", func() error {
					_, err := pd.CreateAH(AHAttr{PortNum: 1, IsGlobal: true, GRH: GlobalRoute{SGIDIndex: 200, HopLimit: 1}})
					return err
				}},
				{"MR past the buffer", func() error { _, err := pd.RegisterBuffer(buf, 0, 8192, AccessLocalWrite); return err }},
				{"MR remote write without local write", func() error { _, err := pd.RegisterBuffer(buf, 0, 4096, AccessRemoteWrite); return err }},
				{"MW of type 0", func() error { _, err := pd.AllocMW(0); return err }},
				{"nil PD", func() error { var p *PD; _, err := p.AllocMW(MWType1); return err }},
			} {
				if err := tc.do(); err == nil {
					t.Errorf("%s: accepted", tc.name)
				} else {
					t.Logf("%s: %v", tc.name, err)
				}
			}
			if after := resources(t); !noMore(after, before) {
				t.Errorf("refused creates left kernel objects: before %v, after %v", before, after)
			}
		})
	}
}

// TestKernelRefusals covers verbs whose refusal comes from the kernel.
func TestKernelRefusals(t *testing.T) {
	c := openRXE(t, TransportAuto)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	// rxe has no on-demand paging (before 6.14): the kernel refuses.
	buf, err := AllocBuffer(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	if mr, err := pd.RegisterBuffer(buf, 0, 4096, AccessLocalWrite|AccessOnDemand); err == nil {
		mr.Close()
		t.Error("an on-demand-paging MR on rxe accepted")
	} else {
		t.Logf("ODP MR: %v", err)
	}
	mw, err := pd.AllocMW(MWType2)
	if err != nil {
		t.Fatal(err)
	}
	if err := pd.Close(); !errors.Is(err, unix.EBUSY) {
		t.Errorf("closing a PD with a memory window: %v, want EBUSY", err)
	}
	mw.Close()
	cq, err := c.CreateCQ(4, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Close()
	attr, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if err := cq.Resize(int(attr.MaxCQE) + 1); !errors.Is(err, unix.EINVAL) {
		t.Errorf("resize beyond max_cqe: %v, want EINVAL", err)
	}
	qp, err := pd.CreateQP(QPInitAttr{Type: QPTypeUD, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWr: 1, MaxRecvWr: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer qp.Close()
	if err := qp.DetachMulticast(gidOf("ff0e::9"), 0); err == nil {
		t.Error("detaching from a group never joined accepted")
	} else {
		t.Logf("detach without attach: %v", err)
	}
	if err := pd.Close(); !errors.Is(err, unix.EBUSY) {
		t.Errorf("closing a PD with a QP: %v, want EBUSY", err)
	}
	qp.Close()
	if err := pd.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCleanupBackstop drops objects without closing them: the cleanup
// releases them in the kernel once they are unreachable, and closing the
// context releases whatever is left.
func TestCleanupBackstop(t *testing.T) {
	requireVM(t)
	before := settledResources(t)
	c := openRXE(t, TransportAuto)
	func() {
		pd, err := c.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateCQ(4, nil); err != nil {
			t.Fatal(err)
		}
		_ = pd
	}()
	for i := 0; i < 50; i++ {
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
		if noMore(resources(t), before, "pd", "cq") {
			break
		}
	}
	if r := resources(t); !noMore(r, before, "pd", "cq") {
		t.Errorf("forgotten PD and CQ still in the kernel: before %v, now %v", before, r)
	}
	// A context closed under live objects takes them all with it.
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(4, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pd.Close(); err != nil {
		t.Errorf("PD Close after its context closed: %v", err)
	}
	if err := cq.Close(); err != nil {
		t.Errorf("CQ Close after its context closed: %v", err)
	}
	if after := resources(t); !noMore(after, before) {
		t.Errorf("objects left after the context closed: before %v, after %v", before, after)
	}
}

// TestCleanupBackstopTree: objects dropped together become unreachable in
// the same cycle, and Go runs their cleanups in any order; each keeps its
// parents reachable until it has run, so that no parent's destroy comes
// first and is refused (EBUSY) while a child still uses it. A PD with a
// QP, an SRQ, an MR and an MW (where the device has them), and two CQs,
// all dropped: every one leaves the kernel.
func TestCleanupBackstopTree(t *testing.T) {
	requireVM(t)
	before := settledResources(t)
	c := openRXE(t, TransportAuto)
	func() {
		pd, err := c.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		scq, err := c.CreateCQ(8, nil)
		if err != nil {
			t.Fatal(err)
		}
		rcq, err := c.CreateCQ(8, nil)
		if err != nil {
			t.Fatal(err)
		}
		srq, err := pd.CreateSRQ(SRQAttr{MaxWr: 8, MaxSGE: 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: scq, RecvCQ: rcq, SRQ: srq,
			Cap: QPCap{MaxSendWr: 8, MaxSendSGE: 1}}); err != nil {
			t.Fatal(err)
		}
		if _, err := pd.RegisterPinned(make([]byte, 4096), AccessLocalWrite); err != nil {
			t.Fatal(err)
		}
		if _, err := pd.AllocMW(MWType2); err != nil && !errors.Is(err, ErrNotSupported) {
			t.Fatal(err)
		}
	}()
	kinds := []string{"pd", "cq", "qp", "mr", "srq"}
	for range 100 {
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
		if noMore(resources(t), before, kinds...) {
			return
		}
	}
	t.Errorf("dropped PD, CQs, SRQ, QP and MR still in the kernel: before %v, now %v", before, resources(t))
}

// noMore reports whether no kind of object (of kinds, or of any kind) is
// more numerous in now than in before. Objects other tests of the binary
// forgot may be released by their cleanups at any moment, so counts can
// drop under us; they cannot grow unless something of ours is left.
func noMore(now, before map[string]int, kinds ...string) bool {
	for k, n := range now {
		if len(kinds) > 0 && !slices.Contains(kinds, k) {
			continue
		}
		if n > before[k] {
			return false
		}
	}
	return true
}

// settledResources counts after the cleanups of earlier tests' forgotten
// objects have run.
func settledResources(t *testing.T) map[string]int {
	t.Helper()
	r := resources(t)
	for i := 0; i < 10; i++ {
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
		n := resources(t)
		if cmp.Equal(n, r) {
			break
		}
		r = n
	}
	return r
}

// TestCloseEndsCQWait: a Close of the CQ from another goroutine ends a
// CQ.Wait blocked on it (no event can come for a destroyed CQ, and no other
// CQ shares its channel) with ErrClosed.
func TestCloseEndsCQWait(t *testing.T) {
	requireVM(t)
	c := openRXE(t, TransportAuto)
	ch, err := c.NewCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	cq, err := c.CreateCQ(4, &CQOptions{Channel: ch})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := cq.Wait(context.Background(), make([]WC, 1))
		done <- err
	}()
	time.Sleep(100 * time.Millisecond) // parked in the channel's read
	if err := cq.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("CQ.Wait ended by Close: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("CQ.Wait still blocked 5 s after its CQ was closed")
	}
}
