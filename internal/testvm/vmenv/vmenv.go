// Package vmenv tells tests whether they run inside the goverbs test VM and
// gives them its fixed RDMA set-up. It has no dependency on the host-side
// harness, so importing it costs a test binary nothing but a few os calls.
//
// The VM (see internal/testvm) loads rdma_rxe, joins two veth ends va and vb
// (10.99.0.1/24 and 10.99.0.2/24, fixed MACs) and puts rxe0 on va and rxe1
// on vb, with both ports ACTIVE and GID index 1 filled before the test
// binary starts. Traffic between rxe0 and rxe1 crosses the veth pair (the
// guest sets accept_local), so the two devices behave like two hosts; use
// GID index 1 (RoCEv2, IPv4) for that.
package vmenv

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// Environment variables the guest init sets for the program it runs.
const (
	// EnvKernelName holds the harness's kernel name, e.g. "6.1" or "6.12".
	EnvKernelName = "GOVERBS_VM"
	// EnvKernelRelease holds the guest's uname -r, e.g. "6.1.0-56-amd64".
	EnvKernelRelease = "GOVERBS_VM_KERNEL"
)

// The fixed RDMA topology of the VM.
const (
	RXE0    = "rxe0"              // rxe device on netdev va
	RXE1    = "rxe1"              // rxe device on netdev vb
	NetdevA = "va"                // veth end under rxe0
	NetdevB = "vb"                // veth end under rxe1
	AddrA   = "10.99.0.1"         // IPv4 address of va (/24); rxe0's GID index 1 maps it
	AddrB   = "10.99.0.2"         // IPv4 address of vb (/24); rxe1's GID index 1 maps it
	MACA    = "02:00:0a:63:00:01" // MAC of va: rxe0's node GUID is 0000:0aff:fe63:0001
	MACB    = "02:00:0a:63:00:02" // MAC of vb: rxe1's node GUID is 0000:0aff:fe63:0002
	// GIDIndex is the RoCEv2 IPv4-mapped GID the VM waits for on both ports.
	GIDIndex = 1
)

// Paths probed; variables so tests of this package can point them elsewhere.
var (
	sysClassInfiniband = "/sys/class/infiniband"
	devInfiniband      = "/dev/infiniband"
)

// InVM reports whether the process runs inside the goverbs test VM.
func InVM() bool { return os.Getenv(EnvKernelName) != "" }

// KernelName returns the harness's name of the guest kernel ("6.1", "6.12"),
// or "" outside the VM.
func KernelName() string { return os.Getenv(EnvKernelName) }

// KernelRelease returns the guest's uname -r, or "" outside the VM.
func KernelRelease() string { return os.Getenv(EnvKernelRelease) }

// ErrNoDevice reports that an RDMA device the test needs is absent.
var ErrNoDevice = errors.New("rdma device not available")

// CheckDevice reports why the named RDMA device (as in
// /sys/class/infiniband) cannot be used, or nil if it is there together with
// /dev/infiniband. The error wraps ErrNoDevice.
func CheckDevice(name string) error {
	if _, err := os.Stat(devInfiniband); err != nil {
		return fmt.Errorf("%w: no %s (%v)", ErrNoDevice, devInfiniband, errors.Unwrap(err))
	}
	if _, err := os.Stat(filepath.Join(sysClassInfiniband, name)); err != nil {
		have := strings.Join(deviceNames(), ", ")
		if have == "" {
			have = "none"
		}
		return fmt.Errorf("%w: no %s in %s (present: %s)", ErrNoDevice, name, sysClassInfiniband, have)
	}
	return nil
}

// RequireDevice stops the test unless the named RDMA device is present:
// outside the VM it skips with the reason, inside the VM (where the harness
// promised the device) it fails.
func RequireDevice(t testing.TB, name string) {
	t.Helper()
	err := CheckDevice(name)
	if err == nil {
		return
	}
	if InVM() {
		t.Fatalf("inside the test VM (kernel %s): %v", KernelName(), err)
	}
	t.Skipf("%v; not in the test VM (run through internal/testvm: make vmtest)", err)
}

// RequireRXE returns the name of an rxe device to test on: rxe0 inside the
// VM (failing the test if it is missing); outside, the first rxe* device of
// the host, or a skip with the reason.
func RequireRXE(t testing.TB) string {
	t.Helper()
	if InVM() {
		RequireDevice(t, RXE0)
		return RXE0
	}
	for _, name := range deviceNames() {
		if strings.HasPrefix(name, "rxe") && CheckDevice(name) == nil {
			return name
		}
	}
	RequireDevice(t, RXE0) // skips with the precise reason
	return RXE0
}

func deviceNames() []string {
	entries, err := os.ReadDir(sysClassInfiniband)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return []string{"(" + err.Error() + ")"}
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// RequireCM stops the test unless both rxe devices and the connection
// manager's device (/dev/infiniband/rdma_cm) are there, as RequireDevice
// does: a skip outside the VM, a failure inside.
func RequireCM(t testing.TB) {
	t.Helper()
	RequireDevice(t, RXE0)
	RequireDevice(t, RXE1)
	if _, err := os.Stat(filepath.Join(devInfiniband, "rdma_cm")); err != nil {
		if InVM() {
			t.Fatalf("inside the test VM (kernel %s) without the connection manager: %v", KernelName(), err)
		}
		t.Skipf("no connection manager: %v; not in the test VM (run through internal/testvm: make vmtest)", err)
	}
}

// CaptureStdout runs f with os.Stdout redirected to a pipe and returns
// what it printed, for the VM tests that run godoc examples (which need a
// device and so carry no Output comment).
func CaptureStdout(t testing.TB, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	func() {
		defer func() { os.Stdout = old }()
		f()
	}()
	w.Close()
	out := <-done
	r.Close()
	return out
}

// OncePerKernel skips the test in make vmtest's pass with
// GOVERBS_TRANSPORT=write. It is for long tests whose second run on a
// kernel checks nothing more of the transport: interop tests of a wire
// protocol (a peer's messages, perftest's and rstream's exchanges), bulk
// transfers on a provider's rings, command lines refused before a device
// is opened. The transport changes only how verbs commands reach the
// kernel, which the ioctl pass and the uverbs tests of both passes cover,
// so running them twice per kernel only lengthens CI. Run directly (no
// GOVERBS_TRANSPORT), the test runs.
func OncePerKernel(t testing.TB) {
	t.Helper()
	if RepeatPass() {
		t.Skip("runs in the ioctl pass of each kernel, not again with GOVERBS_TRANSPORT=write")
	}
}

// RepeatPass reports whether this is make vmtest's second pass of a kernel,
// the one with GOVERBS_TRANSPORT=write. An interop matrix (a Go side
// against a C tool in both roles, and against itself) runs there only its
// Go-against-Go pairs: they make every verbs command the tool makes, now
// through the write transport, while the pairs with the C tool only repeat
// the wire exchange the ioctl pass checked.
func RepeatPass() bool { return os.Getenv("GOVERBS_TRANSPORT") == "write" }
