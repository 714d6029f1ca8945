package rxe

import (
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/guardmem"
	"github.com/goverbs/goverbs/internal/provider"
)

// These tests run the provider's data path on the host, without the kernel:
// queues are built in anonymous memory (with PROT_NONE guard pages around
// them, so any access outside the ring faults and fails the test) or in a
// memfd that mapQueue maps as it would map the kernel's queue, and the
// doorbell goes into a pipe where its bytes can be read back.

const wcSize = int(unsafe.Sizeof(abi.WC{}))

// guarded is a fake kernel queue: the header and the slots end exactly at a
// PROT_NONE page, and another PROT_NONE page sits before the header.
type guarded struct {
	region []byte // the whole reservation, guard pages included
	q      *queue
}

func newGuarded(t testing.TB, log2 uint32, mask uint32) *guarded {
	t.Helper()
	used := headerSize + int(mask+1)<<log2
	pages, region := guardmem.Map(t, used)
	mem := pages[len(pages)-used:]
	q := &queue{mem: mem, hdr: (*abi.RXEQueueBuf)(unsafe.Pointer(&mem[0]))}
	q.hdr.Log2ElemSize, q.hdr.IndexMask = log2, mask
	q.elemSize = 1 << log2
	q.mask = mask
	q.slots = mem[headerSize:]
	return &guarded{region: region, q: q}
}

// memfdQueue writes a queue header into a memfd of size bytes and returns
// the fd (closed at cleanup), as the kernel would offer it for mmap.
func memfdQueue(t testing.TB, size int, hdr abi.RXEQueueBuf) int {
	t.Helper()
	fd, err := unix.MemfdCreate("rxe-queue", unix.MFD_CLOEXEC)
	if err != nil {
		t.Skipf("memfd_create: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		t.Fatal(err)
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&hdr)), headerSize)
	if len(b) > size {
		b = b[:size]
	}
	if _, err := unix.Pwrite(fd, b, 0); err != nil {
		t.Fatal(err)
	}
	return fd
}

func TestMapQueueHeader(t *testing.T) {
	ok := func(log2, mask uint32) abi.RXEQueueBuf {
		return abi.RXEQueueBuf{Log2ElemSize: log2, IndexMask: mask}
	}
	for _, tc := range []struct {
		name    string
		size    int // file and mapping size
		miSize  uint32
		hdr     abi.RXEQueueBuf
		minElem int
		wantErr string // "" accepts
	}{
		{"send queue as the kernel makes it", 4096 * 5, 4096 * 5, ok(8, 63), sendWQESize, ""},
		{"cq as the kernel makes it", 4096, 4096, ok(6, 31), wcSize, ""},
		{"ring exactly fills the mapping", headerSize + 64*64, uint32(headerSize + 64*64), ok(6, 63), wcSize, ""},
		{"mapping shorter than the header", 4096, 100, ok(6, 31), wcSize, "smaller than its"},
		{"element smaller than an entry", 4096, 4096, ok(5, 31), wcSize, "element size"},
		{"log2 element size absurd", 4096, 4096, ok(31, 0), wcSize, "element size"},
		{"log2 element size just above the limit", 1 << 22, 1 << 22, ok(21, 0), wcSize, "element size"},
		{"log2 element size 32 would shift to 0", 4096, 4096, ok(32, 0), wcSize, "element size"},
		{"index mask not 2^n-1", 4096 * 4, 4096 * 4, ok(6, 40), wcSize, "index mask"},
		{"index mask with a hole", 4096 * 4, 4096 * 4, ok(6, 0x5f), wcSize, "index mask"},
		{"ring one slot past the mapping", headerSize + 64*64, uint32(headerSize + 64*64), ok(6, 127), wcSize, "does not fit"},
		{"ring far past the mapping", 4096, 4096, ok(6, 0xffffffff), wcSize, "does not fit"},
		{"huge elements past the mapping", 4096, 4096, ok(20, 0), wcSize, "does not fit"},
		{"mask all ones and elements huge", 4096, 4096, ok(20, 0xffffffff), wcSize, "does not fit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fd := memfdQueue(t, tc.size, tc.hdr)
			q, err := mapQueue(fd, abi.MMInfo{Offset: 0, Size: tc.miSize}, tc.minElem)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("mapQueue: %v", err)
				}
				defer q.unmap()
				checkQueueInvariants(t, q, tc.minElem)
				return
			}
			if err == nil {
				q.unmap()
				t.Fatalf("mapQueue accepted header %+v in %d bytes", tc.hdr, tc.miSize)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q, want it to mention %q", err, tc.wantErr)
			}
		})
	}
}

// TestMapQueueMmapError: a bad offset (what a stale mminfo would give) is an
// error that wraps the errno.
func TestMapQueueMmapError(t *testing.T) {
	_, err := mapQueue(-1, abi.MMInfo{Offset: 0, Size: 4096}, wcSize)
	if !errors.Is(err, unix.EBADF) {
		t.Errorf("mmap of fd -1: %v, want EBADF", err)
	}
}

// checkQueueInvariants is what every accepted queue must satisfy for the
// data path's unchecked slot arithmetic to stay inside the mapping.
func checkQueueInvariants(t testing.TB, q *queue, minElem int) {
	t.Helper()
	if q.elemSize < minElem {
		t.Fatalf("element size %d below %d", q.elemSize, minElem)
	}
	if q.mask&(q.mask+1) != 0 {
		t.Fatalf("mask %#x is not 2^n-1", q.mask)
	}
	if got, want := uint64(len(q.slots)), (uint64(q.mask)+1)*uint64(q.elemSize); got != want {
		t.Fatalf("slots %d bytes, want %d", got, want)
	}
	if headerSize+len(q.slots) > len(q.mem) {
		t.Fatalf("slots end at %d, mapping is %d bytes", headerSize+len(q.slots), len(q.mem))
	}
	// The highest slot is addressable and ends inside the mapping.
	last := q.slot(q.mask)
	if len(last) != q.elemSize {
		t.Fatalf("last slot %d bytes", len(last))
	}
	if q.capacity() != int(q.mask) {
		t.Fatalf("capacity %d, mask %d", q.capacity(), q.mask)
	}
}

