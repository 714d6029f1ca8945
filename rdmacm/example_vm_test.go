package rdmacm_test

import (
	"testing"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

// TestExampleVM runs the package examples on the VM's rxe0 and checks what
// they print (they have no Output comment, since they need a device).
func TestExampleVM(t *testing.T) {
	vmenv.RequireDevice(t, vmenv.RXE0)
	for _, tc := range []struct {
		name string
		run  func()
		want string
	}{
		{"Example", Example, "hello\n"},
		{"ExampleEventChannel", ExampleEventChannel,
			"client: RDMA_CM_EVENT_ESTABLISHED\nserver: RDMA_CM_EVENT_ESTABLISHED from 10.99.0.2\n"},
	} {
		if out := vmenv.CaptureStdout(t, tc.run); out != tc.want {
			t.Errorf("%s printed %q, want %q", tc.name, out, tc.want)
		}
	}
}
