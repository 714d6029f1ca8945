// Command mlx5bench times provider/mlx5's data path against rdma-core's
// libmlx5 on the same host, in the same run, and prints the medians and
// Go/C:
//
//	go run ./internal/mlx5bench -reps 7      (make bench-mlx5-vs-c)
//
// The Go side is provider/mlx5's BenchmarkVsLibmlx5; the C side is
// provider/mlx5/testdata/libmlx5/bench.c, built here with gcc -O2 against
// the host's libibverbs and libmlx5 (Debian 12's rdma-core 44) and run over
// the fake mlx5 kernel of the golden-vector harness (an LD_PRELOAD shim
// answering the uverbs commands, UAR pages of ordinary memory). Both write
// the CQEs ahead with the clock stopped, so the time is the library's
// ibv_post_send/PostSend and ibv_poll_cq/Poll alone, on the same shapes and
// queue sizes (bench_vs_libmlx5_test.go lists them).
//
// Each case runs -reps times per side as a fresh process with the same
// iteration count, the two sides alternating (C first on odd repetitions,
// Go first on even ones) so that the drift of a shared host favours
// neither; the table gives the median, the range, Go/C of the medians and
// whether the ranges separate. Both sides report the CPU time of their
// thread over the timed part besides the wall time; the comparison is of
// CPU time, which a shared host's scheduling does not inflate (a loop that
// never sleeps, the C one, is descheduled for much of any interval on a
// loaded host). The host's load average is read before each run and
// reported. With -instructions it also counts, under valgrind's
// callgrind, the instructions each side executes per iteration (see
// countInstructions).
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goverbs/goverbs/internal/benchstat"
)

// A benchCase is one row: the sub-benchmark of BenchmarkVsLibmlx5 and the
// case of bench.c share the name.
type benchCase struct {
	Name  string
	What  string
	Iters int
}

var allCases = []benchCase{
	{"write", "post 1-SGE RDMA WRITE + poll 1", 2_000_000},
	{"inline64", "post 64 B inline SEND + poll 1", 2_000_000},
	{"ud", "post 1-SGE UD SEND + poll 1", 2_000_000},
	{"list16", "post list of 16 RDMA WRITEs + poll 1", 500_000},
	{"poll16", "poll 16 CQEs", 1_000_000},
	{"write-solo", "write, single-threaded CQ and QP (C: MLX5_SINGLE_THREADED=1)", 2_000_000},
}

const harness = "provider/mlx5/testdata/libmlx5"

func main() {
	reps := flag.Int("reps", 7, "repetitions per side and case")
	only := flag.String("cases", "", "comma-separated case names (default: all)")
	scale := flag.Float64("scale", 1, "multiply every case's iteration count")
	out := flag.String("o", "", "also write the table to this file")
	instr := flag.Bool("instructions", false, "also count each side's instructions per iteration under valgrind's callgrind")
	flag.Parse()
	if err := run(*reps, *only, *scale, *out, *instr); err != nil {
		fmt.Fprintln(os.Stderr, "mlx5bench:", err)
		os.Exit(1)
	}
}

