package mlx5

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/guardmem"
	"github.com/goverbs/goverbs/internal/provider"
)

// These tests run the completion side on the host: the ring sits in
// anonymous memory that ends exactly at a PROT_NONE page and starts right
// after another, so any access outside it faults and fails the test; CQEs
// are written by hand as the HCA would write them.

// guardedMem returns size bytes (a multiple of the page size) with a
// PROT_NONE page on each side.
func guardedMem(t testing.TB, size int) []byte {
	t.Helper()
	return guardmem.Tail(t, size)
}

// testCQ is a CQ over a guarded ring, its doorbell record and a fake UAR
// page.
type testCQ struct {
	*CQ
	ring  []byte
	dbrec *[2]uint32
	uar   []byte
}

func newTestCQ(t testing.TB, ncqe uint32) *testCQ {
	t.Helper()
	ring := guardedMem(t, int(ncqe)*cqeSize)
	initRing(ring)
	db := guardedMem(t, os.Getpagesize())
	uar := guardedMem(t, os.Getpagesize())
	dbrec := (*[2]uint32)(unsafe.Pointer(&db[len(db)-8]))
	cq, err := newCQ(ring, ncqe, dbrec, 0x77, unsafe.Pointer(&uar[cqDoorbellOffset]))
	if err != nil {
		t.Fatal(err)
	}
	return &testCQ{CQ: cq, ring: ring, dbrec: dbrec, uar: uar}
}

// cqeFields are the fields of a hand-written CQE.
type cqeFields struct {
	opcode     uint8 // CQE opcode (op_own >> 4)
	flags      uint8 // op_own bits 1..3 (solicited, inline scatter)
	sendOp     uint8 // requester: the send opcode in sop_drop_qpn
	qpn        uint32
	wqeCounter uint16
	byteCnt    uint32
	imm        uint32 // imm_inval_pkey
	flagsRQPN  uint32
	slid       uint16
	mlPath     uint8
	srqnUIDX   uint32
	syndrome   uint8
	vendorErr  uint8
	payload    []byte // the first bytes (inline scatter)
}

// encode returns the 64 bytes of f as written at consumer index i of a
// ring of ncqe entries (owner bit = the pass over the ring).
func (f cqeFields) encode(i, ncqe uint32) [cqeSize]byte {
	var e [cqeSize]byte
	e[cqeOffMLPath] = f.mlPath
	binary.BigEndian.PutUint16(e[cqeOffSLID:], f.slid)
	binary.BigEndian.PutUint32(e[cqeOffFlagsRQPN:], f.flagsRQPN)
	// Scattered data overlays the first 32 bytes, fields included.
	copy(e[:32], f.payload)
	binary.BigEndian.PutUint32(e[cqeOffSRQNUIDX:], f.srqnUIDX)
	binary.BigEndian.PutUint32(e[cqeOffImmInvalPkey:], f.imm)
	binary.BigEndian.PutUint32(e[cqeOffByteCnt:], f.byteCnt)
	if f.opcode == cqeReqErr || f.opcode == cqeRespErr {
		e[cqeOffVendorErr] = f.vendorErr
		e[cqeOffSyndrome] = f.syndrome
	}
	binary.BigEndian.PutUint32(e[cqeOffSopDropQPN:], uint32(f.sendOp)<<24|f.qpn&maxQPN)
	binary.BigEndian.PutUint16(e[cqeOffWQECounter:], f.wqeCounter)
	e[cqeOffOpOwn] = f.opcode<<4 | f.flags&0xe | uint8((i/ncqe)&1)
	return e
}

// put writes f at consumer index i.
func (c *testCQ) put(i uint32, f cqeFields) {
	*c.entry(i) = f.encode(i, c.ncqe)
}

// fakeSQ is a send queue of wqeCnt basic blocks where each posted WQE
// takes one: it records what the CQ retired.
type fakeSQ struct {
	wqeCnt   uint16
	head     uint16 // WQE counter of the next post
	tail     uint16 // oldest outstanding
	wrID     []uint64
	opcode   []provider.WCOpcode
	inline   [][]byte
	retired  int
	scatterN int // inline payload room of every WQE
}

