package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/goverbs/goverbs/internal/testvm/vmproc"
)

// linePrefix marks the guest's result lines on its stdout.
const linePrefix = "scalebench: "

type guest struct {
	ctx    context.Context
	self   string // this program, for the Go workers
	cprog  string // scale.c's binary
	ibperf string
	gid    int
	port   int
}

func emit(r result) {
	b, _ := json.Marshal(r)
	fmt.Printf("%s%s\n", linePrefix, b)
}

// guestMain runs every workload reps times per tool, the tools alternating
// (C first on odd repetitions), then the 16-QP bandwidth runs.
func guestMain(ctx context.Context, o options) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	g := &guest{ctx: ctx, self: self, cprog: o.cprog, ibperf: o.ibperf, gid: o.gid, port: 22000}
	type work struct {
		kind string
		n    int64
	}
	var works []work
	for _, n := range o.qps {
		works = append(works, work{"qps", n})
	}
	for _, n := range o.mrs {
		works = append(works, work{"mr", n})
	}
	// A first, unrecorded round: the first connect of a boot resolves the
	// peer's neighbour entry (about a second under TCG), and the first run
	// of each program pages it in.
	for _, tool := range []string{"c", "go"} {
		for _, w := range []work{{"qps", 1}, {"mr", 1 << 20}} {
			if _, err := g.run(tool, w.kind, w.n); err != nil {
				fmt.Fprintf(os.Stderr, "scalebench: warm-up %s %s: %v\n", tool, w.kind, err)
			}
		}
	}
	failed := 0
	for rep := 1; rep <= o.reps; rep++ {
		for _, w := range works {
			order := []string{"c", "go"}
			if rep%2 == 0 {
				order = []string{"go", "c"}
			}
			for _, tool := range order {
				r, err := g.run(tool, w.kind, w.n)
				if err != nil {
					fmt.Fprintf(os.Stderr, "scalebench: %s %s %d, repetition %d: %v\n", tool, w.kind, w.n, rep, err)
					failed++
					continue
				}
				r.Rep = rep
				emit(r)
			}
		}
	}
	if o.ibperf != "" {
		for rep := 1; rep <= o.bwReps; rep++ {
			order := []string{"c", "go"}
			if rep%2 == 0 {
				order = []string{"go", "c"}
			}
			for _, tool := range order {
				v, err := g.bandwidth(tool, o.bwQPs, o.bwIters)
				for try := 2; err != nil && try <= 3; try++ {
					// perftest's out-of-band exchange sometimes fails on a
					// loaded guest ("Couldn't read remote address"): the
					// failure is reported, and the pair run again.
					fmt.Fprintf(os.Stderr, "scalebench: %s write_bw -q %d, repetition %d, try %d failed: %v\n", tool, o.bwQPs, rep, try-1, err)
					v, err = g.bandwidth(tool, o.bwQPs, o.bwIters)
				}
				if err != nil {
					fmt.Fprintf(os.Stderr, "scalebench: %s write_bw -q %d, repetition %d: %v\n", tool, o.bwQPs, rep, err)
					failed++
					continue
				}
				emit(result{Tool: tool, Work: "bw", N: int64(o.bwQPs), Rep: rep, MBps: v})
			}
		}
	}
	if failed > 0 {
		return 1
	}
	return 0
}

// run starts one worker of tool as a fresh process and reads its result.
func (g *guest) run(tool, kind string, n int64) (result, error) {
	ctx, cancel := context.WithTimeout(g.ctx, 10*time.Minute)
	defer cancel()
	var cmd *exec.Cmd
	switch {
	case tool == "c" && kind == "qps":
		cmd = exec.CommandContext(ctx, g.cprog, "qps", strconv.FormatInt(n, 10), strconv.Itoa(g.gid))
	case tool == "c":
		cmd = exec.CommandContext(ctx, g.cprog, "mr", strconv.FormatInt(n, 10))
	default:
		cmd = exec.CommandContext(ctx, g.self, "-worker", kind, "-n", strconv.FormatInt(n, 10), "-gid", strconv.Itoa(g.gid))
	}
	cmd.Env = append(os.Environ(), "IBV_DRIVERS=rxe")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return result{}, fmt.Errorf("%v: %s%s", err, out, stderr.Bytes())
	}
	if tool == "go" {
		var r result
		if err := json.Unmarshal(bytes.TrimSpace(out), &r); err != nil {
			return result{}, fmt.Errorf("worker output %q: %w", out, err)
		}
		return r, nil
	}
	return parseC(string(out))
}

// parseC reads scale.c's line: "qps" or "mr", the count, then names and
// values.
func parseC(out string) (result, error) {
	f := strings.Fields(out)
	bad := fmt.Errorf("scale output %q: not a result line", out)
	if len(f) < 2 || len(f)%2 != 0 || (f[0] != "qps" && f[0] != "mr") {
		return result{}, bad
	}
	r := result{Tool: "c", Work: f[0]}
	var err error
	if r.N, err = strconv.ParseInt(f[1], 10, 64); err != nil {
		return result{}, bad
	}
	fields := map[string]*int64{"create_ns": &r.CreateNs, "connect_ns": &r.ConnectNs, "destroy_ns": &r.DestroyNs,
		"create_cpu": &r.CreateCPU, "connect_cpu": &r.ConnectCPU, "destroy_cpu": &r.DestroyCPU,
		"reg_ns": &r.RegNs, "dereg_ns": &r.DeregNs, "reg_cpu": &r.RegCPU, "dereg_cpu": &r.DeregCPU,
		"create_sys": &r.CreateSys, "connect_sys": &r.ConnectSys}
	for i := 2; i < len(f); i += 2 {
		p := fields[f[i]]
		if p == nil {
			return result{}, bad
		}
		if *p, err = strconv.ParseInt(f[i+1], 10, 64); err != nil {
			return result{}, bad
		}
	}
	return r, nil
}

// bwRow is perftest's (and ibperf's) bandwidth result row: bytes,
// iterations, peak, average (MB/s), message rate.
var bwRow = regexp.MustCompile(`(?m)^ (\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$`)

func parseBW(out string) (float64, error) {
	m := bwRow.FindStringSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no result row in:\n%s", out)
	}
	return strconv.ParseFloat(m[4], 64)
}

// bandwidth runs a write_bw server and client of tool with -q qps -n iters on rxe0
// (the client connecting to 127.0.0.1, GID index gid) and returns the
// client's average MB/s.
func (g *guest) bandwidth(tool string, qps, iters int) (float64, error) {
	ctx, cancel := context.WithTimeout(g.ctx, 4*time.Minute)
	defer cancel()
	g.port++
	argv := func(server bool) []string {
		a := []string{"ib_write_bw"}
		if tool == "go" {
			a = []string{g.ibperf, "write_bw"}
		}
		a = append(a, "-d", "rxe0", "-x", strconv.Itoa(g.gid), "-p", strconv.Itoa(g.port), "-q", strconv.Itoa(qps), "-n", strconv.Itoa(iters))
		if !server {
			a = append(a, "127.0.0.1")
		}
		return a
	}
	cliOut, _, err := vmproc.RunPair(ctx, g.port, argv(true), argv(false), nil)
	if err != nil {
		return 0, err
	}
	return parseBW(cliOut)
}
