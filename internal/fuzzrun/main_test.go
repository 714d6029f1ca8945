package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// TestRunFindsTargetsAndCrashes runs fuzzrun over a throwaway module whose
// test file declares two targets, one of which panics on an input the
// fuzzer finds at once: both are discovered, the crash fails the run and
// the summary names the saved input.
func TestRunFindsTargetsAndCrashes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and fuzzes a module")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command (the test VM): ", err)
	}
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/fz\n\ngo 1.26\n")
	write("fz.go", "package fz\n\nfunc Parse(b []byte) int {\n\tif len(b) > 4 {\n\t\tpanic(\"bad\")\n\t}\n\treturn len(b)\n}\n")
	write("fz_test.go", `package fz

import "testing"

func FuzzClean(f *testing.F) {
	f.Add([]byte("a"))
	f.Fuzz(func(t *testing.T, b []byte) { _ = len(b) })
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("xyz0"[1:]))
	f.Fuzz(func(t *testing.T, b []byte) { Parse(b) })
}

func TestNotFuzz(t *testing.T) {}
`)
	ts, err := discover("go", dir, []string{"./..."})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range ts {
		names = append(names, x.name)
	}
	if strings.Join(names, " ") != "FuzzClean FuzzParse" {
		t.Errorf("discovered %q, want FuzzClean FuzzParse", names)
	}
	var out, errb strings.Builder
	code := run([]string{"-time", "30s", "-run", "Parse"}, &out, &errb, dir)
	t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	for _, want := range []string{"CRASH  example.com/fz.FuzzParse", "1 targets, 1 crashed", "input " + dir + "/testdata/fuzz/FuzzParse/"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	out.Reset()
	if code := run([]string{"-time", "1s", "-parallel", "1", "-run", "Clean"}, &out, &errb, dir); code != 0 ||
		!strings.Contains(out.String(), "1 targets, 0 crashed, 0 under 1000 executions") ||
		!regexp.MustCompile(`(?m)^ok +example.com/fz.FuzzClean +[0-9.]+s  \d+ execs \(\d+/s\), \d+ new interesting \(corpus \d+\)$`).MatchString(out.String()) {
		t.Errorf("-run Clean: exit %d\n%s", code, out.String())
	}
	// A bar no target can clear in a second fails the run, by name.
	out.Reset()
	if code := run([]string{"-time", "1s", "-minexecs", "1000000000000", "-run", "Clean"}, &out, &errb, dir); code != 1 ||
		!strings.Contains(out.String(), "fuzzrun: FEW example.com/fz.FuzzClean ran ") ||
		!strings.Contains(out.String(), "1 targets, 0 crashed, 1 under 1000000000000 executions") {
		t.Errorf("-minexecs 1e12: exit %d\n%s", code, out.String())
	}
}

