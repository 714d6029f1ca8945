package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/goverbs/goverbs/internal/testvm/vmproc"
)

// pairTimeout bounds one server+client run; sweepTimeout one -a run.
const (
	pairTimeout  = 4 * time.Minute
	sweepTimeout = 10 * time.Minute
)

// The result rows: numbers, or what C's printf makes of a NaN (perftest's
// t_stdev squares an int and can overflow into "-nan").
var (
	num      = `(-?nan|inf|[\d.]+)`
	latRowRE = regexp.MustCompile(`(?m)^ (\d+)\s+(\d+)` + strings.Repeat(`\s+`+num, 7) + `\s*$`)
	bwRowRE  = regexp.MustCompile(`(?m)^ (\d+)\s+(\d+)` + strings.Repeat(`\s+`+num, 3) + `\s*$`)
)

// point is one result row: a message size and its figure.
type point struct {
	Size  int     `json:"size"`
	Value float64 `json:"value"`
}

// values reads a client's result rows: t_typical for latency, the average
// bandwidth or the message rate for bandwidth.
func values(metric, out string) ([]point, error) {
	re, col := bwRowRE, 4
	switch metric {
	case "lat":
		re, col = latRowRE, 5
	case "rate":
		col = 5
	}
	var ps []point
	bad := 0
	for _, m := range re.FindAllStringSubmatch(out, -1) {
		size, err := strconv.Atoi(m[1])
		if err != nil {
			return nil, err
		}
		v, err := strconv.ParseFloat(m[col], 64)
		if err != nil {
			return nil, fmt.Errorf("result row of %d B: %w", size, err)
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			// perftest given -F, or a zero interval: no figure for this size.
			bad++
			continue
		}
		ps = append(ps, point{size, v})
	}
	switch {
	case len(ps) == 0 && bad > 0:
		return nil, fmt.Errorf("%d result rows, none with a finite figure", bad)
	case len(ps) == 0:
		return nil, errors.New("no result row in the client's output")
	}
	return ps, nil
}

// value reads the one result row of a client.
func value(metric, out string) (float64, error) {
	ps, err := values(metric, out)
	if err != nil {
		return 0, err
	}
	return ps[0].Value, nil
}

// sweep is one -a run of a tool, as the guest reports it.
type sweep struct {
	Test   string  `json:"test"`
	Tool   string  `json:"tool"` // "c" or "go"
	Rep    int     `json:"rep"`
	Points []point `json:"points,omitempty"`
	OK     bool    `json:"ok"`
	Detail string  `json:"detail,omitempty"`
	Secs   float64 `json:"secs,omitempty"` // the pair's wall time
}

const sweepPrefix = "PERFSWEEP "

type guest struct {
	ctx       context.Context
	ibperf    string
	serverDev string
	host      string
	port      int
	clientEnv []string
}

type guestOptions struct {
	ibperf, devices, only, profile string
	reps, sweepReps, sweepIters    int
}

func since(t time.Time) float64 { return time.Since(t).Round(time.Millisecond).Seconds() }

func emit(prefix string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "perfcompare: %+v: %v\n", v, err)
		return
	}
	fmt.Printf("%s%s\n", prefix, b)
}

func guestMain(ctx context.Context, o guestOptions) int {
	g := &guest{ctx: ctx, ibperf: o.ibperf, serverDev: "rxe0", host: "127.0.0.1", port: 21000}
	if o.devices == "pair" {
		g.serverDev, g.host = "rxe1", "10.99.0.2"
	}
	cs := selectCases(o.only)
	measure := func(c benchCase, tool, server, client string, rep int) {
		start := time.Now()
		v, err := g.pair(c, server, client)
		m := measurement{Case: c.Name, Tool: tool, Rep: rep, Value: v, OK: err == nil, Secs: since(start)}
		if err != nil {
			m.Detail = err.Error()
		}
		emit(linePrefix, m)
	}
	// Wire compatibility: each case once across the tools.
	for _, c := range cs {
		measure(c, "go-c", "go", "c", 0)
		measure(c, "c-go", "c", "go", 0)
	}
	// perftest first on odd repetitions, ibperf first on even ones.
	for rep := 1; rep <= o.reps; rep++ {
		for _, c := range cs {
			order := []string{"c", "go", "godef"}
			if rep%2 == 0 {
				order = []string{"godef", "go", "c"}
			}
			for _, tool := range order {
				if tool == "godef" && !c.GoDefaults {
					continue
				}
				measure(c, tool, tool, tool, rep)
			}
		}
	}
	for rep := 1; rep <= o.sweepReps; rep++ {
		order := []string{"c", "go"}
		if rep%2 == 0 {
			order = []string{"go", "c"}
		}
		for _, test := range sweepTests {
			for _, tool := range order {
				// A failed sweep (perftest exits when its clock check
				// fails on a busy host) runs once more; both are reported.
				for try := 0; try < 2; try++ {
					s := sweep{Test: test, Tool: tool, Rep: rep}
					start := time.Now()
					var err error
					s.Points, err = g.sweep(test, tool, o.sweepIters)
					s.OK, s.Secs = err == nil, since(start)
					if err != nil {
						s.Detail = err.Error()
					}
					emit(sweepPrefix, s)
					if s.OK {
						break
					}
				}
			}
		}
	}
	for _, name := range splitList(o.profile) {
		for _, c := range cases() {
			if c.Name != name {
				continue
			}
			g.clientEnv = []string{"IBPERF_CPUPROFILE=" + profilePath(name)}
			v, err := g.pair(c, "go", "go")
			g.clientEnv = nil
			fmt.Fprintf(os.Stderr, "profiled run of %s: %v %v\n", c.Name, v, err)
		}
	}
	return 0
}