func run(reps int, only string, scale float64, out string, instr bool) error {
	if reps < 1 {
		return fmt.Errorf("-reps %d: need at least 1", reps)
	}
	if instr {
		if err := haveCallgrind(); err != nil {
			return err
		}
	}
	cs, err := selectCases(only, scale)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(harness, "bench.c")); err != nil {
		return fmt.Errorf("run from the module's root: %w", err)
	}
	dir, err := os.MkdirTemp("", "mlx5bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	build := exec.Command("bash", filepath.Join(harness, "bench.sh"), dir)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building the C benchmark (%s/bench.sh): %w", harness, err)
	}
	goTest := filepath.Join(dir, "mlx5.test")
	gob := exec.Command("go", "test", "-c", "-o", goTest, "./provider/mlx5")
	gob.Stdout, gob.Stderr = os.Stderr, os.Stderr
	if err := gob.Run(); err != nil {
		return fmt.Errorf("building provider/mlx5's test binary: %w", err)
	}
	sysfs, err := filepath.Abs(filepath.Join(harness, "sysfs"))
	if err != nil {
		return err
	}
	env := cleanEnv()
	runC := func(c benchCase) (sample, error) {
		cmd := exec.Command(filepath.Join(dir, "bench"), sysfs, c.Name, strconv.Itoa(c.Iters))
		cmd.Env = append(env, "LD_PRELOAD="+filepath.Join(dir, "libfakekernel.so"))
		b, err := output(cmd)
		if err != nil {
			return sample{}, err
		}
		return parseC(b, c.Name)
	}
	runGo := func(c benchCase) (sample, error) {
		cmd := exec.Command(goTest, "-test.run", "^$", "-test.bench", "^BenchmarkVsLibmlx5$/^"+c.Name+"$",
			"-test.benchtime", strconv.Itoa(c.Iters)+"x", "-test.count", "1", "-test.benchmem")
		cmd.Dir = "provider/mlx5"
		cmd.Env = env
		b, err := output(cmd)
		if err != nil {
			return sample{}, err
		}
		return parseGo(b, "BenchmarkVsLibmlx5/"+c.Name)
	}

	start := time.Now()
	res := make(map[string]*result)
	var loads []float64
	for rep := 1; rep <= reps; rep++ {
		for _, c := range cs {
			r := res[c.Name]
			if r == nil {
				r = &result{}
				res[c.Name] = r
			}
			sides := []string{"C", "Go"}
			if rep%2 == 0 {
				sides = []string{"Go", "C"}
			}
			for _, side := range sides {
				if l, err := loadAvg(); err == nil {
					loads = append(loads, l)
				}
				if side == "C" {
					v, err := runC(c)
					if err != nil {
						return fmt.Errorf("libmlx5 side of %s, repetition %d: %w", c.Name, rep, err)
					}
					r.cS = append(r.cS, v)
				} else {
					v, err := runGo(c)
					if err != nil {
						return fmt.Errorf("goverbs side of %s, repetition %d: %w", c.Name, rep, err)
					}
					r.goS = append(r.goS, v)
				}
			}
		}
		fmt.Fprintf(os.Stderr, "mlx5bench: repetition %d of %d done (%s)\n", rep, reps, time.Since(start).Round(time.Second))
	}
	took := time.Since(start)
	ir := make(map[string]irCase)
	irIters := make(map[string]int)
	if instr {
		for _, c := range cs {
			// A fortieth of the timed run: enough calls that the first
			// ones' cold paths are noise, a few seconds under callgrind.
			n := max(1000, c.Iters/40)
			r, err := countInstructions(c, n, dir, goTest, sysfs, env)
			if err != nil {
				return fmt.Errorf("counting the instructions of %s: %w", c.Name, err)
			}
			ir[c.Name], irIters[c.Name] = r, n
			fmt.Fprintf(os.Stderr, "mlx5bench: %s: %.0f instructions per iteration (Go), %.0f (C)\n", c.Name, r.goIter, r.cIter)
		}
	}
	var tbl bytes.Buffer
	writeTable(&tbl, cs, res, loads, reps, took)
	if instr {
		writeInstructions(&tbl, cs, ir, irIters)
	}
	os.Stdout.Write(tbl.Bytes())
	if out != "" {
		// make's default is under .cache, which a fresh clone lacks
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		return os.WriteFile(out, tbl.Bytes(), 0o644)
	}
	return nil
}

// A sample is one run's wall and CPU nanoseconds per iteration.
type sample struct{ wall, cpu float64 }

type result struct{ goS, cS []sample }

func cpus(s []sample) []float64 { return benchstat.Column(s, func(x sample) float64 { return x.cpu }) }
func walls(s []sample) []float64 {
	return benchstat.Column(s, func(x sample) float64 { return x.wall })
}

func selectCases(only string, scale float64) ([]benchCase, error) {
	if scale <= 0 {
		return nil, fmt.Errorf("-scale %v: must be positive", scale)
	}
	var cs []benchCase
	for _, c := range allCases {
		if only == "" || slices.Contains(strings.Split(only, ","), c.Name) {
			c.Iters = max(1, int(float64(c.Iters)*scale))
			cs = append(cs, c)
		}
	}
	if len(cs) == 0 {
		return nil, fmt.Errorf("-cases %q: none of %s", only, caseNames())
	}
	return cs, nil
}

func caseNames() string {
	var n []string
	for _, c := range allCases {
		n = append(n, c.Name)
	}
	return strings.Join(n, " ")
}

// cleanEnv is the environment without libmlx5's and libibverbs' knobs,
// which the Go provider also reads (MLX5_POST_SEND_PREFER_BF, ...): both
// sides run with the libraries' defaults.
func cleanEnv() []string {
	var env []string
	for _, e := range os.Environ() {
		if strings.HasPrefix(e, "MLX5_") || strings.HasPrefix(e, "RDMAV_") || strings.HasPrefix(e, "IBV_") ||
			strings.HasPrefix(e, "LD_PRELOAD=") {
			continue
		}
		env = append(env, e)
	}
	return env
}

func output(cmd *exec.Cmd) ([]byte, error) {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w\n%s%s", cmd.Path, err, b, stderr.Bytes())
	}
	return b, nil
}

