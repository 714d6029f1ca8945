package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
	"github.com/goverbs/goverbs/internal/testvm/vmproc"
)

// TestInteropVM runs this rstream against rdma-core's, each side as
// server and as client, and checks both finish and print their tables.
func TestInteropVM(t *testing.T) {
	vmenv.RequireDevice(t, vmenv.RXE0)
	vmenv.RequireDevice(t, vmenv.RXE1)
	for i, tc := range []struct {
		name     string
		goServer bool
		args     []string
		rows     int
	}{
		{"custom-go-client", false, []string{"-S", "100000", "-C", "20", "-I", "2", "-T", "b", "-T", "v"}, 1},
		{"custom-go-server", true, []string{"-S", "100000", "-C", "20", "-I", "2", "-T", "b", "-T", "v"}, 1},
		{"small-go-client", false, []string{"-S", "64", "-C", "100", "-I", "3", "-T", "b", "-T", "v"}, 1},
		{"1m-go-server", true, []string{"-S", "1048576", "-C", "4", "-I", "1", "-T", "b", "-T", "v"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			gout, cout, err := interop(ctx, 7800+i, tc.goServer, tc.args)
			if err != nil {
				t.Fatalf("%v\nGo rstream:\n%s\nrdma-core rstream:\n%s", err, gout, cout)
			}
			t.Logf("Go rstream:\n%s\nrdma-core rstream:\n%s", gout, cout)
			for _, out := range []string{gout, cout} {
				if n := strings.Count(out, "\n") - 1; n != tc.rows || strings.Contains(out, "verification failed") {
					t.Errorf("%d rows, want %d, or a verification failure", n, tc.rows)
				}
			}
		})
	}
}

// TestInteropSizesVM runs every transfer size of rstream's -S all table
// up to 1 MiB, and 1 byte, between this rstream and rdma-core's, with
// data verification (-T v), the Go side as client and as server, in
// blocking (-T b) and non-blocking (-T n) mode, from rxe1 to rxe0. rstream's
// own -S all runs each size with its fixed counts (100000 round trips
// below 1 KiB, 1.2 GB at 6 MiB), hours under TCG, and -C turns it into a
// single custom test, so each size is one custom run with few transfers:
// both tools must print that size's row and no verification failure.
func TestInteropSizesVM(t *testing.T) {
	vmenv.OncePerKernel(t)
	vmenv.RequireDevice(t, vmenv.RXE0)
	vmenv.RequireDevice(t, vmenv.RXE1)
	sizes := []int{1}
	for _, s := range allSizes() {
		if s <= 1<<20 {
			sizes = append(sizes, s)
		}
	}
	port := 7900
	for _, goServer := range []bool{false, true} {
		for _, mode := range []string{"b", "n"} {
			name := fmt.Sprintf("go-client-%s", mode)
			if goServer {
				name = fmt.Sprintf("go-server-%s", mode)
			}
			t.Run(name, func(t *testing.T) {
				for _, size := range sizes {
					port++
					count := min(64, max(2, 256<<10/size))
					args := []string{"-S", strconv.Itoa(size), "-C", strconv.Itoa(count), "-I", "2", "-T", mode, "-T", "v"}
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					gout, cout, err := interop(ctx, port, goServer, args)
					cancel()
					if err != nil {
						t.Fatalf("%v: %v\nGo rstream:\n%s\nrdma-core rstream:\n%s", args, err, gout, cout)
					}
					for who, out := range map[string]string{"Go": gout, "rdma-core": cout} {
						lines := strings.Split(strings.TrimSpace(out), "\n")
						f := strings.Fields(lines[len(lines)-1])
						if len(lines) != 2 || len(f) != 8 || f[0] != "custom" || f[1] != sizeStr(size) ||
							strings.Contains(out, "verification failed") {
							t.Errorf("%v: %s rstream printed, want one row of %s bytes:\n%s", args, who, sizeStr(size), out)
						}
					}
					t.Logf("%-8d %s", size, strings.TrimSpace(strings.Split(cout, "\n")[1]))
				}
			})
		}
	}
}

