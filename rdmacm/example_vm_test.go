package rdmacm_test

import (
	"testing"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

// TestExampleVM runs the package example on the VM's rxe0 and checks what
// it prints (it has no Output comment, since it needs a device).
func TestExampleVM(t *testing.T) {
	vmenv.RequireDevice(t, vmenv.RXE0)
	if out := vmenv.CaptureStdout(t, Example); out != "hello\n" {
		t.Errorf("Example printed %q, want %q", out, "hello\n")
	}
}
