package main

import (
	"fmt"
	"strings"
)

// A reproduction of glibc's getopt_long as the pingpong examples call it,
// so that their command lines mean the same here: short options bundle
// ("-ec"), an option's argument is the rest of its element or the next
// element ("-n5", "-n 5"), long options take "=value" or the next element
// and may be abbreviated to an unambiguous prefix ("--it=5"), "--" ends the
// options, and non-options may come anywhere (glibc's PERMUTE ordering):
// they are collected in order, the server name among them.

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

// optSpec is an option table: getopt's optstring and its long options.
type optSpec struct {
	short string
	long  []longOption
}

// optEvent is one result of a getopt call: an option with its argument, or
// an error (getopt's '?') with the message glibc prints on stderr.
type optEvent struct {
	opt    byte   // the option's val; 0 for an error
	name   string // how the option was spelled: "-n" or "--iters"
	arg    string // the argument, when the option takes one
	errMsg string // glibc's message, without the trailing newline
}

// getoptLong parses args (args[0] is the program name) and returns the
// options in order and the non-option arguments. Error messages are
// glibc's without the "prog: " it puts first.
func getoptLong(args []string, spec optSpec) (events []optEvent, operands []string) {
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
			var ev optEvent
			ev, i = parseLong(args, i, a[2:], spec)
			events = append(events, ev)
			continue
		}
		// A cluster of short options.
		i++
		for j := 1; j < len(a); j++ {
			c := a[j]
			k := strings.IndexByte(spec.short, c)
			if k < 0 || c == ':' {
				events = append(events, optEvent{errMsg: fmt.Sprintf("invalid option -- '%c'", c)})
				continue
			}
			name := "-" + string(c)
			if k+1 >= len(spec.short) || spec.short[k+1] != ':' {
				events = append(events, optEvent{opt: c, name: name})
				continue
			}
			switch {
			case j+1 < len(a):
				events = append(events, optEvent{opt: c, name: name, arg: a[j+1:]})
			case i < len(args):
				events = append(events, optEvent{opt: c, name: name, arg: args[i]})
				i++
			default:
				events = append(events, optEvent{errMsg: fmt.Sprintf("option requires an argument -- '%c'", c)})
			}
			break
		}
	}
	return events, operands
}

// parseLong handles the long option in args[i], whose text after "--" is
// body ("name" or "name=value"). It returns the event and the index of the
// next element to parse.
func parseLong(args []string, i int, body string, spec optSpec) (optEvent, int) {
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
		// has_arg and val).
		var matches []*longOption
		ambiguous := false
		for k := range spec.long {
			o := &spec.long[k]
			if !strings.HasPrefix(o.name, name) {
				continue
			}
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
			fmt.Fprintf(&b, "option '--%s' is ambiguous; possibilities:", body)
			for _, o := range matches {
				fmt.Fprintf(&b, " '--%s'", o.name)
			}
			return optEvent{errMsg: b.String()}, i
		}
		if len(matches) > 0 {
			found = matches[0]
		}
	}
	if found == nil {
		return optEvent{errMsg: fmt.Sprintf("unrecognized option '--%s'", body)}, i
	}
	spelled := "--" + found.name
	switch {
	case hasValue && found.arg == noArgument:
		return optEvent{errMsg: fmt.Sprintf("option '--%s' doesn't allow an argument", found.name)}, i
	case hasValue:
		return optEvent{opt: found.val, name: spelled, arg: value}, i
	case found.arg == requiredArgument && i < len(args):
		return optEvent{opt: found.val, name: spelled, arg: args[i]}, i + 1
	case found.arg == requiredArgument:
		return optEvent{errMsg: fmt.Sprintf("option '--%s' requires an argument", found.name)}, i
	}
	return optEvent{opt: found.val, name: spelled}, i
}
