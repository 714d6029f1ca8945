package testvm

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

// fakeGo stands in for the go command in vmtest.sh's tests: it appends
// its arguments to $FAKEGO_LOG (one line, each argument in brackets) and
// answers as $FAKEGO_MODE says: ok, flaky (the first run fails
// github.com/x/a and passes github.com/x/b, the next passes), hard
// (github.com/x/a fails every time) or build (fails naming no package).
const fakeGo = `#!/bin/sh
line=""
for a in "$@"; do line="$line[$a]"; done
echo "$line" >>"$FAKEGO_LOG"
runs=$(wc -l <"$FAKEGO_LOG")
case $FAKEGO_MODE in
ok) echo "ok  	github.com/x/a	1.0s"; exit 0 ;;
flaky)
	if [ "$runs" -eq 1 ]; then
		printf -- '--- FAIL: TestX (0.10s)\nFAIL\nFAIL\tgithub.com/x/a\t1.0s\nok  \tgithub.com/x/b\t2.0s\nFAIL\n'
		exit 1
	fi
	echo "ok  	github.com/x/a	1.0s"; exit 0 ;;
hard) printf 'FAIL\tgithub.com/x/a\t1.0s\n'; exit 1 ;;
build) printf '# github.com/x/a\na.go:1:1: syntax error\n'; exit 2 ;;
esac
`

// TestPassScript runs internal/testvm/vmtest.sh (make vmtest's pass)
// against a fake go command: a package that fails once runs again alone
// with the same flags and is reported FLAKY, one that fails twice fails
// the pass, and a failure that names no package fails at once.
func TestPassScript(t *testing.T) {
	if vmenv.InVM() {
		t.Skip("make vmtest runs the script on the host, not in the VM")
	}
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	// Read here so that go test's cache knows the script (sh reads it
	// in a subprocess, which the cache does not see).
	if _, err := os.ReadFile("vmtest.sh"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	goBin := filepath.Join(dir, "go")
	if err := os.WriteFile(goBin, []byte(fakeGo), 0o755); err != nil {
		t.Fatal(err)
	}
	pattern := `TestA|Test B*'q` // spaces, a glob and a quote survive the rerun
	exec1 := "[test][-count=1][-exec][/vm/vmexec -kernel 6.12 -add a:b][-race][-run][" + pattern + "]"
	tests := []struct {
		mode     string
		wantExit int
		wantRuns []string // the fake go's arguments, a line per run
		flaky    string
	}{
		{"ok", 0, []string{exec1 + "[./...]"}, ""},
		{"flaky", 0, []string{exec1 + "[./...]", exec1 + "[github.com/x/a]"},
			"vmtest: FLAKY 6.12/write github.com/x/a: failed, then passed when run again (first failure above)\n"},
		{"hard", 1, []string{exec1 + "[./...]", exec1 + "[github.com/x/a]"}, ""},
		{"build", 1, []string{exec1 + "[./...]"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "log")
			flaky := filepath.Join(t.TempDir(), "flaky")
			cmd := exec.Command("sh", "vmtest.sh", "6.12", "write", "--", "-race", "-run", pattern, "./...")
			cmd.Env = append(os.Environ(), "GO="+goBin, "VMEXEC=/vm/vmexec", "VMEXEC_ADD=-add a:b",
				"VMTEST_FLAKY="+flaky, "FAKEGO_LOG="+log, "FAKEGO_MODE="+tt.mode)
			out, err := cmd.CombinedOutput()
			exit := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				exit = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if exit != tt.wantExit {
				t.Errorf("exit %d, want %d; output:\n%s", exit, tt.wantExit, out)
			}
			runs, _ := os.ReadFile(log)
			if diff := cmp.Diff(tt.wantRuns, strings.Split(strings.TrimSuffix(string(runs), "\n"), "\n")); diff != "" {
				t.Errorf("go test runs (-want +got):\n%s", diff)
			}
			got, _ := os.ReadFile(flaky)
			if diff := cmp.Diff(tt.flaky, string(got)); diff != "" {
				t.Errorf("FLAKY list (-want +got):\n%s", diff)
			}
		})
	}
}
