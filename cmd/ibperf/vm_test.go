package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
	"github.com/goverbs/goverbs/internal/testvm/vmproc"
)

// runTimeout bounds one side of a VM run.
const runTimeout = 120 * time.Second

// side is one program of a pair: this package's run, in process, or
// perftest's ib_<test>.
type side struct{ goSide bool }

func (s side) String() string {
	if s.goSide {
		return "go"
	}
	return "c"
}

type result struct {
	exit           int
	stdout, stderr string
}

// start runs the side in the background; ready (Go servers) is called
// once it listens.
func (s side) start(ctx context.Context, t *testing.T, name string, args []string, ready func(net.Addr)) <-chan result {
	t.Helper()
	done := make(chan result, 1)
	if s.goSide {
		go func() {
			var out, errb bytes.Buffer
			exit := runContext(ctx, append([]string{"ibperf", name}, args...), &out, &errb, ready)
			done <- result{exit, out.String(), errb.String()}
		}()
		return done
	}
	go func() {
		r := <-vmproc.Start(ctx, t, "ib_"+name, args...)
		done <- result{r.Exit, r.Stdout, r.Stderr}
	}()
	return done
}

// The result rows: numbers, or what C's printf makes of a NaN (perftest's
// t_stdev squares an int and can overflow into "-nan").
var (
	num      = `(-?nan|inf|[\d.]+)`
	latRowRE = regexp.MustCompile(`(?m)^ (\d+)\s+(\d+)` + strings.Repeat(`\s+`+num, 7) + `\s*$`)
	bwRowRE  = regexp.MustCompile(`(?m)^ (\d+)\s+(\d+)` + strings.Repeat(`\s+`+num, 3) + `\s*$`)
	// A latency test's duration run (-D): t_avg and tps average.
	latDurRowRE   = regexp.MustCompile(`(?m)^ (\d+)\s+(\d+)` + strings.Repeat(`\s+`+num, 2) + `\s*$`)
	bidirHeaderRE = regexp.MustCompile(`(?m) Bidirectional (Post List )?BW Test$`)
	addrRE        = regexp.MustCompile(`(?m)^ (local|remote) address: LID (\S+) QPN (\S+) PSN (\S+)`)
)

// pairCase is one run: a test, who serves, who connects, the options.
type pairCase struct {
	test           string
	server, client side
	args           []string
	// cross puts the client on rxe1 and the server on rxe0, the
	// connection across the veth pair (see vmenv.RouteAcross).
	cross bool
}

func (tc pairCase) name() string {
	return fmt.Sprintf("%s/%v-server/%v-client/%s", tc.test, tc.server, tc.client, strings.Join(tc.args, "_"))
}

// perftestCalibration is what perftest prints when it cannot measure the
// CPU clock (get_cpu_mhz: the samples' correlation is too low, which a
// loaded host causes) and gives up before its report.
const perftestCalibration = "Correlation coefficient r^2"

// run runs the pair and fails the test on a non-zero exit. A pair whose C
// side gave up only because perftest could not calibrate its clock is run
// again, four times at most (a loaded host once failed three runs of one
// pair in a row): that is the host's load, not the exchange.
func (tc pairCase) run(t *testing.T) (srv, cli result) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		srv, cli = tc.runOnce(t)
		calibration := false
		for _, r := range []struct {
			side side
			res  result
		}{{tc.server, srv}, {tc.client, cli}} {
			if !r.side.goSide && r.res.exit != 0 && strings.Contains(r.res.stderr, perftestCalibration) {
				calibration = true
			}
		}
		if !calibration || attempt == 5 || t.Failed() {
			break
		}
		t.Logf("attempt %d: perftest could not calibrate its clock on the loaded host; running the pair again", attempt)
	}
	for _, r := range []struct {
		role string
		res  result
	}{{"server", srv}, {"client", cli}} {
		if r.res.exit != 0 {
			t.Errorf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", r.role, r.res.exit, r.res.stdout, r.res.stderr)
		}
	}
	return srv, cli
}

