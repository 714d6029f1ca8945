package main

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
	"github.com/goverbs/goverbs/internal/testvm/vmproc"
)

// flagRow is one invalid command line and what ibpingpong says: exit 1,
// this first line on standard error, the usage on standard output.
type flagRow struct {
	name   string
	kind   kind
	args   []string
	stderr string // first line, with argv[0] ibv_<kind>_pingpong
	getopt bool   // a getopt message: the C example prints the same line
}

// numericFlags are the options taking a number, with the range ibpingpong
// accepts (the C examples' types and checks) and the variants having them.
var numericFlags = []struct {
	short, long string
	lo, hi      int64
	kinds       []kind
}{
	{"p", "port", 0, 65535, []kind{kindRC, kindUC, kindUD, kindSRQ}},
	{"i", "ib-port", 1, 255, []kind{kindRC, kindUD}},
	{"s", "size", 1, 2147483607, []kind{kindRC, kindSRQ}},
	{"m", "mtu", 256, 4096, []kind{kindRC, kindUC}},
	{"r", "rx-depth", 1, 2147483391, []kind{kindRC}},
	{"n", "iters", 1, 2147483647, []kind{kindRC, kindUD}},
	{"l", "sl", 0, 15, []kind{kindRC, kindUC}},
	{"g", "gid-idx", -1, 255, []kind{kindRC, kindUD, kindSRQ}},
	{"q", "num-qp", 1, 2147483647, []kind{kindSRQ}},
}

// flagRows lists, for every numeric flag and variant, a missing argument
// (short and long form), a non-number, an empty string, an overflowing
// number and the values just outside its range; then the other flags'
// invalid uses.
func flagRows() []flagRow {
	var rows []flagRow
	for _, f := range numericFlags {
		for _, k := range f.kinds {
			prog := "ibv_" + k.String() + "_pingpong"
			add := func(name string, args []string, msg string, getopt bool) {
				rows = append(rows, flagRow{fmt.Sprintf("%v/-%s/%s", k, f.short, name), k, args, prog + ": " + msg, getopt})
			}
			flag := "-" + f.short
			outside := func(v string) string { return fmt.Sprintf("%s: %q is out of range [%d, %d]", flag, v, f.lo, f.hi) }
			add("missing argument", []string{flag}, "option requires an argument -- '"+f.short+"'", true)
			add("missing long argument", []string{"--" + f.long}, "option '--"+f.long+"' requires an argument", true)
			add("non-numeric", []string{flag, "x"}, fmt.Sprintf("%s: %q is not a number", flag, "x"), false)
			add("empty", []string{flag, ""}, fmt.Sprintf("%s: %q is not a number", flag, ""), false)
			add("trailing garbage", []string{flag, "12k"}, fmt.Sprintf("%s: %q is not a number", flag, "12k"), false)
			add("overflowing", []string{flag, "99999999999999999999"}, outside("99999999999999999999"), false)
			below, above := strconv.FormatInt(f.lo-1, 10), strconv.FormatInt(f.hi+1, 10)
			add("below the range", []string{flag, below}, outside(below), false)
			add("above the range", []string{flag, above}, outside(above), false)
		}
	}
	rc := "ibv_rc_pingpong: "
	rows = append(rows,
		flagRow{"rc/-m/not an MTU", kindRC, []string{"-m", "1000"}, rc + "-m: 1000 is not a path MTU (256, 512, 1024, 2048 or 4096)", false},
		flagRow{"rc/-t/missing argument", kindRC, []string{"-t"}, rc + "option requires an argument -- 't'", false},
		flagRow{"rc/-t/unknown variant", kindRC, []string{"-t", "xrc"}, rc + `-t: "xrc" is not one of rc, uc, ud, srq`, false},
		flagRow{"rc/-e/argument", kindRC, []string{"--events=1"}, rc + "option '--events' doesn't allow an argument", true},
		flagRow{"rc/-c/argument", kindRC, []string{"--chk=yes"}, rc + "option '--chk' doesn't allow an argument", true},
		flagRow{"rc/-h/argument", kindRC, []string{"--help=1"}, rc + "option '--help' doesn't allow an argument", false},
		flagRow{"rc/-d/missing argument", kindRC, []string{"-d"}, rc + "option requires an argument -- 'd'", true},
		flagRow{"rc/--ib-dev/missing argument", kindRC, []string{"--ib-dev"}, rc + "option '--ib-dev' requires an argument", true},
		flagRow{"rc/unknown short option", kindRC, []string{"-Z"}, rc + "invalid option -- 'Z'", true},
		flagRow{"rc/unknown long option", kindRC, []string{"--bogus"}, rc + "unrecognized option '--bogus'", true},
		flagRow{"rc/ambiguous long option", kindRC, []string{"--i=1"}, rc + "option '--i=1' is ambiguous; possibilities: '--ib-dev' '--ib-port' '--iters' '--iodp'", true},
		flagRow{"rc/two servers", kindRC, []string{"a", "b"}, rc + `one server name at most, got ["a" "b"]`, false},
		flagRow{"ud/-m/not an option", kindUD, []string{"-m", "1024"}, "ibv_ud_pingpong: -m: not an option of ibv_ud_pingpong", false},
		flagRow{"uc/-q/not an option", kindUC, []string{"-q", "2"}, "ibv_uc_pingpong: -q: not an option of ibv_uc_pingpong", false},
		flagRow{"srq/-q/more QPs than receives", kindSRQ, []string{"-q", "501"}, "ibv_srq_pingpong: rx_depth 500 is too small for 501 QPs -- must have at least one receive per QP.", false},
	)
	return rows
}

