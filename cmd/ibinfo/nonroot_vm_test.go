package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

// ibinfoChildEnv makes the test binary, re-executed, be ibinfo: the
// arguments after "--" are its command line.
const ibinfoChildEnv = "IBINFO_AS_COMMAND"

// TestNonRootNoAccess runs ibinfo and rdma-core's ibv_devinfo as uid 65534
// while the uverbs nodes are mode 0600, root's. ibv_devinfo says only
// "Failed to open device"; ibinfo must fail too (a non-zero exit status),
// and say which file it could not open, why, and what grants access.
func TestNonRootNoAccess(t *testing.T) {
	if os.Getenv(ibinfoChildEnv) != "" {
		args := []string{"ibv_devinfo"}
		for i, a := range os.Args {
			if a == "--" {
				args = append(args, os.Args[i+1:]...)
				break
			}
		}
		os.Exit(run(args, os.Stdout, os.Stderr, environment{sys: newRealSystem()}))
	}
	if !vmenv.InVM() {
		t.Skip("changes the modes of /dev/infiniband nodes and runs as another user: test VM only")
	}
	vmenv.RequireDevice(t, vmenv.RXE0)
	vmenv.LockUverbsNodes(t)
	ref, err := exec.LookPath("ibv_devinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{}, {"-d", vmenv.RXE0}, {"-l"}} {
		name := "[" + strings.Join(args, " ") + "]"
		want, wantCode := vmenv.RunAsNobody(t, ref, []string{"IBV_DRIVERS=rxe"}, args...)
		got, gotCode := vmenv.RunAsNobody(t, os.Args[0], []string{ibinfoChildEnv + "=1"}, append([]string{"-test.run=^TestNonRootNoAccess$", "--"}, args...)...)
		t.Logf("%s as uid %d:\nibv_devinfo (exit %d):\n%s\nibinfo (exit %d):\n%s", name, vmenv.Nobody, wantCode, want, gotCode, got)
		if len(args) > 0 && args[0] == "-l" {
			// Listing opens nothing: both list the device, as root would.
			if gotCode != 0 || wantCode != 0 || !strings.Contains(got, vmenv.RXE0) {
				t.Errorf("%s: ibinfo exit %d, ibv_devinfo exit %d; want both 0 listing %s", name, gotCode, wantCode, vmenv.RXE0)
			}
			continue
		}
		if gotCode == 0 || wantCode == 0 {
			t.Errorf("%s: ibinfo exit %d, ibv_devinfo exit %d; want both non-zero", name, gotCode, wantCode)
		}
		for _, say := range []string{"Failed to open device", "/dev/infiniband/uverbs", "permission denied", "mode 0600", "uid 65534", "udev rule"} {
			if !strings.Contains(got, say) {
				t.Errorf("%s: ibinfo does not say %q", name, say)
			}
		}
	}
}