func TestUnmapTwice(t *testing.T) {
	fd := memfdQueue(t, 4096, abi.RXEQueueBuf{Log2ElemSize: 6, IndexMask: 31})
	q, err := mapQueue(fd, abi.MMInfo{Size: 4096}, wcSize)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.unmap(); err != nil {
		t.Fatal(err)
	}
	if err := q.unmap(); err != nil {
		t.Errorf("second unmap: %v", err)
	}
	var nilQ *queue
	if err := nilQ.unmap(); err != nil {
		t.Errorf("unmap of nil queue: %v", err)
	}
}

// kernelWC puts a completion into CQ slot i as the kernel writes it.
func kernelWC(q *queue, i uint32, wc abi.WC) {
	*(*abi.WC)(unsafe.Pointer(&q.slot(i)[0])) = wc
}

func TestPollConvertsKernelCompletions(t *testing.T) {
	g := newGuarded(t, 6, 7)
	c := &cq{q: g.q}
	kernel := []abi.WC{
		{WRID: 1, Status: 0, Opcode: 128, ByteLen: 11, Ex: 0xefbeadde, QPNum: 17, SrcQP: 0, WCFlags: kernelWCGRH | kernelWCWithImm},
		{WRID: 2, Status: 0, Opcode: 128, ByteLen: 0, Ex: 0x1234, QPNum: 17, WCFlags: kernelWCGRH | kernelWCWithInvalidate},
		{WRID: 3, Status: 10, Opcode: 0, VendorErr: 5, QPNum: 18},
		{WRID: 4, Status: 0, Opcode: 129, ByteLen: 4096, Ex: 0x01000000, QPNum: 19, SrcQP: 77, WCFlags: kernelWCWithImm | kernelWCIPCSumOK,
			PkeyIndex: 3, SLID: 9, SL: 2, DLIDPathBits: 1},
	}
	// Start near the wrap so the ring's end is crossed.
	start := uint32(6)
	c.cons = start
	for i, k := range kernel {
		kernelWC(g.q, start+uint32(i), k)
	}
	atomic.StoreUint32(&g.q.hdr.ConsumerIndex, start)
	atomic.StoreUint32(&g.q.hdr.ProducerIndex, (start+uint32(len(kernel)))&g.q.mask)
	// A stale value in the caller's slice must not survive.
	wcs := make([]provider.WC, 8)
	for i := range wcs {
		wcs[i] = provider.WC{Imm: 0xffffffff, Flags: 0xff}
	}
	n, err := c.Poll(wcs)
	if err != nil || n != len(kernel) {
		t.Fatalf("Poll = %d, %v; want %d", n, err, len(kernel))
	}
	want := []provider.WC{
		{ID: 1, Status: provider.WCSuccess, Opcode: provider.WCRecv, ByteLen: 11, Imm: 0xdeadbeef, QPNum: 17, Flags: provider.WCWithGRH | provider.WCWithImm},
		{ID: 2, Status: provider.WCSuccess, Opcode: provider.WCRecv, Imm: 0x1234, QPNum: 17, Flags: provider.WCWithGRH | provider.WCWithInvalidate},
		{ID: 3, Status: provider.WCRemAccessErr, Opcode: provider.WCSend, VendorErr: 5, QPNum: 18},
		{ID: 4, Status: provider.WCSuccess, Opcode: provider.WCRecvRDMAWithImm, ByteLen: 4096, Imm: 1, QPNum: 19, SrcQP: 77,
			Flags: provider.WCWithImm | provider.WCIPCSumOK, PkeyIndex: 3, SLID: 9, SL: 2, DLIDPathBits: 1},
	}
	if d := cmp.Diff(want, wcs[:n]); d != "" {
		t.Errorf("completions (-want +got):\n%s", d)
	}
	if got := atomic.LoadUint32(&g.q.hdr.ConsumerIndex); got != (start+4)&g.q.mask {
		t.Errorf("consumer index %d after polling 4 from %d", got, start)
	}
	// Empty now.
	if n, _ := c.Poll(wcs); n != 0 {
		t.Errorf("second Poll = %d", n)
	}
	// A short slice takes only what fits.
	for i := uint32(0); i < 3; i++ {
		kernelWC(g.q, (start+4+i)&g.q.mask, abi.WC{WRID: 10 + uint64(i)})
	}
	atomic.StoreUint32(&g.q.hdr.ProducerIndex, (start+7)&g.q.mask)
	if n, _ := c.Poll(wcs[:2]); n != 2 || wcs[0].ID != 10 || wcs[1].ID != 11 {
		t.Errorf("Poll of 2 = %d, ids %d %d", n, wcs[0].ID, wcs[1].ID)
	}
	if n, _ := c.Poll(wcs[:0]); n != 0 {
		t.Errorf("Poll of 0 = %d", n)
	}
	if n, _ := c.Poll(wcs); n != 1 || wcs[0].ID != 12 {
		t.Errorf("last Poll = %d, id %d", n, wcs[0].ID)
	}
}

func TestPollAfterDestroy(t *testing.T) {
	c := &cq{}
	if n, err := c.Poll(make([]provider.WC, 4)); n != 0 || !errors.Is(err, provider.ErrClosed) {
		t.Errorf("Poll of an unmapped CQ = %d, %v; want 0, ErrClosed", n, err)
	}
}

