package vmproc

import (
	"errors"
	"net"
	"os/exec"
	"strconv"
	"testing"
)

func TestListeningAndFreePort(t *testing.T) {
	port := FreePort(t)
	if Listening(port) {
		t.Fatalf("port %d reported listening before anything listens", port)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Skipf("port %d taken meanwhile: %v", port, err)
	}
	defer ln.Close()
	if !Listening(port) {
		t.Fatalf("port %d not reported listening", port)
	}
}

func TestExitCode(t *testing.T) {
	if code, note := ExitCode(nil); code != 0 || note != "" {
		t.Errorf("ExitCode(nil) = %d, %q", code, note)
	}
	err := exec.Command("sh", "-c", "exit 3").Run()
	if code, note := ExitCode(err); code != 3 || note != "" {
		t.Errorf("ExitCode(exit 3) = %d, %q", code, note)
	}
	if code, note := ExitCode(errors.New("boom")); code != -1 || note == "" {
		t.Errorf("ExitCode(boom) = %d, %q", code, note)
	}
}
