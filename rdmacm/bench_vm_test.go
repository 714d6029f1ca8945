package rdmacm

import (
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

// BenchmarkDialAccept measures connection setup and teardown: one Dial and
// one Accept (rxe1 to rxe0 across the veth, RC, QP in RTS on both ends)
// and both Closes per iteration.
func BenchmarkDialAccept(b *testing.B) {
	requireCM(b)
	ctx := testCtx(b, 10*time.Minute)
	l := listenA(b, ctx)
	addr := l.Addr().String()
	b.ResetTimer()
	for b.Loop() {
		got := make(chan *Conn, 1)
		go func() {
			c, err := l.Accept(ctx)
			if err != nil {
				b.Error(err)
			}
			got <- c
		}()
		c, err := Dial(ctx, addr, WithSource(vmenv.AddrB))
		if err != nil {
			b.Fatal(err)
		}
		s := <-got
		c.Close()
		if s != nil {
			s.Close()
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "conns/s")
}
