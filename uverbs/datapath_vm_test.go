package uverbs

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"
)

// rcPair is two connected RC QPs on one rxe device with a registered
// buffer each.
type rcPair struct {
	f    *qpFixture
	a, b *QP
	bufA *Buffer
	bufB *Buffer
	mrA  *MR
	mrB  *MR
}

func newRCPair(t *testing.T, tr Transport, typ QPType) *rcPair {
	t.Helper()
	f := newQPFixture(t, tr)
	p := &rcPair{f: f}
	p.a, p.b = f.qp(t, typ), f.qp(t, typ)
	for _, x := range []struct {
		qp, peer *QP
	}{{p.a, p.b}, {p.b, p.a}} {
		if err := x.qp.Connect(ConnectAttr{SGIDIndex: f.gid.Index, Qkey: 0x11111111, LocalPSN: 7,
			Access: AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic,
			Remote: Endpoint{QPN: x.peer.QPN(), PSN: 7, GID: f.gid.GID}}); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	access := AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic
	for _, x := range []struct {
		buf **Buffer
		mr  **MR
	}{{&p.bufA, &p.mrA}, {&p.bufB, &p.mrB}} {
		if *x.buf, err = AllocBuffer(1 << 16); err != nil {
			t.Fatal(err)
		}
		if *x.mr, err = f.pd.RegisterBuffer(*x.buf, 0, 1<<16, access); err != nil {
			t.Fatal(err)
		}
		buf, mr := *x.buf, *x.mr
		t.Cleanup(func() { mr.Close(); buf.Close() })
	}
	return p
}

// pollOne waits (busy polling, bounded) for one completion.
func pollOne(t *testing.T, cq *CQ) WC {
	t.Helper()
	var wc [1]WC
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		n, err := cq.Poll(wc[:])
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return wc[0]
		}
		time.Sleep(100 * time.Microsecond)
	}
	t.Fatal("no completion within 5s")
	return WC{}
}

func TestRCDataPath(t *testing.T) {
	for _, tr := range []Transport{TransportIoctl, TransportWrite} {
		t.Run(tr.String(), func(t *testing.T) {
			p := newRCPair(t, tr, QPTypeRC)
			a, b, A, B := p.a, p.b, p.bufA.Bytes(), p.bufB.Bytes()
			cq := p.f.cq

			// SEND with immediate into a posted receive.
			copy(A, "hello, rdma")
			if err := b.PostRecv([]RecvWR{{ID: 1, SGL: []SGE{{Addr: p.mrB.Addr(), Length: 64, Lkey: p.mrB.Lkey()}}}}); err != nil {
				t.Fatal(err)
			}
			if err := a.PostSend([]SendWR{{ID: 2, Opcode: WRSendWithImm, Flags: SendSignaled, Imm: 0xdeadbeef,
				SGL: []SGE{{Addr: p.mrA.Addr(), Length: 11, Lkey: p.mrA.Lkey()}}}}); err != nil {
				t.Fatal(err)
			}
			got := map[uint64]WC{}
			for i := 0; i < 2; i++ {
				wc := pollOne(t, cq)
				got[wc.ID] = wc
			}
			if wc := got[2]; wc.Status != WCSuccess || wc.Opcode != WCSend {
				t.Errorf("send completion %+v", wc)
			}
			if wc := got[1]; wc.Status != WCSuccess || wc.Opcode != WCRecv || wc.ByteLen != 11 || wc.Imm != 0xdeadbeef || wc.Flags&WCWithImm == 0 || wc.QPNum != b.QPN() {
				t.Errorf("recv completion %+v", wc)
			}
			if !bytes.Equal(B[:11], []byte("hello, rdma")) {
				t.Errorf("received %q", B[:11])
			}

			// RDMA WRITE, inline, two SGEs.
			copy(A[100:], "abc")
			copy(A[200:], "defg")
			if err := a.PostSend([]SendWR{{ID: 3, Opcode: WRRDMAWrite, Flags: SendSignaled | SendInline,
				SGL:        []SGE{{Addr: p.mrA.Addr() + 100, Length: 3, Lkey: p.mrA.Lkey()}, {Addr: p.mrA.Addr() + 200, Length: 4, Lkey: p.mrA.Lkey()}},
				RemoteAddr: p.mrB.Addr() + 1000, Rkey: p.mrB.Rkey()}}); err != nil {
				t.Fatal(err)
			}
			if wc := pollOne(t, cq); wc.ID != 3 || wc.Status != WCSuccess || wc.Opcode != WCRDMAWrite {
				t.Errorf("write completion %+v", wc)
			}
			if !bytes.Equal(B[1000:1007], []byte("abcdefg")) {
				t.Errorf("written %q", B[1000:1007])
			}

			// RDMA READ back.
			if err := a.PostSend([]SendWR{{ID: 4, Opcode: WRRDMARead, Flags: SendSignaled,
				SGL:        []SGE{{Addr: p.mrA.Addr() + 3000, Length: 7, Lkey: p.mrA.Lkey()}},
				RemoteAddr: p.mrB.Addr() + 1000, Rkey: p.mrB.Rkey()}}); err != nil {
				t.Fatal(err)
			}
			if wc := pollOne(t, cq); wc.ID != 4 || wc.Status != WCSuccess || wc.Opcode != WCRDMARead || wc.ByteLen != 7 {
				t.Errorf("read completion %+v", wc)
			}
			if !bytes.Equal(A[3000:3007], []byte("abcdefg")) {
				t.Errorf("read %q", A[3000:3007])
			}

			// Atomics: FAA then CAS, old values land in A.
			binary.LittleEndian.PutUint64(B[4096:], 40)
			if err := a.PostSend([]SendWR{
				{ID: 5, Opcode: WRAtomicFetchAndAdd, Flags: SendSignaled, SGL: []SGE{{Addr: p.mrA.Addr() + 4096, Length: 8, Lkey: p.mrA.Lkey()}},
					RemoteAddr: p.mrB.Addr() + 4096, Rkey: p.mrB.Rkey(), CompareAdd: 2},
				{ID: 6, Opcode: WRAtomicCmpAndSwp, Flags: SendSignaled, SGL: []SGE{{Addr: p.mrA.Addr() + 4104, Length: 8, Lkey: p.mrA.Lkey()}},
					RemoteAddr: p.mrB.Addr() + 4096, Rkey: p.mrB.Rkey(), CompareAdd: 42, Swap: 7},
			}); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 2; i++ {
				if wc := pollOne(t, cq); wc.Status != WCSuccess {
					t.Errorf("atomic completion %+v", wc)
				}
			}
			if old1, old2, now := binary.LittleEndian.Uint64(A[4096:]), binary.LittleEndian.Uint64(A[4104:]), binary.LittleEndian.Uint64(B[4096:]); old1 != 40 || old2 != 42 || now != 7 {
				t.Errorf("atomics: FAA old %d (want 40), CAS old %d (want 42), memory %d (want 7)", old1, old2, now)
			}

			// Remote access without the right: the MR of B allows no write
			// through a bad rkey.
			if err := a.PostSend([]SendWR{{ID: 7, Opcode: WRRDMAWrite, Flags: SendSignaled,
				SGL:        []SGE{{Addr: p.mrA.Addr(), Length: 8, Lkey: p.mrA.Lkey()}},
				RemoteAddr: p.mrB.Addr(), Rkey: p.mrB.Rkey() ^ 0x100}}); err != nil {
				t.Fatal(err)
			}
			if wc := pollOne(t, cq); wc.ID != 7 || wc.Status != WCRemAccessErr {
				t.Errorf("write with a stale rkey: %+v (%v), want remote access error", wc, wc.Status)
			}
		})
	}
}

