package mlx5

import (
	"testing"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
)

// The post benchmarks run on plain memory standing in for the UAR page
// (the doorbell and BlueFlame stores are the same instructions either
// way). After each post the queue is emptied by hand, as a completion
// would, so the numbers are the post path alone.

func benchQP(b *testing.B) *QP {
	c, _ := newTestContext(b, testResp())
	return newTestQP(b, c, provider.QPInit{Type: abi.QPTypeRC, MaxSendWr: 64, MaxSendSGE: 1, MaxInlineData: 0})
}

func (sq *sendQueue) retireAll() {
	sq.tail = sq.head
	sq.tailBB = sq.curPost
}

// BenchmarkPostRDMAWrite: one signaled 1-SGE RDMA WRITE per op (a
// BlueFlame copy, libmlx5's default for a lone WQE).
func BenchmarkPostRDMAWrite(b *testing.B) {
	q := benchQP(b)
	wrs := []provider.SendWR{{ID: 1, Opcode: provider.WRRDMAWrite, Flags: provider.SendSignaled,
		SGL: []provider.SGE{{Addr: 0x10000, Length: 64, Lkey: 1}}, RemoteAddr: 0x20000, Rkey: 2}}
	b.ReportAllocs()
	for b.Loop() {
		if err := q.PostSend(wrs); err != nil {
			b.Fatal(err)
		}
		q.sq.retireAll()
	}
}

// BenchmarkPostRDMAWriteList16: a list of 16 1-SGE RDMA WRITEs per op,
// one doorbell.
func BenchmarkPostRDMAWriteList16(b *testing.B) {
	q := benchQP(b)
	wrs := make([]provider.SendWR, 16)
	for i := range wrs {
		wrs[i] = provider.SendWR{ID: uint64(i), Opcode: provider.WRRDMAWrite, SGL: []provider.SGE{{Addr: 0x10000, Length: 64, Lkey: 1}}, RemoteAddr: 0x20000, Rkey: 2}
	}
	wrs[15].Flags = provider.SendSignaled
	b.ReportAllocs()
	for b.Loop() {
		if err := q.PostSend(wrs); err != nil {
			b.Fatal(err)
		}
		q.sq.retireAll()
	}
}

// BenchmarkPostRecv: one 1-SGE receive per op.
func BenchmarkPostRecv(b *testing.B) {
	c, _ := newTestContext(b, testResp())
	q := newTestQP(b, c, provider.QPInit{Type: abi.QPTypeRC, MaxSendWr: 1, MaxRecvWr: 64, MaxRecvSGE: 1})
	wrs := []provider.RecvWR{{ID: 1, SGL: []provider.SGE{{Addr: 0x10000, Length: 64, Lkey: 1}}}}
	b.ReportAllocs()
	for b.Loop() {
		if err := q.PostRecv(wrs); err != nil {
			b.Fatal(err)
		}
		q.rq.tail = q.rq.head
	}
}

// TestPostAllocatesNothing pins the zero-allocation fast path in the
// ordinary test run.
func TestPostAllocatesNothing(t *testing.T) {
	c, _ := newTestContext(t, testResp())
	q := newTestQP(t, c, provider.QPInit{Type: abi.QPTypeRC, MaxSendWr: 64, MaxSendSGE: 2, MaxInlineData: 64, MaxRecvWr: 16, MaxRecvSGE: 1})
	ud := newTestQP(t, c, provider.QPInit{Type: abi.QPTypeUD, MaxSendWr: 64, MaxSendSGE: 1})
	ah := testAH(t, c)
	sgl, _ := payload(t, 1, 64)
	one := []provider.SendWR{{Opcode: provider.WRRDMAWrite, SGL: sgl, RemoteAddr: 1, Rkey: 2}}
	list := make([]provider.SendWR, 16)
	for i := range list {
		list[i] = provider.SendWR{Opcode: provider.WRSend, Flags: provider.SendInline, SGL: sgl}
	}
	udWR := []provider.SendWR{{Opcode: provider.WRSend, SGL: sgl, AH: &provider.AHRef{AH: ah}, RemoteQPN: 5, RemoteQkey: 6}}
	recv := []provider.RecvWR{{SGL: sgl}}
	for name, f := range map[string]func(){
		"send":   func() { q.PostSend(one); q.sq.retireAll() },
		"list16": func() { q.PostSend(list); q.sq.retireAll() },
		"inline": func() { q.PostSend(list[:1]); q.sq.retireAll() },
		"ud":     func() { ud.PostSend(udWR); ud.sq.retireAll() },
		"recv":   func() { q.PostRecv(recv); q.rq.tail = q.rq.head },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocations per post", name, n)
		}
	}
}
