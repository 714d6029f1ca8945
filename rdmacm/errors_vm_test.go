package rdmacm

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/rdmanl"
	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

// TestRejectVM: a listener rejects with private data; the dialer's error
// matches ECONNREFUSED and carries the data (148 bytes, zero-padded).
func TestRejectVM(t *testing.T) {
	requireCM(t)
	ctx := testCtx(t, 60*time.Second)
	l := listenA(t, ctx)
	go func() {
		r, err := l.Request(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		if !bytes.HasPrefix(r.PrivateData(), []byte("let me in")) {
			t.Errorf("request private data %q", r.PrivateData())
		}
		if err := r.Reject([]byte("go away")); err != nil {
			t.Error(err)
		}
	}()
	_, err := Dial(ctx, l.Addr().String(), WithSource(vmenv.AddrB), WithPrivateData([]byte("let me in")))
	var rej *RejectedError
	if !errors.Is(err, unix.ECONNREFUSED) || !errors.As(err, &rej) {
		t.Fatalf("Dial to a rejecting listener: %v", err)
	}
	if rej.Reason != 28 || len(rej.PrivateData) != MaxRejectPrivateData || !bytes.HasPrefix(rej.PrivateData, []byte("go away")) {
		t.Errorf("rejected with reason %d, private data %q (%d bytes)", rej.Reason, rej.PrivateData, len(rej.PrivateData))
	}
	t.Log(err)
}

// TestUnreachableVM dials an address on the subnet that nobody has: the
// context's deadline ends the dial with an error matching both
// context.DeadlineExceeded and the kernel's ETIMEDOUT.
func TestUnreachableVM(t *testing.T) {
	requireCM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := Dial(ctx, "10.99.0.77:7471", WithSource(vmenv.AddrB))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dial to an unreachable address: %v, want the context's deadline", err)
	}
	t.Log(err)
	// A cancelled context, with no deadline, ends the dial as well.
	ctx2, cancel2 := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel2)
	_, err = Dial(ctx2, "10.99.0.77:7471", WithSource(vmenv.AddrB))
	if !errors.Is(err, context.Canceled) && !errors.Is(err, unix.ETIMEDOUT) {
		t.Fatalf("Dial with a cancelled context: %v", err)
	}
	t.Log(err)
}

// TestNoDeviceVM binds addresses no RDMA device owns: one on a netdev
// without RDMA (ENODEV) and one on no netdev (EADDRNOTAVAIL). The error
// names the address and the netdevs that do have RDMA devices.
func TestNoDeviceVM(t *testing.T) {
	requireCM(t)
	if out, err := exec.Command("ip", "addr", "add", "10.98.0.1/32", "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("ip addr add: %v: %s", err, out)
	}
	defer exec.Command("ip", "addr", "del", "10.98.0.1/32", "dev", "lo").Run()
	ctx := testCtx(t, 30*time.Second)
	for _, tc := range []struct {
		addr  string
		errno unix.Errno
	}{
		{"10.98.0.1:7471", unix.ENODEV},
		{"10.55.0.1:7471", unix.EADDRNOTAVAIL},
	} {
		_, err := Listen(ctx, tc.addr)
		var nd *NoDeviceError
		if !errors.As(err, &nd) || !errors.Is(err, tc.errno) {
			t.Errorf("Listen %s: %v, want a NoDeviceError with %v", tc.addr, err, tc.errno)
			continue
		}
		for _, want := range []string{strings.Split(tc.addr, ":")[0], "rxe0/1 on va (10.99.0.1)", "rxe1/1 on vb (10.99.0.2)"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Listen %s: %q does not name %q", tc.addr, err, want)
			}
		}
		t.Log(err)
	}
	// Dialing from such a source fails the same way.
	_, err := Dial(ctx, vmenv.AddrA+":7471", WithSource("10.98.0.1"))
	if !errors.Is(err, unix.ENODEV) && !errors.Is(err, unix.EADDRNOTAVAIL) && !errors.Is(err, unix.EINVAL) {
		t.Errorf("Dial from 10.98.0.1: %v", err)
	}
	t.Log(err)
}

// TestPermissionVM makes the connection manager's node root-only and opens
// it as nobody: the error names the node's mode and owners and the fix.
func TestPermissionVM(t *testing.T) {
	if os.Getenv("RDMACM_NOBODY") != "" {
		_, err := NewEventChannel()
		os.Stdout.WriteString("ERR " + errString(err) + "\n")
		if errors.Is(err, fs.ErrPermission) {
			os.Exit(0)
		}
		os.Exit(3)
	}
	requireCM(t)
	fi, err := os.Stat(DevicePath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(DevicePath, 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(DevicePath, fi.Mode().Perm())
	out, code := vmenv.RunAsNobody(t, os.Args[0], []string{"RDMACM_NOBODY=1"}, "-test.run=^TestPermissionVM$")
	if code != 0 {
		t.Fatalf("as nobody: exit %d: %s", code, out)
	}
	for _, want := range []string{DevicePath + " is mode 0600, owner 0 (root)", "uid 65534", `KERNEL=="rdma_cm"`} {
		if !strings.Contains(out, want) {
			t.Errorf("error %q does not say %q", out, want)
		}
	}
	t.Log(strings.TrimSpace(out))
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestABIVersionVM reads the ABI version the kernel reports.
func TestABIVersionVM(t *testing.T) {
	requireCM(t)
	v, err := ABIVersion()
	if err != nil || v != 4 {
		t.Fatalf("ABIVersion = %d, %v; want 4", v, err)
	}
	b, err := os.ReadFile(sysfsABI)
	if err != nil || strings.TrimSpace(string(b)) != "4" {
		t.Errorf("%s: %q %v", sysfsABI, b, err)
	}
	// Netlink answers for the connection manager with its node's number.
	cd, err := rdmanl.LookupGlobalCharDev("rdma_cm")
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(DevicePath, &st); err != nil {
		t.Fatal(err)
	}
	if cd.Name != "rdma_cm" || cd.ABI != 4 || cd.Major != unix.Major(uint64(st.Rdev)) || cd.Minor != unix.Minor(uint64(st.Rdev)) {
		t.Errorf("netlink chardev %+v, node %d:%d", cd, unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev)))
	}
}
