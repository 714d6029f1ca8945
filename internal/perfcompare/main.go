// Command perfcompare measures ibperf against perftest 4.5 side by side in
// the test VM (internal/testvm: a Debian kernel under QEMU TCG with rxe),
// both in the same boot, and writes the tables and figures of
// docs/performance.md and the summary in README.md:
//
//	go run ./internal/perfcompare -kernels 6.1,6.12 -raw docs/perfcompare-raw.json
//
// The cases are the eight tests (write, send, read, atomic; latency and
// bandwidth) at 2 B, 64 B, 4 KiB and 64 KiB (atomics at 8 B). Both tools
// run every case with perftest's effective settings on rxe, given to both
// explicitly (cases.go says which); where ibperf's own defaults differ,
// ibperf also runs with them, a second column. perftest runs first on odd
// repetitions and ibperf first on even ones, so that drift in the shared
// host's speed does not favour either. Each case
// also runs once across the tools (an ibperf client against a perftest
// server and the reverse), as a wire-compatibility check.
//
// Then both tools sweep message sizes (-a) for write_lat and write_bw, and
// the medians per size are drawn as docs/perf-write_lat.svg and
// docs/perf-write_bw.svg.
//
// The generated text goes between markers in docs/performance.md and
// README.md under -root (default: the working directory); -raw saves
// every sample, and -replay re-renders from such a file without a VM.
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
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/internal/perfstat"
	"github.com/goverbs/goverbs/internal/testvm"
)

// measurement is one run of a pair, as the guest reports it.
type measurement struct {
	Case   string  `json:"case"`
	Tool   string  `json:"tool"` // "c", "go", "godef" (ibperf's defaults), or "go-c"/"c-go" (server-client) for interop
	Rep    int     `json:"rep"`
	Value  float64 `json:"value"` // t_typical µs, BW MB/s or Mpps
	OK     bool    `json:"ok"`
	Detail string  `json:"detail,omitempty"`
	Secs   float64 `json:"secs,omitempty"` // the pair's wall time
}

const linePrefix = "PERFCOMPARE "

// rawRun is everything one run measured: what -raw writes and -replay
// reads.
type rawRun struct {
	Date       string      `json:"date"` // UTC, RFC 3339
	Commit     string      `json:"commit"`
	Command    string      `json:"command"`
	LoadBefore string      `json:"load_before"` // /proc/loadavg
	LoadAfter  string      `json:"load_after"`
	Reps       int         `json:"reps"`
	SweepReps  int         `json:"sweep_reps"`
	SweepIters int         `json:"sweep_iters"`
	Devices    string      `json:"devices"`
	Kernels    []kernelRun `json:"kernels"`
}

type kernelRun struct {
	Kernel       string        `json:"kernel"`
	Release      string        `json:"release"`
	Seconds      float64       `json:"seconds"`
	Measurements []measurement `json:"measurements"`
	Sweeps       []sweep       `json:"sweeps,omitempty"`
}

type options struct {
	kernels                 []string
	reps, sweepReps, sweepN int
	devices, only, profile  string
	out, root, raw, replay  string
	noDocs                  bool
	stdout                  io.Writer // the tables; os.Stdout if nil
}

func main() {
	guest := flag.Bool("guest", false, "run the measurements (inside the VM)")
	kernels := flag.String("kernels", "6.1,6.12", "kernels to boot, comma-separated")
	reps := flag.Int("reps", 7, "repetitions of every case and tool")
	sweepReps := flag.Int("sweep-reps", 3, "message-size sweeps (-a) of write_lat and write_bw per tool; 0 skips them")
	sweepN := flag.Int("sweep-n", 20, "iterations per message size in a sweep (-a runs up to 8 MiB)")
	devices := flag.String("devices", "same", "same: server and client on rxe0; pair: server on rxe1")
	only := flag.String("only", "", "run only the cases whose name contains one of these (comma-separated), e.g. \"write_lat 64B,send_bw 4KiB\"")
	profile := flag.String("profile", "", "comma-separated case names whose ibperf client is profiled once more (pprof top)")
	ibperf := flag.String("ibperf", "", "(guest) path of the ibperf binary")
	out := flag.String("o", "", "also write the tables here")
	root := flag.String("root", ".", "tree whose docs/performance.md, docs/perf-*.svg and README.md are rewritten (between markers)")
	noDocs := flag.Bool("nodocs", false, "leave docs/ and README.md alone")
	raw := flag.String("raw", "", "save every sample here (JSON)")
	replay := flag.String("replay", "", "render from a file saved with -raw instead of measuring")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *guest {
		os.Exit(guestMain(ctx, guestOptions{ibperf: *ibperf, devices: *devices, only: *only, profile: *profile,
			reps: *reps, sweepReps: *sweepReps, sweepIters: *sweepN}))
	}
	o := options{kernels: splitList(*kernels), reps: *reps, sweepReps: *sweepReps, sweepN: *sweepN, devices: *devices,
		only: *only, profile: *profile, out: *out, root: *root, raw: *raw, replay: *replay, noDocs: *noDocs}
	if err := hostMain(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "perfcompare:", err)
		os.Exit(1)
	}
}