// TestPollCorruptIndexes: whatever the kernel (or a stray write) leaves in
// the producer index, and whatever the consumer index says, Poll stays in
// the ring (the guard pages would fault otherwise) and returns at most a
// ring's worth.
func TestPollCorruptIndexes(t *testing.T) {
	g := newGuarded(t, 6, 15)
	wcs := make([]provider.WC, 64)
	for _, tc := range []struct{ prod, cons uint32 }{
		{0xffffffff, 0}, {0x80000000, 0}, {16, 0}, {17, 3}, {0, 0xffffffff}, {0xdeadbeef, 0xcafebabe}, {15, 0}, {0, 1},
	} {
		c := &cq{q: g.q, cons: tc.cons}
		atomic.StoreUint32(&g.q.hdr.ProducerIndex, tc.prod)
		n, err := c.Poll(wcs)
		if err != nil {
			t.Fatal(err)
		}
		want := int((tc.prod&g.q.mask - tc.cons&g.q.mask) & g.q.mask)
		if n != want || n > int(g.q.mask) {
			t.Errorf("prod %#x cons %#x: Poll = %d, want %d", tc.prod, tc.cons, n, want)
		}
		if ci := atomic.LoadUint32(&g.q.hdr.ConsumerIndex); ci > g.q.mask {
			t.Errorf("prod %#x cons %#x: published consumer index %#x outside the ring", tc.prod, tc.cons, ci)
		}
	}
}

// sq builds a send queue over a guarded ring whose doorbell goes into a
// pipe; read returns the doorbell bytes rung so far.
func newTestSQ(t testing.TB, qpType provider.QPType, log2, mask uint32, maxSGE, maxInline int) (*sendQueue, *guarded, func() []byte) {
	t.Helper()
	g := newGuarded(t, log2, mask)
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	s := &sendQueue{q: g.q, fd: p[1], qpType: qpType, maxSGE: maxSGE, maxInline: maxInline}
	s.db.init(0x1234)
	read := func() []byte {
		buf := make([]byte, 1<<16)
		n, err := unix.Read(p[0], buf)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) {
				return nil
			}
			t.Fatal(err)
		}
		return buf[:n]
	}
	return s, g, read
}

// sendWQE returns the WQE in slot i and the bytes after it.
func sendWQE(q *queue, i uint32) (*abi.RXESendWQE, []byte) {
	s := q.slot(i)
	return (*abi.RXESendWQE)(unsafe.Pointer(&s[0])), s[sendWQESize:]
}

func le32(v ...uint32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], x)
	}
	return b
}

func le64(v ...uint64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], x)
	}
	return b
}

// union fills the start of a rxe_send_wr union.
func union(parts ...[]byte) (u [120]byte) {
	off := 0
	for _, p := range parts {
		off += copy(u[off:], p)
	}
	return u
}

