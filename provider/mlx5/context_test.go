package mlx5

import (
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
)

func TestMmapOffset(t *testing.T) {
	for _, tc := range []struct {
		cmd, idx int
		want     int64
	}{
		{abi.MLX5MmapRegularPage, 0, 0},
		{abi.MLX5MmapRegularPage, 3, 3 * 4096},
		{abi.MLX5MmapNCPage, 1, (3<<8 | 1) * 4096},
		{abi.MLX5MmapCoreClock, 0, 5 << 8 * 4096},
		{abi.MLX5MmapClockInfo, abi.MLX5ClockInfoV1, 7 << 8 * 4096},
		{abi.MLX5MmapAllocWC, 0x123, (6<<8 | 0x23 | 1<<16) * 4096}, // extended index
		{abi.MLX5MmapAllocWC, 0x12, (6<<8 | 0x12) * 4096},
	} {
		if got := abi.MLX5MmapOffset(tc.cmd, tc.idx, 4096); got != tc.want {
			t.Errorf("MLX5MmapOffset(%d, %#x) = %#x, want %#x", tc.cmd, tc.idx, got, tc.want)
		}
	}
}

// TestDynamicUARAssignment: QPs get BlueFlame registers as libmlx5 hands
// them out: two per UAR page, a new page per two QPs while under the 4
// low-latency registers, then shared pages (locked), then the least used
// shared register; destroyed QPs give dedicated registers back.
func TestDynamicUARAssignment(t *testing.T) {
	c, k := newTestContext(t, testResp())
	if c.ncUAR == nil || c.ncUAR.pageID != 0x20 || !c.ncUAR.ncMode {
		t.Fatalf("NC UAR %+v, want page 0x20", c.ncUAR)
	}
	base, pageID, named := c.CQUAR()
	if base != unsafe.Pointer(&k.uarPage(0x20)[0]) || pageID != 0x20 || !named {
		t.Errorf("CQUAR = %p %#x %v", base, pageID, named)
	}
	type reg struct {
		Page   uint32
		Off    int
		Shared bool
	}
	var got []reg
	var qps []*QP
	for i := 0; i < 20; i++ {
		q := newTestQP(t, c, provider.QPInit{Type: abi.QPTypeRC, MaxSendWr: 1, MaxSendSGE: 1})
		qps = append(qps, q)
		got = append(got, reg{q.bf.pageID, q.bf.regOff, q.bf.needLock})
		if q.req.BfregIndex != q.bf.pageID || q.req.Flags&abi.MLX5QPFlagUARPageIndex == 0 {
			t.Errorf("QP %d: driver data names page %d (flags %#x), register on %d", i, q.req.BfregIndex, q.req.Flags, q.bf.pageID)
		}
	}
	var want []reg
	for p := uint32(0x21); p <= 0x22; p++ { // dedicated
		want = append(want, reg{p, 0x800, false}, reg{p, 0xa00, false})
	}
	for p := uint32(0x23); p <= 0x28; p++ { // 12 shared registers
		want = append(want, reg{p, 0x800, true}, reg{p, 0xa00, true})
	}
	// Then the least used shared registers, in order.
	for i := 0; i < 4; i++ {
		want = append(want, want[4+i])
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("registers (-libmlx5's order +got):\n%s", diff)
	}
	// A destroyed QP's dedicated register goes to the next QP.
	qps[1].Destroyed()
	q := newTestQP(t, c, provider.QPInit{Type: abi.QPTypeRC, MaxSendWr: 1, MaxSendSGE: 1})
	if q.bf.pageID != 0x21 || q.bf.regOff != 0xa00 {
		t.Errorf("after a destroy: register %#x+%#x, want 0x21+0xa00", q.bf.pageID, q.bf.regOff)
	}
}

