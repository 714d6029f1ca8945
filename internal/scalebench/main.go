// Command scalebench measures what goverbs costs as the work grows, against
// a C program on libibverbs (testdata/scale.c) in the same boot of the test
// VM (internal/testvm: a Debian kernel under QEMU TCG with rxe0 and rxe1):
//
//	go run ./internal/scalebench -kernels 6.1,6.12 -reps 5
//
// Workloads, each run as a fresh process per tool and repetition, the tools
// alternating (C first on odd repetitions, Go first on even ones):
//
//   - qps N: create N RC QPs on rxe0 and N on rxe1 (one PD and one CQ per
//     device, made before the clock starts; 64 send and receive WRs, one
//     SGE), connect each to its peer on the other device (RESET, INIT, RTR,
//     RTS, as ibv_rc_pingpong), destroy them; each phase timed;
//   - mr B: register B bytes of mapped memory (every page touched before),
//     deregister;
//   - bw: write_bw -q 16 -n 300 of ibperf and of perftest (64 KiB
//     messages, 300 per QP: perftest's default of 5000 would move 5 GB, a
//     few minutes under TCG), server and client on rxe0 (client to
//     127.0.0.1), the client's average MB/s.
//
// Each phase is timed in wall time and in CPU time (user + system, of the
// whole process: the Go runtime's threads count): under TCG on a shared host
// the wall time of a verb is mostly waiting (for rxe's work queues and
// for the host to run the vCPU) and varies fiftyfold between runs; the CPU
// time is what the library and the kernel spent on its behalf, and is the
// comparison. The Go workers also report the heap bytes they allocated while creating
// and connecting (or registering) and the bytes still live after a GC
// (runtime.MemStats), per QP and per MR.
//
// The C program is built on the host with gcc -O2 against Debian's
// libibverbs-dev and copied into the guest, where rdma-core's libibverbs
// and its rxe provider are installed. The VM gets -m MiB of memory (3072
// by default, for the 1 GiB registration).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/internal/benchstat"
	"github.com/goverbs/goverbs/internal/testvm"
)

type options struct {
	kernels []string
	reps    int
	qps     []int64
	mrs     []int64
	bwReps  int
	bwQPs   int
	bwIters int
	memMiB  int
	gid     int
	out     string
	cprog   string
	ibperf  string
}

func main() {
	var o options
	kernels := flag.String("kernels", "6.1,6.12", "comma-separated kernels, one boot each")
	flag.IntVar(&o.reps, "reps", 5, "repetitions per tool and workload")
	qps := flag.String("qps", "1,100,1000", "QP counts per device")
	mrs := flag.String("mrs", "1M,64M,1G", "MR sizes (K, M, G suffixes)")
	flag.IntVar(&o.bwReps, "bw-reps", 3, "write_bw repetitions per tool (0: none)")
	flag.IntVar(&o.bwQPs, "bw-qps", 16, "write_bw -q")
	flag.IntVar(&o.bwIters, "bw-iters", 300, "write_bw -n (per QP; 64 KiB messages)")
	flag.IntVar(&o.memMiB, "m", 3072, "guest memory in MiB")
	flag.IntVar(&o.gid, "gid", 1, "GID index (RoCE v2, IPv4 on the test VM)")
	flag.StringVar(&o.out, "o", "", "also write the tables here")
	replay := flag.String("replay", "", "print the tables of a saved run's output (this program's stdout and stderr) instead of running")
	guest := flag.Bool("guest", false, "(guest) run the workloads")
	worker := flag.String("worker", "", "(guest) run one Go workload: qps or mr")
	n := flag.Int64("n", 0, "(worker) QPs per device or MR bytes")
	cpuprofile := flag.String("cpuprofile", "", "(worker) write a CPU profile of the workload here")
	flag.StringVar(&o.cprog, "cprog", "", "(guest) scale.c's binary")
	flag.StringVar(&o.ibperf, "ibperf", "", "(guest) ibperf's binary")
	flag.Parse()
	var err error
	o.kernels = strings.Split(*kernels, ",")
	if o.qps, err = parseSizes(*qps); err == nil {
		o.mrs, err = parseSizes(*mrs)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scalebench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch {
	case *replay != "":
		b, err := os.ReadFile(*replay)
		if err == nil {
			err = replayTables(os.Stdout, b)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "scalebench:", err)
			os.Exit(1)
		}
		return
	case *worker != "":
		os.Exit(workerMain(*worker, *n, o.gid, *cpuprofile))
	case *guest:
		os.Exit(guestMain(ctx, o))
	}
	if err := hostMain(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "scalebench:", err)
		os.Exit(1)
	}
}