// TestFlagsBadValues: every row exits 1 with its message and the usage,
// before touching a device.
func TestFlagsBadValues(t *testing.T) {
	rows := flagRows()
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			prog := "ibv_" + r.kind.String() + "_pingpong"
			args := append([]string{prog}, r.args...)
			if r.kind != kindRC && !strings.HasPrefix(r.name, r.kind.String()+"/-t") {
				args = append([]string{prog, "-t", r.kind.String()}, r.args...)
			}
			exit := runContext(context.Background(), args, &stdout, &stderr, nil)
			if exit != 1 {
				t.Errorf("exit %d, want 1", exit)
			}
			first, _, _ := strings.Cut(stderr.String(), "\n")
			if diff := cmp.Diff(r.stderr, first); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
			if !strings.HasPrefix(stdout.String(), "Usage:\n") {
				t.Errorf("stdout is not the usage:\n%s", stdout.String())
			}
		})
	}
	t.Logf("%d rows", len(rows))
}

// TestFlagsBadValuesVM gives every row to rdma-core's example too, as a
// client of a closed port (so a line it accepts ends at once instead of
// waiting for a peer). Both must fail with exit 1; getopt's messages must
// be the same line. Where the C example takes a value ibpingpong refuses
// (strtol reading "x" as 0, no range check), the test logs it. Every row
// ends before ibpingpong opens a device, so the transport changes nothing:
// once per kernel.
func TestFlagsBadValuesVM(t *testing.T) {
	tools := requireVM(t)
	vmenv.OncePerKernel(t)
	closed := strconv.Itoa(vmproc.FreePort(t))
	accepted := 0
	for _, r := range flagRows() {
		t.Run(r.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			args := append([]string{"-d", "rxe0", "-p", closed, "127.0.0.1"}, r.args...)
			want := <-side{tool: tools[r.kind]}.start(ctx, t, r.kind, args, nil)
			got := <-side{goSide: true}.start(ctx, t, r.kind, args, nil)
			first := func(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }
			if got.exit != 1 {
				t.Errorf("ibpingpong exit %d, want 1\n%s", got.exit, got.stderr)
			}
			if want.exit != 1 {
				t.Errorf("%s exit %d, want 1\n%s", tools[r.kind], want.exit, want.stderr)
			}
			if r.getopt {
				// ibpingpong names itself ibpingpong here (side.start).
				wantLine := strings.Replace(first(want.stderr), tools[r.kind]+":", "ibpingpong:", 1)
				gotLine := first(got.stderr)
				if diff := cmp.Diff(wantLine, gotLine); diff != "" {
					t.Errorf("first stderr line (-C +Go):\n%s", diff)
				}
			}
			if !strings.HasPrefix(want.stdout, "Usage:") {
				accepted++
				t.Logf("the C example takes it and fails later: %q", first(want.stderr))
			}
		})
	}
	t.Logf("%d lines the C example accepts and ibpingpong refuses", accepted)
}
