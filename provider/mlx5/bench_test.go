package mlx5

import (
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/goverbs/goverbs/internal/provider"
)

// Benchmarks of the data path on the host. The HCA's part is played by
// the benchmark: the CQEs of the WQEs it is about to post are written
// ahead, a whole pass of the ring at a time with the timer stopped, so
// that the time measured is the provider's alone (the HCA model decodes
// each WQE into fresh slices and would time itself instead). The doorbell
// path is the real one: the doorbell record, the BlueFlame copy of the WQE
// (libmlx5's choice for a single WQE) with its fences, into a UAR page of
// ordinary memory.

// BenchmarkPostPollRDMAWrite posts a signaled 1-SGE RDMA WRITE and polls
// its completion: BenchmarkVsLibmlx5's write case.
func BenchmarkPostPollRDMAWrite(b *testing.B) { benchWrite(b, loopOptions{}) }

// hcaComplete writes the template CQE at consumer index i for WQE
// counter ctr, as the HCA would: the body, then the word with the owner
// bit.
func hcaComplete(cq *CQ, tmpl *[cqeSize]byte, i uint32, ctr uint16) {
	e := cq.entry(i)
	copy(e[:cqeOffTrailer], tmpl[:cqeOffTrailer])
	trailer := uint32(ctr)<<16 | uint32(tmpl[cqeOffOpOwn]&^cqeOwnerMask) | passParity(i, cq.ncqe)
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&e[cqeOffTrailer])), be32(trailer))
}

// benchSQ completes any counter: the poll benchmarks measure the CQ's
// side.
type benchSQ struct{ n uint64 }

func (s *benchSQ) completeSend(uint16, []byte) (uint64, provider.WCOpcode, provider.WCStatus, bool) {
	s.n++
	return s.n, 0, provider.WCSuccess, true
}

func benchPoll(b *testing.B, batch int) {
	const ncqe = 4096
	c := newTestCQ(b, ncqe)
	if err := c.attach(testQPN, &benchSQ{}, nil); err != nil {
		b.Fatal(err)
	}
	tmpl := cqeFields{opcode: cqeReq, sendOp: reqOpRDMAWrite, qpn: testQPN}.encode(0, ncqe)
	fill := func() { // one pass of the ring ahead of the consumer
		for k := uint32(0); k < ncqe; k++ {
			hcaComplete(c.CQ, &tmpl, c.cons+k, uint16(k))
		}
	}
	fill()
	wcs := make([]provider.WC, batch)
	perPass := ncqe / batch
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%perPass == 0 && i > 0 {
			b.StopTimer()
			fill()
			b.StartTimer()
		}
		if n, err := c.Poll(wcs); n != batch || err != nil {
			b.Fatal(n, err)
		}
	}
}

// BenchmarkPoll1 and BenchmarkPoll16 poll 1 and 16 requester completions
// per call; BenchmarkPollEmpty polls an empty CQ.
func BenchmarkPoll1(b *testing.B)  { benchPoll(b, 1) }
func BenchmarkPoll16(b *testing.B) { benchPoll(b, 16) }

func BenchmarkPollEmpty(b *testing.B) {
	c := newTestCQ(b, 64)
	wcs := make([]provider.WC, 16)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if n, err := c.Poll(wcs); n != 0 || err != nil {
			b.Fatal(n, err)
		}
	}
}