func newFakeSQ(wqeCnt uint16) *fakeSQ {
	return &fakeSQ{wqeCnt: wqeCnt, wrID: make([]uint64, wqeCnt), opcode: make([]provider.WCOpcode, wqeCnt),
		inline: make([][]byte, wqeCnt), scatterN: 32}
}

func (s *fakeSQ) post(wrID uint64, op provider.WCOpcode) uint16 {
	c := s.head
	s.wrID[c&(s.wqeCnt-1)] = wrID
	s.opcode[c&(s.wqeCnt-1)] = op
	s.head++
	return c
}

func (s *fakeSQ) completeSend(wqeCounter uint16, inline []byte) (uint64, provider.WCOpcode, provider.WCStatus, bool) {
	if wqeCounter-s.tail >= s.head-s.tail {
		return 0, 0, 0, false
	}
	idx := wqeCounter & (s.wqeCnt - 1)
	status := provider.WCSuccess
	if inline != nil {
		if len(inline) > s.scatterN {
			status = provider.WCLocLenErr
		} else {
			s.inline[idx] = append([]byte(nil), inline...)
		}
	}
	s.retired += int(wqeCounter - s.tail + 1)
	s.tail = wqeCounter + 1
	return s.wrID[idx], s.opcode[idx], status, true
}

// fakeRQ is a receive queue completing in order (srq: false) or an SRQ
// completing the counter's slot.
type fakeRQ struct {
	srq   bool
	wrID  []uint64
	busy  []bool
	head  uint16
	tail  uint16
	got   [][]byte
	room  int
	cnt   uint16
	freed []uint16
}

func newFakeRQ(n uint16, srq bool) *fakeRQ {
	return &fakeRQ{srq: srq, wrID: make([]uint64, n), busy: make([]bool, n), got: make([][]byte, n), room: 32, cnt: n}
}

func (r *fakeRQ) post(wrID uint64) uint16 {
	i := r.head & (r.cnt - 1)
	r.wrID[i], r.busy[i] = wrID, true
	r.head++
	return i
}

func (r *fakeRQ) completeRecv(wqeCounter uint16, inline []byte) (uint64, provider.WCStatus, bool) {
	var i uint16
	if r.srq {
		if wqeCounter >= r.cnt || !r.busy[wqeCounter] {
			return 0, 0, false
		}
		i = wqeCounter
		r.freed = append(r.freed, i)
	} else {
		if r.head == r.tail {
			return 0, 0, false
		}
		i = r.tail & (r.cnt - 1)
		r.tail++
	}
	r.busy[i] = false
	status := provider.WCSuccess
	if inline != nil {
		if len(inline) > r.room {
			status = provider.WCLocLenErr
		} else {
			r.got[i] = append([]byte(nil), inline...)
		}
	}
	return r.wrID[i], status, true
}

func (c *testCQ) ci() uint32 {
	return binary.BigEndian.Uint32(unsafe.Slice((*byte)(unsafe.Pointer(&c.dbrec[0])), 4))
}

func TestCQEntries(t *testing.T) {
	for _, tc := range []struct {
		cqe  int
		want uint32
	}{{1, 2}, {2, 4}, {3, 4}, {4, 8}, {63, 64}, {64, 128}, {100, 128}, {1<<24 - 1, 1 << 24}} {
		got, err := cqEntries(tc.cqe)
		if err != nil || got != tc.want {
			t.Errorf("cqEntries(%d) = %d, %v; want %d", tc.cqe, got, err, tc.want)
		}
	}
	for _, cqe := range []int{0, -1, 1 << 24, 0x7fffffff} {
		_, err := cqEntries(cqe)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "cqe" {
			t.Errorf("cqEntries(%d): %v, want a FieldError naming cqe", cqe, err)
		}
	}
}