func TestPostSendWQELayout(t *testing.T) {
	inline := []byte("inline payload, gathered")
	sgl := []provider.SGE{{Addr: 0x1000, Length: 100, Lkey: 0x11}, {Addr: 0x2000, Length: 28, Lkey: 0x22}}
	theAH := &ah{resp: abi.RXECreateAHResp{AHNum: 9}}
	for _, tc := range []struct {
		name string
		typ  provider.QPType
		wr   provider.SendWR
		want abi.RXESendWQE
		tail []byte // expected bytes after the WQE (SGEs or inline data)
	}{
		{"send", abi.QPTypeRC,
			provider.SendWR{ID: 1, Opcode: provider.WRSend, Flags: provider.SendSignaled, SGL: sgl},
			abi.RXESendWQE{WR: abi.RXESendWR{WRID: 1, Opcode: 2, SendFlags: 2}, DMA: abi.RXEDMAInfo{Length: 128, Resid: 128, NumSGE: 2}},
			append(append(le64(0x1000), le32(100, 0x11)...), append(le64(0x2000), le32(28, 0x22)...)...)},
		{"send with imm travels big endian", abi.QPTypeRC,
			provider.SendWR{ID: 2, Opcode: provider.WRSendWithImm, Imm: 0x01020304, SGL: sgl[:1]},
			abi.RXESendWQE{WR: abi.RXESendWR{WRID: 2, Opcode: 3, Ex: 0x04030201}, DMA: abi.RXEDMAInfo{Length: 100, Resid: 100, NumSGE: 1}},
			append(le64(0x1000), le32(100, 0x11)...)},
		{"zero-length send", abi.QPTypeRC,
			provider.SendWR{ID: 3, Opcode: provider.WRSend},
			abi.RXESendWQE{WR: abi.RXESendWR{WRID: 3, Opcode: 2}}, nil},
		{"rdma write", abi.QPTypeRC,
			provider.SendWR{ID: 4, Opcode: provider.WRRDMAWrite, SGL: sgl[1:], RemoteAddr: 0xabcdef0123, Rkey: 0x77},
			abi.RXESendWQE{WR: abi.RXESendWR{WRID: 4, Opcode: 0, WR: union(le64(0xabcdef0123), le32(0x77))}, IOVA: 0xabcdef0123,
				DMA: abi.RXEDMAInfo{Length: 28, Resid: 28, NumSGE: 1}},
			append(le64(0x2000), le32(28, 0x22)...)},
		{"rdma write with imm", abi.QPTypeUC,
			provider.SendWR{ID: 5, Opcode: provider.WRRDMAWriteWithImm, Imm: 0xdeadbeef, RemoteAddr: 8, Rkey: 9},
			abi.RXESendWQE{WR: abi.RXESendWR{WRID: 5, Opcode: 1, Ex: 0xefbeadde, WR: union(le64(8), le32(9))}, IOVA: 8}, nil},
		{"rdma read", abi.QPTypeRC,
			provider.SendWR{ID: 6, Opcode: provider.WRRDMARead, SGL: sgl, RemoteAddr: 0x5000, Rkey: 0x99},
			abi.RXESendWQE{WR: abi.RXESendWR{WRID: 6, Opcode: 4, WR: union(le64(0x5000), le32(0x99))}, IOVA: 0x5000,
				DMA: abi.RXEDMAInfo{Length: 128, Resid: 128, NumSGE: 2}},
			append(append(le64(0x1000), le32(100, 0x11)...), append(le64(0x2000), le32(28, 0x22)...)...)},
		{"compare and swap", abi.QPTypeRC,
			provider.SendWR{ID: 7, Opcode: provider.WRAtomicCmpAndSwp, SGL: []provider.SGE{{Addr: 0x3000, Length: 8, Lkey: 5}},
				RemoteAddr: 0x4008, Rkey: 6, CompareAdd: 0x1111, Swap: 0x2222},
			abi.RXESendWQE{WR: abi.RXESendWR{WRID: 7, Opcode: 5, WR: union(le64(0x4008, 0x1111, 0x2222), le32(6))}, IOVA: 0x4008,
				DMA: abi.RXEDMAInfo{Length: 8, Resid: 8, NumSGE: 1}},
			append(le64(0x3000), le32(8, 5)...)},
		{"fetch and add", abi.QPTypeRC,
			provider.SendWR{ID: 8, Opcode: provider.WRAtomicFetchAndAdd, Flags: provider.SendSignaled | provider.SendFence,
				SGL: []provider.SGE{{Addr: 0x3000, Length: 8, Lkey: 5}}, RemoteAddr: 0x4010, Rkey: 6, CompareAdd: 3},
			abi.RXESendWQE{WR: abi.RXESendWR{WRID: 8, Opcode: 6, SendFlags: 3, WR: union(le64(0x4010, 3, 0), le32(6))}, IOVA: 0x4010,
				DMA: abi.RXEDMAInfo{Length: 8, Resid: 8, NumSGE: 1}},
			append(le64(0x3000), le32(8, 5)...)},
		{"ud send names the AH number", abi.QPTypeUD,
			provider.SendWR{ID: 9, Opcode: provider.WRSendWithImm, Imm: 1, SGL: sgl[:1], AH: &provider.AHRef{AH: theAH}, RemoteQPN: 0x123, RemoteQkey: 0x11111111},
			abi.RXESendWQE{WR: abi.RXESendWR{WRID: 9, Opcode: 3, Ex: 0x01000000, WR: union(le32(0x123, 0x11111111, 0, 9))},
				DMA: abi.RXEDMAInfo{Length: 100, Resid: 100, NumSGE: 1}},
			append(le64(0x1000), le32(100, 0x11)...)},
		{"send with invalidate", abi.QPTypeRC,
			provider.SendWR{ID: 10, Opcode: provider.WRSendWithInv, InvalidateRkey: 0xabc},
			abi.RXESendWQE{WR: abi.RXESendWR{WRID: 10, Opcode: 9, Ex: 0xabc}}, nil},
		{"local invalidate", abi.QPTypeRC,
			provider.SendWR{ID: 11, Opcode: provider.WRLocalInv, InvalidateRkey: 0xabd},
			abi.RXESendWQE{WR: abi.RXESendWR{WRID: 11, Opcode: 7, Ex: 0xabd}}, nil},
		{"bind memory window", abi.QPTypeRC,
			provider.SendWR{ID: 12, Opcode: provider.WRBindMW, Bind: provider.BindMW{MWRkey: 0x100, NewRkey: 0x101, MRLkey: 0x200,
				Addr: 0x7000, Length: 0x1000, Access: 6}},
			abi.RXESendWQE{WR: abi.RXESendWR{WRID: 12, Opcode: 8, WR: union(le64(0x7000, 0x1000), le32(0x200, 0x100, 0x101, 6))}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, g, doorbells := newTestSQ(t, tc.typ, 8, 15, 4, 64)
			// Leave garbage in the slot: PostSend must clear what it does not set.
			slot := g.q.slot(0)
			for i := range slot {
				slot[i] = 0xa5
			}
			if err := s.PostSend([]provider.SendWR{tc.wr}); err != nil {
				t.Fatal(err)
			}
			got, tail := sendWQE(g.q, 0)
			if d := cmp.Diff(tc.want, *got); d != "" {
				t.Errorf("WQE (-want +got):\n%s", d)
			}
			if len(tc.tail) > 0 && !cmp.Equal(tc.tail, tail[:len(tc.tail)]) {
				t.Errorf("after the WQE: %x, want %x", tail[:len(tc.tail)], tc.tail)
			}
			if pi := atomic.LoadUint32(&g.q.hdr.ProducerIndex); pi != 1 {
				t.Errorf("producer index %d, want 1", pi)
			}
			checkDoorbells(t, doorbells(), 1)
		})
	}
	t.Run("inline gathers the bytes at post time", func(t *testing.T) {
		s, g, doorbells := newTestSQ(t, abi.QPTypeRC, 8, 15, 4, 64)
		src := make([]byte, len(inline))
		copy(src, inline)
		addr := uint64(uintptr(unsafe.Pointer(&src[0])))
		wr := provider.SendWR{ID: 13, Opcode: provider.WRSend, Flags: provider.SendInline | provider.SendSignaled,
			SGL: []provider.SGE{{Addr: addr, Length: 6}, {Addr: addr + 6, Length: 0}, {Addr: addr + 7, Length: uint32(len(src) - 7)}}}
		if err := s.PostSend([]provider.SendWR{wr}); err != nil {
			t.Fatal(err)
		}
		copy(src, "XXXXXXXXXXXXXXXXXXXXXXXX") // the WQE holds its own copy
		got, tail := sendWQE(g.q, 0)
		want := abi.RXESendWQE{WR: abi.RXESendWR{WRID: 13, Opcode: 2, SendFlags: 10},
			DMA: abi.RXEDMAInfo{Length: uint32(len(inline) - 1), Resid: uint32(len(inline) - 1), NumSGE: 3}}
		if d := cmp.Diff(want, *got); d != "" {
			t.Errorf("WQE (-want +got):\n%s", d)
		}
		wantData := append(append([]byte{}, inline[:6]...), inline[7:]...)
		if string(tail[:len(wantData)]) != string(wantData) {
			t.Errorf("inline data %q, want %q", tail[:len(wantData)], wantData)
		}
		checkDoorbells(t, doorbells(), 1)
	})
}

