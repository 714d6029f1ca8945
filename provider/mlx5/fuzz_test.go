package mlx5

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
)

// FuzzCQE polls arbitrary bytes as CQEs from an arbitrary consumer index
// over a guarded ring (PROT_NONE on both sides: any access outside it
// faults) with a QP, an SRQ and an XRC SRQ attached. Whatever the bytes,
// Poll must neither panic nor leave the ring, and its results must be
// consistent: every entry it consumed is a completion or the one error
// that ended the batch, and the doorbell record holds the new index.
func FuzzCQE(f *testing.F) {
	const ncqe = 8
	seed := func(cons uint32, fs ...cqeFields) []byte {
		var b []byte
		for k, fl := range fs {
			e := fl.encode(cons+uint32(k), ncqe)
			b = append(b, e[:]...)
		}
		return b
	}
	f.Add(seed(0, cqeFields{opcode: cqeReq, sendOp: reqOpRDMAWrite, qpn: testQPN, wqeCounter: 3}), uint32(0), uint8(4))
	f.Add(seed(6, cqeFields{opcode: cqeRespSendImm, qpn: testQPN, byteCnt: 9, imm: 5},
		cqeFields{opcode: cqeRespSend, qpn: 0x77, srqnUIDX: 0x42, wqeCounter: 2, flags: cqeInlineScatter32, byteCnt: 32},
		cqeFields{opcode: cqeReqErr, qpn: testQPN, syndrome: syndromeRemoteAccess, wqeCounter: 1}), uint32(6), uint8(8))
	f.Add(seed(0xfffffffe, cqeFields{opcode: cqeRespErr, qpn: testQPN, syndrome: 0x99},
		cqeFields{opcode: 9, qpn: testQPN}), uint32(0xfffffffe), uint8(2))
	f.Add(seed(3, cqeFields{opcode: cqeReq, sendOp: reqOpRDMARead, flags: cqeInlineScatter32, qpn: testQPN, byteCnt: 0xffffffff}), uint32(3), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, cons uint32, nPoll uint8) {
		c := newTestCQ(t, ncqe)
		c.cons = cons
		for k := 0; k < ncqe && k*cqeSize < len(data); k++ {
			copy(c.entry(cons + uint32(k))[:], data[k*cqeSize:])
		}
		sq := newFakeSQ(16)
		srq := newFakeRQ(16, true)
		xrc := newFakeRQ(4, true)
		for k := 0; k < 10; k++ {
			sq.post(uint64(k), provider.WCLocalInv)
			srq.post(uint64(k))
		}
		xrc.post(1)
		xrc.post(2)
		if err := c.attach(testQPN, sq, srq); err != nil {
			t.Fatal(err)
		}
		if err := c.attachSRQ(0x42, xrc); err != nil {
			t.Fatal(err)
		}
		wcs := make([]provider.WC, int(nPoll)%(ncqe+2))
		n, err := c.Poll(wcs)
		consumed := c.cons - cons
		if err != nil {
			if !errors.Is(err, ErrBadCQE) {
				t.Fatalf("Poll error %v is not ErrBadCQE", err)
			}
			consumed--
		}
		if n < 0 || n > len(wcs) || uint32(n) != consumed {
			t.Fatalf("Poll = %d, %v over %d slots; consumed %d entries", n, err, len(wcs), c.cons-cons)
		}
		if c.ci() != c.cons&cqConsumerIdxMask {
			t.Fatalf("doorbell record CI %#x, consumer index %#x", c.ci(), c.cons)
		}
		for _, w := range wcs[:n] {
			if w.Status > provider.WCGeneralErr || w.QPNum > maxQPN || w.SrcQP > maxQPN {
				t.Fatalf("completion out of range: %+v", w)
			}
		}
		if sq.tail-0 > sq.head || srq.head < srq.tail {
			t.Fatalf("queues retired beyond what was posted: SQ tail %d head %d", sq.tail, sq.head)
		}
		// The rest of the ring stays readable: a second poll goes on.
		c.Poll(wcs)
		c.detach(testQPN)
	})
}

