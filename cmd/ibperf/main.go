// Command ibperf is perftest's eight verbs benchmarks (ib_write_lat,
// ib_write_bw, ib_send_lat, ib_send_bw, ib_read_lat, ib_read_bw,
// ib_atomic_lat, ib_atomic_bw) in one static binary with no libibverbs,
// wire-compatible with perftest 4.5 (Debian 12's 4.5-0.17, which calls
// itself 6.06), so either side may be the C tool:
//
//	ibperf write_lat -d rxe0 -x 1              # server: waits for one client
//	ibperf write_lat -d rxe0 -x 1 10.99.0.1    # client
//	ib_write_lat -d rxe0 -x 1 10.99.0.1        # ... or perftest's client
//
// A link named ib_<test> runs that test without the test operand.
//
// The options are perftest's (see -h): -d -i -x -p -s -n -a -c RC|UC|UD
// -q -t -r -l/--post_list -Q/--cq-mod -I -o -A -u -S -m -N -F -R -b -e
// -D -f --run_infinitely --report_gbits. Output: perftest's test header,
// addresses and result table, with the same columns and number formats.
//
// -b runs a bandwidth test both ways: both sides send (send_bw: and
// receive) and each prints the sum of both directions. -e waits for
// completions on a completion channel instead of polling (not the write
// tests; not with -D). --run_infinitely (bandwidth tests; not send_bw -b)
// sends until the program is stopped and prints the bandwidth of the last
// -D seconds (default 5) every -D seconds; the server of a one-way
// write_bw, read_bw or atomic_bw prints nothing, as perftest's does.
// perftest refuses the same combinations, with the same words.
//
// -R is perftest's rdma_cm mode: the exchange runs over an rdma_cm
// connection to the server's RDMA address (ibperf send_bw -R -d rxe0
// 10.99.0.1) and the test QPs are connected by the connection manager
// (goverbs' rdmacm), RC or UD.
//
// Where it differs from perftest, on purpose:
//
//   - Bandwidth tests given neither --post_list nor --cq-mod batch: 32
//     messages per doorbell (capped at half the TX depth) and one completion
//     per list. On rxe every doorbell is a system call, so this is most of
//     the small-message rate. Given either option, ibperf posts and signals
//     exactly as perftest does.
//   - Writes and sends of up to 220 bytes go inline unless -I says
//     otherwise (perftest inlines nothing on devices it does not know, rxe
//     among them).
//   - Busy polling runs on an ordinary goroutine that yields every 2 ms,
//     so that the scheduler never preempts it; --go-lock-thread locks it to
//     its OS thread, and --go-no-yield spins without yielding, both slower
//     (docs/performance.md has the figures).
//   - A client retries the connection for 5 s while nothing listens.
//   - IBPERF_CPUPROFILE=<file> writes a CPU profile of the run.
//   - Numbers are checked: "-n 12abc" is refused, where strtol would take
//     12. Options perftest has and ibperf does not implement (completion
//     vectors, multicast, raw Ethernet, ...) are recognized and refused by
//     name (-z, the rdma_cm exchange with QPs connected by hand, among
//     them).
//   - -e gives each run's CQs one completion channel, as perftest does,
//     but a loop waiting for one CQ takes any other CQ's event as a
//     reason to poll again, where perftest polls once per event.
//   - Duration runs (-D, -f) time their phases with Go timers read by the
//     loops (perftest uses SIGALRM). A write_lat side whose clock ends
//     first goes on answering the peer's writes for up to a second, so
//     that a perftest peer, whose spin never re-reads its clock, ends.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
)

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

// run is the program: args[0] is the program name. SIGINT or SIGTERM stops
// it wherever it waits, and everything it opened is closed.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runContext(ctx, args, stdout, stderr, nil)
}

// runContext is run until ctx ends; ready, if not nil, is called once a
// server listens.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer, ready func(net.Addr)) int {
	cfg, notes, err := parseArgs(args)
	switch {
	case errors.Is(err, errHelp):
		usage(stdout, cfg.prog)
		return 0
	case errors.Is(err, errVersion):
		fmt.Fprintf(stdout, "Version: %s\n", perftestVersion)
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "%s: %v\n", cfg.prog, err)
		usage(stdout, cfg.prog)
		return 1
	}
	for _, n := range notes {
		fmt.Fprint(stdout, resultLine, n, "\n")
	}
	p := &perf{cfg: &cfg, stdout: stdout, stderr: stderr, ready: ready}
	stopProfile := startProfile(stderr)
	err = p.run(ctx)
	stopProfile()
	if cerr := p.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 1
	}
	return 0
}

// profileEnv names a file for a CPU profile of the run (what
// internal/perfcompare's -profile collects in the test VM).
const profileEnv = "IBPERF_CPUPROFILE"

// startProfile starts the CPU profile profileEnv asks for and returns what
// stops it.
func startProfile(stderr io.Writer) func() {
	path := os.Getenv(profileEnv)
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(stderr, "ibperf: %s: %v\n", profileEnv, err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintf(stderr, "ibperf: %s: %v\n", profileEnv, err)
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