// checkDoorbells checks that got is n POST_SEND commands with wr_count 0
// and a wqe_size current kernels accept.
func checkDoorbells(t *testing.T, got []byte, n int) {
	t.Helper()
	if len(got) != 32*n {
		t.Fatalf("doorbell bytes %d, want %d doorbell(s) of 32", len(got), n)
	}
	for i := 0; i < n; i++ {
		d := got[32*i : 32*i+32]
		if cmd := binary.LittleEndian.Uint32(d[0:]); cmd != abi.CmdPostSend {
			t.Errorf("doorbell command %d", cmd)
		}
		if in, out := binary.LittleEndian.Uint16(d[4:]), binary.LittleEndian.Uint16(d[6:]); in != 8 || out != 1 {
			t.Errorf("doorbell in_words %d out_words %d, want 8 and 1", in, out)
		}
		if binary.LittleEndian.Uint64(d[8:]) == 0 {
			t.Error("doorbell has no response address")
		}
		if h := binary.LittleEndian.Uint32(d[16:]); h != 0x1234 {
			t.Errorf("doorbell QP handle %#x", h)
		}
		if wc, sc := binary.LittleEndian.Uint32(d[20:]), binary.LittleEndian.Uint32(d[24:]); wc != 0 || sc != 0 {
			t.Errorf("doorbell wr_count %d sge_count %d, want 0 0", wc, sc)
		}
		if ws := binary.LittleEndian.Uint32(d[28:]); ws < 56 {
			t.Errorf("doorbell wqe_size %d is below sizeof(ib_uverbs_send_wr) = 56: current kernels refuse it", ws)
		}
	}
}

func TestPostSendListOneDoorbell(t *testing.T) {
	s, g, doorbells := newTestSQ(t, abi.QPTypeRC, 8, 31, 2, 64)
	list := make([]provider.SendWR, 16)
	for i := range list {
		list[i] = provider.SendWR{ID: uint64(100 + i), Opcode: provider.WRRDMAWrite, RemoteAddr: uint64(i * 8), Rkey: 1}
	}
	// Start the producer near the end of the ring: the list wraps.
	atomic.StoreUint32(&g.q.hdr.ProducerIndex, 25)
	atomic.StoreUint32(&g.q.hdr.ConsumerIndex, 25)
	if err := s.PostSend(list); err != nil {
		t.Fatal(err)
	}
	checkDoorbells(t, doorbells(), 1)
	for i := range list {
		w, _ := sendWQE(g.q, uint32(25+i)&g.q.mask)
		if w.WR.WRID != uint64(100+i) {
			t.Errorf("slot %d holds wr_id %d, want %d", (25+i)&31, w.WR.WRID, 100+i)
		}
	}
	if pi := atomic.LoadUint32(&g.q.hdr.ProducerIndex); pi != (25+16)&31 {
		t.Errorf("producer index %d", pi)
	}
	if err := s.PostSend(nil); err != nil {
		t.Errorf("empty list: %v", err)
	}
	if b := doorbells(); len(b) != 0 {
		t.Errorf("an empty list rang the doorbell (%d bytes)", len(b))
	}
}

