package uverbs

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
	"github.com/goverbs/goverbs/sysfs"
)

// nonRootEnv makes the test binary, re-executed as an unprivileged user,
// play the child of TestNonRootNoAccess.
const nonRootEnv = "GOVERBS_NONROOT_CHILD"

// nobody is the unprivileged identity the children run as.
const nobody = 65534

// lockUverbsNodes makes every /dev/infiniband/uverbs* node mode 0600, owner
// root (what a distribution without rdma-core's udev rules, or a container
// runtime, may leave) until the test ends, and returns their paths.
func lockUverbsNodes(t *testing.T) []string {
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
	return nodes
}

// runAsNobody runs argv as uid and gid 65534 with extra environment env and
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
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, NoSetGroups: false}}
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

// TestNonRootNoAccess opens rxe0 as a user without access to its uverbs
// node (mode 0600, root's): Open fails with an error that matches
// sysfs.ErrNoAccess and fs.ErrPermission, names the file, its mode and
// owners and the user, and says how to grant access.
func TestNonRootNoAccess(t *testing.T) {
	if os.Getenv(nonRootEnv) != "" {
		nonRootChild(t)
		return
	}
	requireVM(t)
	lockUverbsNodes(t)
	out, code := runAsNobody(t, os.Args[0], []string{nonRootEnv + "=1"}, "-test.run=^TestNonRootNoAccess$", "-test.v")
	t.Logf("as uid %d:\n%s", nobody, out)
	if code != 0 || !strings.Contains(out, "--- PASS: TestNonRootNoAccess") {
		t.Errorf("the unprivileged child failed (exit %d)", code)
	}
}

func nonRootChild(t *testing.T) {
	if os.Geteuid() != nobody {
		t.Fatalf("child runs as uid %d, want %d", os.Geteuid(), nobody)
	}
	c, err := Open(vmenv.RXE0)
	if err == nil {
		c.Close()
		t.Fatal("Open succeeded without access to the uverbs node")
	}
	t.Logf("Open(%s): %v", vmenv.RXE0, err)
	if !errors.Is(err, sysfs.ErrNoAccess) || !errors.Is(err, fs.ErrPermission) {
		t.Errorf("the error matches neither sysfs.ErrNoAccess nor fs.ErrPermission")
	}
	for _, want := range []string{"/dev/infiniband/uverbs", "mode 0600", "owner 0", "uid 65534", "udev rule", `MODE="0660"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q", want)
		}
	}
}
