package mlx5

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/provider/mlx5/internal/hcamodel"
)

// RC loopback through the provider's real post and poll with the software
// HCA model (internal/hcamodel) standing in for the device: the provider
// writes WQEs and doorbells into ordinary memory, the model executes them
// as the PRM says a ConnectX does and writes CQEs, and the provider polls
// them.

// loopKernel stands in for the uverbs file: UAR objects and their
// mappings are ordinary memory.
type loopKernel struct {
	mu   sync.Mutex
	next uint32
}

func (k *loopKernel) mmap(_ int64, length int, _ int) ([]byte, error) {
	return unix.Mmap(-1, 0, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
}
func (k *loopKernel) munmap(b []byte) error { return unix.Munmap(b) }
func (k *loopKernel) allocUAR(uint32) (dynUAR, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.next++
	return dynUAR{handle: k.next, mmapOff: uint64(k.next) << 12, length: 4096, pageID: 0x20 + k.next}, nil
}
func (k *loopKernel) destroyUAR(uint32) error { return nil }

// loopContext is a context set up as from a ConnectX-5's GET_CONTEXT
// response: dynamic UARs, CQE version 1, 64-byte cache lines.
func loopContext(t testing.TB) *Context {
	t.Helper()
	c := newContext(os.Getpagesize())
	c.resp = abi.MLX5AllocUcontextResp{
		QPTabSize: 1 << 18, BfRegSize: 512, CacheLineSize: 64, MaxSQDescSz: 512, MaxRQDescSz: 512,
		MaxSendWqebb: 1 << 15, MaxRecvWr: 1 << 15, MaxSRQRecvWr: 1 << 15, NumPorts: 1, CQEVersion: 1,
		CmdsSuppUHW: 3, EthMinInline: 1, NumUARsPerPage: 1, LogUARSize: 12, NumDynBfregs: 1024,
	}
	c.ops = &loopKernel{}
	if err := c.setup(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// loopCQ creates a CQ of cqe entries and its model twin.
func loopCQ(t testing.TB, c *Context, cqe int, cqn uint32) (*CQ, *hcamodel.CQ) {
	t.Helper()
	p, err := c.NewCQ(cqe)
	if err != nil {
		t.Fatal(err)
	}
	cq := p.(*CQ)
	cq.resp.CQN = cqn
	if err := cq.Created(nil, cqn, int(cq.ncqe)-1); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cq.Destroyed() })
	return cq, &hcamodel.CQ{CQN: cqn, Ring: cq.buf.mem[:cq.ncqe*cqeSize], NCQE: cq.ncqe, DBRec: cq.db.words}
}

// loopQP creates an RC QP on cq and its model twin.
func loopQP(t testing.TB, c *Context, cq *CQ, mcq *hcamodel.CQ, qpn uint32, caps provider.QPInit) (*QP, *hcamodel.QP) {
	t.Helper()
	caps.Type = abi.QPTypeRC
	caps.SendCQ, caps.RecvCQ = cq, cq
	p, err := c.NewQP(caps)
	if err != nil {
		t.Fatal(err)
	}
	q := p.(*QP)
	if err := q.Created(nil, qpn, qpn, caps); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Destroyed() })
	m := &hcamodel.QP{
		QPN:      qpn,
		UIDX:     q.uidx,
		SQ:       unsafe.Slice((*byte)(q.sq.start), q.sq.wqeCnt*64),
		SQWQECnt: q.sq.wqeCnt,
		RQ:       unsafe.Slice((*byte)(q.rq.start), q.rq.wqeCnt<<q.rq.shift),
		RQWQECnt: q.rq.wqeCnt,
		RQStride: 1 << q.rq.shift,
		DBRec:    q.db.words,
		SendCQ:   mcq,
		RecvCQ:   mcq,
	}
	return q, m
}

// loopSide is one QP of a model loopback pair. Posts and the model's
// execution share a lock, as a posting thread and the HCA's reading of
// what it wrote are ordered by the doorbell; polling runs beside them.
type loopSide struct {
	hw  *sync.Mutex
	hca *hcamodel.HCA
	qp  *QP
	cq  *CQ
	mem []byte
	key uint32
	srq *SRQ // receives go here when set
}