func TestPostSendRefusals(t *testing.T) {
	sge := provider.SGE{Addr: 0x1000, Length: 8, Lkey: 1}
	big := make([]byte, 65)
	bigAddr := uint64(uintptr(unsafe.Pointer(&big[0])))
	for _, tc := range []struct {
		name string
		typ  provider.QPType
		wr   provider.SendWR
		want error
	}{
		{"too many SGEs", abi.QPTypeRC, provider.SendWR{Opcode: provider.WRSend, SGL: make([]provider.SGE, 3)}, provider.ErrTooManySGE},
		{"inline too large", abi.QPTypeRC, provider.SendWR{Opcode: provider.WRSend, Flags: provider.SendInline,
			SGL: []provider.SGE{{Addr: bigAddr, Length: 65}}}, provider.ErrInlineTooLarge},
		{"inline read", abi.QPTypeRC, provider.SendWR{Opcode: provider.WRRDMARead, Flags: provider.SendInline, SGL: []provider.SGE{sge}}, provider.ErrBadWR},
		{"inline atomic", abi.QPTypeRC, provider.SendWR{Opcode: provider.WRAtomicFetchAndAdd, Flags: provider.SendInline, SGL: []provider.SGE{sge}}, provider.ErrBadWR},
		{"unaligned atomic", abi.QPTypeRC, provider.SendWR{Opcode: provider.WRAtomicCmpAndSwp, SGL: []provider.SGE{sge}, RemoteAddr: 4}, provider.ErrBadWR},
		{"short atomic", abi.QPTypeRC, provider.SendWR{Opcode: provider.WRAtomicFetchAndAdd, SGL: []provider.SGE{{Length: 4}}}, provider.ErrBadWR},
		{"bind with data", abi.QPTypeRC, provider.SendWR{Opcode: provider.WRBindMW, SGL: []provider.SGE{sge}}, provider.ErrBadWR},
		{"bind with imm", abi.QPTypeRC, provider.SendWR{Opcode: provider.WRBindMW, Imm: 1}, provider.ErrBadWR},
		{"unknown opcode", abi.QPTypeRC, provider.SendWR{Opcode: 10}, provider.ErrBadWR},
		{"huge opcode", abi.QPTypeRC, provider.SendWR{Opcode: 0xffffffff}, provider.ErrBadWR},
		{"over 2 GiB", abi.QPTypeRC, provider.SendWR{Opcode: provider.WRSend,
			SGL: []provider.SGE{{Length: 1 << 31}, {Length: 1}}}, provider.ErrBadWR},
		{"UD rdma write", abi.QPTypeUD, provider.SendWR{Opcode: provider.WRRDMAWrite, AH: &provider.AHRef{AH: &ah{resp: abi.RXECreateAHResp{AHNum: 1}}}}, provider.ErrBadWR},
		{"UD without AH", abi.QPTypeUD, provider.SendWR{Opcode: provider.WRSend}, provider.ErrBadWR},
		{"UD with a nil *ah", abi.QPTypeUD, provider.SendWR{Opcode: provider.WRSend, AH: &provider.AHRef{AH: (*ah)(nil)}}, provider.ErrBadWR},
		{"UD with AH number 0", abi.QPTypeUD, provider.SendWR{Opcode: provider.WRSend, AH: &provider.AHRef{AH: &ah{}}}, provider.ErrBadWR},
		{"UC read", abi.QPTypeUC, provider.SendWR{Opcode: provider.WRRDMARead, SGL: []provider.SGE{sge}}, provider.ErrBadWR},
		{"UC atomic", abi.QPTypeUC, provider.SendWR{Opcode: provider.WRAtomicFetchAndAdd, SGL: []provider.SGE{sge}}, provider.ErrBadWR},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, g, doorbells := newTestSQ(t, tc.typ, 8, 15, 2, 64)
			// The refused request comes second: nothing of the list may be
			// queued.
			err := s.PostSend([]provider.SendWR{{Opcode: provider.WRSend, AH: &provider.AHRef{AH: &ah{resp: abi.RXECreateAHResp{AHNum: 1}}}}, tc.wr})
			var pe *provider.PostError
			if !errors.Is(err, tc.want) || !errors.As(err, &pe) || pe.Index != 1 {
				t.Fatalf("PostSend = %v, want %v at index 1", err, tc.want)
			}
			if pi := atomic.LoadUint32(&g.q.hdr.ProducerIndex); pi != 0 {
				t.Errorf("producer index moved to %d", pi)
			}
			if b := doorbells(); len(b) != 0 {
				t.Errorf("a refused list rang the doorbell")
			}
		})
	}
}

func TestPostSendQueueFull(t *testing.T) {
	s, g, doorbells := newTestSQ(t, abi.QPTypeRC, 8, 7, 2, 64)
	wr := provider.SendWR{Opcode: provider.WRSend}
	// Seven slots usable (one stays empty).
	if err := s.PostSend([]provider.SendWR{wr, wr, wr, wr, wr}); err != nil {
		t.Fatal(err)
	}
	err := s.PostSend([]provider.SendWR{wr, wr, wr})
	var pe *provider.PostError
	if !errors.Is(err, provider.ErrQueueFull) || !errors.As(err, &pe) || pe.Index != 2 {
		t.Errorf("8th WR on a 7-slot queue: %v, want ErrQueueFull at index 2", err)
	}
	if err := s.PostSend([]provider.SendWR{wr, wr}); err != nil {
		t.Errorf("filling the last two slots: %v", err)
	}
	// The kernel consumes three.
	atomic.StoreUint32(&g.q.hdr.ConsumerIndex, 3)
	if err := s.PostSend([]provider.SendWR{wr, wr, wr}); err != nil {
		t.Errorf("after the kernel consumed 3: %v", err)
	}
	checkDoorbells(t, doorbells(), 3)
}

// TestPostSendCorruptIndexes: nonsense in either index of the shared header
// never makes PostSend write outside the ring (guard pages) nor publish an
// index outside it.
func TestPostSendCorruptIndexes(t *testing.T) {
	for _, tc := range []struct{ prod, cons uint32 }{
		{0xffffffff, 0}, {0, 0xffffffff}, {0xdeadbeef, 0xcafebabe}, {16, 16}, {31, 0x80000000},
	} {
		s, g, _ := newTestSQ(t, abi.QPTypeRC, 8, 15, 2, 64)
		atomic.StoreUint32(&g.q.hdr.ProducerIndex, tc.prod)
		atomic.StoreUint32(&g.q.hdr.ConsumerIndex, tc.cons)
		wr := provider.SendWR{Opcode: provider.WRSend, SGL: []provider.SGE{{Length: 1}, {Length: 2}}}
		free := g.q.free(tc.prod & g.q.mask)
		list := make([]provider.SendWR, 16)
		for i := range list {
			list[i] = wr
		}
		err := s.PostSend(list)
		if (err == nil) != (free >= 16) {
			t.Errorf("prod %#x cons %#x: free %d, PostSend of 16: %v", tc.prod, tc.cons, free, err)
		}
		if free > 0 {
			if err := s.PostSend(list[:free]); err != nil {
				t.Errorf("prod %#x cons %#x: PostSend of the %d free: %v", tc.prod, tc.cons, free, err)
			}
		}
		if pi := atomic.LoadUint32(&g.q.hdr.ProducerIndex); free > 0 && pi > g.q.mask {
			t.Errorf("prod %#x cons %#x: published producer index %#x", tc.prod, tc.cons, pi)
		}
	}
}

