// Command fuzzrun runs every fuzz target of the module for a short, bounded
// time, one after another, and fails if any finds a crash. It is the CI
// form of `go test -fuzz`, which takes one target of one package at a time.
//
//	go run ./internal/fuzzrun -time 5s            # every target, 5 s each
//	go run ./internal/fuzzrun -run Queue ./provider/...
//
// Targets are discovered, not listed: the packages whose test files declare
// a Fuzz function are asked for their targets with `go test -list '^Fuzz'`,
// so a target added later is picked up without touching this program.
//
// A crashing input is written by go test to the package's
// testdata/fuzz/<Target>/ directory; the summary names the file. Committed
// there, it becomes a regression test that plain `go test` runs.
//
// Each target's line reports what go test's last progress line said: the
// executions, their average rate, and the new interesting inputs (inputs
// that reached new code, added to the corpus in the fuzz cache) with the
// corpus's total. A target that ran fewer than -minexecs executions fails
// the run like a crash: a target too slow for its seeds, or one whose
// fuzzer spends the whole time minimising a large input, would otherwise
// pass while fuzzing nothing.
//
//	ok     example.com/pkg.FuzzParse     5.3s  171759 execs (34351/s), 9 new interesting (corpus 14)
//
// -parallel sets go test's number of fuzzing workers (default: one per
// CPU); on a shared machine -parallel 1 leaves the other cores alone.
//
// -minimizetime bounds how long go test minimises one input (its
// -fuzzminimizetime; default a tenth of -time, at most go's own 60 s).
// Minimising drops each byte and each run of bytes, so its time grows with
// the square of the input's size, and a worker reports its executions only
// when it is done: one large input, from a seed or from the fuzz cache of
// an earlier run, could otherwise take a target's whole time and count
// for nothing.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

type target struct {
	pkg, dir, name string
}

type result struct {
	target
	elapsed time.Duration
	stats   stats
	crashed bool
	raced   bool   // failed twice by go test's deadline race only (see deadlineRace)
	detail  string // the failure's output: the panic and the input file
	input   string // the crashing input's file, relative to dir
}

// few reports whether a target that found nothing ran fewer than min
// executions.
func (r result) few(min int64) bool {
	return !r.crashed && r.stats.execs < min
}

// stats is what go test -fuzz's last progress line reported.
type stats struct {
	elapsed        time.Duration // fuzzing time, as go test counts it
	execs          int64         // calls of the fuzz function, minimisation included
	newInteresting int64         // inputs that reached new code in this run
	corpus         int64         // the corpus's size: seeds, cache and new inputs
	seen           bool          // a progress line was found
}

// progressLine matches go test's progress lines, e.g.
// "fuzz: elapsed: 3s, execs: 152883 (50957/sec), new interesting: 2 (total: 9)";
// elapsed is a time.Duration rounded to the second ("1m0s").
var progressLine = regexp.MustCompile(`(?m)^fuzz: elapsed: ([0-9hms]+), execs: (\d+) \(\d+/sec\), new interesting: (\d+) \(total: (\d+)\)`)

// parseStats reads the last progress line of go test -fuzz's output; the
// line's own rate is over its last few seconds (often 0 once the time is
// up), so the run's average is computed from its totals instead.
func parseStats(out []byte) stats {
	m := progressLine.FindAllSubmatch(out, -1)
	if len(m) == 0 {
		return stats{}
	}
	last := m[len(m)-1]
	elapsed, err := time.ParseDuration(string(last[1]))
	if err != nil {
		return stats{}
	}
	num := func(b []byte) int64 {
		n, _ := strconv.ParseInt(string(b), 10, 64)
		return n
	}
	return stats{elapsed: elapsed, execs: num(last[2]), newInteresting: num(last[3]), corpus: num(last[4]), seen: true}
}

// add sums two runs of one target (a run stopped by the deadline race and
// its rerun); the corpus is the later run's.
func (s stats) add(later stats) stats {
	return stats{
		elapsed:        s.elapsed + later.elapsed,
		execs:          s.execs + later.execs,
		newInteresting: s.newInteresting + later.newInteresting,
		corpus:         later.corpus,
		seen:           s.seen || later.seen,
	}
}

// rate is the average executions per second, 0 when no time was reported.
func (s stats) rate() int64 {
	if s.elapsed < time.Second {
		return 0
	}
	return s.execs * int64(time.Second) / int64(s.elapsed)
}

func (s stats) String() string {
	if !s.seen {
		return "no progress reported"
	}
	return fmt.Sprintf("%d execs (%d/s), %d new interesting (corpus %d)", s.execs, s.rate(), s.newInteresting, s.corpus)
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, ""))
}

