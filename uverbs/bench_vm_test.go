package uverbs

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/leakcheck"
	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

// Data path benchmarks on rxe, run in the test VM:
//
//	go test -exec "$PWD/bin/vmexec -kernel 6.1" -run '^$' -bench . -benchtime=20000x ./uverbs/
//
// (A fixed count keeps the run short: every 1024 polled completions cost a
// refill of 1024 messages through rxe, tens of milliseconds under TCG, so
// the default -benchtime=1s, which targets a second of polling, takes
// minutes.)
//
// Besides ns/op and allocs/op each reports syscalls/op, counted by the
// benchmark itself: a perf counter on the raw_syscalls:sys_enter
// tracepoint, opened for the benchmark's own OS thread (the goroutine is
// locked to it), enabled only while the timer runs. Every system call the
// posting or polling code makes happens on that thread, so each one is
// counted; the only extra entry a measured stretch sees is the
// PERF_EVENT_IOC_DISABLE ioctl that ends it, which the counter calibrates
// and subtracts. Work between stretches (waiting for completions, making a
// fresh queue) runs with the counter disabled and the timer stopped.
// Targets: one system call per posted list (the doorbell write), none per
// receive post or poll, no allocation anywhere.

// benchSyscalls counts the system calls of the calling OS thread: a perf
// group whose leader counts every sys_enter and whose members count single
// system calls (a tracepoint filter on the id), so the report can say what
// the calls were.
type benchSyscalls struct {
	leader   int
	members  []benchSyscall
	overhead []uint64 // per counter (leader first): what an empty stretch adds
	base     []uint64 // the counts after calibration
	buf      []byte
}

type benchSyscall struct {
	name string
	nr   int
	fd   int
}

// benchWatched are the system calls counted one by one.
var benchWatched = []struct {
	name string
	nr   int
}{
	{"write", unix.SYS_WRITE}, {"ioctl", unix.SYS_IOCTL}, {"futex", unix.SYS_FUTEX}, {"rt_sigreturn", unix.SYS_RT_SIGRETURN},
	{"sched_yield", unix.SYS_SCHED_YIELD}, {"nanosleep", unix.SYS_NANOSLEEP}, {"mmap", unix.SYS_MMAP}, {"madvise", unix.SYS_MADVISE},
	{"epoll_pwait", unix.SYS_EPOLL_PWAIT}, {"rt_sigprocmask", unix.SYS_RT_SIGPROCMASK}, {"sigaltstack", unix.SYS_SIGALTSTACK},
	{"tgkill", unix.SYS_TGKILL}, {"getpid", unix.SYS_GETPID}, {"clock_gettime", unix.SYS_CLOCK_GETTIME},
}

// tracepointID finds the id of a tracepoint, mounting tracefs if the
// guest has not.
func tracepointID(name string) (uint64, error) {
	var firstErr error
	for _, dir := range []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"} {
		b, err := os.ReadFile(dir + "/events/" + name + "/id")
		if err == nil {
			return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if err := unix.Mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, ""); err != nil && !errors.Is(err, unix.EBUSY) {
		return 0, fmt.Errorf("%v; mount tracefs: %w", firstErr, err)
	}
	b, err := os.ReadFile("/sys/kernel/tracing/events/" + name + "/id")
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}

// benchKeeper is a sys_enter event on the main thread, opened once and
// never closed. Registering the first perf user of the syscall tracepoint
// patches kernel text (a static key, through int3), and unregistering the
// last one patches it back; under QEMU TCG that patching occasionally
// livelocked a 6.1 guest in syscall_trace_enter (soft lockups on both
// CPUs, seen twice in a dozen runs). With the keeper open, the per-thread
// counters each benchmark opens and closes never move the refcount
// through zero, so the text is patched once.
var benchKeeper struct {
	once sync.Once
	fd   int
	err  error
}

