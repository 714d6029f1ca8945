package vmenv

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// Nobody is the unprivileged uid and gid the permission tests run as.
const Nobody = 65534

// LockUverbsNodes makes every /dev/infiniband/uverbs* node mode 0600, owner
// root (what a distribution without rdma-core's udev rules, or a container
// runtime, may leave) until the test ends, and returns their paths.
func LockUverbsNodes(t testing.TB) []string {
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

// RunAsNobody runs bin (argv[0] its base name) as uid and gid Nobody with
// extra environment env and returns its combined output and exit status.
// The binary is copied where that user can execute it.
func RunAsNobody(t testing.TB, bin string, env []string, args ...string) (string, int) {
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
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: Nobody, Gid: Nobody}}
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
