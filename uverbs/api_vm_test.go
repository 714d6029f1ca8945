package uverbs

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

// TestMRReReg: Linux 6.12's rxe changes an MR's access rights and PD in
// place (RXE_MR_REREG_SUPPORTED), and a peer sees the change; it refuses
// to change the memory. 6.1's rxe has no rereg: every change is refused.
// Each refusal matches ErrNotSupported, names what was refused, and leaves
// the MR as it was.
func TestMRReReg(t *testing.T) {
	kernel := vmenv.KernelName()
	for _, tr := range []Transport{TransportIoctl, TransportWrite} {
		t.Run(tr.String(), func(t *testing.T) {
			p := newRCPair(t, tr, QPTypeRC)
			buf, err := AllocBuffer(4096)
			if err != nil {
				t.Fatal(err)
			}
			defer buf.Close()
			copy(buf.Bytes(), "re-registered")
			mr, err := p.f.pd.RegisterBuffer(buf, 0, 4096, AccessLocalWrite)
			if err != nil {
				t.Fatal(err)
			}
			defer mr.Close()
			pd2, err := p.f.c.AllocPD()
			if err != nil {
				t.Fatal(err)
			}
			defer pd2.Close()
			other, err := AllocBuffer(4096)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()

			read := func() WC {
				into, err := p.mrA.SGE(0, 13)
				if err != nil {
					t.Fatal(err)
				}
				if err := p.a.PostSend([]SendWR{{ID: 1, Opcode: WRRDMARead, Flags: SendSignaled, SGL: []SGE{into},
					RemoteAddr: mr.IOVA(), Rkey: mr.Rkey()}}); err != nil {
					t.Fatal(err)
				}
				return pollOne(t, p.f.cq)
			}
			accessErr := mr.ReReg(ReregAccess, nil, AccessLocalWrite|AccessRemoteRead)
			bufErr := mr.ReRegBuffer(other, 0, 4096)
			switch kernel {
			case "6.12":
				if accessErr != nil {
					t.Fatalf("rereg access: %v", accessErr)
				}
				if mr.Access() != AccessLocalWrite|AccessRemoteRead {
					t.Errorf("access %v after rereg", mr.Access())
				}
				if wc := read(); wc.Err() != nil || !bytes.Equal(p.mrA.Bytes()[:13], []byte("re-registered")) {
					t.Fatalf("RDMA READ after granting REMOTE_READ: %v, read %q", wc.Err(), p.mrA.Bytes()[:13])
				}
				if !errors.Is(bufErr, ErrNotSupported) || !strings.Contains(bufErr.Error(), "does not change an MR's memory") {
					t.Errorf("rereg translation: %v, want ErrNotSupported naming the memory", bufErr)
				}
				if err := mr.ReReg(ReregPD, pd2, 0); err != nil {
					t.Fatalf("rereg PD: %v", err)
				}
				if mr.PD() != pd2 {
					t.Error("PD() is not the new PD")
				}
				// The MR is now another PD's: the QPs of the first may not
				// use it.
				if wc := read(); !errors.Is(wc.Err(), WCRemAccessErr) {
					t.Errorf("RDMA READ through the old PD: %v, want %v", wc.Err(), WCRemAccessErr)
				}
			case "6.1":
				for _, c := range []struct {
					err  error
					what string
				}{{accessErr, "access rights"}, {mr.ReReg(ReregPD, pd2, 0), "PD"}, {bufErr, "memory"}} {
					if !errors.Is(c.err, ErrNotSupported) || !errors.Is(c.err, unix.EOPNOTSUPP) ||
						!strings.Contains(c.err.Error(), "does not change an MR's "+c.what) {
						t.Errorf("rereg %s on 6.1: %v, want ErrNotSupported naming it", c.what, c.err)
					}
				}
				if mr.Access() != AccessLocalWrite || mr.PD() != p.f.pd {
					t.Errorf("a refused rereg changed the MR: access %v", mr.Access())
				}
			default:
				t.Logf("kernel %q: access %v, memory %v", kernel, accessErr, bufErr)
			}
			// A refused translation released the new buffer.
			if err := other.Close(); err != nil {
				t.Errorf("the buffer of a refused ReRegBuffer: %v", err)
			}
		})
	}
}