func (s *loopSide) PostSend(wrs []provider.SendWR) error {
	s.hw.Lock()
	defer s.hw.Unlock()
	if err := s.qp.PostSend(wrs); err != nil {
		return err
	}
	_, err := s.hca.Run()
	return err
}

func (s *loopSide) PostRecv(wrs []provider.RecvWR) error {
	s.hw.Lock()
	defer s.hw.Unlock()
	post := s.qp.PostRecv
	if s.srq != nil {
		post = s.srq.PostRecv
	}
	if err := post(wrs); err != nil {
		return err
	}
	_, err := s.hca.Run()
	return err
}

func (s *loopSide) Poll(wcs []provider.WC) (int, error) { return s.cq.Poll(wcs) }
func (s *loopSide) QPN() uint32                         { return s.qp.QPN() }
func (s *loopSide) Arena() []byte                       { return s.mem }
func (s *loopSide) Lkey() uint32                        { return s.key }
func (s *loopSide) Rkey() uint32                        { return s.key }
func (s *loopSide) MaxInline() int                      { return s.qp.MaxInlineData() }
func (s *loopSide) ZeroLengthRecvSGEs() bool            { return s.srq == nil }
func (s *loopSide) MaxSGE() int                         { return 4 } // loopCaps' send and receive SGEs

// loopPair is two connected QPs, each with its own CQ, in the model.
type loopPair struct {
	c          *Context
	hca        *hcamodel.HCA
	a, b       *loopSide
	ma, mb     *hcamodel.QP
	mcqA, mcqB *hcamodel.CQ
}

// loopOptions vary the pair: b receives through an SRQ; the HCA
// scatters small receives into the CQE.
type loopOptions struct {
	srq     bool
	scatter bool
	solo    bool // single-threaded CQs and send queues
}

func newLoopPair(t testing.TB, cqe int, caps provider.QPInit, arena int, opts ...loopOptions) *loopPair {
	t.Helper()
	var o loopOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	c := loopContext(t)
	h := hcamodel.New()
	hw := &sync.Mutex{}
	p := &loopPair{c: c, hca: h}
	cqA, mcqA := loopCQ(t, c, cqe, 0x80)
	cqB, mcqB := loopCQ(t, c, cqe, 0x81)
	if o.solo {
		if err := soloBarrierReady(); err != nil {
			t.Skipf("no single-threaded queues here: %v", err)
		}
		caps.SingleThreaded = true
		for _, cq := range []*CQ{cqA, cqB} {
			if !cq.SetSingleThreaded() {
				t.Fatal("SetSingleThreaded refused")
			}
		}
	}
	qa, ma := loopQP(t, c, cqA, mcqA, 0x1100, caps)
	var srq *SRQ
	var msrq *hcamodel.SRQ
	capsB := caps
	if o.srq {
		ps, err := c.NewSRQ(caps.MaxRecvWr, caps.MaxRecvSGE)
		if err != nil {
			t.Fatal(err)
		}
		srq = ps.(*SRQ)
		if err := srq.Created(nil, 7, caps.MaxRecvWr, caps.MaxRecvSGE); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srq.Destroyed() })
		msrq = &hcamodel.SRQ{SRQN: 7, Buf: unsafe.Slice((*byte)(srq.start), srq.max<<srq.shift), WQECnt: srq.max,
			Stride: 1 << srq.shift, DBRec: srq.db.words}
		capsB.SRQ = srq
	}
	qb, mb := loopQP(t, c, cqB, mcqB, 0x2200, capsB)
	mb.SRQ = msrq
	ma.ScatterToCQE, mb.ScatterToCQE = o.scatter, o.scatter
	if err := h.Connect(ma, mb); err != nil {
		t.Fatal(err)
	}
	access := hcamodel.LocalWrite | hcamodel.RemoteWrite | hcamodel.RemoteRead | hcamodel.RemoteAtomic
	memA, memB := make([]byte, arena), make([]byte, arena)
	h.Register(&hcamodel.Region{Mem: memA, Lkey: 0x1a1a, Rkey: 0x1a1a, Access: access})
	h.Register(&hcamodel.Region{Mem: memB, Lkey: 0x2b2b, Rkey: 0x2b2b, Access: access})
	p.a = &loopSide{hw: hw, hca: h, qp: qa, cq: cqA, mem: memA, key: 0x1a1a}
	p.b = &loopSide{hw: hw, hca: h, qp: qb, cq: cqB, mem: memB, key: 0x2b2b, srq: srq}
	p.ma, p.mb, p.mcqA, p.mcqB = ma, mb, mcqA, mcqB
	return p
}

