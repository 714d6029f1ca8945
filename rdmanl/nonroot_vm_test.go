package rdmanl

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

const nobodyEnv = "RDMANL_TEST_AS_NOBODY"

// TestVMNonRoot runs TestNobody as an unprivileged user: it reads what
// rdma shows every user, and the kernel refuses the rest with EPERM.
func TestVMNonRoot(t *testing.T) {
	vmenv.RequireDevice(t, vmenv.RXE0)
	if os.Getuid() != 0 {
		t.Skip("needs root to switch to nobody")
	}
	out, code := vmenv.RunAsNobody(t, os.Args[0], []string{nobodyEnv + "=1"}, "-test.run=^TestNobody$", "-test.v")
	if code != 0 || !strings.Contains(out, "--- PASS: TestNobody") {
		t.Fatalf("as nobody: exit %d\n%s", code, out)
	}
}

// TestNobody is TestVMNonRoot's unprivileged half.
func TestNobody(t *testing.T) {
	if os.Getenv(nobodyEnv) == "" {
		t.Skip("run by TestVMNonRoot")
	}
	c, err := Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	devs, err := c.Devices(ctx)
	if err != nil || len(devs) < 2 {
		t.Fatalf("Devices as nobody: %v, %v", names(devs), err)
	}
	if _, err := c.Links(ctx); err != nil {
		t.Errorf("Links as nobody: %v", err)
	}
	if _, err := c.System(ctx); err != nil {
		t.Errorf("System as nobody: %v", err)
	}
	for name, call := range map[string]func() error{
		"AddLink":      func() error { return c.AddLink(ctx, "rxe7", LinkRXE, vmenv.NetdevA) },
		"DeleteLink":   func() error { return c.DeleteLink(ctx, vmenv.RXE1) },
		"Rename":       func() error { return c.Rename(ctx, vmenv.RXE1, "rxe7") },
		"SetNetnsMode": func() error { return c.SetNetnsMode(ctx, NetnsExclusive) },
	} {
		if err := call(); !errors.Is(err, unix.EPERM) {
			t.Errorf("%s as nobody: %v, want EPERM", name, err)
		}
	}
}
