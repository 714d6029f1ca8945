package vmproc

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
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

// TestKernelStacks: one entry per thread, named by its task id and
// command; the stack itself, or the reason it could not be read.
func TestKernelStacks(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep to run:", err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	pid := cmd.Process.Pid
	// Start returns once the child exists, which can be before it has
	// exec'd sleep: until then its command is still this test's (seen
	// under TCG, where the exec takes a while).
	comm := "/proc/" + strconv.Itoa(pid) + "/comm"
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(comm); err == nil && strings.TrimSpace(string(b)) == "sleep" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the child never became sleep", comm)
		}
	}
	got := KernelStacks(pid)
	if want := "\n" + strconv.Itoa(pid) + " (sleep):\n"; !strings.Contains(got, want) {
		t.Errorf("KernelStacks(%d) = %q, want it to hold %q", pid, got, want)
	}
	if got := KernelStacks(-1); got != "" {
		t.Errorf("KernelStacks(-1) = %q, want nothing", got)
	}
}
