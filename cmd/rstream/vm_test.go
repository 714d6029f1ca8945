package main

import (
	"bytes"
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

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
			port := strconv.Itoa(7800 + i)
			server := append([]string{"-b", vmenv.AddrA, "-p", port}, tc.args...)
			client := append([]string{"-s", vmenv.AddrA, "-b", vmenv.AddrB, "-p", port}, tc.args...)
			cArgs, goArgs := client, server
			if !tc.goServer {
				cArgs, goArgs = server, client
			}
			cmd := exec.CommandContext(ctx, "rstream", cArgs...)
			var cout bytes.Buffer
			cmd.Stdout, cmd.Stderr = &cout, &cout
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var gout, gerr bytes.Buffer
			rc := 1
			for try := 0; try < 50 && rc != 0; try++ {
				if try > 0 {
					time.Sleep(100 * time.Millisecond)
				}
				gout.Reset()
				gerr.Reset()
				rc = run(append([]string{"rstream"}, goArgs...), &gout, &gerr)
				// Retry only a client that found no server yet.
				if tc.goServer || !strings.Contains(gerr.String(), "nobody listens") {
					break
				}
			}
			err := cmd.Wait()
			t.Logf("Go rstream %v (exit %d):\n%s%s", goArgs, rc, gout.String(), gerr.String())
			t.Logf("rdma-core rstream %v (%v):\n%s", cArgs, err, cout.String())
			if rc != 0 || err != nil {
				t.Fatal("a side failed")
			}
			for _, out := range []string{gout.String(), cout.String()} {
				if n := strings.Count(out, "\n") - 1; n != tc.rows || strings.Contains(out, "verification failed") {
					t.Errorf("%d rows, want %d, or a verification failure", n, tc.rows)
				}
			}
		})
	}
}