// TestCQWait: CQ.Wait returns completions however they race with the arm
// (many rounds, sender and waiter on separate goroutines), honours its
// context, and refuses a CQ without a channel of its own.
func TestCQWait(t *testing.T) {
	for _, tr := range []Transport{TransportIoctl, TransportWrite} {
		t.Run(tr.String(), func(t *testing.T) {
			f := newQPFixture(t, tr)
			ch, err := f.c.NewCompChannel()
			if err != nil {
				t.Fatal(err)
			}
			defer ch.Close()
			cq, err := f.c.CreateCQ(64, &CQOptions{Channel: ch})
			if err != nil {
				t.Fatal(err)
			}
			defer cq.Close()
			qp, err := f.pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq,
				Cap: QPCap{MaxSendWr: 64, MaxRecvWr: 64, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 16}})
			if err != nil {
				t.Fatal(err)
			}
			defer qp.Close()
			if err := qp.Connect(ConnectAttr{SGIDIndex: f.gid.Index, Access: AccessLocalWrite | AccessRemoteWrite,
				Remote: Endpoint{QPN: qp.QPN(), GID: f.gid.GID}}); err != nil {
				t.Fatal(err)
			}
			buf, err := AllocBuffer(4096)
			if err != nil {
				t.Fatal(err)
			}
			defer buf.Close()
			mr, err := f.pd.RegisterBuffer(buf, 0, 4096, AccessLocalWrite|AccessRemoteWrite)
			if err != nil {
				t.Fatal(err)
			}
			defer mr.Close()
			src, _ := mr.SGE(0, 8)
			dst, _ := mr.RemoteBuffer(1024, 8)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var wcs [4]WC
			var wg sync.WaitGroup
			const rounds = 200
			wg.Add(1)
			go func() { // the sender: signaled inline RDMA WRITEs to itself, at its own pace
				defer wg.Done()
				for i := range rounds {
					for {
						err := qp.PostSend([]SendWR{{ID: uint64(i), Opcode: WRRDMAWrite, Flags: SendSignaled | SendInline,
							SGL: []SGE{src}, RemoteAddr: dst.Addr, Rkey: dst.Rkey}})
						if !errors.Is(err, ErrQueueFull) {
							if err != nil {
								t.Error(err)
								return
							}
							break
						}
						time.Sleep(time.Millisecond)
					}
					if i%7 == 0 {
						time.Sleep(time.Millisecond)
					}
				}
			}()
			for got := 0; got < rounds; {
				n, err := cq.Wait(ctx, wcs[:])
				if err != nil {
					t.Fatalf("after %d of %d completions: %v", got, rounds, err)
				}
				for _, wc := range wcs[:n] {
					if wc.Err() != nil || wc.ID != uint64(got) {
						t.Fatalf("completion %d: %+v", got, wc)
					}
					got++
				}
			}
			wg.Wait()

			short, stop := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer stop()
			if _, err := cq.Wait(short, wcs[:]); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Wait with nothing to come: %v, want the context's deadline", err)
			}
			if _, err := cq.Wait(ctx, nil); !errors.Is(err, unix.EINVAL) {
				t.Errorf("Wait with no room: %v", err)
			}
			if _, err := f.cq.Wait(ctx, wcs[:]); !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "without a completion channel") {
				t.Errorf("Wait on a CQ without a channel: %v", err)
			}
			cq2, err := f.c.CreateCQ(4, &CQOptions{Channel: ch})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cq.Wait(ctx, wcs[:]); !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "shares its completion channel") {
				t.Errorf("Wait on a shared channel: %v", err)
			}
			if err := cq2.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestConnectTwoSteps: ReadyToReceive leaves the QP in RTR, where receives