func TestPostBadInput(t *testing.T) {
	p := newRCPair(t, TransportAuto, QPTypeRC)
	sge := SGE{Addr: p.mrA.Addr(), Length: 8, Lkey: p.mrA.Lkey()}
	for _, tc := range []struct {
		name string
		wr   SendWR
		want error
	}{
		{"too many SGEs", SendWR{Opcode: WRSend, SGL: make([]SGE, p.a.Cap().MaxSendSGE+1)}, ErrTooManySGE},
		{"inline too large", SendWR{Opcode: WRSend, Flags: SendInline, SGL: []SGE{{Addr: p.mrA.Addr(), Length: p.a.Cap().MaxInlineData + 1}}}, ErrInlineTooLarge},
		{"unaligned atomic", SendWR{Opcode: WRAtomicFetchAndAdd, SGL: []SGE{sge}, RemoteAddr: p.mrB.Addr() + 4}, ErrBadWR},
		{"short atomic", SendWR{Opcode: WRAtomicFetchAndAdd, SGL: []SGE{{Addr: sge.Addr, Length: 4, Lkey: sge.Lkey}}, RemoteAddr: p.mrB.Addr()}, ErrBadWR},
		{"unknown opcode", SendWR{Opcode: 42, SGL: []SGE{sge}}, ErrBadWR},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A good request first: the list is refused whole.
			err := p.a.PostSend([]SendWR{{ID: 1, Opcode: WRSend, SGL: []SGE{sge}}, tc.wr})
			var pe *PostError
			if !errors.Is(err, tc.want) || !errors.As(err, &pe) || pe.Index != 1 {
				t.Errorf("err = %v, want %v at index 1", err, tc.want)
			}
		})
	}
	// Nothing was posted: a completion would show up otherwise.
	var wc [4]WC
	time.Sleep(50 * time.Millisecond)
	if n, _ := p.f.cq.Poll(wc[:]); n != 0 {
		t.Errorf("refused lists produced %d completions: %+v", n, wc[:n])
	}
	// Queue full: more than the send ring holds in one list (the ring may
	// hold more than the granted MaxSendWr: it is a power of two).
	many := make([]SendWR, 64*p.a.Cap().MaxSendWr)
	for i := range many {
		many[i] = SendWR{Opcode: WRSend, SGL: []SGE{sge}}
	}
	if err := p.a.PostSend(many); !errors.Is(err, ErrQueueFull) {
		t.Errorf("%d WRs on a %d-deep queue: %v, want ErrQueueFull", len(many), p.a.Cap().MaxSendWr, err)
	}
	// Wrong state.
	fresh := p.f.qp(t, QPTypeRC)
	if err := fresh.PostSend([]SendWR{{Opcode: WRSend, SGL: []SGE{sge}}}); !errors.Is(err, ErrQPState) {
		t.Errorf("post_send in RESET: %v, want ErrQPState", err)
	}
	if err := fresh.PostRecv([]RecvWR{{SGL: []SGE{sge}}}); !errors.Is(err, ErrQPState) {
		t.Errorf("post_recv in RESET: %v, want ErrQPState", err)
	}
}

