package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/streamtool"
	"github.com/goverbs/goverbs/internal/streamtool/streamtest"
	"github.com/goverbs/goverbs/internal/testvm/vmenv"
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
	for _, s := range streamtool.AllSizes() {
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
					streamtest.CheckPair(t, "rstream", run, port, goServer, args, size)
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
			streamtest.GoPair(t, "rstream", run, args)
		})
	}
}

// interop runs one rstream pair with args on port (streamtest.Interop).
func interop(ctx context.Context, port int, goServer bool, args []string) (gout, cout string, err error) {
	return streamtest.Interop(ctx, "rstream", run, port, goServer, args)
}