var loopCaps = provider.QPInit{MaxSendWr: 16, MaxRecvWr: 16, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 128}

// TestLoopbackIntegrity: random RC traffic through post, the model and
// poll; with 15-entry CQs and 16-WR queues both rings wrap hundreds of
// times.
func TestLoopbackIntegrity(t *testing.T) {
	rounds, passes := 400, uint32(4)
	if testing.Short() {
		rounds, passes = 60, 2
	}
	p := newLoopPair(t, 15, loopCaps, 256<<10)
	e := newITEngine(t, 1, p.a, p.b)
	e.run(rounds)
	for _, cq := range []*hcamodel.CQ{p.mcqA, p.mcqB} {
		if cq.Produced() < passes*cq.NCQE {
			t.Errorf("CQ %#x: %d CQEs in a ring of %d: the test did not wrap it", cq.CQN, cq.Produced(), cq.NCQE)
		}
		t.Logf("CQ %#x: %d CQEs, %d passes over its %d entries", cq.CQN, cq.Produced(), cq.Produced()/cq.NCQE, cq.NCQE)
	}
	for _, s := range []*loopSide{p.a, p.b} {
		sq := &s.qp.sq
		if sq.curPost < passes*sq.wqeCnt {
			t.Errorf("QP %#x: %d basic blocks posted in a ring of %d: the test did not wrap it", s.qp.QPN(), sq.curPost, sq.wqeCnt)
		}
		t.Logf("QP %#x: %d basic blocks, %d passes over its %d-block send queue", s.qp.QPN(), sq.curPost, sq.curPost/sq.wqeCnt, sq.wqeCnt)
	}
	if p.ma.InError() || p.mb.InError() {
		t.Error("a QP went to the error state")
	}
}

// TestLoopbackIntegritySolo is TestLoopbackIntegrity on single-threaded
// CQs and send queues (each has one goroutine using it: a side's poster
// and its poller run beside each other).
func TestLoopbackIntegritySolo(t *testing.T) {
	rounds := 200
	if testing.Short() {
		rounds = 40
	}
	p := newLoopPair(t, 15, loopCaps, 256<<10, loopOptions{solo: true})
	if !p.a.qp.sq.mu.solo || !p.b.qp.sq.mu.solo || !p.a.cq.mu.solo || !p.b.cq.mu.solo {
		t.Fatal("the pair's queues are not single-threaded")
	}
	e := newITEngine(t, 3, p.a, p.b)
	e.run(rounds)
	if p.ma.InError() || p.mb.InError() {
		t.Fatal("a QP went to the error state")
	}
}

// TestLoopbackIntegritySRQScatter: the same traffic with b receiving
// through an SRQ (completions name its WQE by counter, out of posting
// order of slots once they recycle) and with the HCA scattering receives
// of up to 32 bytes into the CQE, which poll copies to the buffers.
func TestLoopbackIntegritySRQScatter(t *testing.T) {
	rounds := 300
	if testing.Short() {
		rounds = 40
	}
	p := newLoopPair(t, 15, loopCaps, 256<<10, loopOptions{srq: true, scatter: true})
	e := newITEngine(t, 2, p.a, p.b)
	e.run(rounds)
	if n := p.hca.ScatteredToCQE(); n < rounds/2 {
		t.Errorf("only %d receives scattered to the CQE", n)
	} else {
		t.Logf("%d receives scattered to the CQE", n)
	}
	if p.ma.InError() || p.mb.InError() {
		t.Error("a QP went to the error state")
	}
}