func TestInitRing(t *testing.T) {
	c := newTestCQ(t, 8)
	for i := range c.ring {
		want := byte(0)
		if i%cqeSize == cqeOffOpOwn {
			want = 0xf0
		}
		if c.ring[i] != want {
			t.Fatalf("ring byte %d = %#x, want %#x", i, c.ring[i], want)
		}
	}
	n, err := c.Poll(make([]provider.WC, 8))
	if n != 0 || err != nil {
		t.Fatalf("Poll of a new CQ = %d, %v", n, err)
	}
}

func TestNewCQ(t *testing.T) {
	c := newContext(4096)
	c.dbrecs = newDBAllocator(4096, 64)
	for _, tc := range []struct{ cqe, ncqe int }{{1, 2}, {63, 64}, {64, 128}, {1000, 1024}} {
		pcq, err := c.NewCQ(tc.cqe)
		if err != nil {
			t.Fatal(err)
		}
		cq := pcq.(*CQ)
		if cq.Entries() != tc.ncqe {
			t.Errorf("cqe %d: %d entries, want %d", tc.cqe, cq.Entries(), tc.ncqe)
		}
		if cq.req.BufAddr%4096 != 0 || cq.req.BufAddr != cq.buf.addr() || cq.req.DBAddr != cq.db.addr() || cq.req.CQESize != 64 ||
			cq.req.Flags != 0 || cq.req.CQECompEn != 0 {
			t.Errorf("cqe %d: driver data %+v", tc.cqe, cq.req)
		}
		if len(cq.buf.mem)%4096 != 0 || len(cq.buf.mem) < tc.ncqe*64 {
			t.Errorf("cqe %d: ring of %d bytes", tc.cqe, len(cq.buf.mem))
		}
		for i := 0; i < tc.ncqe*64; i++ {
			want := byte(0)
			if i%64 == 63 {
				want = 0xf0
			}
			if cq.buf.mem[i] != want {
				t.Fatalf("cqe %d: ring byte %d = %#x, want %#x", tc.cqe, i, cq.buf.mem[i], want)
			}
		}
		if *cq.db.words != [2]uint32{} {
			t.Errorf("doorbell record %v, want zero", *cq.db.words)
		}
		in, out := cq.CreateData()
		if len(in) != 32 || len(out) != 8 {
			t.Errorf("driver data sizes %d, %d; want 32, 8", len(in), len(out))
		}
		binary.LittleEndian.PutUint32(out, 0x456)
		if err := cq.Created(nil, 1, tc.ncqe-1); err != nil || cq.CQN() != 0x456 {
			t.Errorf("Created: %v, CQN %#x", err, cq.CQN())
		}
		if err := cq.Arm(false); !errors.Is(err, ErrNoCQDoorbell) {
			t.Errorf("Arm without a UAR: %v", err)
		}
		if err := cq.Destroyed(); err != nil {
			t.Fatal(err)
		}
		if _, err := cq.Poll(make([]provider.WC, 1)); !errors.Is(err, provider.ErrClosed) {
			t.Errorf("Poll after destroy: %v", err)
		}
	}
	if _, err := c.NewCQ(0); err == nil {
		t.Error("NewCQ(0) succeeded")
	}
	pcq, _ := c.NewCQ(10)
	if err := pcq.Created(nil, 1, 7); err == nil {
		t.Error("Created accepted a capacity that is not the ring's")
	}
	pcq.Destroyed()
}

