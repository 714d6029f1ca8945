// Command rsockperf measures cmd/rstream (package rsocket) against
// rdma-core's rstream in the test VM (internal/testvm: a Debian kernel
// under QEMU TCG with rxe), with kernel TCP (rstream -T s) on the same veth
// beside them for reference, all in one boot per kernel:
//
//	go run ./internal/rsockperf -kernels 6.1,6.12 -reps 5 -doc docs/performance.md
//
// Each case is one rstream custom test with the same flags for every pair
// (-T b: blocking, since the non-blocking default spins on both of the
// guest's two CPUs): bandwidth at 64 B, 4 KiB, 64 KiB and 1 MiB (rstream's
// default sizes; MB/s, both directions, from rstream's usec/xfer as its
// Gb/sec column has too few digits at these speeds) and latency at 64 B
// (usec/xfer, half a round trip). Every repetition runs a Go pair (Go server, Go
// client), a C pair and a kernel-TCP pair (C rstream -T s), their order
// rotating per repetition so that drift in the shared host's speed favours
// none; each case also runs once across the tools (Go client against the
// C server and the reverse) with -T v as a wire check. The server is on
// rxe0 (10.99.0.1), the client on rxe1 (10.99.0.2), across the veth pair.
//
// The table gives each tool's median over the repetitions, the range, and
// Go/C of the medians. -doc writes it into a markdown file between the
// lines "<!-- rsockperf begin -->" and "<!-- rsockperf end -->".
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
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/internal/benchstat"
	"github.com/goverbs/goverbs/internal/perfstat"
	"github.com/goverbs/goverbs/internal/testvm"
)

// A benchCase is one rstream custom test.
type benchCase struct {
	Name   string   // row label
	Size   int      // -S
	Args   []string // -C, -I
	Metric string   // "bw" (MB/s, higher is better) or "lat" (usec/xfer, lower is better)
}

func cases() []benchCase {
	bw := func(name string, size int, count string) benchCase {
		return benchCase{Name: "bw " + name, Size: size, Args: []string{"-C", count, "-I", "1"}, Metric: "bw"}
	}
	// The bandwidth cases move as many messages as rstream's own table
	// does (size_to_count in librdmacm's examples: 100000 below 1 KiB,
	// 10000 below 64 KiB, 1000 below 1 MiB, 100 from 1 MiB on), so that
	// the start of a connection weighs what it weighs in rstream's table.
	// The latency case makes 1000 round trips where the table makes
	// 100000: at 0.1-0.3 ms a round trip under TCG the table's count would
	// take a minute a run.
	return []benchCase{
		bw("64 B", 64, "100000"),
		bw("4 KiB", 4096, "10000"),
		bw("64 KiB", 65536, "1000"),
		bw("1 MiB", 1<<20, "100"),
		{Name: "lat 64 B", Size: 64, Args: []string{"-C", "1", "-I", "1000"}, Metric: "lat"},
	}
}

// tools are the measured pairs, in the table's order.
var tools = []string{"go", "c", "tcp"}

// measurement is one run of a pair, as the guest reports it.
type measurement struct {
	Case   string  `json:"case"`
	Tool   string  `json:"tool"` // go, c, tcp; go-c / c-go (server-client) for the wire check
	Rep    int     `json:"rep"`
	Value  float64 `json:"value"`
	OK     bool    `json:"ok"`
	Detail string  `json:"detail,omitempty"`
}

const linePrefix = "RSOCKPERF "

const (
	beginMarker = "<!-- rsockperf begin -->"
	endMarker   = "<!-- rsockperf end -->"
)

func main() {
	guest := flag.Bool("guest", false, "run the measurements (inside the VM)")
	kernels := flag.String("kernels", "6.1,6.12", "kernels to boot, comma-separated")
	reps := flag.Int("reps", 5, "repetitions of every case and pair")
	only := flag.String("only", "", "run only the cases whose name contains this")
	rstream := flag.String("rstream", "", "(guest) path of the Go rstream binary")
	doc := flag.String("doc", "", "write the tables into this markdown file, between its rsockperf markers")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *guest {
		os.Exit(guestMain(ctx, *rstream, *reps, *only))
	}
	if err := hostMain(ctx, strings.Split(*kernels, ","), *reps, *only, *doc); err != nil {
		fmt.Fprintln(os.Stderr, "rsockperf:", err)
		os.Exit(1)
	}
}

