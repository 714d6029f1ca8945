package cminterop

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

// setupConns is how many connections one round of the setup benchmark
// makes (issue 11: Dial+Accept of 100 connections).
const setupConns = 100

// setupBound bounds each side of a setup benchmark (every round of it):
// a round takes well under a second, so a side still running after this
// is stuck, and is reported as such, with which side it was, instead of
// holding the VM until the test binary's own timeout.
const setupBound = 2 * time.Minute

// envCMRate names the cmrate binary (testdata/cmrate, built by make cmrate
// and carried into the VM).
const envCMRate = "GOVERBS_CMRATE"

// BenchmarkSetup measures connection setup: one op is a round of
// setupConns RC connections started at once and all ESTABLISHED on both
// sides (each side with its send and receive CQs and its QP, on the
// device's shared PD), across the veth pair
// and on one device. "rdmacm" is goverbs' Dial and Accept; "librdmacm" is
// cmrate, the same round on librdmacm in C (reported with its own clock,
// so that starting the process is not counted). Tearing a round down is
// not timed. cpu-ns/op is the process's CPU time (user and system) in a
// round, csw/op its context switches (voluntary and not); the kernel's own
// threads (the CM's MADs, rxe) are in neither.
func BenchmarkSetup(b *testing.B) {
	if !vmenv.InVM() {
		b.Skip("not in the goverbs test VM: make cmrate")
	}
	vmenv.RequireDevice(b, vmenv.RXE0)
	b.Logf("kernel %s (%s)", vmenv.KernelName(), vmenv.KernelRelease())
	port := 7600
	for _, pl := range placements {
		b.Run(pl.name+"/rdmacm", func(b *testing.B) {
			port++
			benchGo(b, port, pl.src)
		})
		b.Run(pl.name+"/librdmacm", func(b *testing.B) {
			port++
			benchC(b, port, pl.src)
		})
	}
}

func benchGo(b *testing.B, port int, src string) {
	ctx, cancel := context.WithTimeout(context.Background(), setupBound)
	defer cancel()
	qpcap := rdmacm.WithQPCap(uverbs.QPCap{MaxSendWr: 16, MaxRecvWr: 16, MaxSendSGE: 1, MaxRecvSGE: 1})
	addr := vmenv.AddrA + ":" + strconv.Itoa(port)
	l, err := rdmacm.Listen(ctx, addr, qpcap, rdmacm.WithBacklog(setupConns))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	opts := []rdmacm.Option{qpcap, rdmacm.WithSource(src), rdmacm.WithResponderResources(1), rdmacm.WithInitiatorDepth(1)}
	var cpu time.Duration
	var csw int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cpu0, csw0 := usage(b)
		clients, servers, err := goRound(ctx, l, addr, opts)
		cpu1, csw1 := usage(b)
		cpu, csw = cpu+cpu1-cpu0, csw+csw1-csw0
		b.StopTimer()
		for _, c := range append(servers, clients...) {
			c.Close()
		}
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(setupConns)*float64(b.N)/b.Elapsed().Seconds(), "conns/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(csw)/float64(b.N), "csw/op")
}

// usage returns the process's CPU time so far (user and system) and its
// context switches (voluntary and not).
func usage(b *testing.B) (time.Duration, int64) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), ru.Nvcsw + ru.Nivcsw
}

// goRound dials setupConns connections at once and accepts each as its
// request arrives, until all are established on both sides.
func goRound(ctx context.Context, l *rdmacm.Listener, addr string, opts []rdmacm.Option) (clients, servers []*rdmacm.Conn, err error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	var first error
	keep := func(c *rdmacm.Conn, err error, list *[]*rdmacm.Conn) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil && first == nil {
			first = err
		}
		if c != nil {
			*list = append(*list, c)
		}
	}
	wg.Add(1)
	go func() { // the acceptor: each request accepted on its own goroutine
		defer wg.Done()
		for i := 0; i < setupConns; i++ {
			r, err := l.Request(ctx)
			if err != nil {
				keep(nil, err, &servers)
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := r.Accept(ctx)
				keep(c, err, &servers)
			}()
		}
	}()
	for i := 0; i < setupConns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := rdmacm.Dial(ctx, addr, opts...)
			keep(c, err, &clients)
		}()
	}
	wg.Wait()
	return clients, servers, first
}

func benchC(b *testing.B, port int, src string) {
	bin := os.Getenv(envCMRate)
	if bin == "" {
		b.Skipf("%s is not set: make cmrate builds cmrate and runs this benchmark with it", envCMRate)
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-a", vmenv.AddrA, "-I", src, "-p", strconv.Itoa(port),
		"-c", strconv.Itoa(setupConns), "-n", strconv.Itoa(b.N))
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		b.Fatalf("%s: still running after %v, killed (librdmacm's side is stuck): %v\n%s", bin, setupBound, err, out)
	}
	if err != nil {
		b.Fatalf("%s: %v\n%s", bin, err, out)
	}
	// "cmrate: conns 100 rounds N setup_ns T cpu_ns C csw S"
	f := strings.Fields(string(out))
	if len(f) != 11 || f[0] != "cmrate:" || f[5] != "setup_ns" || f[7] != "cpu_ns" || f[9] != "csw" {
		b.Fatalf("cmrate printed %q", out)
	}
	ns, err := strconv.ParseInt(f[6], 10, 64)
	if err != nil {
		b.Fatalf("cmrate printed %q: %v", out, err)
	}
	cpu, err := strconv.ParseInt(f[8], 10, 64)
	if err != nil {
		b.Fatalf("cmrate printed %q: %v", out, err)
	}
	b.ReportMetric(float64(ns)/float64(b.N), "ns/op")
	b.ReportMetric(float64(setupConns)*float64(b.N)/(float64(ns)/1e9), "conns/s")
	csw, err := strconv.ParseInt(f[10], 10, 64)
	if err != nil {
		b.Fatalf("cmrate printed %q: %v", out, err)
	}
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(csw)/float64(b.N), "csw/op")
}

// TestCMRateOutput keeps benchC's reading of cmrate's line in step with
// the program.
func TestCMRateOutput(t *testing.T) {
	src, err := os.ReadFile("testdata/cmrate/cmrate.c")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%q", "cmrate: conns %d rounds %d setup_ns %lld cpu_ns %lld csw %lld\n"); !strings.Contains(string(src), want) {
		t.Errorf("cmrate.c no longer prints %s", want)
	}
}
