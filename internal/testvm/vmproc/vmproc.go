// Package vmproc holds what the VM tests and tools need to run a server and
// a client side by side in the guest: a free TCP port, whether a server
// listens yet, and the exit status of a finished process.
package vmproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// FreePort returns a TCP port nothing listens on now.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Listening reports whether a socket listens on TCP port (IPv4 or IPv6),
// from /proc/net: probing with a connection would be taken by a C server
// (rdma-core's examples, perftest) as its one client.
func Listening(port int) bool {
	want := fmt.Sprintf(":%04X ", port)
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			fields := strings.Fields(line)
			// sl local_address rem_address st ...: st 0A is LISTEN.
			if len(fields) > 3 && strings.HasSuffix(fields[1]+" ", want) && fields[3] == "0A" {
				return true
			}
		}
	}
	return false
}

// ExitCode turns what exec.Cmd.Wait returned into an exit status: the
// process's own, 0 for success, or -1 with a note for the output when the
// process could not be waited for at all.
func ExitCode(err error) (code int, note string) {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, ""
	case errors.As(err, &ee):
		return ee.ExitCode(), ""
	default:
		return -1, fmt.Sprintf("\n[test: %v]", err)
	}
}

// CMListening reports whether an rdma_cm ID listens on port in port space
// ps ("TCP" or "UDP"), from iproute2's `rdma resource show cm_id`: rdma_cm
// listeners have no socket for Listening to find.
func CMListening(ps string, port int) bool {
	out, err := exec.Command("rdma", "-j", "resource", "show", "cm_id").Output()
	if err != nil {
		return false
	}
	var ids []struct {
		State   string `json:"state"`
		PS      string `json:"ps"`
		SrcAddr string `json:"src-addr"`
	}
	if json.Unmarshal(out, &ids) != nil {
		return false
	}
	suffix := fmt.Sprintf(":%d", port)
	for _, id := range ids {
		if id.State == "LISTEN" && id.PS == ps && strings.HasSuffix(id.SrcAddr, suffix) {
			return true
		}
	}
	return false
}

// Result is how a program run by Start ended.
type Result struct {
	Exit           int
	Stdout, Stderr string
}

// Start runs one of rdma-core's tools (looked up in PATH, with
// IBV_DRIVERS=rxe) in the background until it exits or ctx ends, and
// delivers its exit status and output; a tool that is not there fails the
// test. A tool still running when ctx ends is killed, and Stderr ends with
// where each of its threads waited in the kernel.
func Start(ctx context.Context, t testing.TB, tool string, args ...string) <-chan Result {
	t.Helper()
	path, err := exec.LookPath(tool)
	if err != nil {
		t.Fatalf("inside the test VM without %s: %v", tool, err)
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(os.Environ(), "IBV_DRIVERS=rxe")
	cmd.WaitDelay = 5 * time.Second
	var hung string // written by Cancel, read after Wait
	cmd.Cancel = func() error {
		hung = "\n[test: killed at the end of its context; its threads' kernel stacks:" + KernelStacks(cmd.Process.Pid) + "]"
		return cmd.Process.Kill()
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	done := make(chan Result, 1)
	go func() {
		exit, note := ExitCode(cmd.Wait())
		errb.WriteString(note + hung)
		done <- Result{exit, out.String(), errb.String()}
	}()
	return done
}

// RunPair runs a server and then, once it listens on TCP port, a client
// (both with IBV_DRIVERS=rxe, the client also with clientEnv), waits for
// both, and returns their combined output. The error names both exit
// statuses and carries the last lines of each output; a server that exits
// before listening is reported with its output.
func RunPair(ctx context.Context, port int, server, client, clientEnv []string) (cliOut, srvOut string, err error) {
	return RunPairWhen(ctx, func() bool { return Listening(port) }, server, client, clientEnv)
}

// RunPairWhen is RunPair with the client started once listening reports
// true (e.g. CMListening for an rdma_cm server, which has no socket).
func RunPairWhen(ctx context.Context, listening func() bool, server, client, clientEnv []string) (cliOut, srvOut string, err error) {
	start := func(argv, env []string) (*exec.Cmd, *bytes.Buffer, error) {
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = append(append(os.Environ(), "IBV_DRIVERS=rxe"), env...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.WaitDelay = 5 * time.Second
		return cmd, &out, cmd.Start()
	}
	srv, so, err := start(server, nil)
	if err != nil {
		return "", "", err
	}
	srvDone := make(chan error, 1)
	go func() { srvDone <- srv.Wait() }()
	for !listening() {
		select {
		case err := <-srvDone:
			return "", so.String(), fmt.Errorf("server ended before listening: %v: %s", err, so)
		case <-ctx.Done():
			srv.Process.Kill()
			<-srvDone
			return "", so.String(), ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	cli, co, err := start(client, clientEnv)
	if err != nil {
		srv.Process.Kill()
		<-srvDone
		return "", so.String(), err
	}
	cliErr := cli.Wait()
	srvErr := <-srvDone
	if cliErr != nil || srvErr != nil {
		return co.String(), so.String(), fmt.Errorf("client: %v, server: %v\nclient output:\n%s\nserver output:\n%s",
			cliErr, srvErr, lastLines(co.String(), 8), lastLines(so.String(), 8))
	}
	return co.String(), so.String(), nil
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// KernelStacks returns where each thread of process pid waits in the
// kernel (/proc/PID/task/TID/stack; root only): what a test prints of a
// tool it kills because it hung.
func KernelStacks(pid int) string {
	var b strings.Builder
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	for _, task := range tasks {
		comm, _ := os.ReadFile(filepath.Join(task, "comm"))
		stack, err := os.ReadFile(filepath.Join(task, "stack"))
		if err != nil {
			stack = []byte(err.Error())
		}
		fmt.Fprintf(&b, "\n%s (%s):\n%s", filepath.Base(task), strings.TrimSpace(string(comm)), strings.TrimSpace(string(stack)))
	}
	return b.String()
}

// Buffer is a process's output, written by the copy of its pipes (and, for
// a tool killed because it hung, by its context's cancel) while the test
// reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p; it implements io.Writer for exec.Cmd's Stdout and
// Stderr.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Reset empties the buffer.
func (b *Buffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b.Reset()
}