// run is fuzzrun with its arguments; dir is where the go commands run
// ("" for the current directory). It returns the exit status.
func run(args []string, stdout, stderr io.Writer, dir string) int {
	fl := flag.NewFlagSet("fuzzrun", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fuzzTime := fl.Duration("time", 5*time.Second, "fuzzing time per target (go test -fuzztime)")
	only := fl.String("run", "", "only targets whose name matches this regular expression")
	goCmd := fl.String("go", "go", "the go command")
	minExecs := fl.Int64("minexecs", 1000, "fail a target that ran fewer executions than this")
	parallel := fl.Int("parallel", 0, "fuzzing workers per target (go test -parallel; 0: one per CPU)")
	minimize := fl.Duration("minimizetime", 0, "longest minimisation of one input (go test -fuzzminimizetime; 0: a tenth of -time, at most 60s)")
	fl.Usage = func() {
		fmt.Fprintf(stderr, "usage: fuzzrun [-time d] [-minexecs n] [-parallel n] [-minimizetime d] [-run regexp] [packages]\n")
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if *minExecs < 0 || *parallel < 0 || *minimize < 0 || *fuzzTime <= 0 {
		fmt.Fprintln(stderr, "fuzzrun: -time must be positive, -minexecs, -parallel and -minimizetime not negative")
		return 2
	}
	if *minimize == 0 {
		*minimize = defaultMinimizeTime(*fuzzTime)
	}
	re, err := regexp.Compile(*only)
	if err != nil {
		fmt.Fprintf(stderr, "fuzzrun: -run: %v\n", err)
		return 2
	}
	patterns := fl.Args()
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	start := time.Now()
	targets, err := discover(*goCmd, dir, patterns)
	if err != nil {
		fmt.Fprintf(stderr, "fuzzrun: %v\n", err)
		return 2
	}
	targets = filter(targets, re)
	if len(targets) == 0 {
		fmt.Fprintln(stderr, "fuzzrun: no fuzz targets found")
		return 2
	}
	workers := "one fuzzing worker per CPU"
	if *parallel == 1 {
		workers = "1 fuzzing worker"
	} else if *parallel > 1 {
		workers = fmt.Sprintf("%d fuzzing workers", *parallel)
	}
	fmt.Fprintf(stdout, "fuzzrun: %d targets, %v each, at least %d executions, %s, minimising an input at most %v (discovery %v)\n",
		len(targets), *fuzzTime, *minExecs, workers, *minimize, time.Since(start).Round(time.Millisecond))
	var results []result
	for _, t := range targets {
		r := fuzz(*goCmd, t, runOpts{time: *fuzzTime, parallel: *parallel, minimize: *minimize})
		status := "ok"
		switch {
		case r.crashed:
			status = "CRASH"
		case r.few(*minExecs):
			status = "FEW"
		case r.raced:
			status = "raced"
		}
		fmt.Fprintf(stdout, "%-6s %-60s %6.1fs  %v\n", status, t.pkg+"."+t.name, r.elapsed.Seconds(), r.stats)
		if r.crashed {
			fmt.Fprintln(stdout, indent(r.detail))
		}
		results = append(results, r)
	}
	return summarize(stdout, results, *minExecs, time.Since(start))
}

// summarize prints the run's totals and what failed, and returns the exit
// status: 1 if a target crashed or ran fewer than minExecs executions.
func summarize(w io.Writer, results []result, minExecs int64, total time.Duration) int {
	crashes, few := 0, 0
	var execs int64
	for _, r := range results {
		if r.crashed {
			crashes++
		}
		if r.few(minExecs) {
			few++
		}
		execs += r.stats.execs
	}
	fmt.Fprintf(w, "fuzzrun: %d targets, %d crashed, %d under %d executions; %d executions in all, total %v\n",
		len(results), crashes, few, minExecs, execs, total.Round(time.Second))
	for _, r := range results {
		if r.raced {
			fmt.Fprintf(w, "fuzzrun: %s.%s stopped twice by go test's -fuzztime deadline race (go.dev/issue/75804), no input found\n", r.pkg, r.name)
		}
	}
	for _, r := range results {
		switch {
		case r.crashed:
			where := "no input saved: see the output above"
			if r.input != "" {
				where = "input " + r.dir + "/" + r.input
			}
			fmt.Fprintf(w, "fuzzrun: CRASH %s.%s (%s)\n", r.pkg, r.name, where)
		case r.few(minExecs):
			fmt.Fprintf(w, "fuzzrun: FEW %s.%s ran %d executions, fewer than %d: too slow an input or too large a seed to minimise (go test -fuzz shows the progress)\n",
				r.pkg, r.name, r.stats.execs, minExecs)
		}
	}
	if crashes > 0 || few > 0 {
		return 1
	}
	return 0
}

func filter(ts []target, re *regexp.Regexp) []target {
	var out []target
	for _, t := range ts {
		if re.MatchString(t.name) {
			out = append(out, t)
		}
	}
	return out
}

// fuzzDecl finds fuzz target declarations; only packages with one are asked
// for their list, which spares compiling every other test binary.
var fuzzDecl = regexp.MustCompile(`(?m)^func Fuzz[A-Za-z0-9_]*\(\s*\w+\s+\*testing\.F\s*\)`)

// discover lists the packages of patterns whose test files declare fuzz
// targets, then the targets go test reports for each.
func discover(goCmd, dir string, patterns []string) ([]target, error) {
	args := append([]string{"list", "-json=ImportPath,Dir,TestGoFiles,XTestGoFiles"}, patterns...)
	cmd := exec.Command(goCmd, args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w%s", err, stderrOf(err))
	}
	var targets []target
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath, Dir           string
			TestGoFiles, XTestGoFiles []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list output: %w", err)
		}
		if !declaresFuzz(p.Dir, append(p.TestGoFiles, p.XTestGoFiles...)) {
			continue
		}
		names, err := listTargets(goCmd, p.Dir)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.ImportPath, err)
		}
		for _, n := range names {
			targets = append(targets, target{pkg: p.ImportPath, dir: p.Dir, name: n})
		}
	}
	return targets, nil
}