// loopPoll polls until n completions arrived.
func loopPoll(t *testing.T, s *loopSide, n int) []provider.WC {
	t.Helper()
	var out []provider.WC
	wcs := make([]provider.WC, 8)
	for tries := 0; len(out) < n && tries < 1000; tries++ {
		k, err := s.Poll(wcs)
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		out = append(out, wcs[:k]...)
	}
	if len(out) != n {
		t.Fatalf("%d completions, want %d: %+v", len(out), n, out)
	}
	if k, err := s.Poll(wcs); k != 0 || err != nil {
		t.Fatalf("extra completions: %d, %v: %+v", k, err, wcs[:k])
	}
	return out
}

func (s *loopSide) sge(off, n int) provider.SGE {
	return provider.SGE{Addr: uint64(uintptr(unsafe.Pointer(&s.mem[off]))), Length: uint32(n), Lkey: s.key}
}

func (s *loopSide) addr(off int) uint64 { return uint64(uintptr(unsafe.Pointer(&s.mem[off]))) }

// TestLoopbackUnsignaled: unsignaled WQEs produce no CQE; the next
// signaled one's counter retires them all, which frees their slots.
func TestLoopbackUnsignaled(t *testing.T) {
	p := newLoopPair(t, 63, loopCaps, 64<<10)
	max := p.a.qp.MaxSendWr()
	for round := 0; round < 20; round++ {
		wrs := make([]provider.SendWR, max)
		for i := range wrs {
			wrs[i] = provider.SendWR{ID: uint64(round*1000 + i), Opcode: provider.WRRDMAWrite,
				SGL: []provider.SGE{p.a.sge(i*8, 8)}, RemoteAddr: p.b.addr(i * 8), Rkey: p.b.key}
		}
		wrs[max-1].Flags = provider.SendSignaled
		if err := p.a.PostSend(wrs); err != nil {
			t.Fatalf("round %d: posting a full queue: %v", round, err)
		}
		got := loopPoll(t, p.a, 1)
		if got[0].ID != uint64(round*1000+max-1) || got[0].Status != provider.WCSuccess {
			t.Fatalf("round %d: completion %+v", round, got[0])
		}
	}
	// With nothing retired the queue refuses a WR beyond its depth.
	wrs := make([]provider.SendWR, max+1)
	for i := range wrs {
		wrs[i] = provider.SendWR{ID: uint64(i), Opcode: provider.WRRDMAWrite, SGL: []provider.SGE{p.a.sge(0, 8)}, RemoteAddr: p.b.addr(0), Rkey: p.b.key}
	}
	if err := p.a.PostSend(wrs); !errors.Is(err, provider.ErrQueueFull) {
		t.Fatalf("posting %d WRs on a %d-deep queue: %v", max+1, max, err)
	}
}

