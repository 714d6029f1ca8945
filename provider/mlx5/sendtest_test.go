package mlx5

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/guardmem"
)

// The send side's host tests run over memory that faults outside the
// buffers the code was given: every queue buffer, doorbell page and
// stand-in UAR page is mapped with a PROT_NONE page on each side.

// guardedPages maps n bytes (rounded up to pages) between two PROT_NONE
// pages and returns exactly the usable pages.
func guardedPages(t testing.TB, n int) []byte {
	t.Helper()
	pages, _ := guardmem.Map(t, n)
	return pages
}

// guardedAlloc is a Context.allocBuf whose buffers sit between guard
// pages.
func guardedAlloc(t testing.TB) func(size, pageSize int) (queueBuffer, error) {
	return func(size, pageSize int) (queueBuffer, error) {
		// Not marked mapped: free() leaves the pages to the test's
		// cleanup, so no later mapping can land between the guards.
		return queueBuffer{mem: guardedPages(t, size)}, nil
	}
}

// fakeKernel stands in for the uverbs file: mmaps are guarded anonymous
// pages, UAR objects get page ids from 0x20 and mmap offsets
// (0x400+n)<<12 as the libmlx5 harness's fake kernel gives them.
type fakeKernel struct {
	t       testing.TB
	maps    map[int64][]byte
	nextUAR uint32
	uarOff  map[uint32]int64 // page id -> mmap offset
}

func newFakeKernel(t testing.TB) *fakeKernel {
	return &fakeKernel{t: t, maps: map[int64][]byte{}, uarOff: map[uint32]int64{}}
}

func (f *fakeKernel) mmap(offset int64, length int, prot int) ([]byte, error) {
	if b, ok := f.maps[offset]; ok {
		return b, nil
	}
	b := guardedPages(f.t, length)
	f.maps[offset] = b
	return b, nil
}

func (f *fakeKernel) munmap([]byte) error { return nil }

func (f *fakeKernel) allocUAR(typ uint32) (dynUAR, error) {
	n := f.nextUAR
	f.nextUAR++
	d := dynUAR{handle: 100 + n, mmapOff: uint64(0x400+n) << 12, length: 4096, pageID: 0x20 + n}
	f.uarOff[d.pageID] = int64(d.mmapOff)
	return d, nil
}

func (f *fakeKernel) destroyUAR(uint32) error { return nil }

// uarPage returns the memory standing in for the UAR page with that id.
func (f *fakeKernel) uarPage(pageID uint32) []byte { return f.maps[f.uarOff[pageID]] }

// clearUARs zeroes every UAR page, so the next post's writes stand out.
func (f *fakeKernel) clearUARs() {
	for _, off := range f.uarOff {
		clear(f.maps[off])
	}
}

// testResp is a GET_CONTEXT response like a ConnectX-5's with dynamic
// UARs (the one the libmlx5 harness answers).
func testResp() abi.MLX5AllocUcontextResp {
	return abi.MLX5AllocUcontextResp{
		QPTabSize: 1 << 18, BfRegSize: 512, CacheLineSize: 64, MaxSQDescSz: 512, MaxRQDescSz: 512,
		MaxSendWqebb: 1 << 15, MaxRecvWr: 1 << 15, MaxSRQRecvWr: 1 << 15, NumPorts: 1, CQEVersion: 1,
		EthMinInline: 3, CompMask: abi.MLX5UctxRespCoreClockOffset | abi.MLX5UctxRespDumpFillMkey,
		DumpFillMkey: 0x100, ClockInfoVersions: 1, LogUARSize: 12, NumUARsPerPage: 1,
	}
}

// newTestContext sets up a context from resp over a fake kernel, with
// guarded buffers.
func newTestContext(t testing.TB, resp abi.MLX5AllocUcontextResp) (*Context, *fakeKernel) {
	t.Helper()
	c := newContext(4096)
	c.preferBF, c.scatterToCQE = true, true // libmlx5's defaults, whatever the environment
	c.resp = resp
	k := newFakeKernel(t)
	c.ops = k
	c.allocBuf = guardedAlloc(t)
	if err := c.setup(); err != nil {
		t.Fatal(err)
	}
	return c, k
}

// ringBytes returns a QP's send ring.
func (q *QP) sqRing() []byte {
	return unsafe.Slice((*byte)(q.sq.start), int(q.sq.wqeCnt)*wqeBB)
}

func (q *QP) rqRing() []byte {
	if q.rq.start == nil {
		return nil
	}
	return unsafe.Slice((*byte)(q.rq.start), int(q.rq.wqeCnt)<<q.rq.shift)
}

func (q *QP) dbrecBytes() []byte { return unsafe.Slice((*byte)(unsafe.Pointer(q.db.words)), 8) }

func (s *SRQ) ring() []byte { return unsafe.Slice((*byte)(s.start), int(s.max)<<s.shift) }

func (s *SRQ) dbrecBytes() []byte { return unsafe.Slice((*byte)(unsafe.Pointer(s.db.words)), 8) }

// sqState is the send queue's software state, which a refused list
// leaves as it was.
type sqState struct {
	CurPost, Head, Posted, Tail, TailBB uint32
	FmCache                             uint8
}

func (q *QP) sqState() sqState {
	s := &q.sq
	return sqState{CurPost: s.curPost, Head: s.head, Posted: s.posted, Tail: s.tail, TailBB: s.tailBB, FmCache: s.fmCache}
}

// sqOutstanding returns the WQEs posted and not completed, oldest first,
// each as the HCA reads it: its size's 16-byte units from its control
// segment on, across the ring's wrap. A refused list leaves them alone;
// it may write in the free blocks past them, which the HCA reads only
// once the doorbell record says so.
func (q *QP) sqOutstanding(t testing.TB) [][]byte {
	t.Helper()
	ring := q.sqRing()
	var wqes [][]byte
	for bb := q.sq.tailBB; bb != q.sq.curPost; {
		blocks := uint32(q.sq.slot(bb).blocks)
		if blocks == 0 || bb+blocks-q.sq.tailBB > q.sq.curPost-q.sq.tailBB {
			t.Fatalf("block %d: an outstanding WQE of %d blocks (posted up to %d)", bb, blocks, q.sq.curPost)
		}
		off := int(bb&(q.sq.wqeCnt-1)) * wqeBB
		ds := int(binary.BigEndian.Uint32(ring[off+4:]) & 0x3f)
		w := make([]byte, ds*16)
		for i := range w {
			w[i] = ring[(off+i)%len(ring)]
		}
		wqes = append(wqes, w)
		bb += blocks
	}
	return wqes
}
