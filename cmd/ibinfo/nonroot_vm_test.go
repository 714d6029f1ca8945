package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

// ibinfoChildEnv makes the test binary, re-executed, be ibinfo: the
// arguments after "--" are its command line.
const ibinfoChildEnv = "IBINFO_AS_COMMAND"

// nobody is the unprivileged identity the commands run as.
const nobody = 65534

// TestNonRootNoAccess runs ibinfo and rdma-core's ibv_devinfo as uid 65534
// while the uverbs nodes are mode 0600, root's. ibv_devinfo says only
// "Failed to open device"; ibinfo must fail too (a non-zero exit status),
// and say which file it could not open, why, and what grants access.
func TestNonRootNoAccess(t *testing.T) {
	if os.Getenv(ibinfoChildEnv) != "" {
		args := []string{"ibv_devinfo"}
		for i, a := range os.Args {
			if a == "--" {
				args = append(args, os.Args[i+1:]...)
				break
			}
		}
		os.Exit(run(args, os.Stdout, os.Stderr, environment{sys: newRealSystem()}))
	}
	if !vmenv.InVM() {
		t.Skip("changes the modes of /dev/infiniband nodes and runs as another user: test VM only")
	}
	vmenv.RequireDevice(t, vmenv.RXE0)
	lockUverbsNodes(t)
	ref, err := exec.LookPath("ibv_devinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{}, {"-d", vmenv.RXE0}, {"-l"}} {
		name := "[" + strings.Join(args, " ") + "]"
		want, wantCode := runAsNobody(t, ref, []string{"IBV_DRIVERS=rxe"}, args...)
		got, gotCode := runAsNobody(t, os.Args[0], []string{ibinfoChildEnv + "=1"}, append([]string{"-test.run=^TestNonRootNoAccess$", "--"}, args...)...)
		t.Logf("%s as uid %d:\nibv_devinfo (exit %d):\n%s\nibinfo (exit %d):\n%s", name, nobody, wantCode, want, gotCode, got)
		if len(args) > 0 && args[0] == "-l" {
			// Listing opens nothing: both list the device, as root would.
			if gotCode != 0 || wantCode != 0 || !strings.Contains(got, vmenv.RXE0) {
				t.Errorf("%s: ibinfo exit %d, ibv_devinfo exit %d; want both 0 listing %s", name, gotCode, wantCode, vmenv.RXE0)
			}
			continue
		}
		if gotCode == 0 || wantCode == 0 {
			t.Errorf("%s: ibinfo exit %d, ibv_devinfo exit %d; want both non-zero", name, gotCode, wantCode)
		}
		for _, say := range []string{"Failed to open device", "/dev/infiniband/uverbs", "permission denied", "mode 0600", "uid 65534", "udev rule"} {
			if !strings.Contains(got, say) {
				t.Errorf("%s: ibinfo does not say %q", name, say)
			}
		}
	}
}

// lockUverbsNodes makes every /dev/infiniband/uverbs* node mode 0600, owner
// root, until the test ends.
func lockUverbsNodes(t *testing.T) {
	t.Helper()
	nodes, err := filepath.Glob("/dev/infiniband/uverbs*")
	if err != nil || len(nodes) == 0 {
		t.Fatalf("no uverbs nodes: %v", err)
	}
	for _, n := range nodes {
		fi, err := os.Stat(n)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		mode, uid, gid := fi.Mode().Perm(), int(st.Uid), int(st.Gid)
		t.Cleanup(func() {
			os.Chmod(n, mode)
			os.Chown(n, uid, gid)
		})
		if err := os.Chown(n, 0, 0); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(n, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// runAsNobody runs bin as uid and gid 65534 with extra environment env and
// returns its combined output and exit status. The binary is copied where
// that user can execute it.
func runAsNobody(t *testing.T, bin string, env []string, args ...string) (string, int) {
	t.Helper()
	dir, err := os.MkdirTemp("", "nonroot")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, filepath.Base(bin))
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Args[0] = filepath.Base(bin)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	}
	t.Fatalf("%s: %v", bin, err)
	return "", -1
}