// TestLoopbackErrors: the violations a ConnectX reports, with their
// syndromes mapped to the statuses libmlx5 reports, then flushes.
func TestLoopbackErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		wr       func(p *loopPair) provider.SendWR
		recv     bool // post a receive at b first
		recvSize int
		req      provider.WCStatus
		resp     provider.WCStatus // b's receive completion status, or success for none
	}{
		{name: "write-bad-rkey", wr: func(p *loopPair) provider.SendWR {
			return provider.SendWR{Opcode: provider.WRRDMAWrite, SGL: []provider.SGE{p.a.sge(0, 16)}, RemoteAddr: p.b.addr(0), Rkey: 0x999}
		}, req: provider.WCRemAccessErr},
		{name: "write-beyond-region", wr: func(p *loopPair) provider.SendWR {
			return provider.SendWR{Opcode: provider.WRRDMAWrite, SGL: []provider.SGE{p.a.sge(0, 16)}, RemoteAddr: p.b.addr(len(p.b.mem) - 8), Rkey: p.b.key}
		}, req: provider.WCRemAccessErr},
		{name: "read-bad-lkey", wr: func(p *loopPair) provider.SendWR {
			s := p.a.sge(0, 16)
			s.Lkey = 0x777
			return provider.SendWR{Opcode: provider.WRRDMARead, SGL: []provider.SGE{s}, RemoteAddr: p.b.addr(0), Rkey: p.b.key}
		}, req: provider.WCLocProtErr},
		{name: "atomic-misaligned", wr: func(p *loopPair) provider.SendWR {
			return provider.SendWR{Opcode: provider.WRAtomicFetchAndAdd, SGL: []provider.SGE{p.a.sge(0, 8)}, RemoteAddr: p.b.addr(4), Rkey: p.b.key, CompareAdd: 1}
		}, req: provider.WCRemAccessErr},
		{name: "send-too-long-for-receive", recv: true, recvSize: 8, wr: func(p *loopPair) provider.SendWR {
			return provider.SendWR{Opcode: provider.WRSend, SGL: []provider.SGE{p.a.sge(0, 64)}}
		}, req: provider.WCRemInvReqErr, resp: provider.WCLocLenErr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newLoopPair(t, 63, loopCaps, 64<<10)
			if tc.recv {
				if err := p.b.PostRecv([]provider.RecvWR{{ID: 50, SGL: []provider.SGE{p.b.sge(1024, tc.recvSize)}}, {ID: 51, SGL: []provider.SGE{p.b.sge(2048, 8)}}}); err != nil {
					t.Fatal(err)
				}
			}
			// A receive posted at a (the requester) is flushed when it
			// goes to error.
			if err := p.a.PostRecv([]provider.RecvWR{{ID: 60, SGL: []provider.SGE{p.a.sge(4096, 8)}}}); err != nil {
				t.Fatal(err)
			}
			bad := tc.wr(p)
			bad.ID = 1 // unsignaled: errors complete anyway
			after := provider.SendWR{ID: 2, Opcode: provider.WRRDMAWrite, Flags: provider.SendSignaled, SGL: []provider.SGE{p.a.sge(0, 8)}, RemoteAddr: p.b.addr(0), Rkey: p.b.key}
			if err := p.a.PostSend([]provider.SendWR{bad, after}); err != nil {
				t.Fatal(err)
			}
			got := loopPoll(t, p.a, 3)
			wantA := []provider.WC{
				{ID: 1, Status: tc.req, QPNum: 0x1100},
				{ID: 60, Status: provider.WCWRFlushErr, QPNum: 0x1100},
				{ID: 2, Status: provider.WCWRFlushErr, QPNum: 0x1100},
			}
			for i := range got {
				got[i].VendorErr = 0
			}
			if d := cmpWCs(wantA, got); d != "" {
				t.Errorf("requester completions (-want +got):\n%s", d)
			}
			if tc.resp != provider.WCSuccess {
				gotB := loopPoll(t, p.b, 2)
				for i := range gotB {
					gotB[i].VendorErr = 0
				}
				wantB := []provider.WC{{ID: 50, Status: tc.resp, QPNum: 0x2200}, {ID: 51, Status: provider.WCWRFlushErr, QPNum: 0x2200}}
				if d := cmpWCs(wantB, gotB); d != "" {
					t.Errorf("responder completions (-want +got):\n%s", d)
				}
			}
			// Everything was retired: the queue takes a full list again
			// (the QP is in error, so it completes with flushes).
			wrs := make([]provider.SendWR, p.a.qp.MaxSendWr())
			for i := range wrs {
				wrs[i] = after
			}
			if err := p.a.PostSend(wrs); err != nil {
				t.Fatalf("after the error: %v", err)
			}
			if got := loopPoll(t, p.a, len(wrs)); got[0].Status != provider.WCWRFlushErr {
				t.Errorf("after the error: %+v", got[0])
			}
		})
	}
}

