// Command perfcompare measures ibperf against perftest 4.5 side by side in
// the test VM (internal/testvm: a Debian kernel under QEMU TCG with rxe),
// both in the same boot, and prints the medians and the Go/C ratios:
//
//	go run ./internal/perfcompare -kernels 6.1,6.12 -reps 5
//
// For each case (a test, a size, options) and each repetition it runs a
// server and a client of the same tool, perftest's first on odd
// repetitions and ibperf's first on even ones, so that drift in the shared
// host's speed does not favour either. It also runs each case once across
// the tools (an ibperf client against a perftest server and the reverse),
// as a wire-compatibility check.
//
// Both sides of a pair run on rxe0, the client connecting to 127.0.0.1
// (-devices same). -devices pair puts the server on rxe1 instead, reached
// across the veth pair at 10.99.0.2: a second network device and its
// softirq per packet, more work for the two emulated CPUs and more noise.
//
// -profile TEST runs one more ibperf pair of that case name with a CPU
// profile of the client and prints go tool pprof -top of it.
//
// The program runs itself in the guest (-guest), where it starts the
// tools and writes one JSON line per measurement.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/internal/perfstat"
	"github.com/goverbs/goverbs/internal/testvm"
)

// A case is one comparison: the same arguments to both tools.
type benchCase struct {
	Name   string   // row label, e.g. "write_lat 2B"
	Test   string   // write_lat, ...
	Args   []string // besides -d, -x, -p
	Metric string   // "lat" (t_typical, lower is better) or "bw" / "rate" (higher is better)
	// GoArgs are appended for ibperf only (e.g. its own defaults spelled
	// out); empty for like-for-like cases.
	GoArgs []string
}

// cases are the comparison's rows.
func cases() []benchCase {
	var cs []benchCase
	for _, t := range []string{"write_lat", "send_lat", "read_lat"} {
		for _, s := range []string{"2", "64", "4096"} {
			cs = append(cs, benchCase{Name: fmt.Sprintf("%s %sB", t, s), Test: t, Args: []string{"-s", s, "-n", "2000"}, Metric: "lat"})
		}
	}
	for _, t := range []string{"write_bw", "send_bw"} {
		cs = append(cs,
			benchCase{Name: t + " 64KiB", Test: t, Args: []string{"-s", "65536", "-n", "2000"}, Metric: "bw"},
			benchCase{Name: t + " 64B defaults", Test: t, Args: []string{"-s", "64", "-n", "6400"}, Metric: "rate"},
			benchCase{Name: t + " 64B -l32 -Q32", Test: t, Args: []string{"-s", "64", "-n", "6400", "--post_list", "32", "--cq-mod", "32"}, Metric: "rate"},
		)
	}
	cs = append(cs, benchCase{Name: "write_bw 64B -l1 -Q1", Test: "write_bw", Args: []string{"-s", "64", "-n", "6400", "--post_list", "1", "--cq-mod", "1"}, Metric: "rate"})
	return cs
}

// measurement is one run of a pair, as the guest reports it.
type measurement struct {
	Case   string  `json:"case"`
	Tool   string  `json:"tool"` // "go", "c", or "go-c"/"c-go" (server-client) for interop
	Rep    int     `json:"rep"`
	Value  float64 `json:"value"` // t_typical µs, BW MB/s or Mpps
	OK     bool    `json:"ok"`
	Detail string  `json:"detail,omitempty"`
}

const linePrefix = "PERFCOMPARE "

func main() {
	guest := flag.Bool("guest", false, "run the measurements (inside the VM)")
	kernels := flag.String("kernels", "6.1,6.12", "kernels to boot, comma-separated")
	reps := flag.Int("reps", 5, "repetitions of every case and tool")
	devices := flag.String("devices", "same", "same: server and client on rxe0; pair: server on rxe1")
	only := flag.String("only", "", "run only the cases whose name contains this")
	profile := flag.String("profile", "", "comma-separated case names whose ibperf client is profiled once more (pprof top)")
	ibperf := flag.String("ibperf", "", "(guest) path of the ibperf binary")
	out := flag.String("o", "", "also write the table here")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *guest {
		os.Exit(guestMain(ctx, *ibperf, *reps, *devices, *only, *profile))
	}
	if err := hostMain(ctx, strings.Split(*kernels, ","), *reps, *devices, *only, *profile, *out); err != nil {
		fmt.Fprintln(os.Stderr, "perfcompare:", err)
		os.Exit(1)
	}
}