// pairRun is what both kinds of runs set up: a deadline, a free port, the
// options of each side (they differ in the device only), the address the
// client connects to, and up, closed once the server listens (a Go
// server's ready does it).
type pairRun struct {
	ctx          context.Context
	cancel       context.CancelFunc
	common       []string // the server's
	clientCommon []string
	serverAddr   string
	up           chan struct{}
	ready        func(net.Addr)
}

func (tc pairCase) prepare(t *testing.T) *pairRun {
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	port := vmproc.FreePort(t)
	srvDev, cliDev := vmenv.RXE0, vmenv.RXE0
	if tc.cross {
		cliDev = vmenv.RXE1
	}
	common := func(dev string) []string {
		return append([]string{"-d", dev, "-x", strconv.Itoa(vmenv.GIDIndex), "-p", strconv.Itoa(port)}, tc.args...)
	}
	r := &pairRun{ctx: ctx, cancel: cancel, serverAddr: "127.0.0.1", up: make(chan struct{}),
		common: common(srvDev), clientCommon: common(cliDev)}
	// With -R the peers meet through rdma_cm, at the address of the
	// server's device (rxe0's); the server listens on an rdma_cm ID.
	rdmaCM := slices.Contains(tc.args, "-R")
	if rdmaCM {
		r.serverAddr = vmenv.AddrA
	}
	if tc.server.goSide {
		r.ready = func(net.Addr) { close(r.up) }
		return r
	}
	go func() {
		for ctx.Err() == nil && !(rdmaCM && vmproc.CMListening("TCP", port) || !rdmaCM && vmproc.Listening(port)) {
			time.Sleep(20 * time.Millisecond)
		}
		close(r.up)
	}()
	return r
}

// runOnce runs the server and then the client once.
func (tc pairCase) runOnce(t *testing.T) (srv, cli result) {
	r := tc.prepare(t)
	defer r.cancel()
	srvDone := tc.server.start(r.ctx, t, tc.test, r.common, r.ready)
	select {
	case <-r.up:
	case srv = <-srvDone:
		t.Fatalf("server ended before listening: exit %d\nstdout:\n%s\nstderr:\n%s", srv.exit, srv.stdout, srv.stderr)
	}
	cli = <-tc.client.start(r.ctx, t, tc.test, append(r.clientCommon, r.serverAddr), nil)
	srv = <-srvDone
	return srv, cli
}

func requireVM(t *testing.T) {
	t.Helper()
	if !vmenv.InVM() {
		t.Skip("not in the goverbs test VM: run go test -exec \"$PWD/bin/vmexec -kernel 6.1\" ./cmd/ibperf/")
	}
	vmenv.RequireDevice(t, vmenv.RXE0)
	t.Logf("kernel %s (%s), GOVERBS_TRANSPORT=%q", vmenv.KernelName(), vmenv.KernelRelease(), os.Getenv("GOVERBS_TRANSPORT"))
}