func TestPostSendNoQueue(t *testing.T) {
	var s sendQueue
	if err := s.PostSend([]provider.SendWR{{Opcode: provider.WRSend}}); err == nil {
		t.Error("PostSend on a QP without send queue succeeded")
	}
}

func TestDoorbellErrorWrapsErrno(t *testing.T) {
	s, _, _ := newTestSQ(t, abi.QPTypeRC, 8, 15, 2, 64)
	s.fd = -1
	err := s.PostSend([]provider.SendWR{{Opcode: provider.WRSend}})
	if !errors.Is(err, unix.EBADF) {
		t.Errorf("doorbell on fd -1: %v, want EBADF", err)
	}
}

func newTestRQ(t testing.TB, mask uint32, maxSGE int) (*recvQueue, *guarded) {
	// 128-byte slots: room for the WQE and two SGEs.
	g := newGuarded(t, 7, mask)
	return &recvQueue{q: g.q, maxSGE: maxSGE}, g
}

func TestPostRecvWQELayout(t *testing.T) {
	r, g := newTestRQ(t, 7, 2)
	slot := g.q.slot(0)
	for i := range slot {
		slot[i] = 0x5a
	}
	sgl := []provider.SGE{{Addr: 0x1000, Length: 40, Lkey: 3}, {Addr: 0x9000, Length: 24, Lkey: 4}}
	if err := r.PostRecv([]provider.RecvWR{{ID: 77, SGL: sgl}, {ID: 78}}); err != nil {
		t.Fatal(err)
	}
	got := *(*abi.RXERecvWQE)(unsafe.Pointer(&slot[0]))
	want := abi.RXERecvWQE{WRID: 77, DMA: abi.RXEDMAInfo{Length: 64, Resid: 64, NumSGE: 2}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("recv WQE (-want +got):\n%s", d)
	}
	wantSGEs := append(append(le64(0x1000), le32(40, 3)...), append(le64(0x9000), le32(24, 4)...)...)
	if s := slot[recvWQESize : recvWQESize+len(wantSGEs)]; string(s) != string(wantSGEs) {
		t.Errorf("SGEs %x, want %x", s, wantSGEs)
	}
	second := *(*abi.RXERecvWQE)(unsafe.Pointer(&g.q.slot(1)[0]))
	if d := cmp.Diff(abi.RXERecvWQE{WRID: 78}, second); d != "" {
		t.Errorf("zero-SGE recv WQE (-want +got):\n%s", d)
	}
	if pi := atomic.LoadUint32(&g.q.hdr.ProducerIndex); pi != 2 {
		t.Errorf("producer index %d", pi)
	}
}

func TestPostRecvRefusals(t *testing.T) {
	r, g := newTestRQ(t, 3, 2)
	err := r.PostRecv([]provider.RecvWR{{ID: 1}, {ID: 2, SGL: make([]provider.SGE, 3)}})
	var pe *provider.PostError
	if !errors.Is(err, provider.ErrTooManySGE) || !errors.As(err, &pe) || pe.Index != 1 {
		t.Errorf("3 SGEs on a 2-SGE queue: %v", err)
	}
	err = r.PostRecv(make([]provider.RecvWR, 4))
	if !errors.Is(err, provider.ErrQueueFull) || !errors.As(err, &pe) || pe.Index != 3 {
		t.Errorf("4 WRs on a 3-slot queue: %v", err)
	}
	if pi := atomic.LoadUint32(&g.q.hdr.ProducerIndex); pi != 0 {
		t.Errorf("refused lists moved the producer index to %d", pi)
	}
	if err := r.PostRecv(nil); err != nil {
		t.Errorf("empty list: %v", err)
	}
	var none recvQueue
	if err := none.PostRecv([]provider.RecvWR{{ID: 1}}); err == nil {
		t.Error("PostRecv without a queue (SRQ QP) succeeded")
	}
}

// TestDataPathAllocs: posting and polling allocate nothing.
func TestDataPathAllocs(t *testing.T) {
	s, gs, doorbells := newTestSQ(t, abi.QPTypeRC, 8, 1023, 2, 64)
	r, gr := newTestRQ(t, 1023, 2)
	gc := newGuarded(t, 6, 1023)
	c := &cq{q: gc.q}
	sgl := []provider.SGE{{Addr: 0x1000, Length: 8, Lkey: 1}}
	one := []provider.SendWR{{ID: 1, Opcode: provider.WRRDMAWrite, Flags: provider.SendSignaled, SGL: sgl, RemoteAddr: 8, Rkey: 2}}
	list := make([]provider.SendWR, 16)
	for i := range list {
		list[i] = one[0]
	}
	recv := []provider.RecvWR{{ID: 1, SGL: sgl}}
	wcs := make([]provider.WC, 16)
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"PostSend 1", func() {
			atomic.StoreUint32(&gs.q.hdr.ConsumerIndex, atomic.LoadUint32(&gs.q.hdr.ProducerIndex))
			if err := s.PostSend(one); err != nil {
				t.Fatal(err)
			}
			doorbells()
		}},
		{"PostSend 16", func() {
			atomic.StoreUint32(&gs.q.hdr.ConsumerIndex, atomic.LoadUint32(&gs.q.hdr.ProducerIndex))
			if err := s.PostSend(list); err != nil {
				t.Fatal(err)
			}
			doorbells()
		}},
		{"PostRecv", func() {
			atomic.StoreUint32(&gr.q.hdr.ConsumerIndex, atomic.LoadUint32(&gr.q.hdr.ProducerIndex))
			if err := r.PostRecv(recv); err != nil {
				t.Fatal(err)
			}
		}},
		{"Poll 16", func() {
			atomic.StoreUint32(&gc.q.hdr.ProducerIndex, (atomic.LoadUint32(&gc.q.hdr.ConsumerIndex)+16)&gc.q.mask)
			if n, _ := c.Poll(wcs); n != 16 {
				t.Fatalf("Poll = %d", n)
			}
		}},
		{"Poll empty", func() {
			if n, _ := c.Poll(wcs); n != 0 {
				t.Fatalf("Poll = %d", n)
			}
		}},
	} {
		// The pipe read in the doorbell cases allocates; measure without it.
		if a := testing.AllocsPerRun(100, tc.f); a > 0 && !strings.HasPrefix(tc.name, "PostSend") {
			t.Errorf("%s: %.1f allocations per call", tc.name, a)
		}
	}
	// PostSend alone, with the doorbell going to /dev/null.
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	s.fd = int(null.Fd())
	for _, l := range [][]provider.SendWR{one, list} {
		a := testing.AllocsPerRun(100, func() {
			atomic.StoreUint32(&gs.q.hdr.ConsumerIndex, atomic.LoadUint32(&gs.q.hdr.ProducerIndex))
			if err := s.PostSend(l); err != nil {
				t.Fatal(err)
			}
		})
		if a > 0 {
			t.Errorf("PostSend of %d: %.1f allocations per call", len(l), a)
		}
	}
}