// newBenchSyscalls opens the counters on the current thread; the caller
// must have locked its goroutine to the thread.
func newBenchSyscalls(b *testing.B) *benchSyscalls {
	b.Helper()
	id, err := tracepointID("raw_syscalls/sys_enter")
	if err != nil {
		b.Fatalf("syscall counter: %v", err)
	}
	benchKeeper.once.Do(func() {
		attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_TRACEPOINT, Config: id}
		attr.Size = uint32(unsafe.Sizeof(attr))
		benchKeeper.fd, benchKeeper.err = unix.PerfEventOpen(&attr, os.Getpid(), -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
		if benchKeeper.err == nil {
			leakcheck.Keep(benchKeeper.fd)
		}
	})
	if benchKeeper.err != nil {
		b.Fatalf("perf_event_open(raw_syscalls:sys_enter) on the main thread: %v", benchKeeper.err)
	}
	open := func(group int, filter string) int {
		attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_TRACEPOINT, Config: id}
		attr.Size = uint32(unsafe.Sizeof(attr))
		if group < 0 {
			attr.Bits = unix.PerfBitDisabled
			attr.Read_format = unix.PERF_FORMAT_GROUP
		}
		fd, err := unix.PerfEventOpen(&attr, 0, -1, group, unix.PERF_FLAG_FD_CLOEXEC)
		if err != nil {
			b.Fatalf("perf_event_open(raw_syscalls:sys_enter %q): %v", filter, err)
		}
		b.Cleanup(func() { unix.Close(fd) })
		if filter != "" {
			f, _ := unix.BytePtrFromString(filter)
			if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.PERF_EVENT_IOC_SET_FILTER, uintptr(unsafe.Pointer(f))); e != 0 {
				b.Fatalf("perf filter %q: %v", filter, e)
			}
		}
		return fd
	}
	c := &benchSyscalls{leader: open(-1, "")}
	for _, w := range benchWatched {
		c.members = append(c.members, benchSyscall{w.name, w.nr, open(c.leader, fmt.Sprintf("id == %d", w.nr))})
	}
	c.buf = make([]byte, 8*(2+len(c.members)))
	// Calibrate: an empty stretch costs the disabling ioctl alone.
	c.overhead = nil
	for i := 0; i < 5; i++ {
		before := c.read(b)
		c.ioctl(unix.PERF_EVENT_IOC_ENABLE)
		c.ioctl(unix.PERF_EVENT_IOC_DISABLE)
		after := c.read(b)
		for k := range after {
			d := after[k] - before[k]
			if len(c.overhead) <= k {
				c.overhead = append(c.overhead, d)
			}
			c.overhead[k] = min(c.overhead[k], d)
		}
	}
	if c.overhead[0] != 1 {
		b.Logf("syscall counter: an empty stretch counts %d", c.overhead[0])
	}
	c.base = c.read(b)
	return c
}

func (c *benchSyscalls) ioctl(req uintptr) {
	unix.Syscall(unix.SYS_IOCTL, uintptr(c.leader), req, unix.PERF_IOC_FLAG_GROUP)
}

// read returns the group's counts, leader first.
func (c *benchSyscalls) read(b *testing.B) []uint64 {
	n, err := unix.Read(c.leader, c.buf)
	if err != nil || n != len(c.buf) {
		b.Fatalf("read syscall counters: %d, %v", n, err)
	}
	out := make([]uint64, 1+len(c.members))
	for i := range out {
		out[i] = binary.LittleEndian.Uint64(c.buf[8*(i+1):])
	}
	return out
}

// start begins a measured stretch together with the timer.
func (c *benchSyscalls) start(b *testing.B) {
	b.StartTimer()
	c.ioctl(unix.PERF_EVENT_IOC_ENABLE)
}

// stop ends a stretch; the counts so far are kept.
func (c *benchSyscalls) stop(b *testing.B) {
	c.ioctl(unix.PERF_EVENT_IOC_DISABLE)
	b.StopTimer()
}