func hostMain(ctx context.Context, o options) error {
	var run *rawRun
	if o.replay != "" {
		b, err := os.ReadFile(o.replay)
		if err != nil {
			return err
		}
		run = new(rawRun)
		if err := json.Unmarshal(b, run); err != nil {
			return fmt.Errorf("%s: %w", o.replay, err)
		}
	} else {
		var err error
		if run, err = measure(ctx, o); err != nil {
			return err
		}
		if o.raw != "" {
			b, err := json.MarshalIndent(run, "", " ")
			if err != nil {
				return err
			}
			if err := os.WriteFile(o.raw, append(b, '\n'), 0o644); err != nil {
				return err
			}
		}
	}
	var tables bytes.Buffer
	renderTables(&tables, run)
	stdout := o.stdout
	if stdout == nil {
		stdout = os.Stdout
	}
	stdout.Write(tables.Bytes())
	if o.out != "" {
		// make's default is under .cache, which a fresh clone lacks
		if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(o.out, tables.Bytes(), 0o644); err != nil {
			return err
		}
	}
	if o.noDocs {
		return nil
	}
	return writeDocs(o.root, run)
}

// measure builds the two static binaries, boots each kernel once with
// them, and collects the guest's samples.
func measure(ctx context.Context, o options) (*rawRun, error) {
	if len(selectCases(o.only)) == 0 {
		return nil, fmt.Errorf("-only %q: no such case", o.only)
	}
	run := &rawRun{Date: time.Now().UTC().Format(time.RFC3339), Commit: perfstat.Commit(ctx), Command: command(),
		LoadBefore: perfstat.LoadAvg(), Reps: o.reps, SweepReps: o.sweepReps, SweepIters: o.sweepN, Devices: o.devices}
	dir, err := os.MkdirTemp("", "perfcompare-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ibperf, self := filepath.Join(dir, "ibperf"), filepath.Join(dir, "perfcompare")
	if err := perfstat.BuildStatic(ctx, map[string]string{ibperf: "./cmd/ibperf", self: "./internal/perfcompare"}); err != nil {
		return nil, err
	}
	for _, k := range o.kernels {
		var stdout bytes.Buffer
		args := []string{"-guest", "-ibperf", ibperf, "-reps", fmt.Sprint(o.reps), "-sweep-reps", fmt.Sprint(o.sweepReps),
			"-sweep-n", fmt.Sprint(o.sweepN), "-devices", o.devices, "-only", o.only, "-profile", o.profile}
		fmt.Fprintf(os.Stderr, "perfcompare: kernel %s: booting (%d repetitions, %d sweeps)\n", k, o.reps, o.sweepReps)
		started := time.Now()
		res, err := testvm.Run(ctx, testvm.Config{
			Kernel: k, Program: self, Args: args, Adds: []testvm.Add{{Host: ibperf}},
			Stdout: io.MultiWriter(&stdout, perfstat.Progress{W: os.Stderr, Prefix: linePrefix},
				perfstat.Progress{W: os.Stderr, Prefix: sweepPrefix}), Stderr: os.Stderr,
			Returns: profilePaths(o.profile), Timeout: 4 * time.Hour,
		})
		if err != nil {
			return nil, fmt.Errorf("kernel %s: %w", k, err)
		}
		if res.ExitCode != 0 {
			return nil, fmt.Errorf("kernel %s: the guest run exited %d", k, res.ExitCode)
		}
		kr, err := parseGuest(stdout.Bytes())
		if err != nil {
			return nil, fmt.Errorf("kernel %s: %w", k, err)
		}
		kr.Kernel, kr.Release, kr.Seconds = k, res.Kernel.Release, time.Since(started).Round(time.Second).Seconds()
		run.Kernels = append(run.Kernels, kr)
		if err := printProfiles(ctx, ibperf, k, o.profile); err != nil {
			return nil, err
		}
	}
	run.LoadAfter = perfstat.LoadAvg()
	return run, nil
}

func printProfiles(ctx context.Context, ibperf, kernel, profile string) error {
	for _, name := range splitList(profile) {
		path := profilePath(name)
		if _, err := os.Stat(path); err != nil {
			fmt.Printf("\nno CPU profile came back for %s\n", name)
			continue
		}
		cmd := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=25", ibperf, path)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		fmt.Printf("\nCPU profile of the ibperf client, %s, kernel %s:\n\n", name, kernel)
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("pprof: %w", err)
		}
		os.Remove(path)
	}
	return nil
}

// command is how this run was started, as one could type it again.
func command() string {
	args := []string{"go run ./internal/perfcompare"}
	for _, a := range os.Args[1:] {
		if a == "" || strings.ContainsAny(a, " \t\"'$,") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		args = append(args, a)
	}
	return strings.Join(args, " ")
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

// parseGuest reads the guest's measurement and sweep lines; one that does
// not parse is reported and left out rather than losing the kernel's run.
func parseGuest(out []byte) (kernelRun, error) {
	var kr kernelRun
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if l, ok := strings.CutPrefix(sc.Text(), linePrefix); ok {
			var m measurement
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				fmt.Fprintf(os.Stderr, "perfcompare: guest line %q left out: %v\n", l, err)
				continue
			}
			kr.Measurements = append(kr.Measurements, m)
		} else if l, ok := strings.CutPrefix(sc.Text(), sweepPrefix); ok {
			var s sweep
			if err := json.Unmarshal([]byte(l), &s); err != nil {
				fmt.Fprintf(os.Stderr, "perfcompare: guest line %q left out: %v\n", l, err)
				continue
			}
			kr.Sweeps = append(kr.Sweeps, s)
		}
	}
	if len(kr.Measurements) == 0 {
		return kr, errors.New("the guest reported no measurements")
	}
	return kr, nil
}