// hostMain builds the two static binaries, boots each kernel once with
// them, and prints the table.
func hostMain(ctx context.Context, kernels []string, reps int, devices, only, profile, out string) error {
	dir, err := os.MkdirTemp("", "perfcompare-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ibperf, self := filepath.Join(dir, "ibperf"), filepath.Join(dir, "perfcompare")
	if err := perfstat.BuildStatic(ctx, map[string]string{ibperf: "./cmd/ibperf", self: "./internal/perfcompare"}); err != nil {
		return err
	}
	var report bytes.Buffer
	w := io.MultiWriter(os.Stdout, &report)
	for _, k := range kernels {
		var stdout bytes.Buffer
		args := []string{"-guest", "-ibperf", ibperf, "-reps", fmt.Sprint(reps), "-devices", devices, "-only", only, "-profile", profile}
		fmt.Fprintf(os.Stderr, "perfcompare: kernel %s: booting (%d repetitions)\n", k, reps)
		started := time.Now()
		res, err := testvm.Run(ctx, testvm.Config{
			Kernel: k, Program: self, Args: args, Adds: []testvm.Add{{Host: ibperf}},
			Stdout: io.MultiWriter(&stdout, perfstat.Progress{W: os.Stderr, Prefix: linePrefix}), Stderr: os.Stderr,
			Returns: profilePaths(profile), Timeout: 90 * time.Minute,
		})
		if err != nil {
			return fmt.Errorf("kernel %s: %w", k, err)
		}
		if res.ExitCode != 0 {
			return fmt.Errorf("kernel %s: the guest run exited %d", k, res.ExitCode)
		}
		ms, err := perfstat.ParseLines[measurement](stdout.Bytes(), linePrefix)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "\nkernel %s (%s), %d repetitions, %s devices, run %v\n\n", k, res.Kernel.Release, reps, devices, time.Since(started).Round(time.Second))
		printTable(w, summarize(ms))
		for _, name := range splitList(profile) {
			path := profilePath(name)
			if _, err := os.Stat(path); err != nil {
				fmt.Fprintf(w, "\nno CPU profile came back for %s\n", name)
				continue
			}
			cmd := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=25", ibperf, path)
			cmd.Stdout, cmd.Stderr = w, os.Stderr
			fmt.Fprintf(w, "\nCPU profile of the ibperf client, %s, kernel %s:\n\n", name, k)
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("pprof: %w", err)
			}
			os.Remove(path)
		}
	}
	if out != "" {
		return os.WriteFile(out, report.Bytes(), 0o644)
	}
	return nil
}

// profilePath is where the guest writes the profile of a case; the harness
// brings it back to the same host path.
func profilePath(name string) string {
	return "/tmp/perfcompare-" + strings.NewReplacer(" ", "_", "/", "_").Replace(name) + ".pprof"
}

func profilePaths(list string) []string {
	var ps []string
	for _, n := range splitList(list) {
		ps = append(ps, profilePath(n))
	}
	return ps
}

func splitList(s string) []string {
	var l []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			l = append(l, x)
		}
	}
	return l
}

// row is one case's summary.
type row struct {
	Case         string
	Metric       string
	GoMed, CMed  float64
	GoN, CN      int
	GoMin, GoMax float64
	CMin, CMax   float64
	Ratio        float64 // Go/C of the medians
	Interop      string  // "ok", or what failed
	Failures     []string
	GoAll, CAll  []float64
	ordered      int
}

// summarize groups measurements by case, in the order cases() gives.
func summarize(ms []measurement) []row {
	order := map[string]int{}
	metric := map[string]string{}
	for i, c := range cases() {
		order[c.Name], metric[c.Name] = i, c.Metric
	}
	rows := map[string]*row{}
	for _, m := range ms {
		r := rows[m.Case]
		if r == nil {
			r = &row{Case: m.Case, Metric: metric[m.Case], Interop: "ok", ordered: order[m.Case]}
			rows[m.Case] = r
		}
		switch {
		case !m.OK:
			r.Failures = append(r.Failures, fmt.Sprintf("%s rep %d: %s", m.Tool, m.Rep, m.Detail))
			if m.Tool == "go-c" || m.Tool == "c-go" {
				r.Interop = "FAIL " + m.Tool
			}
		case m.Tool == "go":
			r.GoAll = append(r.GoAll, m.Value)
		case m.Tool == "c":
			r.CAll = append(r.CAll, m.Value)
		}
	}
	var out []row
	for _, r := range rows {
		r.GoMed, r.CMed = perfstat.Median(r.GoAll), perfstat.Median(r.CAll)
		r.GoN, r.CN = len(r.GoAll), len(r.CAll)
		if r.CMed != 0 {
			r.Ratio = r.GoMed / r.CMed
		}
		r.GoMin, r.GoMax = perfstat.MinMax(r.GoAll)
		r.CMin, r.CMax = perfstat.MinMax(r.CAll)
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ordered < out[j].ordered })
	return out
}

var units = map[string]string{"lat": "t_typical µs", "bw": "MB/s", "rate": "Mpps"}

func printTable(w io.Writer, rows []row) {
	fmt.Fprintf(w, "| case | unit | ibperf median (min–max) | perftest median (min–max) | Go/C | runs Go/C | interop |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		f := "%.2f"
		if r.Metric == "rate" {
			f = "%.4f"
		}
		cell := func(med, lo, hi float64) string {
			return fmt.Sprintf(f+" ("+f+"–"+f+")", med, lo, hi)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %.3f | %d/%d | %s |\n", r.Case, units[r.Metric],
			cell(r.GoMed, r.GoMin, r.GoMax), cell(r.CMed, r.CMin, r.CMax), r.Ratio, r.GoN, r.CN, r.Interop)
	}
	for _, r := range rows {
		for _, f := range r.Failures {
			fmt.Fprintf(w, "  failure: %s: %s\n", r.Case, f)
		}
	}
}
