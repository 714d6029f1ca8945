package cli

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// devinfoSpec and ibinfoSpec are the tables testdata/getopt_ref/ref.c
// records glibc with: ibv_devinfo's, and cmd/ibinfo's (ibv_devinfo's with
// -h, --help and --json added).
var (
	devinfoSpec = Spec{
		Short: "d:i:lv",
		Long: []LongOption{
			{"ib-dev", RequiredArgument, 'd'},
			{"ib-port", RequiredArgument, 'i'},
			{"list", NoArgument, 'l'},
			{"verbose", NoArgument, 'v'},
		},
	}
	ibinfoSpec = Spec{
		Short: devinfoSpec.Short + "h",
		Long: append(slices.Clip(devinfoSpec.Long),
			LongOption{Name: "help", Arg: NoArgument, Val: 'h'},
			LongOption{Name: "json", Arg: NoArgument, Val: 'j'}),
	}
)

// refEvent is one getopt_long result as testdata/getopt_ref/ref.c records
// it: an option with its argument, or the error message getopt printed.
type refEvent struct {
	Opt string  `json:"opt"`
	Arg *string `json:"arg"`
	Err string  `json:"err"`
}

// asRef is ev as ref.c would record it: glibc's message with prog's
// prefix, and optarg only for options that take an argument.
func asRef(prog string, spec Spec, ev Event) refEvent {
	if ev.Err != nil {
		return refEvent{Err: prog + ": " + ev.Err.Error()}
	}
	r := refEvent{Opt: string(ev.Opt)}
	for _, o := range spec.Long {
		if o.Val == ev.Opt && o.Arg == RequiredArgument {
			arg := ev.Arg
			r.Arg = &arg
		}
	}
	return r
}

// TestGetoptMatchesGlibc replays argument vectors recorded from glibc's
// getopt_long with ibv_devinfo's option table and with ibinfo's.
func TestGetoptMatchesGlibc(t *testing.T) {
	type refCase struct {
		Args   []string
		Events []refEvent
	}
	var ref struct{ Devinfo, Ibinfo []refCase }
	readJSON(t, "testdata/getopt_glibc.json", &ref)
	for _, set := range []struct {
		name  string
		spec  Spec
		cases []refCase
	}{
		{"devinfo", devinfoSpec, ref.Devinfo},
		{"ibinfo", ibinfoSpec, ref.Ibinfo},
	} {
		if len(set.cases) < 100 {
			t.Fatalf("%s: only %d cases", set.name, len(set.cases))
		}
		for _, c := range set.cases {
			events, _ := GetoptLong(append([]string{"ibv_devinfo"}, c.Args...), set.spec)
			got := []refEvent{}
			for _, ev := range events {
				got = append(got, asRef("ibv_devinfo", set.spec, ev))
			}
			want := append([]refEvent{}, c.Events...)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: GetoptLong(%q) (-glibc +got):\n%s", set.name, c.Args, diff)
			}
		}
	}
}

// pingpongSpec is a part of cmd/ibpingpong's table, with an operand.
var pingpongSpec = Spec{
	Short: "p:n:ec",
	Long: []LongOption{
		{"port", RequiredArgument, 'p'},
		{"iters", RequiredArgument, 'n'},
		{"ib-dev", RequiredArgument, 'd'},
		{"ib-port", RequiredArgument, 'i'},
		{"events", NoArgument, 'e'},
		{"chk", NoArgument, 'c'},
	},
}

