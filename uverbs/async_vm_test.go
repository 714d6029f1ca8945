package uverbs

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

// TestPortEvents takes the netdev under rxe1 down and up again and expects
// the port error and port active events, as ibv_get_async_event reports
// them.
func TestPortEvents(t *testing.T) {
	vmenv.RequireDevice(t, vmenv.RXE1)
	if !vmenv.InVM() {
		t.Skip("changes the link state of a netdev: test VM only")
	}
	c, err := Open(vmenv.RXE1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	next := func(want AsyncEventType) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for {
			ev, err := c.WaitAsyncEvent(ctx)
			if err != nil {
				t.Fatalf("waiting for %v: %v", want, err)
			}
			t.Logf("event: %v (port %d)", ev.Type, ev.Port)
			if ev.Type == want {
				if ev.Port != 1 {
					t.Errorf("%v on port %d, want 1", ev.Type, ev.Port)
				}
				return
			}
		}
	}
	ip("link", "set", vmenv.NetdevB, "down")
	next(EventPortErr)
	ip("link", "set", vmenv.NetdevB, "up")
	next(EventPortActive)
	// Leave the VM as found: both ports active with their GIDs.
	for _, name := range []string{vmenv.RXE0, vmenv.RXE1} {
		waitActive(t, name)
	}
}

func waitActive(t *testing.T, name string) {
	t.Helper()
	c, err := Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < 200; i++ {
		pa, err := c.QueryPort(1)
		if err == nil && pa.State == PortActive {
			if _, err := c.QueryGID(1, vmenv.GIDIndex); err == nil {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s port 1 not active again after 10s", name)
}

// TestCQOverrunEvent fills a one-entry CQ with more completions than it
// holds: the kernel reports the overrun as a CQ error event naming the CQ.
func TestCQOverrunEvent(t *testing.T) {
	p := newRCPair(t, TransportAuto, QPTypeRC)
	small, err := p.f.c.CreateCQ(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	qp, err := p.f.pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: small, RecvCQ: p.f.cq,
		Cap: QPCap{MaxSendWr: 16, MaxRecvWr: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer qp.Close()
	peer := p.f.qp(t, QPTypeRC)
	for _, x := range [][2]*QP{{qp, peer}, {peer, qp}} {
		if err := x[0].Connect(ConnectAttr{SGIDIndex: p.f.gid.Index, Access: AccessLocalWrite | AccessRemoteWrite,
			Remote: Endpoint{QPN: x[1].QPN(), GID: p.f.gid.GID}}); err != nil {
			t.Fatal(err)
		}
	}
	wrs := make([]SendWR, small.Capacity()+8)
	for i := range wrs {
		wrs[i] = SendWR{ID: uint64(i), Opcode: WRRDMAWrite, Flags: SendSignaled,
			SGL:        []SGE{{Addr: p.mrA.Addr(), Length: 8, Lkey: p.mrA.Lkey()}},
			RemoteAddr: p.mrB.Addr(), Rkey: p.mrB.Rkey()}
	}
	if err := qp.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		ev, err := p.f.c.WaitAsyncEvent(ctx)
		if err != nil {
			t.Fatalf("no CQ error event: %v", err)
		}
		t.Logf("event: %v (CQ %v, QP %v)", ev.Type, ev.CQ != nil, ev.QP != nil)
		if ev.Type == EventCQErr {
			if ev.CQ != small {
				t.Errorf("CQ error for %v, want the one-entry CQ", ev.CQ)
			}
			return
		}
	}
}
