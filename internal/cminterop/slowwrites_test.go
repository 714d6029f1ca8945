//go:build linux && amd64

package cminterop

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// runSlowWrites runs one of rdma-core's tools as startC does, but traced:
// once the tool's main thread has slept (mckey's sleep(3) before it sends),
// each of that thread's later write(2) calls waits delay before it enters
// the kernel. rxe's provider rings its doorbell with a write to the
// uverbs device and librdmacm leaves a group with a write to rdma_cm, so
// the pause gives rxe's send work (a work item on 6.12) time to run before
// the tool tears its QP down. Nothing the tool sends or receives changes;
// only when. The tool's other threads run untraced.
func runSlowWrites(ctx context.Context, t *testing.T, delay time.Duration, tool string, args ...string) result {
	t.Helper()
	path, err := exec.LookPath(tool)
	if err != nil {
		t.Fatalf("inside the test VM without %s: %v", tool, err)
	}
	// The output goes to files: the tracer reaps the process itself, so
	// exec.Cmd.Wait (which would copy pipes) is never called.
	stdout, err := os.CreateTemp("", tool+"-out")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(stdout.Name())
	defer stdout.Close()
	stderr, err := os.CreateTemp("", tool+"-err")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(stderr.Name())
	defer stderr.Close()

	// ptrace requests must come from the thread that started the tracee.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), "IBV_DRIVERS=rxe")
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	pid := cmd.Process.Pid
	stop := context.AfterFunc(ctx, func() { unix.Kill(pid, unix.SIGKILL) })
	defer stop()

	exit, delayed, note := traceSlowWrites(pid, delay)
	t.Logf("%s: %d writes delayed by %v", tool, delayed, delay)
	out, _ := os.ReadFile(stdout.Name())
	errOut, _ := os.ReadFile(stderr.Name())
	return result{Exit: exit, Stdout: string(out), Stderr: string(errOut) + note}
}

// traceSlowWrites runs the stopped tracee pid (stopped by its exec) to its
// end and returns its exit status (-1 with a note if tracing failed) and
// how many writes it delayed.
func traceSlowWrites(pid int, delay time.Duration) (exit, delayed int, note string) {
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid, &ws, unix.WALL, nil); err != nil || !ws.Stopped() {
		return -1, delayed, fmt.Sprintf("\n[test: first stop of %d: %v, status %#x]", pid, err, ws)
	}
	if err := unix.PtraceSetOptions(pid, unix.PTRACE_O_TRACESYSGOOD|unix.PTRACE_O_EXITKILL); err != nil {
		unix.Kill(pid, unix.SIGKILL)
		return -1, delayed, fmt.Sprintf("\n[test: ptrace options: %v]", err)
	}
	slept, entering := false, true
	sig := 0
	for {
		if err := unix.PtraceSyscall(pid, sig); err != nil {
			return -1, delayed, fmt.Sprintf("\n[test: ptrace resume: %v]", err)
		}
		sig = 0
		if _, err := unix.Wait4(pid, &ws, unix.WALL, nil); err != nil {
			return -1, delayed, fmt.Sprintf("\n[test: wait: %v]", err)
		}
		switch {
		case ws.Exited():
			return ws.ExitStatus(), delayed, ""
		case ws.Signaled():
			return -1, delayed, fmt.Sprintf("\n[test: killed by %v]", ws.Signal())
		case !ws.Stopped():
			continue
		case ws.StopSignal() != unix.SIGTRAP|0x80:
			// A signal for the tracee (not a syscall stop): deliver it.
			sig = int(ws.StopSignal())
			continue
		}
		var regs unix.PtraceRegs
		if err := unix.PtraceGetRegs(pid, &regs); err != nil {
			return -1, delayed, fmt.Sprintf("\n[test: registers: %v]", err)
		}
		switch nr := regs.Orig_rax; {
		case !entering && (nr == unix.SYS_CLOCK_NANOSLEEP || nr == unix.SYS_NANOSLEEP):
			slept = true
		case entering && slept && nr == unix.SYS_WRITE:
			time.Sleep(delay)
			delayed++
		}
		entering = !entering
	}
}