// TestResize: the completions not yet polled move to the new ring (from
// the old ring's wrap, in order), the RESIZE_CQ entry is consumed, and
// the HCA's next CQEs land in the new ring with its owner bits.
func TestResize(t *testing.T) {
	c := loopContext(t)
	newCQ := func() (*CQ, *fakeSQ) {
		p, err := c.NewCQ(7)
		if err != nil {
			t.Fatal(err)
		}
		cq := p.(*CQ)
		cq.resp.CQN = 0x90
		if err := cq.Created(nil, 1, 7); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cq.Destroyed() })
		sq := newFakeSQ(64)
		if err := cq.attach(testQPN, sq, nil); err != nil {
			t.Fatal(err)
		}
		return cq, sq
	}
	put := func(cq *CQ, i uint32, f cqeFields) { *cq.entry(i) = f.encode(i, cq.ncqe) }
	ci := func(cq *CQ) uint32 {
		return binary.BigEndian.Uint32(unsafe.Slice((*byte)(unsafe.Pointer(&cq.dbrec[0])), 4))
	}

	cq, sq := newCQ()
	cq.cons = 5 // the unpolled entries cross the old ring's end
	for k := uint32(0); k < 5; k++ {
		put(cq, cq.cons+k, cqeFields{opcode: cqeReq, sendOp: reqOpSend, qpn: testQPN, wqeCounter: sq.post(uint64(100+k), 0)})
	}
	var sent abi.MLX5ResizeCQ
	err := cq.ResizeTo(nil, 20, func(in, out []byte) (int, error) {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&sent)), unsafe.Sizeof(sent)), in)
		// The HCA switches rings and leaves a RESIZE_CQ entry behind.
		put(cq, cq.cons+5, cqeFields{opcode: cqeResizeCQ})
		return 31, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if sent.CQESize != 64 || sent.BufAddr != cq.buf.addr() || sent.BufAddr%4096 != 0 || len(resizeReqBytes(sent)) != 16 {
		t.Errorf("RESIZE_CQ driver data %+v, new ring at %#x", sent, cq.buf.addr())
	}
	if cq.Entries() != 32 || cq.cons != 6 || ci(cq) != 6 {
		t.Fatalf("after resize: %d entries, consumer index %d, CI %d", cq.Entries(), cq.cons, ci(cq))
	}
	// The HCA goes on after the RESIZE_CQ entry, in the new ring.
	put(cq, 11, cqeFields{opcode: cqeReq, sendOp: reqOpSend, qpn: testQPN, wqeCounter: sq.post(105, 0)})
	wcs := make([]provider.WC, 8)
	n, err := cq.Poll(wcs)
	var ids []uint64
	for _, w := range wcs[:n] {
		ids = append(ids, w.ID)
	}
	if err != nil || fmt.Sprint(ids) != "[100 101 102 103 104 105]" {
		t.Fatalf("after resize: Poll = %v, %v", ids, err)
	}

	// A refused command keeps the old ring.
	cq, sq = newCQ()
	put(cq, 0, cqeFields{opcode: cqeReq, qpn: testQPN, wqeCounter: sq.post(1, 0)})
	if err := cq.ResizeTo(nil, 100, func(in, out []byte) (int, error) { return 0, unix.ENOMEM }); !errors.Is(err, unix.ENOMEM) {
		t.Fatalf("refused resize: %v", err)
	}
	if w := pollOne(t, &testCQ{CQ: cq}); cq.Entries() != 8 || w.ID != 1 {
		t.Fatalf("after a refused resize: %d entries, %+v", cq.Entries(), w)
	}
	// The same size asks the kernel (which does nothing) and keeps the ring.
	asked := false
	if err := cq.ResizeTo(nil, 5, func(in, out []byte) (int, error) { asked = true; return 7, nil }); err != nil || !asked || cq.Entries() != 8 {
		t.Fatalf("same-size resize: %v, asked %v, %d entries", err, asked, cq.Entries())
	}
	// No RESIZE_CQ entry: an error naming the CQ, never a read beyond it.
	if err := cq.ResizeTo(nil, 30, func(in, out []byte) (int, error) { return 31, nil }); !errors.Is(err, ErrBadCQE) {
		t.Fatalf("resize without the RESIZE_CQ entry: %v", err)
	}
	if _, err := cq.Poll(wcs); err != nil {
		t.Fatalf("poll after a broken resize: %v", err)
	}
	if err := cq.ResizeTo(nil, 0, nil); err == nil {
		t.Fatal("resize to 0 entries accepted")
	}
}

func resizeReqBytes(r abi.MLX5ResizeCQ) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&r)), unsafe.Sizeof(r))
}