// TestLoopbackCQOverrun: completions beyond the CQ's room are an overrun
// the model detects from the consumer index the provider publishes; polling
// in time avoids it.
func TestLoopbackCQOverrun(t *testing.T) {
	p := newLoopPair(t, 7, loopCaps, 64<<10) // 8 entries: 7 usable before the ring is full... and the 8th
	wr := func(id uint64) provider.SendWR {
		return provider.SendWR{ID: id, Opcode: provider.WRRDMAWrite, Flags: provider.SendSignaled, SGL: []provider.SGE{p.a.sge(0, 8)}, RemoteAddr: p.b.addr(0), Rkey: p.b.key}
	}
	for i := 0; i < 8; i++ {
		if err := p.a.PostSend([]provider.SendWR{wr(uint64(i))}); err != nil {
			t.Fatalf("completion %d of a ring of 8: %v", i, err)
		}
	}
	err := p.a.PostSend([]provider.SendWR{wr(8)})
	if !errors.Is(err, hcamodel.ErrCQOverrun) || !p.mcqA.Overrun() {
		t.Fatalf("a 9th completion on an unpolled ring of 8: %v, want an overrun", err)
	}
	got := loopPoll(t, p.a, 8)
	for i, w := range got {
		if w.ID != uint64(i) || w.Status != provider.WCSuccess {
			t.Fatalf("completion %d: %+v", i, w)
		}
	}
}

func cmpWCs(want, got []provider.WC) string { return cmp.Diff(want, got) }

// TestLoopbackResize: completions still in the ring when the CQ is
// resized are delivered from the new ring, in order, before the ones the
// HCA writes there afterwards; growing and shrinking.
func TestLoopbackResize(t *testing.T) {
	p := newLoopPair(t, 15, loopCaps, 64<<10)
	var next uint64
	post := func(n int) {
		for i := 0; i < n; i++ {
			next++
			wr := provider.SendWR{ID: next, Opcode: provider.WRRDMAWrite, Flags: provider.SendSignaled,
				SGL: []provider.SGE{p.a.sge(0, 8)}, RemoteAddr: p.b.addr(0), Rkey: p.b.key}
			if err := p.a.PostSend([]provider.SendWR{wr}); err != nil {
				t.Fatal(err)
			}
		}
	}
	resize := func(cqe int) {
		p.a.hw.Lock()
		defer p.a.hw.Unlock()
		err := p.a.cq.ResizeTo(nil, cqe, func(in, out []byte) (int, error) {
			var req abi.MLX5ResizeCQ
			copy(unsafe.Slice((*byte)(unsafe.Pointer(&req)), unsafe.Sizeof(req)), in)
			n, _ := cqEntries(cqe)
			if err := p.hca.ResizeCQ(p.mcqA, userBytes(req.BufAddr, n*cqeSize), n); err != nil {
				return 0, err
			}
			return int(n) - 1, nil
		})
		if err != nil {
			t.Fatalf("resize to %d: %v", cqe, err)
		}
	}
	var polled uint64
	check := func(n int) {
		wcs := make([]provider.WC, n) // exactly n: the rest stays in the ring
		got, err := p.a.Poll(wcs)
		if got != n || err != nil {
			t.Fatalf("Poll = %d, %v; want %d", got, err, n)
		}
		for _, w := range wcs {
			polled++
			if w.ID != polled || w.Status != provider.WCSuccess {
				t.Fatalf("completion %+v, want ID %d", w, polled)
			}
		}
	}
	for round, size := range []int{100, 20, 7, 300, 15} {
		post(3 + round)
		check(2)
		resize(size)
		post(2)
		check(3 + round)
		if p.a.cq.Entries() != int(p.mcqA.NCQE) {
			t.Fatalf("round %d: provider ring of %d, model's %d", round, p.a.cq.Entries(), int(p.mcqA.NCQE))
		}
	}
}

