package uverbs_test

import (
	"testing"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

// TestExamplesVM runs the godoc examples on the VM's device and checks
// what they print (they have no Output comment, since they need a device).
func TestExamplesVM(t *testing.T) {
	vmenv.RequireRXE(t)
	for _, tc := range []struct {
		name string
		run  func()
		want string
	}{
		{"send", ExampleQP_PostSend_send, "ping\n"},
		{"rdma", ExampleQP_PostSend_rdma, "remote\n"},
		{"atomics", ExampleQP_PostSend_atomics, "40 42 7\n"},
		{"ud", ExamplePD_CreateAH, "datagram\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := vmenv.CaptureStdout(t, tc.run); got != tc.want {
				t.Errorf("printed %q, want %q", got, tc.want)
			}
		})
	}
	for _, run := range []func(){ExampleOpen, ExampleContext_RecommendedGID, ExamplePD_RegisterBuffer, ExampleCompChannel_Wait} {
		vmenv.CaptureStdout(t, run)
	}
}