func workerMain(kind string, n int64, gid int, cpuprofile string) int {
	var r result
	var err error
	if cpuprofile != "" {
		f, err := os.Create(cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "scalebench worker:", err)
			return 1
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	switch kind {
	case "qps":
		r, err = workQPs(int(n), gid)
	case "mr":
		r, err = workMR(int(n))
	default:
		err = fmt.Errorf("-worker %q: qps or mr", kind)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scalebench worker:", err)
		return 1
	}
	b, _ := json.Marshal(r)
	fmt.Printf("%s\n", b)
	return 0
}

// parseSizes reads a comma-separated list of counts with optional K, M, G
// (binary) suffixes.
func parseSizes(s string) ([]int64, error) {
	var v []int64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		mul := int64(1)
		switch {
		case strings.HasSuffix(f, "K"):
			mul, f = 1<<10, strings.TrimSuffix(f, "K")
		case strings.HasSuffix(f, "M"):
			mul, f = 1<<20, strings.TrimSuffix(f, "M")
		case strings.HasSuffix(f, "G"):
			mul, f = 1<<30, strings.TrimSuffix(f, "G")
		}
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q: not a positive count", f)
		}
		v = append(v, n*mul)
	}
	return v, nil
}

// hostMain builds the three programs, boots each kernel once and prints
// the tables.
func hostMain(ctx context.Context, o options) error {
	if o.reps < 1 {
		return fmt.Errorf("-reps %d: need at least 1", o.reps)
	}
	dir, err := os.MkdirTemp("", "scalebench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	self, ibperf, cprog := filepath.Join(dir, "scalebench"), filepath.Join(dir, "ibperf"), filepath.Join(dir, "scale")
	for _, b := range [][2]string{{self, "./internal/scalebench"}, {ibperf, "./cmd/ibperf"}} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", b[0], b[1])
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build %s: %w", b[1], err)
		}
	}
	gcc := exec.CommandContext(ctx, "gcc", "-O2", "-Wall", "-Werror", "-o", cprog, "internal/scalebench/testdata/scale.c", "-libverbs")
	gcc.Stdout, gcc.Stderr = os.Stderr, os.Stderr
	if err := gcc.Run(); err != nil {
		return fmt.Errorf("gcc scale.c (needs gcc and libibverbs-dev): %w", err)
	}
	var report bytes.Buffer
	w := io.MultiWriter(os.Stdout, &report)
	for _, k := range o.kernels {
		args := []string{"-guest", "-cprog", cprog, "-ibperf", ibperf, "-reps", fmt.Sprint(o.reps),
			"-qps", joinSizes(o.qps), "-mrs", joinSizes(o.mrs), "-bw-reps", fmt.Sprint(o.bwReps),
			"-bw-qps", fmt.Sprint(o.bwQPs), "-bw-iters", fmt.Sprint(o.bwIters), "-gid", fmt.Sprint(o.gid)}
		fmt.Fprintf(os.Stderr, "scalebench: kernel %s: booting (%d repetitions, %d MiB)\n", k, o.reps, o.memMiB)
		load0, _ := os.ReadFile("/proc/loadavg")
		started := time.Now()
		var stdout bytes.Buffer
		res, err := testvm.Run(ctx, testvm.Config{
			Kernel: k, Program: self, Args: args, Adds: []testvm.Add{{Host: cprog}, {Host: ibperf}},
			Stdout: io.MultiWriter(&stdout, os.Stderr), Stderr: os.Stderr,
			MemoryMiB: o.memMiB, Timeout: 90 * time.Minute,
		})
		if err != nil {
			return fmt.Errorf("kernel %s: %w", k, err)
		}
		load1, _ := os.ReadFile("/proc/loadavg")
		rs, err := parseResults(stdout.Bytes())
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "\nkernel %s (%s), %d repetitions, %d MiB guest, run %v; host load average before %s, after %s",
			k, res.Kernel.Release, o.reps, o.memMiB, time.Since(started).Round(time.Second),
			loadField(load0), loadField(load1))
		if res.ExitCode != 0 {
			fmt.Fprintf(w, "; the guest exited %d (a run failed: its message is above)", res.ExitCode)
		}
		fmt.Fprintln(w)
		fmt.Fprintln(w)
		printTables(w, rs)
	}
	if o.out != "" {
		// the documented -o is under .cache, which a fresh clone lacks
		if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
			return err
		}
		return os.WriteFile(o.out, report.Bytes(), 0o644)
	}
	return nil
}

