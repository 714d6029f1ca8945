package cli

import (
	"errors"
	"fmt"
	"strings"
)

// ArgKind says whether an option takes an argument (getopt's has_arg).
type ArgKind int

const (
	NoArgument       ArgKind = iota // a flag: "--verbose"
	RequiredArgument                // "--ib-dev=rxe0", "--ib-dev rxe0", "-drxe0", "-d rxe0"
)

// LongOption is one entry of getopt_long's struct option table.
type LongOption struct {
	Name string
	Arg  ArgKind
	Val  byte // what the option is reported as, usually its short letter
}

// Spec is an option table: getopt's optstring (Short, e.g. "d:i:lv") and
// longopts. SingleDash lists names of Long that are also accepted as a
// whole element with a single dash ("-json"), which getopt does not do;
// "-js" stays the short options j and s.
type Spec struct {
	Short      string
	Long       []LongOption
	SingleDash []string
}

// Event is one result of a getopt call: an option with its argument, or
// an error (getopt's '?').
type Event struct {
	Opt  byte   // the option's Val; 0 with Err
	Name string // how the option was written, in full: "-n", "--iters" (also for "--it"), "-json"
	Arg  string // the argument, when the option takes one
	Err  error  // a *OptionError: what glibc would complain about
}

// ErrBadOption matches every *OptionError.
var ErrBadOption = errors.New("bad option")

// Problem is what getopt finds wrong with an option.
type Problem int

const (
	// Unrecognized: not in the table.
	Unrecognized Problem = iota + 1
	// Ambiguous: a long option's prefix shared by options that differ.
	Ambiguous
	// MissingArgument: the option takes an argument and none is left.
	MissingArgument
	// UnexpectedArgument: "=value" given to an option that takes none.
	UnexpectedArgument
)

// OptionError is an option getopt refuses. Its message is glibc's without
// the "prog: " glibc puts first, which the caller adds if it wants it.
type OptionError struct {
	Problem Problem
	// Option is the option the message names, with its dash(es): as
	// written for Unrecognized and Ambiguous ("-x", "--ib", "--json=1"),
	// by its full name otherwise ("--ib-port" for "--ib-p").
	Option string
	// Long is set for long options, whose messages glibc words
	// differently ("unrecognized option" rather than "invalid option").
	Long bool
	// Possibilities are the options an Ambiguous prefix matches, in
	// full ("--ib-dev", "--ib-port").
	Possibilities []string
}

func (e *OptionError) Error() string {
	switch {
	case e.Problem == Unrecognized && !e.Long:
		return fmt.Sprintf("invalid option -- '%s'", e.Option[1:])
	case e.Problem == Unrecognized:
		return fmt.Sprintf("unrecognized option '%s'", e.Option)
	case e.Problem == Ambiguous:
		var b strings.Builder
		fmt.Fprintf(&b, "option '%s' is ambiguous; possibilities:", e.Option)
		for _, p := range e.Possibilities {
			fmt.Fprintf(&b, " '%s'", p)
		}
		return b.String()
	case e.Problem == MissingArgument && !e.Long:
		return fmt.Sprintf("option requires an argument -- '%s'", e.Option[1:])
	case e.Problem == MissingArgument:
		return fmt.Sprintf("option '%s' requires an argument", e.Option)
	case e.Problem == UnexpectedArgument:
		return fmt.Sprintf("option '%s' doesn't allow an argument", e.Option)
	}
	return fmt.Sprintf("option '%s': problem %d", e.Option, e.Problem)
}

// Is makes errors.Is(err, ErrBadOption) hold.
func (e *OptionError) Is(target error) bool { return target == ErrBadOption }