// TestCompletionEvent arms a CQ, sends, and waits for the event on the
// channel through the netpoller.
func TestCompletionEvent(t *testing.T) {
	c := openRXE(t, TransportAuto)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	ch, err := c.NewCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	cq, err := c.CreateCQ(16, &CQOptions{Channel: ch})
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Close()
	gid, err := c.RecommendedGID(1)
	if err != nil {
		t.Fatal(err)
	}
	mk := func() *QP {
		qp, err := pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWr: 4, MaxRecvWr: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		return qp
	}
	a, b := mk(), mk()
	defer a.Close()
	defer b.Close()
	for _, x := range [][2]*QP{{a, b}, {b, a}} {
		if err := x[0].Connect(ConnectAttr{SGIDIndex: gid.Index, Remote: Endpoint{QPN: x[1].QPN(), GID: gid.GID}}); err != nil {
			t.Fatal(err)
		}
	}
	buf, err := AllocBuffer(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	mr, err := pd.RegisterBuffer(buf, 0, 4096, AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	if err := cq.RequestNotify(false); err != nil {
		t.Fatal(err)
	}
	if err := b.PostRecv([]RecvWR{{ID: 9, SGL: []SGE{{Addr: mr.Addr() + 2048, Length: 64, Lkey: mr.Lkey()}}}}); err != nil {
		t.Fatal(err)
	}
	if err := a.PostSend([]SendWR{{ID: 8, Opcode: WRSend, Flags: SendSignaled | SendInline, SGL: []SGE{{Addr: mr.Addr(), Length: 16}}}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := ch.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got != cq {
		t.Error("event for another CQ")
	}
	got.AckEvents(1)
	var wc [4]WC
	n := 0
	for deadline := time.Now().Add(5 * time.Second); n < 2 && time.Now().Before(deadline); {
		m, err := cq.Poll(wc[n:])
		if err != nil {
			t.Fatal(err)
		}
		n += m
	}
	if n != 2 {
		t.Errorf("%d completions after the event, want 2", n)
	}
}

// TestPostAfterClose: a closed QP, CQ or context refuses the data path
// with ErrClosed; nothing is written to the queue or to the (maybe reused)
// fd number.
func TestPostAfterClose(t *testing.T) {
	p := newRCPair(t, TransportAuto, QPTypeRC)
	sge := SGE{Addr: p.mrA.Addr(), Length: 8, Lkey: p.mrA.Lkey()}
	if err := p.a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.a.PostSend([]SendWR{{Opcode: WRSend, SGL: []SGE{sge}}}); !errors.Is(err, ErrClosed) {
		t.Errorf("post_send on a closed QP: %v, want ErrClosed", err)
	}
	if err := p.a.PostRecv([]RecvWR{{SGL: []SGE{sge}}}); !errors.Is(err, ErrClosed) {
		t.Errorf("post_recv on a closed QP: %v, want ErrClosed", err)
	}
	// Closing the context under a live QP and CQ.
	if err := p.f.c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.b.PostSend([]SendWR{{Opcode: WRSend, SGL: []SGE{sge}}}); !errors.Is(err, ErrClosed) {
		t.Errorf("post_send after the context closed: %v, want ErrClosed", err)
	}
	var wc [1]WC
	if _, err := p.f.cq.Poll(wc[:]); err != nil && !errors.Is(err, ErrClosed) {
		t.Errorf("poll after the context closed: %v", err)
	}
	if err := p.f.cq.Close(); err != nil {
		t.Errorf("CQ Close after the context closed: %v", err)
	}
	if _, err := p.f.cq.Poll(wc[:]); !errors.Is(err, ErrClosed) {
		t.Errorf("poll on a closed CQ: %v, want ErrClosed", err)
	}
}