// TestInteropVM runs every test and transport perftest supports against
// perftest in both roles and against itself: both sides must finish, the
// client must report a row with the iterations asked for, and each side's
// printed addresses must be what the other printed as remote.
func TestInteropVM(t *testing.T) {
	requireVM(t)
	var variants []variant
	for _, tn := range []string{"write_lat", "send_lat", "read_lat", "atomic_lat"} {
		variants = append(variants, variant{tn, []string{"-n", "200"}})
	}
	for _, tn := range []string{"write_bw", "send_bw", "read_bw"} {
		variants = append(variants, variant{tn, []string{"-n", "400", "-s", "4096"}})
	}
	variants = append(variants, variant{"atomic_bw", []string{"-n", "400"}})
	variants = append(variants,
		variant{"write_lat", []string{"-n", "100", "-c", "UC", "-s", "64"}},
		variant{"write_bw", []string{"-n", "400", "-c", "UC", "-s", "64"}},
		variant{"send_lat", []string{"-n", "100", "-c", "UC"}},
		variant{"send_bw", []string{"-n", "400", "-c", "UC", "-s", "256"}},
		variant{"send_lat", []string{"-n", "100", "-c", "UD"}},
		variant{"send_bw", []string{"-n", "400", "-c", "UD", "-s", "512"}},
		// perftest's own batching, and several QPs.
		variant{"write_bw", []string{"-n", "400", "-s", "64", "--post_list", "8", "-Q", "4"}},
		variant{"send_bw", []string{"-n", "400", "-s", "64", "-q", "2"}},
		variant{"read_bw", []string{"-n", "200", "-s", "64", "-q", "3"}},
		variant{"atomic_lat", []string{"-n", "100", "-A", "CMP_AND_SWAP"}},
		// Duration runs: the row counts what completed in the sample.
		variant{"write_bw", []string{"-D", "2", "-s", "4096"}},
		variant{"send_bw", []string{"-D", "2", "-s", "4096"}},
		variant{"read_bw", []string{"-D", "2", "-s", "4096"}},
		variant{"write_lat", []string{"-D", "2"}},
		variant{"read_lat", []string{"-D", "2"}},
		variant{"send_lat", []string{"-D", "2"}},
		variant{"write_bw", []string{"-D", "3", "-f", "1", "-s", "64"}},
	)
	runVariants(t, variants)
	if n := deviceFDs(); n != 0 {
		t.Errorf("%d uverbs file descriptors open after the runs", n)
	}
}

// variant is a test and its options.
type variant struct {
	test string
	args []string
}

// runVariants runs each variant with perftest in both roles and against
// itself: both sides must finish, the client must report a row with the
// iterations asked for, and each side's printed addresses must be what
// the other printed as remote. In make vmtest's GOVERBS_TRANSPORT=write
// pass it runs only ibperf against itself, which makes every verbs command
// of each variant through that transport (vmenv.RepeatPass).
func runVariants(t *testing.T, variants []variant) {
	goSide, cSide := side{goSide: true}, side{}
	pairs := [][2]side{{goSide, cSide}, {cSide, goSide}, {goSide, goSide}}
	if vmenv.RepeatPass() {
		pairs = pairs[2:]
	}
	runVariantPairs(t, variants, pairs, false)
}

// runVariantPairs is runVariants for the given pairs (server, client),
// with the client on rxe1 if cross is set.
func runVariantPairs(t *testing.T, variants []variant, pairs [][2]side, cross bool) {
	for _, v := range variants {
		for _, pair := range pairs {
			tc := pairCase{test: v.test, server: pair[0], client: pair[1], args: v.args, cross: cross}
			t.Run(tc.name(), func(t *testing.T) {
				started := time.Now()
				srv, cli := tc.run(t)
				if t.Failed() {
					return
				}
				iters, timed := 0, false
				for i, a := range v.args {
					switch a {
					case "-n":
						iters = mustAtoi(v.args[i+1])
					case "-D":
						timed = true
					}
				}
				re := bwRowRE
				switch {
				case strings.HasSuffix(v.test, "_lat") && timed:
					re = latDurRowRE
				case strings.HasSuffix(v.test, "_lat"):
					re = latRowRE
				}
				m := re.FindStringSubmatch(cli.stdout)
				if m == nil {
					t.Fatalf("client printed no result row:\n%s", cli.stdout)
				}
				wantIters := iters
				if strings.HasSuffix(v.test, "_bw") {
					for i, a := range v.args {
						if a == "-q" {
							wantIters *= mustAtoi(v.args[i+1])
						}
					}
				}
				if got := mustAtoi(m[2]); timed && got == 0 {
					t.Errorf("client's duration row counts no iterations: %q", m[0])
				} else if got := mustAtoi(m[2]); !timed && got != wantIters {
					t.Errorf("client's row says %d iterations, want %d: %q", got, wantIters, m[0])
				}
				// Both sides of a bidirectional test print the sum of both
				// directions, and the test's name.
				if slices.Contains(v.args, "-b") {
					sm := re.FindStringSubmatch(srv.stdout)
					if sm == nil {
						t.Fatalf("bidirectional server printed no result row:\n%s", srv.stdout)
					}
					if got := mustAtoi(sm[2]); (timed && got == 0) || (!timed && got != wantIters) {
						t.Errorf("server's row says %d iterations, want %d: %q", got, wantIters, sm[0])
					}
					for _, out := range []string{srv.stdout, cli.stdout} {
						if !bidirHeaderRE.MatchString(out) {
							t.Errorf("no bidirectional test header:\n%s", out)
						}
					}
				}
				if slices.Contains(v.args, "-e") {
					for _, out := range []string{srv.stdout, cli.stdout} {
						if !strings.Contains(out, " Test with events. Using "+vmenv.RXE0+"_comp0\n") {
							t.Errorf("no events line in the header:\n%s", out)
						}
					}
				}
				sa, ca := addrs(srv.stdout), addrs(cli.stdout)
				if len(sa["local"]) == 0 || fmt.Sprint(sa["local"]) != fmt.Sprint(ca["remote"]) || fmt.Sprint(ca["local"]) != fmt.Sprint(sa["remote"]) {
					t.Errorf("addresses do not match: server %v, client %v", sa, ca)
				}
				t.Logf("%v: %s", time.Since(started).Round(time.Millisecond), strings.TrimSpace(m[0]))
			})
		}
	}
}