func TestParseStats(t *testing.T) {
	tests := []struct {
		name string
		out  string
		want stats
	}{
		{"last line wins", "fuzz: elapsed: 0s, gathering baseline coverage: 0/5 completed\n" +
			"fuzz: elapsed: 0s, gathering baseline coverage: 5/5 completed, now fuzzing with 2 workers\n" +
			"fuzz: elapsed: 3s, execs: 101340 (33778/sec), new interesting: 9 (total: 14)\n" +
			"fuzz: elapsed: 5s, execs: 171759 (33675/sec), new interesting: 11 (total: 16)\n" +
			"PASS\nok  \tpkg\t5.2s\n",
			stats{elapsed: 5 * time.Second, execs: 171759, newInteresting: 11, corpus: 16, seen: true}},
		{"minutes", "fuzz: elapsed: 1m0s, execs: 1140891 (0/sec), new interesting: 9 (total: 15)\n" +
			"fuzz: elapsed: 1h2m3s, execs: 7 (0/sec), new interesting: 0 (total: 1)\n",
			stats{elapsed: time.Hour + 2*time.Minute + 3*time.Second, execs: 7, corpus: 1, seen: true}},
		{"minimising, then stopped", "fuzz: elapsed: 3s, execs: 3 (1/sec), new interesting: 0 (total: 1)\n" +
			"fuzz: elapsed: 6s, minimizing\n--- FAIL: FuzzX (6.01s)\n",
			stats{elapsed: 3 * time.Second, execs: 3, corpus: 1, seen: true}},
		{"seed corpus only", "fuzz: elapsed: 0s, testing seed corpus: 1/1 completed\n--- FAIL: FuzzX/seed#0\n", stats{}},
		{"build error", "# pkg\n./x.go:1:1: syntax error\nFAIL\tpkg [build failed]\n", stats{}},
		{"not at a line start", "log: fuzz: elapsed: 3s, execs: 99 (33/sec), new interesting: 0 (total: 1)\n", stats{}},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, parseStats([]byte(tc.out)), cmp.AllowUnexported(stats{})); diff != "" {
			t.Errorf("%s: parseStats (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestStatsString(t *testing.T) {
	s := stats{elapsed: 5 * time.Second, execs: 171759, newInteresting: 11, corpus: 16, seen: true}
	if got, want := s.String(), "171759 execs (34351/s), 11 new interesting (corpus 16)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := (stats{}).String(), "no progress reported"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	sum := stats{elapsed: 5 * time.Second, execs: 10, newInteresting: 1, corpus: 3, seen: true}.add(s)
	if want := (stats{elapsed: 10 * time.Second, execs: 171769, newInteresting: 12, corpus: 16, seen: true}); sum != want {
		t.Errorf("add: got %+v, want %+v", sum, want)
	}
}

// TestSummarizeThreshold: the run fails when a target found nothing but ran
// fewer than the minimum (or reported no progress at all); a crash fails it
// whatever its count, and a raced target is judged by its executions.
func TestSummarizeThreshold(t *testing.T) {
	res := func(name string, execs int64, seen, crashed, raced bool) result {
		return result{target: target{pkg: "p", name: name}, crashed: crashed, raced: raced,
			stats: stats{elapsed: 5 * time.Second, execs: execs, seen: seen}}
	}
	tests := []struct {
		name     string
		results  []result
		min      int64
		wantCode int
		want     []string
		notWant  []string
	}{
		{"all clear", []result{res("FuzzA", 1000, true, false, false), res("FuzzB", 50000, true, false, false)}, 1000, 0,
			[]string{"2 targets, 0 crashed, 0 under 1000 executions; 51000 executions in all"}, []string{"FEW", "CRASH"}},
		{"one short", []result{res("FuzzA", 999, true, false, false), res("FuzzB", 50000, true, false, false)}, 1000, 1,
			[]string{"1 under 1000 executions", "fuzzrun: FEW p.FuzzA ran 999 executions, fewer than 1000"}, []string{"p.FuzzB ran"}},
		{"no progress line", []result{res("FuzzA", 0, false, false, false)}, 1000, 1,
			[]string{"fuzzrun: FEW p.FuzzA ran 0 executions"}, nil},
		{"bar of zero", []result{res("FuzzA", 0, false, false, false)}, 0, 0, []string{"0 under 0 executions"}, []string{"FEW"}},
		{"crash not counted as few", []result{res("FuzzA", 3, true, true, false)}, 1000, 1,
			[]string{"1 crashed, 0 under 1000", "fuzzrun: CRASH p.FuzzA"}, []string{"FEW"}},
		{"raced but busy", []result{res("FuzzA", 20000, true, false, true)}, 1000, 0,
			[]string{"deadline race (go.dev/issue/75804)"}, []string{"FEW"}},
		{"raced and idle", []result{res("FuzzA", 10, true, false, true)}, 1000, 1,
			[]string{"fuzzrun: FEW p.FuzzA ran 10 executions"}, nil},
	}
	for _, tc := range tests {
		var out strings.Builder
		code := summarize(&out, tc.results, tc.min, time.Minute)
		if code != tc.wantCode {
			t.Errorf("%s: exit %d, want %d\n%s", tc.name, code, tc.wantCode, out.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%s: output lacks %q\n%s", tc.name, w, out.String())
			}
		}
		for _, w := range tc.notWant {
			if strings.Contains(out.String(), w) {
				t.Errorf("%s: output has %q\n%s", tc.name, w, out.String())
			}
		}
	}
}

func TestRunOptsArgs(t *testing.T) {
	tests := []struct {
		o    runOpts
		want string
	}{
		{runOpts{time: 5 * time.Second}, "test -run ^$ -fuzz ^FuzzX$ -fuzztime 5s ."},
		{runOpts{time: 2 * time.Minute, parallel: 1, minimize: 12 * time.Second},
			"test -run ^$ -fuzz ^FuzzX$ -fuzztime 2m0s -fuzzminimizetime 12s -parallel 1 ."},
	}
	for _, tc := range tests {
		if got := strings.Join(tc.o.args("FuzzX"), " "); got != tc.want {
			t.Errorf("%+v: got %q, want %q", tc.o, got, tc.want)
		}
	}
	for _, tc := range []struct{ fuzz, want time.Duration }{
		{5 * time.Second, time.Second}, {80 * time.Second, 8 * time.Second}, {2 * time.Minute, 12 * time.Second},
		{time.Hour, time.Minute},
	} {
		if got := defaultMinimizeTime(tc.fuzz); got != tc.want {
			t.Errorf("defaultMinimizeTime(%v) = %v, want %v", tc.fuzz, got, tc.want)
		}
	}
}

func TestRunBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-minexecs", "-1"}, {"-parallel", "-2"}, {"-minimizetime", "-1s"}, {"-time", "0s"}, {"-run", "("}} {
		var out, errb strings.Builder
		if code := run(args, &out, &errb, t.TempDir()); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}

func TestRaceOnly(t *testing.T) {
	tests := []struct {
		name string
		out  string
		want bool
	}{
		{"deadline race", "fuzz: elapsed: 5s, execs: 72645 (14572/sec), new interesting: 0 (total: 17)\n" +
			"--- FAIL: FuzzQueueIndexes (5.06s)\n    context deadline exceeded\nFAIL\nexit status 1\n", true},
		{"crash with input", "--- FAIL: FuzzX (4.81s)\n    --- FAIL: FuzzX (0.00s)\n        x_test.go:59: bad\n" +
			"    Failing input written to testdata/fuzz/FuzzX/650aface558a57d8\n", false},
		{"deadline text in a crash", "--- FAIL: FuzzX (1.00s)\n    context deadline exceeded\n" +
			"    Failing input written to testdata/fuzz/FuzzX/1\n", false},
		{"build error", "# pkg\n./x.go:1:1: syntax error\nFAIL\tpkg [build failed]\n", false},
		{"seed failure", "--- FAIL: FuzzX (0.00s)\n    --- FAIL: FuzzX/seed#0 (0.00s)\n        x_test.go:9: bad\n", false},
	}
	for _, tc := range tests {
		if got := raceOnly([]byte(tc.out)); got != tc.want {
			t.Errorf("%s: raceOnly = %v, want %v", tc.name, got, tc.want)
		}
	}
}