// TestInteropKeepaliveVM: -k 1 on both sides, Go client and Go server
// against rdma-core's rstream; the run lasts over a second, so rstream
// sends its keepalives (one a second, traffic or not) to the Go side.
func TestInteropKeepaliveVM(t *testing.T) {
	vmenv.RequireDevice(t, vmenv.RXE0)
	vmenv.RequireDevice(t, vmenv.RXE1)
	args := []string{"-S", "65536", "-C", "20", "-I", "2", "-T", "b", "-T", "v", "-k", "1"}
	for i, goServer := range []bool{false, true} {
		t.Run(fmt.Sprintf("go-server-%v", goServer), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			gout, cout, err := interop(ctx, 7850+i, goServer, args)
			t.Logf("Go rstream:\n%s\nrdma-core rstream:\n%s", gout, cout)
			if err != nil {
				t.Fatal(err)
			}
			for who, out := range map[string]string{"Go": gout, "rdma-core": cout} {
				// The server sets keepalive on its listener and on the
				// connection, the client on its connection.
				want := 1
				if who == "Go" == goServer {
					want = 2
				}
				if n := strings.Count(out, "Keepalive: ON\n  time: 1\n"); n != want ||
					!strings.Contains(out, "\ncustom    64k     20      2 ") || strings.Contains(out, "verification failed") {
					t.Errorf("%s rstream: %d keepalive settings, want %d, or no custom row, or a verification failure", who, n, want)
				}
			}
		})
	}
}

// TestGoPairVM: this rstream on both ends, rxe1 to rxe0, with -T v. At
// 1 MiB the server's close used to reach the client (as a CM disconnect)
// before the client had taken the last data from its CQ: rrecv:
// unexpected EOF.
func TestGoPairVM(t *testing.T) {
	vmenv.RequireDevice(t, vmenv.RXE0)
	vmenv.RequireDevice(t, vmenv.RXE1)
	for i, size := range []string{"65536", "1048576"} {
		t.Run(size, func(t *testing.T) {
			p := strconv.Itoa(7870 + i)
			args := []string{"-p", p, "-S", size, "-C", "8", "-I", "1", "-T", "b", "-T", "v"}
			var sout, serr vmproc.Buffer
			done := make(chan int, 1)
			go func() { done <- run(append([]string{"rstream", "-b", vmenv.AddrA}, args...), &sout, &serr) }()
			for sout.String() == "" && serr.String() == "" {
				time.Sleep(10 * time.Millisecond)
			}
			var cout, cerr bytes.Buffer
			rc := run(append([]string{"rstream", "-s", vmenv.AddrA, "-b", vmenv.AddrB}, args...), &cout, &cerr)
			src := <-done
			t.Logf("client (%d):\n%s%s\nserver (%d):\n%s%s", rc, cout.String(), cerr.String(), src, sout.String(), serr.String())
			if rc != 0 || src != 0 || strings.Count(cout.String()+sout.String(), "\ncustom ") != 2 {
				t.Fatal("a side failed")
			}
		})
	}
}

// interop runs one rstream pair with args on port, the server on rxe0,
// the client bound to rxe1; the Go side is the server if goServer. The
// server starts first. It returns both outputs (stdout and stderr).
func interop(ctx context.Context, port int, goServer bool, args []string) (gout, cout string, err error) {
	p := strconv.Itoa(port)
	server := append([]string{"-b", vmenv.AddrA, "-p", p}, args...)
	client := append([]string{"-s", vmenv.AddrA, "-b", vmenv.AddrB, "-p", p}, args...)
	cArgs, goArgs := client, server
	if !goServer {
		cArgs, goArgs = server, client
	}
	var cbuf vmproc.Buffer
	cmd := exec.CommandContext(ctx, "rstream", cArgs...)
	cmd.Stdout, cmd.Stderr = &cbuf, &cbuf
	var gbuf, gerr vmproc.Buffer
	rc := 1
	if goServer {
		done := make(chan int, 1)
		go func() { done <- run(append([]string{"rstream"}, goArgs...), &gbuf, &gerr) }()
		// The server prints its header once it listens.
		for gbuf.String() == "" && gerr.String() == "" && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}
		if err := cmd.Start(); err != nil {
			return "", "", err
		}
		err = cmd.Wait()
		select {
		case rc = <-done:
		case <-ctx.Done():
		}
	} else {
		if err := cmd.Start(); err != nil {
			return "", "", err
		}
		for try := 0; try < 100; try++ {
			if try > 0 {
				time.Sleep(50 * time.Millisecond)
			}
			gbuf.Reset()
			gerr.Reset()
			rc = run(append([]string{"rstream"}, goArgs...), &gbuf, &gerr)
			// Retry only while the server does not listen yet.
			if !strings.Contains(gerr.String(), "nobody listens") {
				break
			}
		}
		if rc != 0 {
			cmd.Process.Kill()
		}
		err = cmd.Wait()
	}
	gout, cout = gbuf.String()+gerr.String(), cbuf.String()
	switch {
	case rc != 0:
		return gout, cout, fmt.Errorf("Go rstream %v exited %d (rdma-core rstream %v: %v)", goArgs, rc, cArgs, err)
	case err != nil:
		return gout, cout, fmt.Errorf("rdma-core rstream %v: %w", cArgs, err)
	}
	return gout, cout, nil
}
