package mlx5

import (
	"runtime"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
)

// BenchmarkVsLibmlx5 runs the data path on the shapes that
// testdata/libmlx5/bench.c times on rdma-core's libmlx5 (over the same fake
// kernel as the golden vectors); internal/mlx5bench runs both and prints
// Go/C. Each case and its C twin use the same settings: a 4096-entry CQ,
// queue pairs with loopCaps (poll16: 4096 send WRs of 1 SGE), 64-byte
// payloads, one untimed pass of the CQ ring first, and CQEs written ahead a
// ring pass at a time with the clock stopped, so that only the provider is
// timed. Besides ns/op (wall time) each reports cpu-ns/op, the CPU time
// of the benchmark's thread over the timed part: on a shared host a
// process is descheduled for part of any wall-clock interval, and how much
// depends on how it sleeps (the Go benchmark sleeps in every StopTimer,
// which the scheduler rewards; the C loop never does), so the comparison
// uses CPU time, which both sides measure the same way.
//
//	write     post a signaled 1-SGE RDMA WRITE, poll its completion
//	inline64  post a signaled 64-byte inline SEND, poll its completion
//	ud        post a signaled 1-SGE UD SEND, poll its completion
//	list16    post a list of 16 1-SGE RDMA WRITEs (the last signaled), poll one completion
//	poll16    poll 16 completions (their WQEs posted with the clock stopped)
//	write-solo  write on a single-threaded CQ and send queue (C: libmlx5 under MLX5_SINGLE_THREADED=1)
func BenchmarkVsLibmlx5(b *testing.B) {
	b.Run("write", func(b *testing.B) { benchWrite(b, loopOptions{}) })
	b.Run("write-solo", func(b *testing.B) { benchWrite(b, loopOptions{solo: true}) })
	b.Run("inline64", func(b *testing.B) {
		p := newLoopPair(b, 4095, loopCaps, 4096)
		benchPostPoll(b, p.a.qp, p.a.cq, []provider.SendWR{{ID: 7, Opcode: provider.WRSend,
			Flags: provider.SendSignaled | provider.SendInline, SGL: []provider.SGE{p.a.sge(0, 64)}}}, reqOpSend)
	})
	b.Run("ud", func(b *testing.B) {
		c := loopContext(b)
		cq, _ := loopCQ(b, c, 4095, 0x80)
		qp := benchNewQP(b, c, cq, abi.QPTypeUD, loopCaps)
		mem := make([]byte, 4096)
		benchPostPoll(b, qp, cq, []provider.SendWR{{ID: 7, Opcode: provider.WRSend, Flags: provider.SendSignaled,
			SGL: []provider.SGE{sgeOf(mem[:64], 0x1a1a)}, AH: &provider.AHRef{AH: testAH(b, c)}, RemoteQPN: 5, RemoteQkey: 6}}, reqOpSend)
	})
	b.Run("list16", func(b *testing.B) {
		p := newLoopPair(b, 4095, loopCaps, 4096)
		wrs := make([]provider.SendWR, 16)
		for i := range wrs {
			wrs[i] = provider.SendWR{ID: uint64(i), Opcode: provider.WRRDMAWrite,
				SGL: []provider.SGE{p.a.sge(0, 64)}, RemoteAddr: p.b.addr(0), Rkey: p.b.key}
		}
		wrs[15].Flags = provider.SendSignaled
		benchPostPoll(b, p.a.qp, p.a.cq, wrs, reqOpRDMAWrite)
	})
	b.Run("poll16", benchPollPosted)
}

func benchWrite(b *testing.B, o loopOptions) {
	p := newLoopPair(b, 4095, loopCaps, 4096, o)
	benchPostPoll(b, p.a.qp, p.a.cq, []provider.SendWR{{ID: 7, Opcode: provider.WRRDMAWrite,
		Flags: provider.SendSignaled, SGL: []provider.SGE{p.a.sge(0, 64)}, RemoteAddr: p.b.addr(0), Rkey: p.b.key}},
		reqOpRDMAWrite)
}

// benchNewQP creates a QP of type typ on cq (send and receive), in RTS as
// far as the data path is concerned.
func benchNewQP(b *testing.B, c *Context, cq *CQ, typ provider.QPType, caps provider.QPInit) *QP {
	b.Helper()
	caps.Type, caps.SendCQ, caps.RecvCQ = typ, cq, cq
	p, err := c.NewQP(caps)
	if err != nil {
		b.Fatal(err)
	}
	q := p.(*QP)
	if err := q.Created(nil, 0x1100, 0x1100, caps); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { q.Destroyed() })
	return q
}