// TestLoopbackSharedQueues: default (thread-safe) queues shared by
// goroutines. In each round a fresh pair's send queue is first posted to by
// one goroutine, which owns its lock's bias, then by four at once, which
// revoke it and contend for the compare-and-swap; the CQ likewise with two
// pollers. Every RDMA WRITE lands where it was aimed, every WR completes
// once, and each poster's completions come in its posting order.
func TestLoopbackSharedQueues(t *testing.T) {
	rounds, per := 40, 48
	if testing.Short() {
		rounds = 8
	}
	const posters, pollers = 4, 2
	caps := loopCaps
	caps.MaxSendWr = 256
	for r := range rounds {
		p := newLoopPair(t, 511, caps, (posters*per+1)*8)
		a := p.a
		id := func(w, i int) uint64 { return uint64(w)<<32 | uint64(i) }
		write := func(w, i int) error {
			off := (w*per + i) * 8
			binary.LittleEndian.PutUint64(a.mem[off:], id(w, i)+1)
			return a.qp.PostSend([]provider.SendWR{{ID: id(w, i), Opcode: provider.WRRDMAWrite,
				Flags: provider.SendSignaled, SGL: []provider.SGE{a.sge(off, 8)}, RemoteAddr: p.b.addr(off), Rkey: p.b.key}})
		}
		// The first goroutine to post owns the bias (this one, for the
		// last slot), then the posters share the queue.
		if err := write(posters, 0); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, posters+pollers)
		for w := range posters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range per {
					if err := write(w, i); err != nil {
						errs <- fmt.Errorf("round %d poster %d: post %d: %w", r, w, i, err)
						return
					}
					if i%7 == w {
						runtime.Gosched()
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		a.hw.Lock()
		_, err := a.hca.Run()
		a.hw.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		// Two pollers share the CQ (the first poll, here, takes its bias).
		// Each sees a subsequence of the CQ's order, in which each
		// poster's WRs come in posting order.
		var mu sync.Mutex
		got := map[uint64]int{}
		first := make([]provider.WC, 1)
		if n, err := a.cq.Poll(first); err != nil || n != 1 || first[0].ID != id(posters, 0) {
			t.Fatalf("round %d: first poll: %d, %v, %+v", r, n, err, first[0])
		}
		got[first[0].ID] = 1
		want := posters*per + 1
		var polled atomic.Int64
		polled.Store(1)
		for range pollers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				wcs := make([]provider.WC, 3)
				next := make([]int, posters+1)
				deadline := time.Now().Add(10 * time.Second)
				for polled.Load() < int64(want) {
					n, err := a.cq.Poll(wcs)
					if err != nil {
						t.Error(err)
						return
					}
					if n == 0 {
						if time.Now().After(deadline) {
							t.Errorf("round %d: %d of %d completions after 10 s", r, polled.Load(), want)
							return
						}
						runtime.Gosched()
						continue
					}
					mu.Lock()
					for _, wc := range wcs[:n] {
						if wc.Status != provider.WCSuccess {
							t.Errorf("round %d: WR %#x: status %v", r, wc.ID, wc.Status)
						}
						got[wc.ID]++
						w, i := int(wc.ID>>32), int(uint32(wc.ID))
						if w < posters && i < next[w] {
							t.Errorf("round %d: poster %d's WR %d completed after its WR %d", r, w, i, next[w]-1)
						}
						next[min(w, posters)] = i + 1
					}
					mu.Unlock()
					polled.Add(int64(n))
				}
			}()
		}
		wg.Wait()
		if len(got) != want {
			t.Fatalf("round %d: %d WRs completed, want %d", r, len(got), want)
		}
		for k, c := range got {
			if c != 1 {
				t.Errorf("round %d: WR %#x completed %d times", r, k, c)
			}
		}
		for w := range posters {
			for i := range per {
				off := (w*per + i) * 8
				if v := binary.LittleEndian.Uint64(p.b.mem[off:]); v != id(w, i)+1 {
					t.Fatalf("round %d: poster %d write %d: remote holds %#x, want %#x", r, w, i, v, id(w, i)+1)
				}
			}
		}
		if biasable && (a.qp.sq.mu.bias&biasRevoked == 0 || a.cq.mu.bias&biasRevoked == 0) {
			t.Fatalf("round %d: bias not revoked (send queue %#x, CQ %#x)", r, a.qp.sq.mu.bias, a.cq.mu.bias)
		}
	}
}
