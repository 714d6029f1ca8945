package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// refEvent is one getopt_long result as testdata/getopt_ref/ref.c records
// it: an option with its argument, or the error message getopt printed.
type refEvent struct {
	Opt string  `json:"opt"`
	Arg *string `json:"arg"`
	Err string  `json:"err"`
}

// devinfoOnlySpec is ibv_devinfo's own table, without ibinfo's additions.
var devinfoOnlySpec = optSpec{
	short: "d:i:lv",
	long: []longOption{
		{"ib-dev", requiredArgument, 'd'},
		{"ib-port", requiredArgument, 'i'},
		{"list", noArgument, 'l'},
		{"verbose", noArgument, 'v'},
	},
}

// TestGetoptMatchesGlibc replays argument vectors recorded from glibc's
// getopt_long with ibv_devinfo's option table (and with ibinfo's, less the
// single-dash -json that getopt has no notion of).
func TestGetoptMatchesGlibc(t *testing.T) {
	var ref struct {
		Devinfo []struct {
			Args   []string
			Events []refEvent
		}
		Ibinfo []struct {
			Args   []string
			Events []refEvent
		}
	}
	readJSON(t, "testdata/getopt_glibc.json", &ref)
	ibinfoNoSingleDash := ibvDevinfoSpec
	ibinfoNoSingleDash.singleDash = nil
	for _, set := range []struct {
		name  string
		spec  optSpec
		cases []struct {
			Args   []string
			Events []refEvent
		}
	}{
		{"devinfo", devinfoOnlySpec, ref.Devinfo},
		{"ibinfo", ibinfoNoSingleDash, ref.Ibinfo},
	} {
		if len(set.cases) < 100 {
			t.Fatalf("%s: only %d cases", set.name, len(set.cases))
		}
		for _, c := range set.cases {
			want := []optEvent{}
			for _, e := range c.Events {
				if e.Err != "" || e.Opt == "" {
					want = append(want, optEvent{errMsg: e.Err})
					continue
				}
				ev := optEvent{opt: e.Opt[0]}
				if e.Arg != nil {
					ev.arg = *e.Arg
				}
				want = append(want, ev)
			}
			got := append([]optEvent{}, getoptLong(append([]string{"ibv_devinfo"}, c.Args...), set.spec)...)
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(optEvent{})); diff != "" {
				t.Errorf("%s: getoptLong(%q) (-glibc +got):\n%s", set.name, c.Args, diff)
			}
		}
	}
}

func TestGetoptSingleDashJSON(t *testing.T) {
	tests := []struct {
		args []string
		want []optEvent
	}{
		{[]string{"-json"}, []optEvent{{opt: 'j'}}},
		{[]string{"-v", "-json", "-l"}, []optEvent{{opt: 'v'}, {opt: 'j'}, {opt: 'l'}}},
		// As an option's argument it stays a device name.
		{[]string{"-d", "-json"}, []optEvent{{opt: 'd', arg: "-json"}}},
		{[]string{"-json=1"}, []optEvent{{errMsg: "ibinfo: option '-json' doesn't allow an argument"}}},
		// Only the whole word: "-js" is short options.
		{[]string{"-js"}, []optEvent{{errMsg: "ibinfo: invalid option -- 'j'"}, {errMsg: "ibinfo: invalid option -- 's'"}}},
		{[]string{"--", "-json"}, nil},
	}
	for _, tt := range tests {
		got := getoptLong(append([]string{"ibinfo"}, tt.args...), ibvDevinfoSpec)
		if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(optEvent{})); diff != "" {
			t.Errorf("getoptLong(%q) (-want +got):\n%s", tt.args, diff)
		}
	}
}