// FuzzCQEQueues polls arbitrary CQE bytes against the real queues: an RC
// QP with send WQEs outstanding (an RDMA READ and an atomic whose results
// a scatter-to-CQE entry would copy into 8- and 16-byte buffers, a SEND,
// unsignaled WRITEs) and receives posted, every buffer, ring and doorbell
// page between PROT_NONE guard pages, and the CQ ring exactly one page.
// Completions of WQEs that were never posted, scatters beyond the posted
// buffers, and the queues' own bookkeeping must all hold up.
func FuzzCQEQueues(f *testing.F) {
	const ncqe = 64 // 4096 bytes: the ring ends at its guard page
	seed := func(fs ...cqeFields) []byte {
		var b []byte
		for k, fl := range fs {
			e := fl.encode(uint32(k), ncqe)
			b = append(b, e[:]...)
		}
		return b
	}
	const qpn = 0x1234
	f.Add(seed(cqeFields{opcode: cqeReq, sendOp: reqOpRDMARead, flags: cqeInlineScatter32, qpn: qpn, wqeCounter: 0, byteCnt: 16, payload: []byte("0123456789abcdef")},
		cqeFields{opcode: cqeReq, sendOp: reqOpAtomicFA, flags: cqeInlineScatter32, qpn: qpn, wqeCounter: 1, byteCnt: 8, payload: []byte("01234567")},
		cqeFields{opcode: cqeRespSend, flags: cqeInlineScatter32, qpn: qpn, byteCnt: 32, payload: make([]byte, 32)}))
	f.Add(seed(cqeFields{opcode: cqeReq, sendOp: reqOpRDMAWrite, qpn: qpn, wqeCounter: 5},
		cqeFields{opcode: cqeReqErr, qpn: qpn, wqeCounter: 3, syndrome: syndromeWRFlush},
		cqeFields{opcode: cqeRespErr, qpn: qpn, syndrome: syndromeLocalProt}))
	f.Add(seed(cqeFields{opcode: cqeReq, sendOp: reqOpRDMARead, flags: cqeInlineScatter32, qpn: qpn, wqeCounter: 0, byteCnt: 31}))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, _ := newTestContext(t, testResp())
		p, err := c.NewCQ(ncqe - 1)
		if err != nil {
			t.Fatal(err)
		}
		cq := p.(*CQ)
		if err := cq.Created(nil, 1, ncqe-1); err != nil {
			t.Fatal(err)
		}
		init := provider.QPInit{Type: abi.QPTypeRC, MaxSendWr: 8, MaxRecvWr: 8, MaxSendSGE: 1, MaxRecvSGE: 2, MaxInlineData: 16, SendCQ: cq, RecvCQ: cq}
		pq, err := c.NewQP(init)
		if err != nil {
			t.Fatal(err)
		}
		q := pq.(*QP)
		if err := q.Created(nil, 1, qpn, init); err != nil {
			t.Fatal(err)
		}
		defer q.Destroyed()
		mem := guardedPages(t, 4096)
		addr := func(off int) uint64 { return uint64(uintptr(unsafe.Pointer(&mem[off]))) }
		// 8 and 16 bytes at the very end of the page: a write past them faults.
		wrs := []provider.SendWR{
			{ID: 1, Opcode: provider.WRRDMARead, SGL: []provider.SGE{{Addr: addr(4096 - 16), Length: 16, Lkey: 1}}, RemoteAddr: 0x1000, Rkey: 2},
			{ID: 2, Opcode: provider.WRAtomicFetchAndAdd, SGL: []provider.SGE{{Addr: addr(4096 - 8), Length: 8, Lkey: 1}}, RemoteAddr: 0x2000, Rkey: 2},
			{ID: 3, Opcode: provider.WRSend, SGL: []provider.SGE{{Addr: addr(0), Length: 64, Lkey: 1}}},
			{ID: 4, Opcode: provider.WRRDMAWrite, SGL: []provider.SGE{{Addr: addr(0), Length: 64, Lkey: 1}}, RemoteAddr: 0x3000, Rkey: 2},
			{ID: 5, Opcode: provider.WRRDMAWrite, Flags: provider.SendSignaled, SGL: []provider.SGE{{Addr: addr(0), Length: 64, Lkey: 1}}, RemoteAddr: 0x3000, Rkey: 2},
		}
		if err := q.PostSend(wrs); err != nil {
			t.Fatal(err)
		}
		if err := q.PostRecv([]provider.RecvWR{{ID: 10, SGL: []provider.SGE{{Addr: addr(4096 - 24), Length: 24, Lkey: 1}}},
			{ID: 11, SGL: []provider.SGE{{Addr: addr(4096 - 4), Length: 4, Lkey: 1}, {Addr: addr(100), Length: 4, Lkey: 1}}}}); err != nil {
			t.Fatal(err)
		}
		for k := 0; k < ncqe && k*cqeSize < len(data); k++ {
			copy(cq.entry(uint32(k))[:], data[k*cqeSize:])
		}
		wcs := make([]provider.WC, 8)
		for polls := 0; polls < ncqe; polls++ {
			before := cq.cons
			n, err := cq.Poll(wcs)
			if err != nil && !errors.Is(err, ErrBadCQE) {
				t.Fatalf("Poll: %v", err)
			}
			consumed := int(cq.cons - before)
			if err != nil {
				consumed--
			}
			if consumed != n {
				t.Fatalf("Poll = %d, %v, consuming %d entries", n, err, cq.cons-before)
			}
			for _, w := range wcs[:n] {
				if w.ID < 1 || w.ID > 11 || (w.ID > 5 && w.ID < 10) {
					t.Fatalf("completion of a work request never posted: %+v", w)
				}
			}
			if n == 0 && err == nil {
				break
			}
		}
		if q.sq.tail > q.sq.head || q.rq.tail > q.rq.head {
			t.Fatalf("queues retired more than was posted: SQ %d/%d RQ %d/%d", q.sq.tail, q.sq.head, q.rq.tail, q.rq.head)
		}
		cq.detach(qpn)
	})
}