// hostMain builds the two static binaries, boots each kernel once with
// them, and prints the tables.
func hostMain(ctx context.Context, kernels []string, reps int, only, doc string) error {
	if reps < 1 {
		return fmt.Errorf("-reps %d: want at least 1", reps)
	}
	if doc != "" {
		if _, err := replaceBetween(doc, ""); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp("", "rsockperf-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	rstream, self := filepath.Join(dir, "rstream"), filepath.Join(dir, "rsockperf")
	if err := perfstat.BuildStatic(ctx, map[string]string{rstream: "./cmd/rstream", self: "./internal/rsockperf"}); err != nil {
		return err
	}
	var report bytes.Buffer
	w := io.MultiWriter(os.Stdout, &report)
	onlyArg := ""
	if only != "" {
		onlyArg = fmt.Sprintf(" -only %q", only)
	}
	fmt.Fprintf(w, "Measured %s with `go run ./internal/rsockperf -kernels %s -reps %d%s` at commit %s, host load average %s at the start.\n",
		time.Now().UTC().Format("2006-01-02"), strings.Join(kernels, ","), reps, onlyArg, perfstat.Commit(ctx), perfstat.LoadAvg())
	for _, k := range kernels {
		var stdout bytes.Buffer
		fmt.Fprintf(os.Stderr, "rsockperf: kernel %s: booting (%d repetitions)\n", k, reps)
		started := time.Now()
		res, err := testvm.Run(ctx, testvm.Config{
			Kernel: k, Program: self, Args: []string{"-guest", "-rstream", rstream, "-reps", fmt.Sprint(reps), "-only", only},
			Adds:   []testvm.Add{{Host: rstream}},
			Stdout: io.MultiWriter(&stdout, perfstat.Progress{W: os.Stderr, Prefix: linePrefix}), Stderr: os.Stderr, Timeout: 90 * time.Minute,
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
		fmt.Fprintf(w, "\nkernel %s (%s), %d repetitions, run %v\n\n", k, res.Kernel.Release, reps, time.Since(started).Round(time.Second))
		printTable(w, summarize(ms))
	}
	if doc != "" {
		_, err := replaceBetween(doc, report.String())
		return err
	}
	return nil
}

// replaceBetween puts text between the markers of the markdown file at
// path; with text "" it only checks that the markers are there.
func replaceBetween(path, text string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	i, j := bytes.Index(b, []byte(beginMarker)), bytes.Index(b, []byte(endMarker))
	if i < 0 || j < i {
		return nil, fmt.Errorf("%s: no %q line followed by a %q line", path, beginMarker, endMarker)
	}
	if text == "" {
		return b, nil
	}
	var out bytes.Buffer
	out.Write(b[:i+len(beginMarker)])
	out.WriteString("\n" + strings.TrimSpace(text) + "\n")
	out.Write(b[j:])
	return out.Bytes(), os.WriteFile(path, out.Bytes(), 0o644)
}

// row is one case's summary.
type row struct {
	Case, Metric string
	Flags        string               // rstream's flags for the case, besides -T b
	All          map[string][]float64 // by tool
	Interop      string               // "ok", or what failed
	Failures     []string
	order        int
}

// summarize groups measurements by case, in the order of cases().
func summarize(ms []measurement) []row {
	order, metric, flags := map[string]int{}, map[string]string{}, map[string]string{}
	for i, c := range cases() {
		order[c.Name], metric[c.Name] = i, c.Metric
		flags[c.Name] = strings.Join(append([]string{"-S", fmt.Sprint(c.Size)}, c.Args...), " ")
	}
	rows := map[string]*row{}
	for _, m := range ms {
		r := rows[m.Case]
		if r == nil {
			r = &row{Case: m.Case, Metric: metric[m.Case], Flags: flags[m.Case], All: map[string][]float64{}, Interop: "ok", order: order[m.Case]}
			rows[m.Case] = r
		}
		switch {
		case !m.OK:
			r.Failures = append(r.Failures, fmt.Sprintf("%s rep %d: %s", m.Tool, m.Rep, m.Detail))
			if m.Rep == 0 {
				r.Interop = "FAIL " + m.Tool
			}
		case m.Rep > 0:
			r.All[m.Tool] = append(r.All[m.Tool], m.Value)
		}
	}
	var out []row
	for _, r := range rows {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].order < out[j].order })
	return out
}

var units = map[string]string{"bw": "MB/s", "lat": "usec/xfer"}

func printTable(w io.Writer, rows []row) {
	fmt.Fprintf(w, "| case | rstream flags | unit | Go rstream median (min–max) | rdma-core rstream median (min–max) | Go/C | Go and C ranges | kernel TCP (-T s) median (min–max) | runs Go/C/TCP | interop |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		cell := func(tool string) string {
			lo, hi := benchstat.MinMax(r.All[tool])
			return fmt.Sprintf("%.2f (%.2f–%.2f)", benchstat.Median(r.All[tool]), lo, hi)
		}
		ratio, ranges := "–", "–"
		if c := benchstat.Median(r.All["c"]); c != 0 {
			ratio = fmt.Sprintf("%.3f", benchstat.Median(r.All["go"])/c)
		}
		if len(r.All["go"]) > 0 && len(r.All["c"]) > 0 {
			ranges = benchstat.Relation(r.All["go"], r.All["c"])
		}
		fmt.Fprintf(w, "| %s | `%s` | %s | %s | %s | %s | %s | %s | %d/%d/%d | %s |\n", r.Case, r.Flags, units[r.Metric], cell("go"), cell("c"),
			ratio, ranges, cell("tcp"), len(r.All["go"]), len(r.All["c"]), len(r.All["tcp"]), r.Interop)
	}
	for _, r := range rows {
		for _, f := range r.Failures {
			fmt.Fprintf(w, "\nfailure: %s: %s\n", r.Case, f)
		}
	}
}
