package main

import (
	"bytes"
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/cli"
	"github.com/goverbs/goverbs/uverbs"
)

func TestParseArgs(t *testing.T) {
	with := func(k kind, f func(*config)) config {
		c := defaults(k)
		c.prog = "ibpingpong"
		f(&c)
		return c
	}
	for _, tc := range []struct {
		args []string
		want config
	}{
		{nil, with(kindRC, func(c *config) {})},
		{[]string{"-t", "rc", "-p", "18600", "-d", "rxe0", "-i", "1", "-s", "64", "-m", "2048", "-r", "100", "-n", "500",
			"-l", "3", "-e", "-g", "1", "-c", "10.99.0.1"}, with(kindRC, func(c *config) {
			c.tcpPort, c.ibDev, c.size, c.mtu, c.rxDepth, c.iters, c.sl, c.events, c.gidIdx, c.check, c.server =
				18600, "rxe0", 64, uverbs.MTU2048, 100, 500, 3, true, 1, true, "10.99.0.1"
		})},
		// Long options, "=value" and next-element arguments, abbreviations,
		// bundling, the operand anywhere, base prefixes as strtol takes them,
		// the last of a repeated option.
		{[]string{"--transport=uc", "host", "--iters", "0x10", "--gid=1", "-ecn7", "--size=010", "--rx-d", "8"},
			with(kindUC, func(c *config) {
				c.server, c.iters, c.gidIdx, c.events, c.check, c.size, c.rxDepth = "host", 7, 1, true, true, 8, 8
			})},
		{[]string{"-tud"}, with(kindUD, func(c *config) {})},
		{[]string{"-t", "SRQ", "-q", "4", "-r", "4"}, with(kindSRQ, func(c *config) { c.numQP, c.rxDepth = 4, 4 })},
		{[]string{"-t", "rc", "-N", "-g", "-1", "--", "-host"}, with(kindRC, func(c *config) { c.server = "-host" })},
		{[]string{"-p", "0"}, with(kindRC, func(c *config) { c.tcpPort = 0 })},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			got, err := parseArgs(append([]string{"ibpingpong"}, tc.args...))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(config{})); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseArgsDefaultsFromProgramName(t *testing.T) {
	for prog, want := range map[string]kind{
		"ibv_ud_pingpong": kindUD, "/usr/bin/ibv_srq_pingpong": kindSRQ, "uc_pingpong": kindUC,
		"ibpingpong": kindRC, "ibv_xx_pingpong": kindRC,
	} {
		c, err := parseArgs([]string{prog})
		if err != nil || c.kind != want {
			t.Errorf("%s: kind %v, %v; want %v", prog, c.kind, err, want)
		}
	}
	if c, _ := parseArgs([]string{"ibv_ud_pingpong"}); c.size != 1024 {
		t.Errorf("ud default size %d, want 1024", c.size)
	}
	// -t wins over the name.
	if c, _ := parseArgs([]string{"ibv_ud_pingpong", "-t", "rc"}); c.kind != kindRC || c.size != 4096 {
		t.Errorf("-t rc as ibv_ud_pingpong: %v size %d", c.kind, c.size)
	}
}

func TestParseArgsBadInput(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string
		number  bool // the error is a bad number
	}{
		{[]string{"-x"}, "invalid option -- 'x'", false},
		{[]string{"--bogus"}, "unrecognized option '--bogus'", false},
		{[]string{"--events=1"}, "option '--events' doesn't allow an argument", false},
		{[]string{"-n"}, "option requires an argument -- 'n'", false},
		{[]string{"--iters"}, "option '--iters' requires an argument", false},
		{[]string{"--i=1"}, "option '--i=1' is ambiguous; possibilities: '--ib-dev' '--ib-port' '--iters' '--iodp'", false},
		{[]string{"-t", "xrc"}, `-t: "xrc" is not one of rc, uc, ud, srq`, false},
		{[]string{"-t", ""}, `-t: "" is not one of rc, uc, ud, srq`, false},
		{[]string{"-p", "65536"}, `-p: "65536" is out of range [0, 65535]`, true},
		{[]string{"-p", "-1"}, `-p: "-1" is out of range [0, 65535]`, true},
		{[]string{"-p", "80x"}, `-p: "80x" is not a number`, true},
		{[]string{"-i", "0"}, `-i: "0" is out of range [1, 255]`, true},
		{[]string{"-i", "256"}, `-i: "256" is out of range [1, 255]`, true},
		{[]string{"-s", "0"}, `-s: "0" is out of range [1, 2147483607]`, true},
		{[]string{"-s", ""}, `-s: "" is not a number`, true},
		{[]string{"-s", "0x"}, `-s: "0x" is not a number`, true},
		{[]string{"-s", "08"}, `-s: "08" is not a number`, true},
		{[]string{"-s", " 8"}, `-s: " 8" is not a number`, true},
		{[]string{"-s", "1_000"}, `-s: "1_000" is not a number`, true},
		{[]string{"-s", "+-1"}, `-s: "+-1" is not a number`, true},
		{[]string{"-s", "99999999999999999999999"}, `-s: "99999999999999999999999" is out of range [1, 2147483607]`, true},
		{[]string{"-m", "1000"}, "-m: 1000 is not a path MTU (256, 512, 1024, 2048 or 4096)", false},
		{[]string{"-m", "8192"}, `-m: "8192" is out of range [256, 4096]`, true},
		{[]string{"-r", "0"}, `-r: "0" is out of range [1, 2147483391]`, true},
		{[]string{"-n", "0"}, `-n: "0" is out of range [1, 2147483647]`, true},
		{[]string{"-n", "4294967296"}, `-n: "4294967296" is out of range [1, 2147483647]`, true},
		{[]string{"-l", "16"}, `-l: "16" is out of range [0, 15]`, true},
		{[]string{"-g", "-2"}, `-g: "-2" is out of range [-1, 255]`, true},
		{[]string{"-g", "256"}, `-g: "256" is out of range [-1, 255]`, true},
		{[]string{"-t", "ud", "-m", "1024"}, "-m: not an option of ibv_ud_pingpong", false},
		{[]string{"-t", "rc", "-q", "2"}, "-q: not an option of ibv_rc_pingpong", false},
		{[]string{"-t", "uc", "--odp"}, "--odp: not an option of ibv_uc_pingpong", false},
		{[]string{"-t", "uc", "-N"}, "-N: not an option of ibv_uc_pingpong", false},
		{[]string{"--odp"}, "--odp: on-demand paging is not supported", false},
		{[]string{"-O"}, "-O: implicit on-demand paging is not supported", false},
		{[]string{"-P"}, "-P: MR prefetch (on-demand paging) is not supported", false},
		{[]string{"--ts"}, "--ts: completion timestamps are not supported", false},
		{[]string{"-j"}, "-j: device memory is not supported", false},
		{[]string{"-t", "srq", "-o"}, "-o: on-demand paging is not supported", false},
		{[]string{"-t", "srq", "-q", "0"}, `-q: "0" is out of range [1, 2147483647]`, true},
		{[]string{"-t", "srq", "-q", "501"}, "rx_depth 500 is too small for 501 QPs -- must have at least one receive per QP.", false},
		{[]string{"-t", "srq", "-q", "256", "-r", "1000"}, "num_qp 256 must be less than 255", false},
		{[]string{"a", "b"}, `one server name at most, got ["a" "b"]`, false},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := parseArgs(append([]string{"ibpingpong"}, tc.args...))
			if !errors.Is(err, ErrUsage) {
				t.Fatalf("err = %v, want a usage error", err)
			}
			var ue *UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("err = %T, want *UsageError", err)
			}
			if diff := cmp.Diff(tc.wantErr, err.Error()); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
			var ne *cli.NumberError
			if got := errors.Is(err, cli.ErrBadNumber) && errors.As(err, &ne); got != tc.number {
				t.Errorf("bad number: %v, want %v", got, tc.number)
			}
		})
	}
}

