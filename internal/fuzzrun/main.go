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
	execs   string // the last count go test printed, "" if none
	crashed bool
	raced   bool   // failed twice by go test's deadline race only (see deadlineRace)
	detail  string // the failure's output: the panic and the input file
	input   string // the crashing input's file, relative to dir
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
	fl.Usage = func() {
		fmt.Fprintf(stderr, "usage: fuzzrun [-time d] [-run regexp] [packages]\n")
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		return 2
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
	fmt.Fprintf(stdout, "fuzzrun: %d targets, %v each (discovery %v)\n", len(targets), *fuzzTime, time.Since(start).Round(time.Millisecond))
	var results []result
	for _, t := range targets {
		r := fuzz(*goCmd, t, *fuzzTime)
		status := "ok"
		switch {
		case r.crashed:
			status = "CRASH"
		case r.raced:
			status = "raced"
		}
		fmt.Fprintf(stdout, "%-6s %-60s %6.1fs  %s\n", status, t.pkg+"."+t.name, r.elapsed.Seconds(), r.execs)
		if r.crashed {
			fmt.Fprintln(stdout, indent(r.detail))
		}
		results = append(results, r)
	}
	return summarize(stdout, results, time.Since(start))
}

func summarize(w io.Writer, results []result, total time.Duration) int {
	crashes := 0
	for _, r := range results {
		if r.crashed {
			crashes++
		}
	}
	fmt.Fprintf(w, "fuzzrun: %d targets, %d crashed, total %v\n", len(results), crashes, total.Round(time.Second))
	for _, r := range results {
		if r.raced {
			fmt.Fprintf(w, "fuzzrun: %s.%s stopped twice by go test's -fuzztime deadline race (go.dev/issue/75804), no input found\n", r.pkg, r.name)
		}
	}
	if crashes > 0 {
		for _, r := range results {
			if r.crashed {
				where := "no input saved: see the output above"
				if r.input != "" {
					where = "input " + r.dir + "/" + r.input
				}
				fmt.Fprintf(w, "fuzzrun: CRASH %s.%s (%s)\n", r.pkg, r.name, where)
			}
		}
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

// execsLine matches go test's progress lines, e.g.
// "fuzz: elapsed: 3s, execs: 152883 (50957/sec), new interesting: 2 (total: 9)".
// crashFile matches go test's report of the input that failed.
var crashFile = regexp.MustCompile(`Failing input written to (\S+)`)

var execsLine = regexp.MustCompile(`fuzz: elapsed: (?:(\d+)m)?(\d+)s, execs: (\d+) `)

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
func fuzz(goCmd string, t target, d time.Duration) result {
	r := fuzzOnce(goCmd, t, d)
	if r.crashed && raceOnly([]byte(r.detail)) {
		first := r.elapsed
		r = fuzzOnce(goCmd, t, d)
		r.elapsed += first
		if r.crashed && raceOnly([]byte(r.detail)) {
			r.crashed, r.raced = false, true
		}
	}
	return r
}

func fuzzOnce(goCmd string, t target, d time.Duration) result {
	// -run matching nothing: the package's ordinary tests run elsewhere.
	cmd := exec.Command(goCmd, "test", "-run", "^$", "-fuzz", "^"+t.name+"$", "-fuzztime", d.String(), ".")
	cmd.Dir = t.dir
	start := time.Now()
	out, err := cmd.CombinedOutput()
	r := result{target: t, elapsed: time.Since(start)}
	if m := execsLine.FindAllSubmatch(out, -1); len(m) > 0 {
		// The last line's own rate is over its last few seconds (often 0
		// once the time is up); report the run's average.
		last := m[len(m)-1]
		mins, _ := strconv.Atoi(string(last[1]))
		secs, _ := strconv.Atoi(string(last[2]))
		execs, _ := strconv.Atoi(string(last[3]))
		r.execs = fmt.Sprintf("%d execs", execs)
		if secs += 60 * mins; secs > 0 {
			r.execs += fmt.Sprintf(" (%d/s)", execs/secs)
		}
	}
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
