package vmenv

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeTB records how a Require* function ended the test.
type fakeTB struct {
	testing.TB
	mu      sync.Mutex
	outcome string // "fatal: ...", "skip: ...", or "" if it returned
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.end("fatal: " + fmt.Sprintf(format, args...))
}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.end("skip: " + fmt.Sprintf(format, args...))
}
func (f *fakeTB) end(s string) {
	f.mu.Lock()
	f.outcome = s
	f.mu.Unlock()
	runtime.Goexit()
}

// call runs fn on its own goroutine, as Fatalf and Skipf end it with
// Goexit like the testing package does.
func call(t *testing.T, fn func(tb testing.TB)) string {
	f := &fakeTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f.outcome
}

func TestRequireDevice(t *testing.T) {
	if InVM() {
		t.Skip("uses fake sysfs paths; meaningless inside the VM")
	}
	root := t.TempDir()
	withDev := filepath.Join(root, "dev-infiniband")
	sysWith := filepath.Join(root, "sys-class-infiniband")
	for _, d := range []string{withDev, filepath.Join(sysWith, "rxe0"), filepath.Join(sysWith, "mlx5_0")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name        string
		inVM        bool
		dev, sys    string
		device      string
		wantOutcome string // prefix
		wantText    string
	}{
		{"present outside", false, withDev, sysWith, "rxe0", "", ""},
		{"present inside", true, withDev, sysWith, "rxe0", "", ""},
		{"no /dev/infiniband outside", false, filepath.Join(root, "none"), sysWith, "rxe0", "skip:", "no " + filepath.Join(root, "none")},
		{"no /dev/infiniband inside", true, filepath.Join(root, "none"), sysWith, "rxe0", "fatal:", "inside the test VM"},
		{"no such device outside", false, withDev, sysWith, "rxe7", "skip:", "present: mlx5_0, rxe0"},
		{"no such device inside", true, withDev, sysWith, "rxe7", "fatal:", "no rxe7"},
		{"no sysfs class", false, withDev, filepath.Join(root, "nosys"), "rxe0", "skip:", "present: none)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			devInfiniband, sysClassInfiniband = tt.dev, tt.sys
			t.Cleanup(func() { devInfiniband, sysClassInfiniband = "/dev/infiniband", "/sys/class/infiniband" })
			if tt.inVM {
				t.Setenv(EnvKernelName, "6.1")
			} else {
				t.Setenv(EnvKernelName, "")
			}
			got := call(t, func(tb testing.TB) { RequireDevice(tb, tt.device) })
			if !strings.HasPrefix(got, tt.wantOutcome) || (tt.wantOutcome == "" && got != "") {
				t.Fatalf("outcome %q, want %q...", got, tt.wantOutcome)
			}
			if !strings.Contains(got, tt.wantText) {
				t.Errorf("outcome %q does not mention %q", got, tt.wantText)
			}
		})
	}

	// RequireRXE outside the VM finds a host rxe device by name.
	devInfiniband, sysClassInfiniband = withDev, sysWith
	t.Cleanup(func() { devInfiniband, sysClassInfiniband = "/dev/infiniband", "/sys/class/infiniband" })
	t.Setenv(EnvKernelName, "")
	var name string
	if got := call(t, func(tb testing.TB) { name = RequireRXE(tb) }); got != "" || name != "rxe0" {
		t.Errorf("RequireRXE: outcome %q, name %q; want rxe0", got, name)
	}
}

// TestVMTopology checks, inside the test VM, what the guest init promises:
// both rxe devices with an ACTIVE port and GID 1 set, their uverbs nodes,
// the netdevs under them, split BTF for the RDMA modules, and the
// environment.
func TestVMTopology(t *testing.T) {
	if !InVM() {
		t.Skip("not in the test VM (GOVERBS_VM unset); run with make vmtest")
	}
	RequireDevice(t, RXE0)
	RequireDevice(t, RXE1)
	read := func(p string) string {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Error(err)
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	for _, d := range []struct{ dev, netdev, guid string }{
		{RXE0, NetdevA, "0000:0aff:fe63:0001"},
		{RXE1, NetdevB, "0000:0aff:fe63:0002"},
	} {
		dev, netdev := d.dev, d.netdev
		if got := read(filepath.Join("/sys/class/infiniband", dev, "node_guid")); got != d.guid {
			t.Errorf("%s node GUID %q, want %q (from the fixed MAC)", dev, got, d.guid)
		}
		port := filepath.Join("/sys/class/infiniband", dev, "ports/1")
		if got := read(filepath.Join(port, "state")); got != "4: ACTIVE" {
			t.Errorf("%s port state %q, want 4: ACTIVE", dev, got)
		}
		if got := read(filepath.Join(port, "gids", fmt.Sprint(GIDIndex))); strings.Trim(got, "0:") == "" {
			t.Errorf("%s gid[%d] = %q, want set", dev, GIDIndex, got)
		}
		if got := read(filepath.Join(port, "gid_attrs/ndevs", fmt.Sprint(GIDIndex))); got != netdev {
			t.Errorf("%s gid[%d] netdev %q, want %s", dev, GIDIndex, got, netdev)
		}
		if got := read(filepath.Join(port, "link_layer")); got != "Ethernet" {
			t.Errorf("%s link layer %q", dev, got)
		}
	}
	for _, p := range []string{
		"/dev/infiniband/uverbs0", "/dev/infiniband/uverbs1",
		"/sys/kernel/btf/vmlinux", "/sys/kernel/btf/ib_core", "/sys/kernel/btf/ib_uverbs", "/sys/kernel/btf/rdma_rxe",
	} {
		if _, err := os.Stat(p); err != nil {
			t.Error(err)
		}
	}
	uname := read("/proc/sys/kernel/osrelease")
	if diff := cmp.Diff(uname, KernelRelease()); diff != "" {
		t.Errorf("%s (-uname +env):\n%s", EnvKernelRelease, diff)
	}
	if name := KernelName(); name != "6.1" && name != "6.12" && !strings.HasPrefix(name, "linux-image-") {
		t.Errorf("%s = %q", EnvKernelName, name)
	}
	if !strings.HasPrefix(uname, KernelName()) && !strings.HasPrefix(KernelName(), "linux-image-") {
		t.Errorf("kernel name %q but release %q", KernelName(), uname)
	}
	t.Logf("kernel %s (%s), GOVERBS_TRANSPORT=%q", KernelName(), uname, os.Getenv("GOVERBS_TRANSPORT"))
}