// ours reports whether the page at p is still mapped by this test: it can
// be read and begins with token, which the test wrote there. Asking only
// whether some mapping covers p would race with every other thread of the
// process: an mmap made anywhere between the unmap and the check may land
// in the hole. The page is read by the kernel (a write to a pipe), so a
// page unmapped meanwhile gives EFAULT, not a fault. (Not
// process_vm_readv: qemu-user, which runs the arm64 unit tests, has none.)
func ours(t *testing.T, p *byte, token uint64) bool {
	t.Helper()
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	page := uintptr(unsafe.Pointer(p)) &^ uintptr(pageSize-1)
	_, _, errno := unix.Syscall(unix.SYS_WRITE, uintptr(fds[1]), page, 8)
	switch errno {
	case 0:
	case unix.EFAULT:
		return false
	default:
		t.Fatalf("write from the page: %v", errno)
	}
	var b [8]byte
	if _, err := unix.Read(fds[0], b[:]); err != nil {
		t.Fatal(err)
	}
	return binary.LittleEndian.Uint64(b[:]) == token
}

// newToken is a value no other mapping holds by chance.
func newToken(t *testing.T) uint64 {
	var b [8]byte
	if _, err := unix.Getrandom(b[:], 0); err != nil {
		t.Fatal(err)
	}
	return binary.LittleEndian.Uint64(b[:]) | 1
}

func TestUnmapPair(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b [2]int  // first page in a 3-page region, length in bytes
		left [3]bool // which of the region's pages stay mapped
	}{
		{"adjacent, a below b", [2]int{0, 100}, [2]int{1, 4096 + 200}, [3]bool{}},
		{"adjacent, b below a", [2]int{1, 300}, [2]int{0, 4096}, [3]bool{false, false, true}},
		{"a gap between them", [2]int{0, 4096}, [2]int{2, 64}, [3]bool{false, true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			region, err := unix.Mmap(-1, 0, 3*pageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
			if err != nil {
				t.Fatal(err)
			}
			token := newToken(t)
			for i := range 3 {
				binary.LittleEndian.PutUint64(region[i*pageSize:], token)
			}
			mk := func(at [2]int) *queue { return &queue{mem: region[at[0]*pageSize : at[0]*pageSize+at[1]]} }
			a, b := mk(tc.a), mk(tc.b)
			if err := unmapPair(a, b); err != nil {
				t.Fatal(err)
			}
			if a.mem != nil || b.mem != nil {
				t.Error("unmapPair left a queue's memory set")
			}
			for i, want := range tc.left {
				got := ours(t, &region[i*pageSize], token)
				if got != want {
					t.Errorf("page %d mapped %v, want %v", i, got, want)
				}
				if got { // only what is still ours: the rest may be someone else's by now
					unix.Syscall(unix.SYS_MUNMAP, uintptr(unsafe.Pointer(&region[i*pageSize])), uintptr(pageSize), 0)
				}
			}
		})
	}
	if err := unmapPair(nil, nil); err != nil {
		t.Errorf("unmapPair(nil, nil): %v", err)
	}
}

// TestMapQueueBelow maps a QP's two queues as Created does and unmaps
// them as Destroyed does: where the kernel honoured the hint they touch
// and go in one munmap.
func TestMapQueueBelow(t *testing.T) {
	fd := memfdQueue(t, 8192, abi.RXEQueueBuf{Log2ElemSize: 6, IndexMask: 63})
	sq, err := mapQueue(fd, abi.MMInfo{Size: 8192}, wcSize)
	if err != nil {
		t.Fatal(err)
	}
	rq, err := mapQueueBelow(fd, abi.MMInfo{Size: 8192 - 100}, wcSize, sq)
	if err != nil {
		sq.unmap()
		t.Fatal(err)
	}
	sqStart, rqStart := &sq.mem[0], &rq.mem[0]
	token := newToken(t) // both map the file's first page
	binary.LittleEndian.PutUint64(sq.mem, token)
	if uintptr(unsafe.Pointer(rqStart))+2*uintptr(pageSize) != uintptr(unsafe.Pointer(sqStart)) {
		t.Logf("the kernel placed the receive queue elsewhere (%p, send queue %p)", rqStart, sqStart)
	}
	if err := unmapPair(sq, rq); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*byte{sqStart, rqStart} {
		if ours(t, p, token) {
			t.Errorf("%p still mapped", p)
		}
	}
}
