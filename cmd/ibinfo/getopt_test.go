package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/cli"
)

// optEvent is a getopt event as ibinfo acts on it: an option with its
// argument, or the message it prints on stderr.
type optEvent struct {
	opt    byte
	arg    string
	errMsg string
}

// parseIbinfo is ibinfo's getopt_long pass over args: the glibc-recorded
// behaviour of the parser itself is tested in internal/cli.
func parseIbinfo(args []string) []optEvent {
	events, _ := cli.GetoptLong(args, ibvDevinfoSpec)
	var out []optEvent
	for _, ev := range events {
		if ev.Err != nil {
			out = append(out, optEvent{errMsg: getoptMessage(args[0], ev.Err)})
			continue
		}
		out = append(out, optEvent{opt: ev.Opt, arg: ev.Arg})
	}
	return out
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
		got := parseIbinfo(append([]string{"ibinfo"}, tt.args...))
		if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(optEvent{})); diff != "" {
			t.Errorf("getoptLong(%q) (-want +got):\n%s", tt.args, diff)
		}
	}
}