// report adds syscalls/op (every system call of the thread) and
// doorbells/op (write calls), and logs the other calls by name.
func (c *benchSyscalls) report(b *testing.B, stretches int) {
	counts := c.read(b)
	per := make([]float64, len(counts))
	for k, n := range counts {
		n -= c.base[k]
		sub := min(n, uint64(stretches)*c.overhead[k])
		per[k] = float64(n-sub) / float64(b.N)
	}
	b.ReportMetric(per[0], "syscalls/op")
	b.ReportMetric(per[1], "writes/op")
	var parts []string
	rest := per[0]
	for i, m := range c.members {
		if per[i+1] > 0 {
			parts = append(parts, fmt.Sprintf("%s %.4g", m.name, per[i+1]))
		}
		rest -= per[i+1]
	}
	if rest > 1e-9 {
		parts = append(parts, fmt.Sprintf("other %.4g", rest))
	}
	if len(parts) == 0 {
		parts = []string{"none"}
	}
	b.Logf("b.N=%d: syscalls per op by kind: %s", b.N, strings.Join(parts, ", "))
}

// benchPair is a connected RC pair on rxe0 with registered buffers; b's
// receive CQ has a completion channel.
type benchPair struct {
	d      *itDev
	a, b   *QP
	mem    *udMem
	rcq    *CQ // b's receive CQ
	ch     *CompChannel
	sendWR int
}

func newBenchPair(b *testing.B, sendWR, recvWR int) *benchPair {
	b.Helper()
	vmenv.RequireRXE(b)
	c, err := Open(vmenv.RXE0, WithTransport(TransportAuto))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	p := &benchPair{sendWR: sendWR}
	d := &itDev{name: vmenv.RXE0, c: c}
	if d.pd, err = c.AllocPD(); err != nil {
		b.Fatal(err)
	}
	if d.scq, err = c.CreateCQ(2*sendWR+64, nil); err != nil {
		b.Fatal(err)
	}
	if p.ch, err = c.NewCompChannel(); err != nil {
		b.Fatal(err)
	}
	if p.rcq, err = c.CreateCQ(2*recvWR+64, &CQOptions{Channel: p.ch}); err != nil {
		b.Fatal(err)
	}
	d.rcq = p.rcq
	if d.gid, err = c.RecommendedGID(1); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		d.scq.Close()
		p.rcq.Close()
		p.ch.Close()
		d.pd.Close()
	})
	p.d = d
	mk := func() *QP {
		qp, err := d.pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: d.scq, RecvCQ: p.rcq,
			Cap: QPCap{MaxSendWr: uint32(sendWR), MaxRecvWr: uint32(recvWR), MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64}})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { qp.Close() })
		return qp
	}
	p.a, p.b = mk(), mk()
	for _, x := range [][2]*QP{{p.a, p.b}, {p.b, p.a}} {
		if err := x[0].Connect(ConnectAttr{SGIDIndex: d.gid.Index, Access: AccessLocalWrite | AccessRemoteWrite,
			Remote: Endpoint{QPN: x[1].QPN(), GID: d.gid.GID}}); err != nil {
			b.Fatal(err)
		}
	}
	buf, err := AllocBuffer(1 << 16)
	if err != nil {
		b.Fatal(err)
	}
	mr, err := d.pd.RegisterBuffer(buf, 0, 1<<16, AccessLocalWrite|AccessRemoteWrite)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { mr.Close(); buf.Close() })
	p.mem = &udMem{buf: buf, mr: mr, b: buf.Bytes()}
	return p
}

// benchWait polls cq (timer stopped) until the completion with id arrives;
// every completion must be a success.
func benchWait(b *testing.B, cq *CQ, id uint64) {
	var wcs [64]WC
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := cq.Poll(wcs[:])
		if err != nil {
			b.Fatal(err)
		}
		for _, wc := range wcs[:n] {
			if wc.Status != WCSuccess {
				b.Fatalf("completion %+v (%v)", wc, wc.Status)
			}
			if wc.ID == id {
				return
			}
		}
		if n == 0 {
			if time.Now().After(deadline) {
				b.Fatalf("completion %d did not arrive", id)
			}
			time.Sleep(20 * time.Microsecond)
		}
	}
}

