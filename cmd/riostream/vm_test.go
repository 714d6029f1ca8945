package main

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/goverbs/goverbs/internal/streamtool"
	"github.com/goverbs/goverbs/internal/streamtool/streamtest"
	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

// TestInteropVM runs this riostream against rdma-core's with data
// verification (-T v), the Go side as server and as client, blocking and
// not, at sizes from 16 bytes to 1 MiB: both must print their row and no
// verification failure. (Below 16 bytes rdma-core's riostream sends and
// receives its 16-byte sync message through a buffer of the transfer's
// size, past its end.)
func TestInteropVM(t *testing.T) {
	vmenv.RequireDevice(t, vmenv.RXE0)
	vmenv.RequireDevice(t, vmenv.RXE1)
	port := 8000
	for _, goServer := range []bool{false, true} {
		for _, mode := range []string{"b", "n"} {
			name := fmt.Sprintf("go-client-%s", mode)
			if goServer {
				name = fmt.Sprintf("go-server-%s", mode)
			}
			t.Run(name, func(t *testing.T) {
				for _, tc := range []struct{ size, count, iters int }{
					{16, 1, 100}, {64, 1, 200}, {4096, 10, 5}, {100000, 20, 2}, {1 << 20, 4, 1},
				} {
					port++
					args := []string{"-S", strconv.Itoa(tc.size), "-C", strconv.Itoa(tc.count), "-I", strconv.Itoa(tc.iters),
						"-T", mode, "-T", "v"}
					streamtest.CheckPair(t, "riostream", run, port, goServer, args, tc.size)
				}
			})
		}
	}
}

// TestInteropSizesVM: every size of riostream's -S all table up to 1 MiB
// from 64 bytes, the Go side as client and as server, with -T v, a custom
// run of few transfers each (riostream's own counts take hours under
// TCG).
func TestInteropSizesVM(t *testing.T) {
	vmenv.OncePerKernel(t)
	vmenv.RequireDevice(t, vmenv.RXE0)
	vmenv.RequireDevice(t, vmenv.RXE1)
	port := 8100
	for _, goServer := range []bool{false, true} {
		t.Run(fmt.Sprintf("go-server-%v", goServer), func(t *testing.T) {
			for _, size := range streamtool.AllSizes() {
				if size > 1<<20 {
					continue
				}
				port++
				count := min(32, max(2, 256<<10/size))
				streamtest.CheckPair(t, "riostream", run, port, goServer, []string{"-S", strconv.Itoa(size), "-C", strconv.Itoa(count), "-I", "2", "-T", "v"}, size)
			}
		})
	}
}

// TestGoPairVM: this riostream on both ends, rxe1 to rxe0, with -T v.
func TestGoPairVM(t *testing.T) {
	vmenv.RequireDevice(t, vmenv.RXE0)
	vmenv.RequireDevice(t, vmenv.RXE1)
	for i, size := range []string{"1", "4096", "1048576"} {
		t.Run(size, func(t *testing.T) {
			args := []string{"-p", strconv.Itoa(8200 + i), "-S", size, "-C", "8", "-I", "3", "-T", "v"}
			streamtest.GoPair(t, "riostream", run, args)
		})
	}
}