// TestFlagsVM runs -b (bidirectional), -e (events) and --run_infinitely
// against perftest in both roles and against itself.
func TestFlagsVM(t *testing.T) {
	requireVM(t)
	vmenv.OncePerKernel(t)
	runVariants(t, []variant{
		{"write_bw", []string{"-b", "-n", "400", "-s", "4096"}},
		{"send_bw", []string{"-b", "-n", "400", "-s", "4096"}},
		{"read_bw", []string{"-b", "-n", "200", "-s", "4096"}},
		{"atomic_bw", []string{"-b", "-n", "200"}},
		{"write_bw", []string{"-b", "-D", "2", "-s", "4096"}},
		{"send_bw", []string{"-b", "-D", "2", "-s", "4096"}},
		{"send_bw", []string{"-e", "-n", "400", "-s", "4096"}},
		{"read_bw", []string{"-e", "-n", "200", "-s", "4096"}},
		{"read_lat", []string{"-e", "-n", "200"}},
		{"atomic_lat", []string{"-e", "-n", "200"}},
		{"send_bw", []string{"-b", "-e", "-n", "400", "-s", "4096"}},
	})
	// perftest 4.5's own send_lat -e pair (ib_send_lat against ib_send_lat)
	// does not finish on rxe: both sides were still waiting after 120 s
	// (its loop polls each CQ once per event, whichever CQ raised it, and
	// goes on whether or not that poll found a completion). ibperf's pair
	// runs against itself.
	goSide, cSide := side{goSide: true}, side{}
	runVariantPairs(t, []variant{{"send_lat", []string{"-e", "-n", "200"}}}, [][2]side{{goSide, goSide}}, false)
	// --run_infinitely: both sides that report print a row every -D
	// seconds until they are stopped. perftest calibrates its clock for
	// every row and, while both sides spin on the VM's two CPUs, mostly
	// fails and exits ("Can't produce a report"); with -F it prints the
	// row anyway (a rate of 0 when the calibration failed).
	for _, v := range []variant{
		{"send_bw", []string{"--run_infinitely", "-D", "1", "-s", "4096", "-F"}},
		{"write_bw", []string{"-b", "--run_infinitely", "-D", "1", "-s", "4096", "-F"}},
	} {
		for _, pair := range [][2]side{{goSide, cSide}, {cSide, goSide}} {
			tc := pairCase{test: v.test, server: pair[0], client: pair[1], args: v.args}
			t.Run(tc.name(), func(t *testing.T) { tc.runInfinite(t, 3) })
		}
	}
	// The server of a one-way write_bw prints no rows and ends, as
	// perftest's does, when its client goes.
	tc := pairCase{test: "write_bw", server: goSide, client: cSide, args: []string{"--run_infinitely", "-D", "1", "-s", "4096", "-F"}}
	t.Run(tc.name(), func(t *testing.T) {
		r := tc.prepare(t)
		defer r.cancel()
		srv := tc.server.startStreaming(r.ctx, t, tc.test, r.common, r.ready)
		<-r.up
		cctx, stopClient := context.WithCancel(r.ctx)
		cli := tc.client.startStreaming(cctx, t, tc.test, append(r.clientCommon, r.serverAddr), nil)
		for started := time.Now(); len(bwRowRE.FindAllString(cli.stdout.String(), -1)) < 2 && time.Since(started) < 45*time.Second; {
			time.Sleep(100 * time.Millisecond)
		}
		stopClient()
		<-cli.exit
		select {
		case exit := <-srv.exit:
			if exit != 1 || bwRowRE.MatchString(srv.stdout.String()) || !strings.Contains(srv.stderr.String(), "Failed to exchange data") {
				t.Errorf("server: exit %d, want 1 with no rows and the exchange's failure\nstdout:\n%s\nstderr:\n%s", exit, srv.stdout.String(), srv.stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Errorf("server still running 30 s after its client ended\nclient stdout:\n%s", cli.stdout.String())
		}
	})
	if n := deviceFDs(); n != 0 {
		t.Errorf("%d uverbs file descriptors open after the runs", n)
	}
}

// running is a side started by startStreaming: its output so far, and its
// exit status once it ends.
type running struct {
	stdout, stderr vmproc.Buffer
	exit           chan int
}

// startStreaming is start for a run that is stopped from outside: the
// output can be read while it runs. perftest is killed when ctx ends.
func (s side) startStreaming(ctx context.Context, t *testing.T, name string, args []string, ready func(net.Addr)) *running {
	t.Helper()
	r := &running{exit: make(chan int, 1)}
	if s.goSide {
		go func() {
			r.exit <- runContext(ctx, append([]string{"ibperf", name}, args...), &r.stdout, &r.stderr, ready)
		}()
		return r
	}
	cmd := exec.CommandContext(ctx, "ib_"+name, args...)
	cmd.Env = append(os.Environ(), "IBV_DRIVERS=rxe")
	cmd.Stdout, cmd.Stderr = &r.stdout, &r.stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("start ib_%s: %v", name, err)
	}
	go func() {
		exit, _ := vmproc.ExitCode(cmd.Wait())
		r.exit <- exit
	}()
	return r
}

// runInfinite runs a --run_infinitely pair until both sides have printed
// rows result rows (with the size, and some iterations among them), then
// stops both.
func (tc pairCase) runInfinite(t *testing.T, rows int) {
	t.Helper()
	r := tc.prepare(t)
	defer r.cancel()
	srv := tc.server.startStreaming(r.ctx, t, tc.test, r.common, r.ready)
	<-r.up
	cli := tc.client.startStreaming(r.ctx, t, tc.test, append(r.clientCommon, r.serverAddr), nil)
	sides := []struct {
		role string
		r    *running
	}{{"server", srv}, {"client", cli}}
	enough := func() bool {
		for _, sd := range sides {
			if len(bwRowRE.FindAllString(sd.r.stdout.String(), -1)) < rows {
				return false
			}
		}
		return true
	}
	started := time.Now()
	for !enough() && time.Since(started) < 45*time.Second {
		time.Sleep(100 * time.Millisecond)
	}
	elapsed := time.Since(started)
	r.cancel()
	for _, sd := range sides {
		<-sd.r.exit
	}
	for _, sd := range sides {
		out := sd.r.stdout.String()
		got := bwRowRE.FindAllStringSubmatch(out, -1)
		if len(got) < rows {
			t.Errorf("%s printed %d rows in %v, want %d\nstdout:\n%s\nstderr:\n%s", sd.role, len(got), elapsed.Round(time.Millisecond), rows, out, sd.r.stderr.String())
			continue
		}
		// A row may count nothing (a second in which the loaded VM
		// completed none of this side's messages: seen once, at
		// perftest's write_bw -b server on 6.12), not all of them.
		iters := 0
		for _, m := range got[:rows] {
			if mustAtoi(m[1]) != 4096 {
				t.Errorf("%s: row %q: want size 4096", sd.role, m[0])
			}
			iters += mustAtoi(m[2])
		}
		if iters == 0 {
			t.Errorf("%s: the first %d rows count no iterations", sd.role, rows)
		}
		t.Logf("%s: %d rows in %v, the first %q", sd.role, len(got), elapsed.Round(time.Millisecond), strings.TrimSpace(got[0][0]))
	}
}

// TestInteropRDMACMVM runs perftest's rdma_cm mode (-R): the exchange over
// an rdma_cm connection and the test QPs connected by rdma_cm, RC and UD,
// against perftest in both roles and against itself.
func TestInteropRDMACMVM(t *testing.T) {
	requireVM(t)
	vmenv.RequireCM(t)
	runVariants(t, []variant{
		{"write_lat", []string{"-R", "-n", "200"}},
		{"send_lat", []string{"-R", "-n", "200"}},
		{"write_bw", []string{"-R", "-n", "400", "-s", "4096"}},
		{"send_bw", []string{"-R", "-n", "400", "-s", "4096"}},
		{"send_bw", []string{"-R", "-n", "400", "-c", "UD", "-s", "512"}},
		{"send_lat", []string{"-R", "-n", "200", "-c", "UD"}},
		{"read_lat", []string{"-R", "-n", "200"}},
	})
	if n := deviceFDs(); n != 0 {
		t.Errorf("%d uverbs file descriptors open after the runs", n)
	}
}

// TestInteropRDMACMCrossVM runs -R between two devices, rxe1 to rxe0
// across the veth pair, perftest against ibperf in both roles. perftest's
// -R client cannot choose its source address, so vmenv.RouteAcross routes
// the server's address through vb.
func TestInteropRDMACMCrossVM(t *testing.T) {
	requireVM(t)
	vmenv.OncePerKernel(t)
	vmenv.RequireCM(t)
	vmenv.RouteAcross(t)
	before := map[string]int{}
	for _, dev := range []string{vmenv.RXE0, vmenv.RXE1} {
		before[dev] = sentPkts(dev)
	}
	goSide, cSide := side{goSide: true}, side{}
	runVariantPairs(t, []variant{
		{"write_lat", []string{"-R", "-n", "200"}},
		{"send_lat", []string{"-R", "-n", "200"}},
		{"write_bw", []string{"-R", "-n", "400", "-s", "4096"}},
		{"send_bw", []string{"-R", "-n", "400", "-s", "4096"}},
		{"send_bw", []string{"-R", "-n", "400", "-c", "UD", "-s", "512"}},
	}, [][2]side{{goSide, cSide}, {cSide, goSide}}, true)
	// The traffic crossed the pair: each device sent (its side's data or
	// acknowledgements), which one device talking to itself would not show.
	for dev, n := range before {
		if got := sentPkts(dev) - n; got < 1000 {
			t.Errorf("%s sent %d packets during the runs, want over 1000", dev, got)
		}
	}
	if n := deviceFDs(); n != 0 {
		t.Errorf("%d uverbs file descriptors open after the runs", n)
	}
}

// sentPkts is dev's port 1 sent_pkts counter.
func sentPkts(dev string) int {
	b, _ := os.ReadFile("/sys/class/infiniband/" + dev + "/ports/1/hw_counters/sent_pkts")
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

func addrs(out string) map[string][]string {
	m := map[string][]string{}
	for _, a := range addrRE.FindAllStringSubmatch(out, -1) {
		m[a[1]] = append(m[a[1]], strings.Join(a[2:], " "))
	}
	return m
}

func mustAtoi(s string) int {
	v, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return v
}

func deviceFDs() int {
	ents, _ := os.ReadDir("/proc/self/fd")
	n := 0
	for _, e := range ents {
		l, _ := os.Readlink("/proc/self/fd/" + e.Name())
		if strings.HasPrefix(l, "/dev/infiniband/") {
			n++
		}
	}
	return n
}