// replayTables prints the tables of each kernel's results in a saved run.
func replayTables(w io.Writer, out []byte) error {
	parts := bytes.Split(out, []byte("scalebench: kernel "))
	for _, p := range parts[1:] {
		k, _, _ := strings.Cut(string(p), ":")
		rs, err := parseResults(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "\nkernel %s\n\n", k)
		printTables(w, rs)
	}
	return nil
}

func loadField(b []byte) string {
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func joinSizes(v []int64) string {
	var s []string
	for _, n := range v {
		s = append(s, strconv.FormatInt(n, 10))
	}
	return strings.Join(s, ",")
}

func parseResults(out []byte) ([]result, error) {
	var rs []result
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), linePrefix)
		if !ok || !strings.HasPrefix(line, "{") {
			continue // not a result (the guest's messages share the prefix)
		}
		var r result
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return nil, fmt.Errorf("guest line %q: %w", line, err)
		}
		rs = append(rs, r)
	}
	return rs, sc.Err()
}

// cell is "median (min–max)" of v, or "–" when empty.
func cell(v []float64, prec int) string {
	if len(v) == 0 {
		return "–"
	}
	return fmt.Sprintf("%.*f (%.*f–%.*f)", prec, benchstat.Median(v), prec, slices.Min(v), prec, slices.Max(v))
}

// ratio is Go/C of the medians and of the minima (on a shared host the
// noise only adds, so the minimum is the closest to the work itself), and
// whether the ranges separate.
func ratio(g, c []float64) string {
	if len(g) == 0 || len(c) == 0 || benchstat.Median(c) == 0 || slices.Min(c) == 0 {
		return "– | – | –"
	}
	return fmt.Sprintf("%.3f | %.3f | %s", benchstat.Median(g)/benchstat.Median(c), slices.Min(g)/slices.Min(c), benchstat.Relation(g, c))
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d B", n)
}