// BenchmarkPostSend posts 8-byte RDMA writes to the peer, one work request
// per post or lists of 16 (one doorbell each). Every 512 work requests the
// last is signaled and its completion awaited outside the measurement.
func BenchmarkPostSend(b *testing.B) {
	for _, per := range []int{1, 16} {
		b.Run(fmt.Sprintf("list=%d", per), func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			const batch = 512 // work requests between waits
			p := newBenchPair(b, 1024, 16)
			sys := newBenchSyscalls(b)
			wr := SendWR{ID: 1, Opcode: WRRDMAWrite, SGL: []SGE{p.mem.sge(0, 8)}, RemoteAddr: p.mem.mr.Addr() + 4096, Rkey: p.mem.mr.Rkey()}
			list := make([]SendWR, per)
			last := make([]SendWR, per)
			for i := range list {
				list[i], last[i] = wr, wr
			}
			last[per-1].ID, last[per-1].Flags = 2, SendSignaled
			lists := batch / per
			b.ReportAllocs()
			b.ResetTimer()
			b.StopTimer()
			stretches := 0
			sys.start(b)
			stretches++
			for i := 0; i < b.N; i++ {
				l := list
				end := (i+1)%lists == 0 || i == b.N-1
				if end {
					l = last
				}
				if err := p.a.PostSend(l); err != nil {
					sys.stop(b)
					b.Fatal(err)
				}
				if end {
					sys.stop(b)
					benchWait(b, p.d.scq, 2)
					if i != b.N-1 {
						sys.start(b)
						stretches++
					}
				}
			}
			sys.report(b, stretches)
			b.ReportMetric(float64(per), "WRs/op")
		})
	}
}

// BenchmarkPostRecv posts receive work requests (one per post, or lists
// of 16) on a QP in INIT; when its receive queue is full a fresh QP takes
// over, outside the measurement.
func BenchmarkPostRecv(b *testing.B) {
	for _, per := range []int{1, 16} {
		b.Run(fmt.Sprintf("list=%d", per), func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			p := newBenchPair(b, 16, 16)
			sys := newBenchSyscalls(b)
			fresh := func() *QP {
				qp, err := p.d.pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: p.d.scq, RecvCQ: p.rcq,
					Cap: QPCap{MaxSendWr: 1, MaxRecvWr: 4096, MaxSendSGE: 1, MaxRecvSGE: 1}})
				if err != nil {
					b.Fatal(err)
				}
				if err := qp.Modify(&QPAttr{State: QPStateInit, Port: 1, AccessFlags: AccessLocalWrite},
					QPAttrState|QPAttrPort|QPAttrPkeyIndex|QPAttrAccessFlags); err != nil {
					b.Fatal(err)
				}
				return qp
			}
			qp := fresh()
			room := int(qp.Cap().MaxRecvWr) / per
			list := make([]RecvWR, per)
			for i := range list {
				list[i] = RecvWR{ID: uint64(i), SGL: []SGE{p.mem.sge(i*64, 64)}}
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.StopTimer()
			stretches := 1
			sys.start(b)
			left := room
			for i := 0; i < b.N; i++ {
				if left == 0 {
					sys.stop(b)
					qp.Close()
					qp = fresh()
					left = room
					sys.start(b)
					stretches++
				}
				if err := qp.PostRecv(list); err != nil {
					sys.stop(b)
					b.Fatal(err)
				}
				left--
			}
			sys.stop(b)
			qp.Close()
			sys.report(b, stretches)
			b.ReportMetric(float64(per), "WRs/op")
		})
	}
}

