package main

import (
	"fmt"
	"strings"
)

// This file reproduces glibc's getopt_long, as ibv_devinfo calls it, closely
// enough that every argument vector gives the same options, arguments and
// error messages in the same order: short options bundle ("-lv"), an option
// argument is the rest of its element or the next element whatever it looks
// like ("-d -v" names the device "-v"), non-options are skipped (glibc's
// default PERMUTE ordering), "--" ends the options, and long options take
// "=value" or the next element and may be abbreviated to any unambiguous
// prefix. Parsing is separate from acting on the options because
// ibv_devinfo acts on each option as getopt returns it: "-l" lists the
// devices and exits before later options are even parsed.

// argKind says whether an option takes an argument (getopt's has_arg).
type argKind int

const (
	noArgument argKind = iota
	requiredArgument
)

// longOption is one entry of getopt_long's struct option table.
type longOption struct {
	name string
	arg  argKind
	val  byte
}

// optSpec is an option table: getopt's optstring and longopts. singleDash
// lists long options also accepted as one whole element with a single dash
// ("-json"), which getopt itself does not do.
type optSpec struct {
	short      string
	long       []longOption
	singleDash []string
}

// optEvent is one result of a getopt call: an option with its argument, or
// an error (getopt's '?') with the message glibc prints on stderr.
type optEvent struct {
	opt    byte   // the option's val; 0 for an error
	arg    string // the argument, when the option takes one
	errMsg string // glibc's message, without the trailing newline
}

// getoptLong parses args (args[0] is the program name, used in messages) as
// glibc's getopt_long does and returns the events in the order getopt
// would return them. Non-option arguments are dropped: ibv_devinfo ignores
// them.
func getoptLong(args []string, spec optSpec) []optEvent {
	if len(args) == 0 {
		return nil
	}
	prog := args[0]
	var events []optEvent
	for i := 1; i < len(args); {
		a := args[i]
		switch {
		case a == "--":
			return events
		case len(a) < 2 || a[0] != '-':
			// A non-option: PERMUTE moves it to the end, where it is ignored.
			i++
			continue
		case strings.HasPrefix(a, "--"):
			var ev optEvent
			ev, i = parseLong(prog, args, i, a[2:], "--", spec)
			events = append(events, ev)
			continue
		}
		if name, ok := singleDashLong(a, spec); ok {
			var ev optEvent
			ev, i = parseLong(prog, args, i, name, "-", spec)
			events = append(events, ev)
			continue
		}
		// A cluster of short options.
		i++
		for j := 1; j < len(a); j++ {
			c := a[j]
			k := strings.IndexByte(spec.short, c)
			if k < 0 || c == ':' || c == ';' {
				events = append(events, optEvent{errMsg: fmt.Sprintf("%s: invalid option -- '%c'", prog, c)})
				continue
			}
			if k+1 >= len(spec.short) || spec.short[k+1] != ':' {
				events = append(events, optEvent{opt: c})
				continue
			}
			// The option takes an argument: the rest of the element, or
			// the next element.
			switch {
			case j+1 < len(a):
				events = append(events, optEvent{opt: c, arg: a[j+1:]})
			case i < len(args):
				events = append(events, optEvent{opt: c, arg: args[i]})
				i++
			default:
				events = append(events, optEvent{errMsg: fmt.Sprintf("%s: option requires an argument -- '%c'", prog, c)})
			}
			break
		}
	}
	return events
}

// singleDashLong reports whether a (an element starting with one dash) is
// one of spec's single-dash long options, as a whole or with "=value".
func singleDashLong(a string, spec optSpec) (string, bool) {
	name := a[1:]
	if k := strings.IndexByte(name, '='); k >= 0 {
		name = name[:k]
	}
	for _, s := range spec.singleDash {
		if name == s {
			return a[1:], true
		}
	}
	return "", false
}

// parseLong handles the long option in args[i], whose text after the
// prefix is body ("name" or "name=value"). It returns the event and the
// index of the next element to parse.
func parseLong(prog string, args []string, i int, body, prefix string, spec optSpec) (optEvent, int) {
	name, value, hasValue := strings.Cut(body, "=")
	i++
	var found *longOption
	for k := range spec.long {
		if spec.long[k].name == name {
			found = &spec.long[k]
			break
		}
	}
	if found == nil {
		// No exact match: an unambiguous prefix will do. Matches that
		// would behave identically are not ambiguous (glibc compares
		// has_arg, flag and val).
		var matches []*longOption
		ambiguous := false
		for k := range spec.long {
			o := &spec.long[k]
			if !strings.HasPrefix(o.name, name) {
				continue
			}
			// glibc lists the first match and those that differ from it.
			if len(matches) > 0 && matches[0].arg == o.arg && matches[0].val == o.val {
				continue
			}
			if len(matches) > 0 {
				ambiguous = true
			}
			matches = append(matches, o)
		}
		if ambiguous {
			var b strings.Builder
			fmt.Fprintf(&b, "%s: option '%s%s' is ambiguous; possibilities:", prog, prefix, body)
			for _, o := range matches {
				fmt.Fprintf(&b, " '%s%s'", prefix, o.name)
			}
			return optEvent{errMsg: b.String()}, i
		}
		if len(matches) > 0 {
			found = matches[0]
		}
	}
	if found == nil {
		return optEvent{errMsg: fmt.Sprintf("%s: unrecognized option '%s%s'", prog, prefix, body)}, i
	}
	switch {
	case hasValue && found.arg == noArgument:
		return optEvent{errMsg: fmt.Sprintf("%s: option '%s%s' doesn't allow an argument", prog, prefix, found.name)}, i
	case hasValue:
		return optEvent{opt: found.val, arg: value}, i
	case found.arg == requiredArgument && i < len(args):
		return optEvent{opt: found.val, arg: args[i]}, i + 1
	case found.arg == requiredArgument:
		return optEvent{errMsg: fmt.Sprintf("%s: option '%s%s' requires an argument", prog, prefix, found.name)}, i
	}
	return optEvent{opt: found.val}, i
}