// TestRunUsage runs the program on bad command lines: exit 1, the reason on
// stderr, the usage on stdout (where the C examples print it); -h is
// usage and exit 0. Nothing here touches a device.
func TestRunUsage(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		wantExit   int
		wantStderr string
		wantUsage  string // a line the usage must have
	}{
		{[]string{"-h"}, 0, "", "  -c, --chk              validate the received buffer\n"},
		{[]string{"-t", "srq", "--help"}, 0, "", "  -q, --num-qp=<num>     number of QPs to use (default 16)\n"},
		{[]string{"-n", "x"}, 1, "ibv_rc_pingpong: -n: \"x\" is not a number\n", "  -m, --mtu=<size>       path MTU (default 1024)\n"},
		{[]string{"-t", "ud", "-m", "512"}, 1, "ibv_rc_pingpong: -m: not an option of ibv_ud_pingpong\n",
			"  -s, --size=<size>      size of the messages exchanged (default 1024)\n"},
		{[]string{"-Z"}, 1, "ibv_rc_pingpong: invalid option -- 'Z'\n", "Usage:\n"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			exit := runContext(context.Background(), append([]string{"ibv_rc_pingpong"}, tc.args...), &stdout, &stderr, nil)
			if exit != tc.wantExit {
				t.Errorf("exit %d, want %d", exit, tc.wantExit)
			}
			if diff := cmp.Diff(tc.wantStderr, stderr.String()); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
			if !strings.HasPrefix(stdout.String(), "Usage:\n") || !strings.Contains(stdout.String(), tc.wantUsage) {
				t.Errorf("stdout is not the usage with %q:\n%s", tc.wantUsage, stdout.String())
			}
		})
	}
	var stdout bytes.Buffer
	runContext(context.Background(), []string{"ibpingpong", "-t", "ud", "-h"}, &stdout, &bytes.Buffer{}, nil)
	if strings.Contains(stdout.String(), "--mtu") || strings.Contains(stdout.String(), "--num-qp") {
		t.Errorf("ud usage lists options ud does not have:\n%s", stdout.String())
	}
}

func TestCFixed2(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		in   float64
		want string
	}{{1.005, "1.00"}, {126.025, "126.03"}, {0, "0.00"}, {inf, "inf"}, {-inf, "-inf"}} {
		if got := cFixed2(tc.in); got != tc.want {
			t.Errorf("cFixed2(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