// GetoptLong reproduces glibc's getopt_long closely enough that every
// argument vector gives the same options, arguments and error messages in
// the same order:
//
//   - short options bundle ("-lv"); an option's argument is the rest of its
//     element or else the next element, whatever it looks like ("-d -v"
//     names the device "-v");
//   - long options take "=value" or the next element and may be abbreviated
//     to any unambiguous prefix ("--it=5");
//   - non-options may come anywhere (glibc's default PERMUTE ordering) and
//     "--" ends the options.
//
// Beyond getopt, Spec.SingleDash names long options that may also be
// written as one whole element with a single dash ("-json").
//
// Parsing is kept apart from acting on the options because the C tools act
// on each option as getopt returns it: ibv_devinfo's "-l" lists the devices
// and exits before later options are even looked at. So GetoptLong returns
// every option and error, in getopt's order, and the caller walks them.
//
// The optstring features the tools do not use are not reproduced: optional
// arguments ("x::"), a leading '+', '-' or ':', and "W;".
func GetoptLong(args []string, spec Spec) (events []Event, operands []string) {
	if len(args) == 0 {
		return nil, nil
	}
	for i := 1; i < len(args); {
		a := args[i]
		switch {
		case a == "--":
			return events, append(operands, args[i+1:]...)
		case len(a) < 2 || a[0] != '-':
			operands = append(operands, a)
			i++
			continue
		case strings.HasPrefix(a, "--"):
			var ev Event
			ev, i = parseLong(args, i, a[2:], "--", spec)
			events = append(events, ev)
			continue
		}
		if body, ok := singleDashLong(a, spec); ok {
			var ev Event
			ev, i = parseLong(args, i, body, "-", spec)
			events = append(events, ev)
			continue
		}
		// A cluster of short options.
		i++
		for j := 1; j < len(a); j++ {
			c := a[j]
			// string(c) is the character's UTF-8 encoding, as fmt's %c
			// of a byte would print it.
			name := "-" + string(c)
			k := strings.IndexByte(spec.Short, c)
			if k < 0 || c == ':' || c == ';' {
				events = append(events, Event{Err: &OptionError{Problem: Unrecognized, Option: name}})
				continue
			}
			if k+1 >= len(spec.Short) || spec.Short[k+1] != ':' {
				events = append(events, Event{Opt: c, Name: name})
				continue
			}
			// The option takes an argument: the rest of the element, or
			// the next element.
			switch {
			case j+1 < len(a):
				events = append(events, Event{Opt: c, Name: name, Arg: a[j+1:]})
			case i < len(args):
				events = append(events, Event{Opt: c, Name: name, Arg: args[i]})
				i++
			default:
				events = append(events, Event{Err: &OptionError{Problem: MissingArgument, Option: name}})
			}
			break
		}
	}
	return events, operands
}

// singleDashLong reports whether a (an element starting with one dash) is
// one of spec's single-dash long options, as a whole or with "=value", and
// returns the text after the dash.
func singleDashLong(a string, spec Spec) (string, bool) {
	name, _, _ := strings.Cut(a[1:], "=")
	for _, s := range spec.SingleDash {
		if name == s {
			return a[1:], true
		}
	}
	return "", false
}

// parseLong handles the long option in args[i], whose text after prefix
// ("--" or "-") is body ("name" or "name=value"). It returns the event and
// the index of the next element to parse.
func parseLong(args []string, i int, body, prefix string, spec Spec) (Event, int) {
	name, value, hasValue := strings.Cut(body, "=")
	i++
	var found *LongOption
	for k := range spec.Long {
		if spec.Long[k].Name == name {
			found = &spec.Long[k]
			break
		}
	}
	if found == nil {
		// No exact match: an unambiguous prefix will do. Matches that
		// would behave identically are not ambiguous (glibc compares
		// has_arg, flag and val).
		var matches []*LongOption
		ambiguous := false
		for k := range spec.Long {
			o := &spec.Long[k]
			if !strings.HasPrefix(o.Name, name) {
				continue
			}
			// glibc lists the first match and those that differ from it.
			if len(matches) > 0 && matches[0].Arg == o.Arg && matches[0].Val == o.Val {
				continue
			}
			if len(matches) > 0 {
				ambiguous = true
			}
			matches = append(matches, o)
		}
		if ambiguous {
			e := &OptionError{Problem: Ambiguous, Option: prefix + body, Long: true}
			for _, o := range matches {
				e.Possibilities = append(e.Possibilities, prefix+o.Name)
			}
			return Event{Err: e}, i
		}
		if len(matches) > 0 {
			found = matches[0]
		}
	}
	if found == nil {
		return Event{Err: &OptionError{Problem: Unrecognized, Option: prefix + body, Long: true}}, i
	}
	spelled := prefix + found.Name
	switch {
	case hasValue && found.Arg == NoArgument:
		return Event{Err: &OptionError{Problem: UnexpectedArgument, Option: spelled, Long: true}}, i
	case hasValue:
		return Event{Opt: found.Val, Name: spelled, Arg: value}, i
	case found.Arg == RequiredArgument && i < len(args):
		return Event{Opt: found.Val, Name: spelled, Arg: args[i]}, i + 1
	case found.Arg == RequiredArgument:
		return Event{Err: &OptionError{Problem: MissingArgument, Option: spelled, Long: true}}, i
	}
	return Event{Opt: found.Val, Name: spelled}, i
}