// printTables prints one table of times (ms) and one of the Go heap.
func printTables(w io.Writer, rs []result) {
	type key struct {
		work string
		n    int64
	}
	var keys []key
	by := map[key]map[string][]result{}
	for _, r := range rs {
		k := key{r.Work, r.N}
		if by[k] == nil {
			by[k] = map[string][]result{}
			keys = append(keys, k)
		}
		by[k][r.Tool] = append(by[k][r.Tool], r)
	}
	col := benchstat.Column[result]
	ms := func(ns int64) float64 { return float64(ns) / 1e6 }
	fmt.Fprintln(w, "| work | phase | goverbs CPU ms median (min–max) | libibverbs CPU ms median (min–max) | Go/C medians | Go/C minima | ranges | goverbs wall ms | libibverbs wall ms | Go/C wall |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, k := range keys {
		g, c := by[k]["go"], by[k]["c"]
		row := func(label, phase string, cpu, wall func(result) float64, prec int) {
			gw, cw := "–", "–"
			wr := "–"
			if wall != nil {
				gws, cws := col(g, wall), col(c, wall)
				gw, cw = fmt.Sprintf("%.*f", prec, benchstat.Median(gws)), fmt.Sprintf("%.*f", prec, benchstat.Median(cws))
				if len(gws) > 0 && len(cws) > 0 && benchstat.Median(cws) > 0 {
					wr = fmt.Sprintf("%.3f", benchstat.Median(gws)/benchstat.Median(cws))
				}
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", label, phase, cell(col(g, cpu), prec), cell(col(c, cpu), prec),
				ratio(col(g, cpu), col(c, cpu)), gw, cw, wr)
		}
		switch k.work {
		case "qps":
			label := fmt.Sprintf("%d RC QPs per device (×2)", k.n)
			row(label, "create", func(r result) float64 { return ms(r.CreateCPU) }, func(r result) float64 { return ms(r.CreateNs) }, 2)
			row(label, "connect (RESET→RTS)", func(r result) float64 { return ms(r.ConnectCPU) }, func(r result) float64 { return ms(r.ConnectNs) }, 2)
			row(label, "create + connect", func(r result) float64 { return ms(r.CreateCPU + r.ConnectCPU) },
				func(r result) float64 { return ms(r.CreateNs + r.ConnectNs) }, 2)
			// Runs from before the split have no system time: no row. The
			// kernel splits a process's CPU time into user and system by
			// timer ticks (4 ms in the test VM's kernels), too coarse for
			// phases of a few milliseconds: no row below 100 QPs either.
			if k.n >= 100 && slices.ContainsFunc(g, func(r result) bool { return r.CreateSys > 0 }) &&
				slices.ContainsFunc(c, func(r result) bool { return r.CreateSys > 0 }) {
				row(label, "create + connect, user CPU", func(r result) float64 {
					return ms(r.CreateCPU + r.ConnectCPU - r.CreateSys - r.ConnectSys)
				}, nil, 2)
				row(label, "create + connect, system CPU", func(r result) float64 { return ms(r.CreateSys + r.ConnectSys) }, nil, 2)
			}
			row(label, "destroy", func(r result) float64 { return ms(r.DestroyCPU) }, func(r result) float64 { return ms(r.DestroyNs) }, 2)
		case "mr":
			label := "MR of " + humanBytes(k.n)
			row(label, "register", func(r result) float64 { return ms(r.RegCPU) }, func(r result) float64 { return ms(r.RegNs) }, 3)
			row(label, "deregister", func(r result) float64 { return ms(r.DeregCPU) }, func(r result) float64 { return ms(r.DeregNs) }, 3)
		}
	}
	for _, k := range keys {
		if k.work != "bw" {
			continue
		}
		g, c := by[k]["go"], by[k]["c"]
		f := func(r result) float64 { return r.MBps }
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| work | ibperf MB/s median (min–max) | perftest MB/s median (min–max) | Go/C medians | Go/C maxima | ranges |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|")
		// Higher is better: the best run of each is its maximum.
		neg := func(r result) float64 { return -r.MBps }
		best := strings.Split(ratio(col(g, neg), col(c, neg)), " | ")
		med := strings.Split(ratio(col(g, f), col(c, f)), " | ")
		fmt.Fprintf(w, "| write_bw -q %d | %s | %s | %s | %s | %s |\n", k.n, cell(col(g, f), 2), cell(col(c, f), 2), med[0], best[1], med[2])
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| work | Go heap allocated per object, B | heap objects per object | Go heap live after GC per object, B |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, k := range keys {
		per := float64(1)
		label := "MR of " + humanBytes(k.n)
		switch k.work {
		case "qps":
			per, label = float64(2*k.n), fmt.Sprintf("QP (of %d per device, created + connected)", k.n)
		case "bw":
			continue
		}
		g := by[k]["go"]
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", label,
			cell(col(g, func(r result) float64 { return float64(r.AllocBytes) / per }), 0),
			cell(col(g, func(r result) float64 { return float64(r.Objects) / per }), 1),
			cell(col(g, func(r result) float64 { return float64(r.LiveBytes) / per }), 0))
	}
}