// TestGetoptLong covers what the glibc vectors do not: operands, the
// spelling of each option, and single-dash long options.
func TestGetoptLong(t *testing.T) {
	jsonSpec := ibinfoSpec
	jsonSpec.SingleDash = []string{"json"}
	for _, tc := range []struct {
		name         string
		spec         Spec
		args         []string
		want         []Event
		wantOperands []string
	}{
		{"nothing", pingpongSpec, nil, nil, nil},
		{"operands anywhere, in order", pingpongSpec, []string{"a", "-e", "b", "--chk", "-"},
			[]Event{{Opt: 'e', Name: "-e"}, {Opt: 'c', Name: "--chk"}}, []string{"a", "b", "-"}},
		{"after --, everything is an operand", pingpongSpec, []string{"x", "--", "-e", "--", "--chk"},
			nil, []string{"x", "-e", "--", "--chk"}},
		{"abbreviation is spelled in full", pingpongSpec, []string{"--it=5", "--ev", "--po", "80"},
			[]Event{{Opt: 'n', Name: "--iters", Arg: "5"}, {Opt: 'e', Name: "--events"}, {Opt: 'p', Name: "--port", Arg: "80"}}, nil},
		{"bundle", pingpongSpec, []string{"-ecn7", "-p", "-n"},
			[]Event{{Opt: 'e', Name: "-e"}, {Opt: 'c', Name: "-c"}, {Opt: 'n', Name: "-n", Arg: "7"}, {Opt: 'p', Name: "-p", Arg: "-n"}}, nil},
		{"single dash", jsonSpec, []string{"-json"}, []Event{{Opt: 'j', Name: "-json"}}, nil},
		{"single dash among others", jsonSpec, []string{"-v", "-json", "-l"},
			[]Event{{Opt: 'v', Name: "-v"}, {Opt: 'j', Name: "-json"}, {Opt: 'l', Name: "-l"}}, nil},
		// As an option's argument it stays an argument.
		{"single dash as an argument", jsonSpec, []string{"-d", "-json"}, []Event{{Opt: 'd', Name: "-d", Arg: "-json"}}, nil},
		{"single dash after --", jsonSpec, []string{"--", "-json"}, nil, []string{"-json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, operands := GetoptLong(append([]string{"prog"}, tc.args...), tc.spec)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantOperands, operands); diff != "" {
				t.Errorf("operands (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGetoptErrors checks each kind of refusal as a typed error and as
// glibc's message.
func TestGetoptErrors(t *testing.T) {
	jsonSpec := ibinfoSpec
	jsonSpec.SingleDash = []string{"json"}
	for _, tc := range []struct {
		spec    Spec
		arg     string
		want    OptionError
		wantMsg string
	}{
		{pingpongSpec, "-x", OptionError{Problem: Unrecognized, Option: "-x"}, "invalid option -- 'x'"},
		{pingpongSpec, "-:", OptionError{Problem: Unrecognized, Option: "-:"}, "invalid option -- ':'"},
		{pingpongSpec, "--bogus=1", OptionError{Problem: Unrecognized, Option: "--bogus=1", Long: true}, "unrecognized option '--bogus=1'"},
		{pingpongSpec, "--ib", OptionError{Problem: Ambiguous, Option: "--ib", Long: true, Possibilities: []string{"--ib-dev", "--ib-port"}},
			"option '--ib' is ambiguous; possibilities: '--ib-dev' '--ib-port'"},
		{pingpongSpec, "-n", OptionError{Problem: MissingArgument, Option: "-n"}, "option requires an argument -- 'n'"},
		{pingpongSpec, "--it", OptionError{Problem: MissingArgument, Option: "--iters", Long: true}, "option '--iters' requires an argument"},
		{pingpongSpec, "--ev=1", OptionError{Problem: UnexpectedArgument, Option: "--events", Long: true}, "option '--events' doesn't allow an argument"},
		{jsonSpec, "-json=1", OptionError{Problem: UnexpectedArgument, Option: "-json", Long: true}, "option '-json' doesn't allow an argument"},
	} {
		t.Run(tc.arg, func(t *testing.T) {
			events, _ := GetoptLong([]string{"prog", tc.arg}, tc.spec)
			if len(events) != 1 || events[0].Opt != 0 || events[0].Name != "" {
				t.Fatalf("events %+v, want one error", events)
			}
			err := events[0].Err
			var oe *OptionError
			if !errors.Is(err, ErrBadOption) || !errors.As(err, &oe) {
				t.Fatalf("err = %#v, want a *OptionError", err)
			}
			if diff := cmp.Diff(tc.want, *oe); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantMsg, err.Error()); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		})
	}
	// Only the whole word is a single-dash option: "-js" is short options.
	events, _ := GetoptLong([]string{"prog", "-js"}, jsonSpec)
	var msgs []string
	for _, ev := range events {
		msgs = append(msgs, ev.Err.Error())
	}
	if diff := cmp.Diff([]string{"invalid option -- 'j'", "invalid option -- 's'"}, msgs); diff != "" {
		t.Errorf("-js (-want +got):\n%s", diff)
	}
}

// FuzzGetoptLong checks the parser on arbitrary argument vectors: no
// panic, every event is an option of the table or an error, and every
// non-option comes back as an operand.
func FuzzGetoptLong(f *testing.F) {
	f.Add("-d\x00rxe0\x00-vl")
	f.Add("--ib=\x00--\x00-json")
	spec := ibinfoSpec
	spec.SingleDash = []string{"json"}
	f.Fuzz(func(t *testing.T, argv string) {
		args := append([]string{"ibinfo"}, strings.Split(argv, "\x00")...)
		events, operands := GetoptLong(args, spec)
		for _, ev := range events {
			if (ev.Opt == 0) == (ev.Err == nil) {
				t.Fatalf("%q: event %+v has neither or both of option and error", args, ev)
			}
			if ev.Opt != 0 && !strings.ContainsRune("dilvhj", rune(ev.Opt)) {
				t.Fatalf("%q: unknown option %q", args, ev.Opt)
			}
		}
		if len(operands) > len(args)-1 {
			t.Fatalf("%q: %d operands", args, len(operands))
		}
	})
}
