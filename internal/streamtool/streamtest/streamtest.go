// Package streamtest runs cmd/rstream and cmd/riostream against
// rdma-core's tools in the test VM.
package streamtest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/streamtool"
	"github.com/goverbs/goverbs/internal/testvm/vmenv"
	"github.com/goverbs/goverbs/internal/testvm/vmproc"
	"github.com/goverbs/goverbs/rdmanl"
)

// Interop runs one pair of tool (rstream or riostream) with args on port,
// rdma-core's and Go's (run, the tool's Run with args[0] its name): the
// server on rxe0, the client bound to rxe1 (riostream's C client ignores
// -b and connects on rxe0); the Go side is the server if goServer. The
// server starts first. It returns both outputs (stdout and stderr).
func Interop(ctx context.Context, tool string, run func(args []string, stdout, stderr io.Writer) int, port int, goServer bool, args []string) (gout, cout string, err error) {
	p := strconv.Itoa(port)
	server := append([]string{"-b", vmenv.AddrA, "-p", p}, args...)
	client := append([]string{"-s", vmenv.AddrA, "-b", vmenv.AddrB, "-p", p}, args...)
	cArgs, goArgs := client, server
	if !goServer {
		cArgs, goArgs = server, client
	}
	var cbuf vmproc.Buffer
	cmd := exec.CommandContext(ctx, tool, cArgs...)
	var gbuf, gerr vmproc.Buffer
	rc := 1
	if goServer {
		done := make(chan int, 1)
		go func() { done <- run(append([]string{tool}, goArgs...), &gbuf, &gerr) }()
		// The server prints its header once it listens.
		for gbuf.String() == "" && gerr.String() == "" && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}
		wait, perr := startOnPTY(cmd, &cbuf)
		if perr != nil {
			return "", "", perr
		}
		err = wait()
		select {
		case rc = <-done:
		case <-ctx.Done():
		}
	} else {
		wait, perr := startOnPTY(cmd, &cbuf)
		if perr != nil {
			return "", "", perr
		}
		waitOptions(ctx, netip.AddrPortFrom(netip.MustParseAddr(vmenv.AddrA), uint16(port)))
		for try := 0; try < 100; try++ {
			if try > 0 {
				time.Sleep(50 * time.Millisecond)
			}
			gbuf.Reset()
			gerr.Reset()
			rc = run(append([]string{tool}, goArgs...), &gbuf, &gerr)
			// Retry only while the server does not listen yet.
			if !strings.Contains(gerr.String(), "nobody listens") {
				break
			}
		}
		if rc != 0 {
			cmd.Process.Kill()
		}
		err = wait()
	}
	gout, cout = gbuf.String()+gerr.String(), cbuf.String()
	switch {
	case rc != 0:
		return gout, cout, fmt.Errorf("the Go %s %v exited %d (rdma-core %s %v: %v)", tool, goArgs, rc, tool, cArgs, err)
	case err != nil:
		return gout, cout, fmt.Errorf("rdma-core %s %v: %w", tool, cArgs, err)
	}
	return gout, cout, nil
}

// startOnPTY starts cmd with its standard output and error on a new
// pseudo-terminal, whose output is copied to w, and returns what waits for
// cmd and the copy. On a terminal C's stdio writes each line as it comes;
// on a pipe it keeps up to 4 KiB, which a tool killed for hanging takes
// with it.
func startOnPTY(cmd *exec.Cmd, w io.Writer) (wait func() error, err error) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (func() error, error) { m.Close(); return nil, fmt.Errorf("pseudo-terminal: %w", err) }
	fd := int(m.Fd())
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		return fail(err)
	}
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		return fail(err)
	}
	sl, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return fail(err)
	}
	// No output processing: lines end in \n, not \r\n.
	if t, err := unix.IoctlGetTermios(int(sl.Fd()), unix.TCGETS); err == nil {
		t.Oflag &^= unix.OPOST
		unix.IoctlSetTermios(int(sl.Fd()), unix.TCSETS, t)
	}
	cmd.Stdout, cmd.Stderr = sl, sl
	err = cmd.Start()
	sl.Close()
	if err != nil {
		return fail(err)
	}
	copied := make(chan struct{})
	go func() {
		io.Copy(w, m) // ends with EIO once the tool's end is closed
		close(copied)
	}()
	return func() error {
		err := cmd.Wait()
		<-copied
		m.Close()
		return err
	}, nil
}

// waitOptions waits until rdma-core's server listens on addr, as the
// kernel's RDMA netlink lists its CM IDs (package rdmanl), and then a little longer. The
// tools set their options (buffer sizes, inline size, riostream's iomap
// size) on the listening rsocket after rlisten, and librdmacm's listen
// service thread accepts a request as soon as it comes, with the options
// the listener has then: a client that connects in between gets the
// defaults (riostream's server then offers no iomap slot).
func waitOptions(ctx context.Context, addr netip.AddrPort) {
	nl, err := rdmanl.Dial()
	if err != nil {
		return // the client's retries still wait for the listener
	}
	defer nl.Close()
	for ctx.Err() == nil {
		ids, _ := nl.CMIDs(ctx, rdmanl.AllDevices)
		for _, id := range ids {
			if id.State.String() == "LISTEN" && id.Src == addr {
				time.Sleep(200 * time.Millisecond)
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// GoPair runs Go's tool (run) on both ends with args, the server on rxe0
// and the client bound to rxe1, and fails t unless both exit 0 and print
// their custom row.
func GoPair(t *testing.T, tool string, run func(args []string, stdout, stderr io.Writer) int, args []string) {
	t.Helper()
	var sout, serr vmproc.Buffer
	done := make(chan int, 1)
	go func() { done <- run(append([]string{tool, "-b", vmenv.AddrA}, args...), &sout, &serr) }()
	for sout.String() == "" && serr.String() == "" {
		time.Sleep(10 * time.Millisecond)
	}
	var cout, cerr bytes.Buffer
	rc := run(append([]string{tool, "-s", vmenv.AddrA, "-b", vmenv.AddrB}, args...), &cout, &cerr)
	src := <-done
	t.Logf("client (%d):\n%s%s\nserver (%d):\n%s%s", rc, cout.String(), cerr.String(), src, sout.String(), serr.String())
	if rc != 0 || src != 0 || strings.Count(cout.String()+sout.String(), "\ncustom ") != 2 {
		t.Fatal("a side failed")
	}
}

// CheckPair runs one custom pair of tool with args (Interop) and fails t
// unless both print one row of size bytes and no verification failure.
func CheckPair(t *testing.T, tool string, run func(args []string, stdout, stderr io.Writer) int, port int, goServer bool, args []string, size int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	gout, cout, err := Interop(ctx, tool, run, port, goServer, args)
	if err != nil {
		t.Fatalf("%v: %v\nGo %s:\n%s\nrdma-core %s:\n%s", args, err, tool, gout, tool, cout)
	}
	for who, out := range map[string]string{"Go": gout, "rdma-core": cout} {
		lines := strings.Split(strings.TrimSpace(out), "\n")
		f := strings.Fields(lines[len(lines)-1])
		if len(lines) != 2 || len(f) != 8 || f[0] != "custom" || f[1] != streamtool.SizeStr(size) ||
			strings.Contains(out, "verification failed") {
			t.Errorf("%v: %s %s printed, want one row of %s bytes:\n%s", args, who, tool, streamtool.SizeStr(size), out)
		}
	}
	t.Logf("%v: %s", args, strings.TrimSpace(strings.Split(cout, "\n")[1]))
}
