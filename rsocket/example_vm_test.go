package rsocket_test

import (
	"testing"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

// TestExampleVM runs the package examples on the VM's rxe0 and checks what
// it prints (it has no Output comment, since it needs a device).
func TestExampleVM(t *testing.T) {
	vmenv.RequireDevice(t, vmenv.RXE0)
	want := "hello over RDMA\n<nil>\n"
	if out := vmenv.CaptureStdout(t, Example); out != want {
		t.Errorf("Example printed %q, want %q", out, want)
	}
	want = "client wrote 5 <nil>\nserver: \"hello\"\n"
	if out := vmenv.CaptureStdout(t, ExampleConn_MapIO); out != want {
		t.Errorf("ExampleConn_MapIO printed %q, want %q", out, want)
	}
}