// TestStaticUARs: with tot_bfregs in the response (kernels without
// dynamic UARs), the pages are mapped by index and the kernel's bfreg
// index picks the QP's register; register 0 never takes BlueFlame.
func TestStaticUARs(t *testing.T) {
	resp := testResp()
	resp.TotBfregs = 8
	c, k := newTestContext(t, resp)
	if c.ncUAR != nil || len(c.staticUARs) != 4 || len(c.bfs) != 16 {
		t.Fatalf("nc %v, %d static pages, %d registers", c.ncUAR, len(c.staticUARs), len(c.bfs))
	}
	for i := 0; i < 4; i++ {
		if _, ok := k.maps[abi.MLX5MmapOffset(abi.MLX5MmapRegularPage, i, 4096)]; !ok {
			t.Errorf("UAR page %d not mapped at its offset", i)
		}
	}
	base, _, named := c.CQUAR()
	if base != unsafe.Pointer(&c.staticUARs[0].mem[0]) || named {
		t.Errorf("CQs must use the first static page")
	}
	if b := c.bfs[0]; b.uuarn != 0 || b.bufSize != 0 || b.regOff != 0x800 {
		t.Errorf("register 0: %+v", b)
	}
	if b := c.bfs[5]; b.uar != c.staticUARs[1] || b.regOff != 0x800+512 || b.bufSize != 256 || !b.needLock {
		t.Errorf("register 5: page %p off %#x half %d lock %v", b.uar, b.regOff, b.bufSize, b.needLock)
	}
	if b := c.bfs[7]; b.needLock { // the low-latency ones (the last four of eight) are not shared
		t.Errorf("register 7 is low latency, yet locked")
	}
	p, err := c.NewQP(provider.QPInit{Type: abi.QPTypeRC, MaxSendWr: 1, MaxSendSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	q := p.(*QP)
	if q.req.Flags&(abi.MLX5QPFlagUARPageIndex|abi.MLX5QPFlagBfregIndex) != 0 {
		t.Errorf("static UARs: the kernel picks the register, flags %#x", q.req.Flags)
	}
	q.resp.BfregIndex = 6
	if err := q.Created(nil, 1, 1, provider.QPInit{}); err != nil || q.bf != c.bfs[6] {
		t.Errorf("Created: %v, register %p want %p", err, q.bf, c.bfs[6])
	}
	p2, _ := c.NewQP(provider.QPInit{Type: abi.QPTypeRC, MaxSendWr: 1, MaxSendSGE: 1})
	p2.(*QP).resp.BfregIndex = 99
	if err := p2.Created(nil, 1, 2, provider.QPInit{}); err == nil {
		t.Errorf("a bfreg index beyond the mapped registers was accepted")
	}
}

// TestClockPages: the core clock and clock info pages are mapped where
// the response says, and the clock reads big endian halves.
func TestClockPages(t *testing.T) {
	resp := testResp()
	resp.HCACoreClockOffset = 0x1238
	c, k := newTestContext(t, resp)
	clk := k.maps[abi.MLX5MmapOffset(abi.MLX5MmapCoreClock, 0, 4096)]
	if clk == nil || c.clockInfo == nil {
		t.Fatalf("clock pages not mapped")
	}
	copy(clk[0x238:], []byte{0, 0, 0, 1, 0x80, 0, 0, 2})
	if v, ok := c.HCACoreClock(); !ok || v != 0x0000000180000002 {
		t.Errorf("HCACoreClock = %#x, %v", v, ok)
	}
}

// TestDBRecords: records are cache-line apart, zeroed, reused after
// release, and a page is given back with its last record.
func TestDBRecords(t *testing.T) {
	a := newDBAllocator(4096, 64)
	a.allocPage = guardedAlloc(t)
	seen := map[uint64]bool{}
	var recs []dbRecord
	for i := 0; i < 64+3; i++ { // a page and a bit
		d, err := a.alloc()
		if err != nil {
			t.Fatal(err)
		}
		if d.addr()%64 != 0 || seen[d.addr()] || d.words[0] != 0 || d.words[1] != 0 {
			t.Fatalf("record %d at %#x: misaligned, reused or dirty", i, d.addr())
		}
		seen[d.addr()] = true
		d.words[0], d.words[1] = 0xffffffff, 0xffffffff
		recs = append(recs, d)
	}
	if len(a.pages) != 2 {
		t.Fatalf("%d pages for 67 records", len(a.pages))
	}
	a.release(recs[5])
	if d, _ := a.alloc(); d.addr() != recs[5].addr() || d.words[0] != 0 {
		t.Errorf("a released record is not reused zeroed")
	}
	for _, d := range recs[64:] {
		a.release(d)
	}
	if len(a.pages) != 1 {
		t.Errorf("%d pages after the second page's records were released", len(a.pages))
	}
}

// TestCompleteSendStale: completions for counters with no outstanding
// WQE are refused and retire nothing.
func TestCompleteSendStale(t *testing.T) {
	c, _ := newTestContext(t, testResp())
	q := newTestQP(t, c, provider.QPInit{Type: abi.QPTypeRC, MaxSendWr: 8, MaxSendSGE: 1})
	wr := provider.SendWR{Opcode: provider.WRSend}
	if err := q.PostSend([]provider.SendWR{wr, wr, wr}); err != nil {
		t.Fatal(err)
	}
	// WQEs at counters 0, 1, 2 (one block each).
	for _, bad := range []uint16{3, 100, 0xffff} {
		if _, _, _, ok := q.sq.completeSend(bad, nil); ok {
			t.Errorf("completeSend(%d) accepted a counter never posted", bad)
		}
	}
	if _, _, _, ok := q.sq.completeSend(1, nil); !ok {
		t.Fatal("completeSend(1)")
	}
	if q.sq.tail != 2 {
		t.Errorf("tail %d after completing the second WQE, want 2", q.sq.tail)
	}
	if _, _, _, ok := q.sq.completeSend(0, nil); ok {
		t.Errorf("completeSend(0) after 1: a retired WQE completed again")
	}
	if _, _, _, ok := q.sq.completeSend(2, nil); !ok {
		t.Errorf("completeSend(2)")
	}
}
