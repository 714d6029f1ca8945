package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/uverbs"
)

var update = flag.Bool("update", false, "rewrite the JSON golden files in testdata/json")

func usageText(prog string) string {
	var b bytes.Buffer
	usage(&b, prog)
	return b.String()
}

func rxeSystem(t *testing.T) *fakeSystem {
	t.Helper()
	sys, err := loadFixture("testdata/cref/fixtures/rxe2.fix")
	if err != nil {
		t.Fatal(err)
	}
	return sys
}

// TestCommandLine covers the command-line cases that stop ibv_devinfo
// before or instead of a device block: each gives its exit status, usage
// on stdout and getopt's message on stderr.
func TestCommandLine(t *testing.T) {
	usageOut := usageText("ibv_devinfo")
	var helpBuf bytes.Buffer
	usage(&helpBuf, "ibv_devinfo")
	usageExtra(&helpBuf)
	list := "2 HCAs found:\n\trxe0\n\trxe1\n\n"
	tests := []struct {
		name       string
		args       []string
		wantStdout string
		wantExit   int
		wantStderr string // a substring
	}{
		{"port zero", []string{"-i", "0"}, usageOut, 1, ""},
		{"port not a number", []string{"-i", "x"}, usageOut, 1, ""},
		{"negative port", []string{"--ib-port=-1"}, usageOut, 1, ""},
		{"port overflowing long", []string{"-i", "99999999999999999999"}, usageOut, 1, ""},
		{"port beyond the device", []string{"-i", "7"}, "", 4, "Invalid port requested for device"},
		{"port beyond the named device", []string{"-d", "rxe0", "-i", "2"}, "", 4, "Invalid port requested for device"},
		{"unknown short option", []string{"-x"}, usageOut, 255, "ibv_devinfo: invalid option -- 'x'"},
		{"unknown long option", []string{"--bogus=1"}, usageOut, 255, "ibv_devinfo: unrecognized option '--bogus=1'"},
		{"ambiguous long option", []string{"--ib", "rxe0"}, usageOut, 255, "is ambiguous; possibilities: '--ib-dev' '--ib-port'"},
		{"missing device name", []string{"-d"}, usageOut, 255, "option requires an argument -- 'd'"},
		{"missing long argument", []string{"-v", "--ib-port"}, usageOut, 255, "option '--ib-port' requires an argument"},
		{"argument to a flag", []string{"--verbose=yes"}, usageOut, 255, "option '--verbose' doesn't allow an argument"},
		{"no such device", []string{"-d", "nosuch"}, "", 255, "IB device 'nosuch' wasn't found"},
		{"list before a bad option", []string{"-l", "-x"}, list, 0, ""},
		{"bad option before list", []string{"-x", "-l"}, usageOut, 255, "invalid option -- 'x'"},
		{"bad port before list", []string{"-i", "0", "-l"}, usageOut, 1, ""},
		{"list with a bundled verbose", []string{"-vl"}, list, 0, ""},
		{"help", []string{"-h"}, helpBuf.String(), 0, ""},
		{"long help", []string{"--help"}, helpBuf.String(), 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			exit := run(append([]string{"ibv_devinfo"}, tt.args...), &stdout, &stderr, environment{sys: rxeSystem(t)})
			if diff := cmp.Diff(tt.wantStdout, stdout.String()); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if exit != tt.wantExit {
				t.Errorf("exit status %d, want %d", exit, tt.wantExit)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}

// TestPortNumberWraps checks ibv_devinfo's int-to-uint8 port conversion:
// 256 selects every port and 257 port 1.
func TestPortNumberWraps(t *testing.T) {
	var all, wrapped, one bytes.Buffer
	sys := rxeSystem(t)
	run([]string{"ibinfo", "-d", "rxe0"}, &all, &bytes.Buffer{}, environment{sys: sys})
	run([]string{"ibinfo", "-d", "rxe0", "-i", "256"}, &wrapped, &bytes.Buffer{}, environment{sys: sys})
	run([]string{"ibinfo", "-d", "rxe0", "-i", "257"}, &one, &bytes.Buffer{}, environment{sys: sys})
	if diff := cmp.Diff(all.String(), wrapped.String()); diff != "" {
		t.Errorf("-i 256 (-all ports +got):\n%s", diff)
	}
	if diff := cmp.Diff(all.String(), one.String()); diff != "" {
		t.Errorf("-i 257 on a one-port device (-port 1 +got):\n%s", diff)
	}
}

// TestNoDevicesExplained checks that the reasons sysfs gives reach stderr
// while stdout and the exit status stay ibv_devinfo's.
func TestNoDevicesExplained(t *testing.T) {
	sys := &fakeSystem{skipped: []unusable{{name: "mlx5_0", reason: os.ErrPermission}}}
	var stdout, stderr bytes.Buffer
	if exit := run([]string{"ibinfo"}, &stdout, &stderr, environment{sys: sys}); exit != 255 {
		t.Errorf("exit %d, want 255", exit)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout %q, want none", stdout.String())
	}
	for _, want := range []string{"No IB devices found", "mlx5_0 is present but not usable: permission denied"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr %q lacks %q", stderr.String(), want)
		}
	}
	sys = &fakeSystem{listFail: true}
	stdout.Reset()
	stderr.Reset()
	if exit := run([]string{"ibinfo", "-l"}, &stdout, &stderr, environment{sys: sys}); exit != 255 || stdout.Len() != 0 {
		t.Errorf("-l with no RDMA subsystem: exit %d, stdout %q; want 255 and none", exit, stdout.String())
	}
	if !strings.Contains(stderr.String(), "Failed to get IB devices list: Function not implemented") {
		t.Errorf("stderr %q", stderr.String())
	}
}

// TestRecommendedRoCEGID pins the choice ibinfo --json shows (uverbs.PickRoCEGID).
func TestRecommendedRoCEGID(t *testing.T) {
	gid := func(s string) uverbs.GID { return uverbs.GID(netip.MustParseAddr(s).As16()) }
	v2 := func(i int, addr string) uverbs.GIDEntry {
		return uverbs.GIDEntry{Index: i, GID: gid(addr), Type: uverbs.GIDTypeRoCEv2, NetdevIfindex: 3}
	}
	noNetdev := v2(4, "::ffff:10.0.0.9")
	noNetdev.NetdevIfindex = 0
	v1 := v2(5, "::ffff:10.0.0.8")
	v1.Type = uverbs.GIDTypeRoCEv1
	tests := []struct {
		name    string
		entries []uverbs.GIDEntry
		want    int
		ok      bool
	}{
		{"empty", nil, 0, false},
		{"link-local only", []uverbs.GIDEntry{v2(0, "fe80::1")}, 0, false},
		{"IPv4-mapped after link-local", []uverbs.GIDEntry{v2(0, "fe80::1"), v2(1, "::ffff:10.99.0.1")}, 1, true},
		{"IPv4 before global IPv6", []uverbs.GIDEntry{v2(2, "2001:db8::1"), v2(3, "::ffff:192.0.2.1")}, 3, true},
		{"global IPv6 when no IPv4", []uverbs.GIDEntry{v2(0, "fe80::1"), v2(2, "2001:db8::1")}, 2, true},
		{"lowest index among equals", []uverbs.GIDEntry{v2(7, "::ffff:10.0.0.2"), v2(6, "::ffff:10.0.0.1")}, 6, true},
		{"IPv4 link-local skipped", []uverbs.GIDEntry{v2(1, "::ffff:169.254.0.1"), v2(2, "2001:db8::2")}, 2, true},
		{"RoCE v1 and no netdev skipped", []uverbs.GIDEntry{v1, noNetdev}, 0, false},
		{"IB GID skipped", []uverbs.GIDEntry{{Index: 0, GID: gid("fe80::2"), Type: uverbs.GIDTypeIB}}, 0, false},
	}
	for _, tt := range tests {
		got, ok := uverbs.PickRoCEGID(tt.entries)
		if ok != tt.ok || (ok && got.Index != tt.want) {
			t.Errorf("%s: got index %d ok %v, want %d ok %v", tt.name, got.Index, ok, tt.want, tt.ok)
		}
	}
}

// TestJSONGolden checks the --json output for fixed device data against
// testdata/json; go test -update rewrites the files after a reviewed change.
func TestJSONGolden(t *testing.T) {
	interfaceName = func(ifindex uint32) string { return map[uint32]string{7: "eth7"}[ifindex] }
	for _, tt := range []struct {
		fixture string
		args    []string
		golden  string
	}{
		{"rxe2.fix", []string{"--json"}, "rxe2.json"},
		{"mlx5.fix", []string{"-json", "-d", "mlx5_0"}, "mlx5.json"},
		{"mlx5.fix", []string{"--json", "-i", "2"}, "mlx5-port2.json"},
		{"rxe2.fix", []string{"-l", "--json"}, "rxe2-list.json"},
		{"gid_fail.fix", []string{"--json"}, "gid_fail.json"},
	} {
		sys, err := loadFixture(filepath.Join("testdata/cref/fixtures", tt.fixture))
		if err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		exit := run(append([]string{"ibinfo"}, tt.args...), &stdout, &stderr, environment{sys: sys})
		var devs []map[string]any
		if err := json.Unmarshal(stdout.Bytes(), &devs); err != nil {
			t.Fatalf("%s %v: output is not a JSON array: %v\n%s", tt.fixture, tt.args, err, stdout.String())
		}
		out := fmt.Sprintf("%sexit %d\n", stdout.String(), exit)
		path := filepath.Join("testdata/json", tt.golden)
		if *update {
			if err := os.MkdirAll("testdata/json", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), out); diff != "" {
			t.Errorf("%s %v (-golden +got):\n%s", tt.fixture, tt.args, diff)
		}
	}
}