// benchPostPoll times PostSend(wrs) + Poll of one completion: that of the
// list's last WR, its only signaled one. A first post, completed by hand,
// tells how many basic blocks a list takes, so each CQE written ahead
// names the counter of the WQE it completes.
func benchPostPoll(b *testing.B, qp *QP, cq *CQ, wrs []provider.SendWR, sendOp uint8) {
	wcs := make([]provider.WC, 1)
	tmpl := cqeFields{opcode: cqeReq, sendOp: sendOp, qpn: qp.QPN(), byteCnt: 64, srqnUIDX: qp.uidx}.encode(0, cq.ncqe)
	before := qp.sq.curPost
	if err := qp.PostSend(wrs); err != nil {
		b.Fatal(err)
	}
	step := qp.sq.curPost - before
	bb := step / uint32(len(wrs))
	// CQE j completes list j (the probe is list 0): its last WQE starts
	// bb blocks before the next list.
	fill := func(from uint32) {
		for j := from; j < from+cq.ncqe; j++ {
			hcaComplete(cq, &tmpl, j, uint16((j+1)*step-bb))
		}
	}
	fill(0)
	if n, err := cq.Poll(wcs); n != 1 || err != nil || wcs[0].Status != provider.WCSuccess {
		b.Fatal("probe completion:", n, err, wcs[0])
	}
	var clk cpuClock
	loop := func(n int, timed bool) {
		for i := 0; i < n; i++ {
			if cq.cons&(cq.ncqe-1) == 0 {
				if timed {
					clk.stop()
				}
				fill(cq.cons)
				if timed {
					clk.start()
				}
			}
			if err := qp.PostSend(wrs); err != nil {
				b.Fatal(err)
			}
			if n, err := cq.Poll(wcs); n != 1 || err != nil {
				b.Fatal(n, err)
			}
		}
	}
	clk.run(b, int(cq.ncqe), loop)
}

// benchPollPosted times Poll of 16 completions of 16 posted WRs: for each
// pass of the 4096-entry ring, with the clock stopped, 4096 signaled
// 1-SGE RDMA WRITEs are posted in lists of 16 and their CQEs written.
func benchPollPosted(b *testing.B) {
	c := loopContext(b)
	cq, _ := loopCQ(b, c, 4095, 0x80)
	qp := benchNewQP(b, c, cq, abi.QPTypeRC, provider.QPInit{MaxSendWr: 4096, MaxRecvWr: 1, MaxSendSGE: 1, MaxRecvSGE: 1})
	mem := make([]byte, 8192)
	wrs := make([]provider.SendWR, 16)
	for i := range wrs {
		wrs[i] = provider.SendWR{ID: uint64(i), Opcode: provider.WRRDMAWrite, Flags: provider.SendSignaled,
			SGL: []provider.SGE{sgeOf(mem[:64], 0x1a1a)}, RemoteAddr: addrOf(mem[4096:]), Rkey: 0x00abcd01}
	}
	tmpl := cqeFields{opcode: cqeReq, sendOp: reqOpRDMAWrite, qpn: qp.QPN(), byteCnt: 64, srqnUIDX: qp.uidx}.encode(0, cq.ncqe)
	wcs := make([]provider.WC, 16)
	per := int(cq.ncqe / 16)
	prepare := func(polls int) {
		for k := uint32(0); k < uint32(polls)*16; k++ {
			j := cq.cons + k
			hcaComplete(cq, &tmpl, j, uint16(j))
		}
		for range polls {
			if err := qp.PostSend(wrs); err != nil {
				b.Fatal(err)
			}
		}
	}
	var clk cpuClock
	loop := func(n int, timed bool) {
		for i := 0; i < n; i++ {
			if i%per == 0 {
				if timed {
					clk.stop()
				}
				prepare(min(per, n-i))
				if timed {
					clk.start()
				}
			}
			if n, err := cq.Poll(wcs); n != 16 || err != nil || wcs[15].Status != provider.WCSuccess {
				b.Fatal(n, err)
			}
		}
	}
	clk.run(b, per, loop)
}

// cpuClock adds up the CPU time of the benchmark's thread (locked to it)
// and the elapsed time between start and stop, as bench.c's timer does.
// It leaves b's timer running: testing.B's StopTimer reads the memory
// statistics, which stops the world (every ring pass here, 4096
// iterations), and the wake-ups and the other threads' work that brings
// would land in the timed part, which the C loop does not have. b's own
// ns/op therefore counts the untimed CQE writes too; the figures compared
// are cpu-ns/op and wall-ns/op, and allocs/op covers the whole loop.
type cpuClock struct {
	total, wall, t0, w0 int64
}

// run locks the goroutine to its thread, runs loop for warm untimed
// iterations, then for b.N timed ones (loop stops and starts the clock
// around its own untimed work), and reports cpu-ns/op and wall-ns/op.
func (c *cpuClock) run(b *testing.B, warm int, loop func(n int, timed bool)) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	loop(warm, false)
	b.ReportAllocs()
	b.ResetTimer()
	c.start()
	loop(b.N, true)
	c.stop()
	b.ReportMetric(float64(c.total)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(c.wall)/float64(b.N), "wall-ns/op")
}

func clockNs(id int32) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(id, &ts); err != nil {
		panic(err)
	}
	return ts.Nano()
}

func (c *cpuClock) start() {
	c.w0 = clockNs(unix.CLOCK_MONOTONIC)
	c.t0 = clockNs(unix.CLOCK_THREAD_CPUTIME_ID)
}

func (c *cpuClock) stop() {
	c.total += clockNs(unix.CLOCK_THREAD_CPUTIME_ID) - c.t0
	c.wall += clockNs(unix.CLOCK_MONOTONIC) - c.w0
}

// sgeOf is the SGE of buf (memory the Go heap keeps alive for the test;
// nothing reads it: CQEs are written ahead) under lkey.
func sgeOf(buf []byte, lkey uint32) provider.SGE {
	return provider.SGE{Addr: addrOf(buf), Length: uint32(len(buf)), Lkey: lkey}
}

func addrOf(buf []byte) uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(buf)))) }