// command is the argv of tool ("c", "go" or "godef": ibperf with its own
// defaults) for a run with args.
func (g *guest) command(tool, test string, args []string, dev string, server bool) []string {
	var argv []string
	if tool == "c" {
		argv = []string{"ib_" + test}
	} else {
		argv = []string{g.ibperf, test}
	}
	argv = append(argv, "-d", dev, "-x", "1", "-p", strconv.Itoa(g.port))
	argv = append(argv, args...)
	if !server {
		argv = append(argv, g.host)
	}
	return argv
}

// caseArgs are the options of a case's run by tool.
func caseArgs(c benchCase, tool string) []string {
	args := []string{"-s", strconv.Itoa(c.Size), "-n", strconv.Itoa(c.Iters)}
	if tool == "godef" {
		return args
	}
	return append(args, c.Settings...)
}

// pair runs a server of one tool and a client of the other (or the same)
// and returns the client's figure.
func (g *guest) pair(c benchCase, serverTool, clientTool string) (float64, error) {
	out, err := g.run(pairTimeout, c.Test, serverTool, clientTool, caseArgs(c, serverTool), caseArgs(c, clientTool))
	if err != nil {
		return 0, err
	}
	return value(c.Metric, out)
}

// sweep runs one -a pair of tool and returns its rows.
func (g *guest) sweep(test, tool string, iters int) ([]point, error) {
	args := sweepArgs(test, iters)
	out, err := g.run(sweepTimeout, test, tool, tool, args, args)
	if err != nil {
		return nil, err
	}
	if strings.HasSuffix(test, "_lat") {
		return values("lat", out)
	}
	bw, err := values("bw", out)
	if err != nil {
		return nil, err
	}
	return preciseBW(bw, out), nil
}

// preciseBW replaces bandwidths under 1 MB/s, which perftest prints with
// two decimals (0.00 for small messages on rxe under TCG), by the message
// rate (six decimals) times the size, in perftest's MB (2^20 bytes).
func preciseBW(bw []point, out string) []point {
	rate, err := values("rate", out)
	if err != nil {
		return bw
	}
	bySize := map[int]float64{}
	for _, p := range rate {
		bySize[p.Size] = p.Value
	}
	for i, p := range bw {
		if r, ok := bySize[p.Size]; ok && p.Value < 1 {
			bw[i].Value = r * 1e6 * float64(p.Size) / (1 << 20)
		}
	}
	return bw
}

// clientStderr is where a client's standard error goes, apart from its
// result rows: perftest's stdout is a full buffer flushed at exit, and a
// warning on stderr (its clock check's) would land inside a row.
const clientStderr = "/tmp/perfcompare-client.stderr"

// run runs a pair and returns the client's standard output; a failure
// carries the client's standard error too.
func (g *guest) run(timeout time.Duration, test, serverTool, clientTool string, serverArgs, clientArgs []string) (string, error) {
	ctx, cancel := context.WithTimeout(g.ctx, timeout)
	defer cancel()
	g.port++
	os.Remove(clientStderr)
	client := append([]string{"sh", "-c", `exec "$@" 2>` + clientStderr, "sh"}, g.command(clientTool, test, clientArgs, "rxe0", false)...)
	cliOut, _, err := vmproc.RunPair(ctx, g.port, g.command(serverTool, test, serverArgs, g.serverDev, true), client, g.clientEnv)
	if err != nil {
		stderr, _ := os.ReadFile(clientStderr)
		return cliOut, fmt.Errorf("%w\nclient stderr:\n%s", err, stderr)
	}
	return cliOut, nil
}