// may be posted and sends may not; ReadyToSend completes it. The path MTU
// defaults to the port's active MTU and the address options reach the QP.
func TestConnectTwoSteps(t *testing.T) {
	for _, tr := range []Transport{TransportIoctl, TransportWrite} {
		t.Run(tr.String(), func(t *testing.T) {
			f := newQPFixture(t, tr)
			a, b := f.qp(t, QPTypeRC), f.qp(t, QPTypeRC)
			port, err := f.c.QueryPort(1)
			if err != nil {
				t.Fatal(err)
			}
			attr := func(self, peer *QP) ConnectAttr {
				return ConnectAttr{SGIDIndex: f.gid.Index, LocalPSN: 0x10, HopLimit: 9, TrafficClass: 0x20, SL: 2,
					Timeout: 0, RetryCnt: 0, Explicit: ExplicitTimeout | ExplicitRetryCnt,
					Remote: Endpoint{QPN: peer.QPN(), PSN: 0x10, GID: f.gid.GID}}
			}
			if err := b.ReadyToReceive(attr(b, a)); err != nil {
				t.Fatal(err)
			}
			if b.State() != QPStateRTR {
				t.Fatalf("state %v after ReadyToReceive", b.State())
			}
			buf, err := AllocBuffer(4096)
			if err != nil {
				t.Fatal(err)
			}
			defer buf.Close()
			mr, err := f.pd.RegisterBuffer(buf, 0, 4096, AccessLocalWrite)
			if err != nil {
				t.Fatal(err)
			}
			defer mr.Close()
			into, _ := mr.SGE(1024, 64)
			if err := b.PostRecv([]RecvWR{{ID: 2, SGL: []SGE{into}}}); err != nil {
				t.Fatalf("PostRecv in RTR: %v", err)
			}
			if err := b.PostSend([]SendWR{{Opcode: WRSend}}); !errors.Is(err, ErrQPState) {
				t.Errorf("PostSend in RTR: %v, want ErrQPState", err)
			}
			if err := a.Connect(attr(a, b)); err != nil {
				t.Fatal(err)
			}
			if err := b.ReadyToSend(attr(b, a)); err != nil {
				t.Fatal(err)
			}
			q, err := b.Query()
			if err != nil {
				t.Fatal(err)
			}
			// What rxe reports back. It keeps no SL on RoCE and takes the
			// hop limit from the route; TestConnectAttrs checks that both
			// are asked for.
			if q.State != QPStateRTS || q.PathMTU != port.ActiveMTU || q.AH.GRH.TrafficClass != 0x20 ||
				q.Timeout != 0 || q.RetryCnt != 0 || q.RNRRetry != 7 || q.AH.GRH.SGIDIndex != f.gid.Index || q.SQPSN != 0x10 {
				t.Errorf("after ReadyToSend: state %v MTU %v (port %v) class %#x timeout %d retry %d RNR retry %d SGID index %d SQ PSN %#x",
					q.State, q.PathMTU, port.ActiveMTU, q.AH.GRH.TrafficClass, q.Timeout, q.RetryCnt, q.RNRRetry, q.AH.GRH.SGIDIndex, q.SQPSN)
			}
			copy(buf.Bytes(), "two steps")
			msg, _ := mr.SGE(0, 9)
			if err := a.PostSend([]SendWR{{ID: 1, Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{msg}}}); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if wc := pollOne(t, f.cq); wc.Err() != nil {
					t.Fatal(wc.Err())
				}
			}
			if got := string(buf.Bytes()[1024:1033]); got != "two steps" {
				t.Errorf("received %q", got)
			}
		})
	}
}

// TestConnectBadInput: the ConnectAttr fields out of their ranges, each
// refused before any command with EINVAL naming the field.
func TestConnectBadInput(t *testing.T) {
	f := newQPFixture(t, TransportAuto)
	for _, tc := range []struct {
		name string
		attr ConnectAttr
		want string
	}{
		{"SGID index", ConnectAttr{SGIDIndex: 256}, "SGIDIndex 256"},
		{"timeout", ConnectAttr{Timeout: 32}, "Timeout 32"},
		{"retry count", ConnectAttr{RetryCnt: 8}, "RetryCnt 8"},
		{"RNR retry", ConnectAttr{RNRRetry: 8}, "RNRRetry 8"},
		{"min RNR timer", ConnectAttr{MinRNRTimer: 32}, "MinRNRTimer 32"},
		{"SL", ConnectAttr{SL: 16}, "SL 16"},
		{"MTU", ConnectAttr{MTU: 6}, "MTU 6"},
		{"PSN", ConnectAttr{LocalPSN: 1 << 24}, "wider than 24 bits"},
		{"flow label", ConnectAttr{FlowLabel: 1 << 20, Remote: Endpoint{GID: f.gid.GID}, SGIDIndex: f.gid.Index}, "FlowLabel"},
	} {
		qp := f.qp(t, QPTypeRC)
		err := qp.Connect(tc.attr)
		if !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want EINVAL naming %q", tc.name, err, tc.want)
		}
	}
}

// TestDevices: the VM's two rxe devices are listed, and open.
func TestDevices(t *testing.T) {
	vmenv.RequireRXE(t)
	devs, err := Devices()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range devs {
		names = append(names, d.Name)
		c, err := Open(d.Name)
		if err != nil {
			t.Errorf("Open(%q) of a listed device: %v", d.Name, err)
			continue
		}
		c.Close()
	}
	if vmenv.InVM() && strings.Join(names, " ") != "rxe0 rxe1" {
		t.Errorf("Devices() = %v, want rxe0 rxe1", names)
	}
}