func declaresFuzz(dir string, files []string) bool {
	for _, f := range files {
		b, err := os.ReadFile(dir + "/" + f)
		if err == nil && fuzzDecl.Match(b) {
			return true
		}
	}
	return false
}

func listTargets(goCmd, dir string) ([]string, error) {
	cmd := exec.Command(goCmd, "test", "-list", "^Fuzz", ".")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go test -list: %w%s", err, stderrOf(err))
	}
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "Fuzz") {
			names = append(names, l)
		}
	}
	return names, nil
}

// crashFile matches go test's report of the input that failed.
var crashFile = regexp.MustCompile(`Failing input written to (\S+)`)

// deadlineRace matches how go test fails a target when its -fuzztime ends
// while a worker is still mid-input on a loaded machine: the target fails
// with a bare "context deadline exceeded" and writes no input. That is a
// race in Go's fuzzing coordinator (go.dev/issue/75804, fixed after Go
// 1.26), not a crash of the code under test.
var deadlineRace = regexp.MustCompile(`(?m)^\s*--- FAIL: Fuzz\w* \([0-9.]+s\)\n\s+context deadline exceeded\n`)

// raceOnly reports whether a failed run's output is the coordinator's
// deadline race and nothing else.
func raceOnly(out []byte) bool {
	return deadlineRace.Match(out) && !crashFile.Match(out)
}

// fuzz runs one target; a run that failed only by the coordinator's
// deadline race is run once more, and if that one races too the target is
// reported as raced, not crashed (it found nothing either time).
func fuzz(goCmd string, t target, o runOpts) result {
	r := fuzzOnce(goCmd, t, o)
	if r.crashed && raceOnly([]byte(r.detail)) {
		first := r
		r = fuzzOnce(goCmd, t, o)
		r.elapsed += first.elapsed
		r.stats = first.stats.add(r.stats)
		if r.crashed && raceOnly([]byte(r.detail)) {
			r.crashed, r.raced = false, true
		}
	}
	return r
}

// runOpts is how each target is fuzzed.
type runOpts struct {
	time     time.Duration // go test -fuzztime
	parallel int           // go test -parallel, 0 for its default
	minimize time.Duration // go test -fuzzminimizetime
}

// defaultMinimizeTime is a tenth of the fuzzing time, at most go's own
// default of 60 s and at least a second.
func defaultMinimizeTime(fuzzTime time.Duration) time.Duration {
	return min(max(fuzzTime/10, time.Second), time.Minute)
}

// args are go test's arguments for fuzzing target name in the current
// directory; -run matching nothing, as the package's ordinary tests run
// elsewhere.
func (o runOpts) args(name string) []string {
	args := []string{"test", "-run", "^$", "-fuzz", "^" + name + "$", "-fuzztime", o.time.String()}
	if o.minimize > 0 {
		args = append(args, "-fuzzminimizetime", o.minimize.String())
	}
	if o.parallel > 0 {
		args = append(args, "-parallel", strconv.Itoa(o.parallel))
	}
	return append(args, ".")
}

func fuzzOnce(goCmd string, t target, o runOpts) result {
	cmd := exec.Command(goCmd, o.args(t.name)...)
	cmd.Dir = t.dir
	start := time.Now()
	out, err := cmd.CombinedOutput()
	r := result{target: t, elapsed: time.Since(start), stats: parseStats(out)}
	if err != nil {
		// A crash names the input go test saved; anything else (a build
		// error, a failing seed) fails the run all the same.
		r.crashed = true
		r.detail = string(out)
		if m := crashFile.FindSubmatch(out); m != nil {
			r.input = string(m[1])
		}
	}
	return r
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return ": " + strings.TrimSpace(string(ee.Stderr))
	}
	return ""
}

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
