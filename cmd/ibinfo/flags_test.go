package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

// flagRow is one invalid command line: ibinfo's exit status, its standard
// error, and whether standard output is the usage. On the host it runs over
// the recorded two-device rxe fixture; in the test VM the same command line
// goes to rdma-core's ibv_devinfo too, and both must answer alike.
type flagRow struct {
	name       string
	args       []string
	exit       int
	stderr     string // exactly
	usage      bool   // stdout is the usage, else empty
	ibinfoOnly bool   // an ibinfo addition (-h, --json): ibv_devinfo does not know it
}

// flagRows covers every flag with each kind of invalid value: missing
// argument, non-numeric, empty, negative, zero, out of range, overflowing,
// unknown or malformed device, an argument to a flag that takes none, and
// unknown or ambiguous options.
var flagRows = []flagRow{
	{"-d/missing argument", []string{"-d"}, 255, "ibv_devinfo: option requires an argument -- 'd'\n", true, false},
	{"--ib-dev/missing argument", []string{"--ib-dev"}, 255, "ibv_devinfo: option '--ib-dev' requires an argument\n", true, false},
	{"-d/empty name", []string{"-d", ""}, 255, "IB device '' wasn't found\n", false, false},
	{"-d/unknown device", []string{"-d", "nosuch0"}, 255, "IB device 'nosuch0' wasn't found\n", false, false},
	{"--ib-dev/unknown device", []string{"--ib-dev=nosuch0"}, 255, "IB device 'nosuch0' wasn't found\n", false, false},
	{"-d/path", []string{"-d", "../rxe0"}, 255, "IB device '../rxe0' wasn't found\n", false, false},
	{"-d/long name", []string{"-d", strings.Repeat("x", 300)}, 255, "IB device '" + strings.Repeat("x", 300) + "' wasn't found\n", false, false},
	{"-i/missing argument", []string{"-i"}, 255, "ibv_devinfo: option requires an argument -- 'i'\n", true, false},
	{"--ib-port/missing argument", []string{"--ib-port"}, 255, "ibv_devinfo: option '--ib-port' requires an argument\n", true, false},
	{"-i/non-numeric", []string{"-i", "x"}, 1, "", true, false},
	{"-i/empty", []string{"-i", ""}, 1, "", true, false},
	{"-i/negative", []string{"-i", "-1"}, 1, "", true, false},
	{"--ib-port/negative", []string{"--ib-port=-5"}, 1, "", true, false},
	{"-i/zero", []string{"-i", "0"}, 1, "", true, false},
	{"-i/beyond the devices' ports", []string{"-i", "2"}, 4, "Invalid port requested for device\nInvalid port requested for device\n", false, false},
	{"-i/beyond the named device's ports", []string{"-d", "rxe1", "-i", "9"}, 4, "Invalid port requested for device\n", false, false},
	{"-i/overflowing long", []string{"-i", "99999999999999999999"}, 1, "", true, false},
	{"-i/negative overflowing long", []string{"-i", "-99999999999999999999"}, 1, "", true, false},
	{"-i/beyond int", []string{"-i", "4294967296"}, 1, "", true, false},
	{"--list/argument", []string{"--list=1"}, 255, "ibv_devinfo: option '--list' doesn't allow an argument\n", true, false},
	{"--verbose/argument", []string{"--verbose=yes"}, 255, "ibv_devinfo: option '--verbose' doesn't allow an argument\n", true, false},
	{"unknown short option", []string{"-x"}, 255, "ibv_devinfo: invalid option -- 'x'\n", true, false},
	{"unknown long option", []string{"--bogus"}, 255, "ibv_devinfo: unrecognized option '--bogus'\n", true, false},
	{"ambiguous long option", []string{"--ib=rxe0"}, 255, "ibv_devinfo: option '--ib=rxe0' is ambiguous; possibilities: '--ib-dev' '--ib-port'\n", true, false},
	{"--json/argument", []string{"--json=1"}, 255, "ibv_devinfo: option '--json' doesn't allow an argument\n", true, true},
	{"-json/argument", []string{"-json=1"}, 255, "ibv_devinfo: option '-json' doesn't allow an argument\n", true, true},
	{"--help/argument", []string{"--help=1"}, 255, "ibv_devinfo: option '--help' doesn't allow an argument\n", true, true},
	{"--json/unknown device", []string{"--json", "-d", "nosuch0"}, 255, "IB device 'nosuch0' wasn't found\n", false, true},
}

func TestFlagsBadValues(t *testing.T) {
	usageOut := usageText("ibv_devinfo")
	for _, r := range flagRows {
		t.Run(r.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			exit := run(append([]string{"ibv_devinfo"}, r.args...), &stdout, &stderr, environment{sys: rxeSystem(t)})
			if exit != r.exit {
				t.Errorf("exit status %d, want %d", exit, r.exit)
			}
			if diff := cmp.Diff(r.stderr, stderr.String()); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
			want := ""
			if r.usage {
				want = usageOut
			}
			if diff := cmp.Diff(want, stdout.String()); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFlagsBadValuesVM runs the rows through ibv_devinfo and ibinfo on the
// VM's rxe devices: the same exit status, standard output and standard
// error (for ibinfo's own flags, the recorded answer only).
func TestFlagsBadValuesVM(t *testing.T) {
	if !vmenv.InVM() {
		t.Skip("compares with rdma-core's ibv_devinfo in the test VM")
	}
	vmenv.RequireDevice(t, vmenv.RXE0)
	ref, err := exec.LookPath("ibv_devinfo")
	if err != nil {
		t.Fatalf("no ibv_devinfo in the test VM: %v", err)
	}
	// The VM's devices have one port each, like the fixture's.
	for _, r := range flagRows {
		t.Run(r.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			exit := run(append([]string{"ibv_devinfo"}, r.args...), &stdout, &stderr, environment{sys: newRealSystem()})
			if exit != r.exit || stderr.String() != r.stderr {
				t.Errorf("ibinfo: exit %d, stderr %q; want %d, %q", exit, stderr.String(), r.exit, r.stderr)
			}
			if r.ibinfoOnly {
				return
			}
			wantOut, wantExit, wantErr := runReference(t, ref, r.args)
			if exit != wantExit {
				t.Errorf("exit status %d, ibv_devinfo %d", exit, wantExit)
			}
			if diff := cmp.Diff(wantOut, stdout.String()); diff != "" {
				t.Errorf("stdout (-ibv_devinfo +ibinfo):\n%s", diff)
			}
			if diff := cmp.Diff(wantErr, stderr.String()); diff != "" {
				t.Errorf("stderr (-ibv_devinfo +ibinfo):\n%s", diff)
			}
		})
	}
}