// BenchmarkPoll polls completions that are already in the CQ: 1 or 16 per
// call, or none (an empty CQ). The CQ is refilled outside the measurement
// with 1024 zero-byte sends into posted receives, the last one solicited:
// the solicited event on the armed CQ says all 1024 are there.
func BenchmarkPoll(b *testing.B) {
	for _, per := range []int{0, 1, 16} {
		name := fmt.Sprintf("wcs=%d", per)
		if per == 0 {
			name = "empty"
		}
		b.Run(name, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			const fill = 1024
			p := newBenchPair(b, 2*fill, 2*fill)
			sys := newBenchSyscalls(b)
			recvs := make([]RecvWR, 64)
			for i := range recvs {
				recvs[i] = RecvWR{ID: uint64(i), SGL: []SGE{p.mem.sge(i*64, 64)}}
			}
			sends := make([]SendWR, 16)
			for i := range sends {
				sends[i] = SendWR{ID: 7, Opcode: WRSend}
			}
			lastSends := make([]SendWR, 16)
			copy(lastSends, sends)
			lastSends[15] = SendWR{ID: 8, Opcode: WRSend, Flags: SendSignaled | SendSolicited}
			refill := func() {
				for i := 0; i < fill/len(recvs); i++ {
					if err := p.b.PostRecv(recvs); err != nil {
						b.Fatal(err)
					}
				}
				if err := p.rcq.RequestNotify(true); err != nil {
					b.Fatal(err)
				}
				for i := 0; i < fill/16; i++ {
					l := sends
					if i == fill/16-1 {
						l = lastSends
					}
					if err := p.a.PostSend(l); err != nil {
						b.Fatal(err)
					}
				}
				benchWait(b, p.d.scq, 8)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				cq, err := p.ch.Wait(ctx)
				cancel()
				if err != nil {
					b.Fatalf("waiting for the solicited event: %v", err)
				}
				cq.AckEvents(1)
			}
			wcs := make([]WC, 16)
			ask := per
			if per == 0 {
				ask = 16 // an empty CQ asked for 16
			}
			left := 0
			b.ReportAllocs()
			b.ResetTimer()
			b.StopTimer()
			stretches := 0
			started := false
			for i := 0; i < b.N; i++ {
				if per > 0 && left < per {
					if started {
						sys.stop(b)
					}
					// Drain what is left, then refill.
					for left > 0 {
						n, _ := p.rcq.Poll(wcs[:1])
						left -= n
					}
					refill()
					left = fill
					sys.start(b)
					stretches++
					started = true
				} else if !started {
					sys.start(b)
					stretches++
					started = true
				}
				n, err := p.rcq.Poll(wcs[:ask])
				if err != nil || n != per {
					sys.stop(b)
					b.Fatalf("Poll of %d = %d, %v", per, n, err)
				}
				left -= n
				for _, wc := range wcs[:n] {
					if wc.Status != WCSuccess || wc.Opcode != WCRecv {
						sys.stop(b)
						b.Fatalf("completion %+v", wc)
					}
				}
			}
			sys.stop(b)
			sys.report(b, stretches)
		})
	}
}

// BenchmarkQPSetup times the control path of one RC QP on rxe, phase by
// phase (the timer runs only around the phase named): create (CREATE_QP
// and mapping its queues), connect (Connect: INIT, RTR, RTS) and destroy
// (DESTROY_QP and unmapping). allocs/op is the Go heap's share of each;
// the goal is few and fixed, none of them proportional to the work
// already done.
//
//	go test -exec "$PWD/bin/vmexec -kernel 6.12" -run '^$' -bench QPSetup -benchtime=200x ./uverbs/
func BenchmarkQPSetup(b *testing.B) {
	for _, tr := range []struct {
		name string
		t    Transport
	}{{"ioctl", TransportIoctl}, {"write", TransportWrite}} {
		for _, phase := range []string{"create", "connect", "destroy"} {
			b.Run(tr.name+"/"+phase, func(b *testing.B) {
				f := newQPFixture(b, tr.t)
				// The peer every measured QP connects to (rxe checks
				// nothing of the remote end at RTR).
				peer := f.qp(b, QPTypeRC)
				attr := QPInitAttr{Type: QPTypeRC, SendCQ: f.cq, RecvCQ: f.cq,
					Cap: QPCap{MaxSendWr: 64, MaxRecvWr: 64, MaxSendSGE: 1, MaxRecvSGE: 1}}
				conn := ConnectAttr{SGIDIndex: f.gid.Index, MTU: MTU1024, Access: AccessLocalWrite | AccessRemoteWrite,
					Remote: Endpoint{QPN: peer.QPN(), GID: f.gid.GID}}
				// Every phase runs each round; the timer runs only around
				// the one measured.
				step := func(name string, f func() error) {
					if name == phase {
						b.StartTimer()
					}
					err := f()
					if name == phase {
						b.StopTimer()
					}
					if err != nil {
						b.Fatalf("%s: %v", name, err)
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				b.StopTimer()
				for range b.N {
					var qp *QP
					step("create", func() (err error) { qp, err = f.pd.CreateQP(attr); return err })
					step("connect", func() error { return qp.Connect(conn) })
					step("destroy", qp.Close)
				}
			})
		}
	}
}
