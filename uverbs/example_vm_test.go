package uverbs_test

import (
	"testing"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

// TestExamplesVM runs the godoc examples on the VM's devices and checks
// what they print (they have no Output comment, since they need a device):
// ExampleQP_Connect runs its server and client programs on rxe0 and rxe1
// over TCP, ExamplePD_CreateAH sends a datagram from rxe0 to rxe1.
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
		{"ud", ExamplePD_CreateAH, "datagram (from the sender: true)\n"},
		{"rc two programs", ExampleQP_Connect, "server: the client wrote \"hello from the client\" and sent \"done\" with immediate 0xc0ffee\n" +
			"client: read \"the server's data\"\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := vmenv.CaptureStdout(t, tc.run); got != tc.want {
				t.Errorf("printed %q, want %q", got, tc.want)
			}
		})
	}
	for _, run := range []func(){ExampleDevices, ExampleOpen, ExampleContext_RecommendedGID, ExamplePD_RegisterBuffer, ExampleCompChannel_Wait} {
		vmenv.CaptureStdout(t, run)
	}
}
