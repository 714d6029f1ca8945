package rxe

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
)

// Host benchmarks of the provider's own work, over fake rings: building
// WQEs, publishing indexes and copying completions out. The doorbell goes
// to /dev/null, so a post costs one cheap write(); the kernel's side is in
// uverbs' VM benchmarks.

func BenchmarkFakePostSend(b *testing.B) {
	for _, per := range []int{1, 16} {
		b.Run(fmt.Sprintf("list=%d", per), func(b *testing.B) {
			s, g, _ := newTestSQ(b, abi.QPTypeRC, 8, 1023, 2, 64)
			null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer null.Close()
			s.fd = int(null.Fd())
			list := make([]provider.SendWR, per)
			for i := range list {
				list[i] = provider.SendWR{ID: uint64(i), Opcode: provider.WRRDMAWrite, SGL: []provider.SGE{{Addr: 0x1000, Length: 8, Lkey: 1}},
					RemoteAddr: 0x2000, Rkey: 2}
			}
			b.ReportAllocs()
			for b.Loop() {
				// Play the kernel: everything posted is consumed at once.
				atomic.StoreUint32(&g.q.hdr.ConsumerIndex, atomic.LoadUint32(&g.q.hdr.ProducerIndex))
				if err := s.PostSend(list); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkFakePostRecv(b *testing.B) {
	r, g := newTestRQ(b, 1023, 2)
	list := []provider.RecvWR{{ID: 1, SGL: []provider.SGE{{Addr: 0x1000, Length: 64, Lkey: 1}}}}
	b.ReportAllocs()
	for b.Loop() {
		atomic.StoreUint32(&g.q.hdr.ConsumerIndex, atomic.LoadUint32(&g.q.hdr.ProducerIndex))
		if err := r.PostRecv(list); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFakePoll(b *testing.B) {
	for _, per := range []int{0, 1, 16} {
		b.Run(fmt.Sprintf("wcs=%d", per), func(b *testing.B) {
			g := newGuarded(b, 6, 1023)
			c := &cq{q: g.q}
			for i := uint32(0); i <= g.q.mask; i++ {
				kernelWC(g.q, i, abi.WC{WRID: uint64(i), Opcode: 128, ByteLen: 64, QPNum: 17, WCFlags: kernelWCGRH | kernelWCWithImm, Ex: 0x01000000})
			}
			wcs := make([]provider.WC, 16)
			b.ReportAllocs()
			for b.Loop() {
				// Play the kernel: per new completions since the last poll.
				atomic.StoreUint32(&g.q.hdr.ProducerIndex, (c.cons+uint32(per))&g.q.mask)
				if n, _ := c.Poll(wcs); n != per {
					b.Fatalf("Poll = %d, want %d", n, per)
				}
			}
		})
	}
}