// parseC reads bench.c's line "<case> <iterations> <wall ns> <CPU ns>"
// and returns the wall and CPU ns per iteration.
func parseC(out []byte, name string) (sample, error) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 4 && f[0] == name {
			iters, err1 := strconv.ParseFloat(f[1], 64)
			wall, err2 := strconv.ParseFloat(f[2], 64)
			cpu, err3 := strconv.ParseFloat(f[3], 64)
			if err := errors.Join(err1, err2, err3); err != nil || iters <= 0 {
				return sample{}, fmt.Errorf("bad C result line %q", sc.Text())
			}
			return sample{wall: wall / iters, cpu: cpu / iters}, nil
		}
	}
	return sample{}, fmt.Errorf("no result for %s in the C benchmark's output:\n%s", name, out)
}

// parseGo reads the wall-ns/op and cpu-ns/op of benchmark name from go
// test -bench output (the name is followed by -GOMAXPROCS unless that is
// 1): the benchmark's own clocks over its timed parts, as bench.c's. Its
// ns/op also counts the CQE writes done with those clocks stopped.
func parseGo(out []byte, name string) (sample, error) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || (f[0] != name && !strings.HasPrefix(f[0], name+"-")) {
			continue
		}
		var s sample
		for i := 2; i+1 < len(f); i++ {
			v, err := strconv.ParseFloat(f[i], 64)
			switch f[i+1] {
			case "wall-ns/op":
				s.wall = v
			case "cpu-ns/op":
				s.cpu = v
			default:
				continue
			}
			if err != nil {
				return sample{}, fmt.Errorf("bad %s in %q", f[i+1], sc.Text())
			}
		}
		if s.wall == 0 || s.cpu == 0 {
			return sample{}, fmt.Errorf("no wall-ns/op and cpu-ns/op in %q", sc.Text())
		}
		return s, nil
	}
	return sample{}, fmt.Errorf("no result for %s in the Go benchmark's output:\n%s", name, out)
}

// loadAvg is the host's one-minute load average.
func loadAvg() (float64, error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, fmt.Errorf("empty /proc/loadavg")
	}
	return strconv.ParseFloat(f[0], 64)
}

func writeTable(w io.Writer, cs []benchCase, res map[string]*result, loads []float64, reps int, took time.Duration) {
	fmt.Fprintf(w, "mlx5 data path: provider/mlx5 (Go) against rdma-core's libmlx5 (C, %s), fake kernel, same host\n\n",
		rdmaCoreVersion())
	fmt.Fprintf(w, "date %s, commit %s, %s, GOMAXPROCS %d, %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"),
		commit(), cpuModel(), runtime.GOMAXPROCS(0), runtime.Version())
	if len(loads) > 0 {
		fmt.Fprintf(w, "load average (1 min) before the runs: median %.2f, %.2f–%.2f; %d repetitions per side and case, alternating; %s\n\n",
			benchstat.Median(loads), slices.Min(loads), slices.Max(loads), reps, took.Round(time.Second))
	}
	fmt.Fprintln(w, "CPU ns/op: CPU time of the benchmark's thread over the timed part, per iteration (the comparison);")
	fmt.Fprintln(w, "wall ns/op: elapsed time, which on a loaded host counts the time the process was descheduled.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| case | what | iterations | Go CPU ns/op median (min–max) | C CPU ns/op median (min–max) | Go/C | ranges | Go wall ns/op | C wall ns/op |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, c := range cs {
		r := res[c.Name]
		g, cc := cpus(r.goS), cpus(r.cS)
		fmt.Fprintf(w, "| %s | %s | %d | %.2f (%.2f–%.2f) | %.2f (%.2f–%.2f) | %.3f | %s | %.2f | %.2f |\n", c.Name, c.What, c.Iters,
			benchstat.Median(g), slices.Min(g), slices.Max(g), benchstat.Median(cc), slices.Min(cc), slices.Max(cc), benchstat.Median(g)/benchstat.Median(cc), benchstat.Relation(g, cc),
			benchstat.Median(walls(r.goS)), benchstat.Median(walls(r.cS)))
	}
}

func commit() string {
	b, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(b))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		c += " (with uncommitted changes)"
	}
	return c
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	n := 0
	model := runtime.GOARCH
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			model = strings.TrimSpace(v)
			n++
		}
	}
	return fmt.Sprintf("%s × %d", model, n)
}

func rdmaCoreVersion() string {
	b, err := exec.Command("dpkg-query", "-W", "-f", "${Version}", "ibverbs-providers").Output()
	if err != nil {
		return "rdma-core"
	}
	return "rdma-core " + string(b)
}
