package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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
	if code := run([]string{"-time", "1s", "-run", "Clean"}, &out, &errb, dir); code != 0 || !strings.Contains(out.String(), "1 targets, 0 crashed") {
		t.Errorf("-run Clean: exit %d\n%s", code, out.String())
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
