package sysfs_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/sysfs"
)

// The fuzz targets check that the parsers never panic, that every failure
// is a ParseError, and that what they accept is exactly what the kernel's
// format would print for the value they return (so nothing is accepted by
// accident). Seeds are in testdata/fuzz/<target>.

func checkFuzzErr(t *testing.T, in string, err error) {
	var pe *sysfs.ParseError
	if !errors.As(err, &pe) || !errors.Is(err, sysfs.ErrMalformed) || len(pe.Text) > 80 {
		t.Fatalf("parse(%q): error %v is not a ParseError", in, err)
	}
}

// sameText compares an input with the kernel's rendering of the parsed
// value, allowing the optional newline and, for hex, upper case.
func sameText(in, printed string, foldCase bool) bool {
	in = strings.TrimSuffix(in, "\n")
	if foldCase {
		return strings.EqualFold(in, printed)
	}
	return in == printed
}

func FuzzParseGUID(f *testing.F) {
	f.Fuzz(func(t *testing.T, in string) {
		g, err := sysfs.ParseGUID(in)
		if err != nil {
			checkFuzzErr(t, in, err)
			return
		}
		if !sameText(in, g.String(), true) {
			t.Fatalf("ParseGUID(%q) = %v, which prints differently", in, g)
		}
	})
}

func FuzzParseGID(f *testing.F) {
	f.Fuzz(func(t *testing.T, in string) {
		g, err := sysfs.ParseGID(in)
		if err != nil {
			checkFuzzErr(t, in, err)
			return
		}
		var b strings.Builder
		for i := 0; i < 16; i += 2 {
			if i > 0 {
				b.WriteByte(':')
			}
			fmt.Fprintf(&b, "%02x%02x", g[i], g[i+1])
		}
		if !sameText(in, b.String(), true) {
			t.Fatalf("ParseGID(%q) = %v, which prints as %s", in, g, b.String())
		}
	})
}

func FuzzParseNodeType(f *testing.F) {
	f.Fuzz(func(t *testing.T, in string) {
		n, err := sysfs.ParseNodeType(in)
		if err != nil {
			checkFuzzErr(t, in, err)
			return
		}
		_, name, _ := strings.Cut(strings.TrimSuffix(in, "\n"), ": ")
		if !sameText(in, fmt.Sprintf("%d: %s", n, name), false) || n < 0 {
			t.Fatalf("ParseNodeType(%q) = %d", in, n)
		}
		_ = n.String()
		_ = n.Transport().String()
	})
}

// FuzzParseState covers both "%d: %s" port files, state and phys_state.
func FuzzParseState(f *testing.F) {
	f.Fuzz(func(t *testing.T, in string) {
		s, err := sysfs.ParsePortState(in)
		p, perr := sysfs.ParsePhysState(in)
		if (err == nil) != (perr == nil) {
			t.Fatalf("state and phys_state parsers disagree on %q: %v, %v", in, err, perr)
		}
		if err != nil {
			checkFuzzErr(t, in, err)
			checkFuzzErr(t, in, perr)
			return
		}
		_, name, _ := strings.Cut(strings.TrimSuffix(in, "\n"), ": ")
		if !sameText(in, fmt.Sprintf("%d: %s", s, name), false) || int(s) != int(p) {
			t.Fatalf("ParsePortState(%q) = %d", in, s)
		}
		_, _ = s.String(), p.String()
	})
}

func FuzzParsePKey(f *testing.F) {
	f.Fuzz(func(t *testing.T, in string) {
		k, err := sysfs.ParsePKey(in)
		if err != nil {
			checkFuzzErr(t, in, err)
			return
		}
		// The kernel prints "0x%04x"; longer zero-padded forms parse to the
		// same value and are accepted.
		digits := strings.TrimPrefix(strings.TrimSuffix(in, "\n"), "0x")
		if !strings.EqualFold(strings.TrimLeft(digits, "0"), strings.TrimLeft(fmt.Sprintf("%04x", k), "0")) {
			t.Fatalf("ParsePKey(%q) = %#x", in, k)
		}
	})
}

func FuzzParseRate(f *testing.F) {
	f.Fuzz(func(t *testing.T, in string) {
		r, err := sysfs.ParseRate(in)
		if err != nil {
			checkFuzzErr(t, in, err)
			return
		}
		half := ""
		if r.DeciGbps%10 != 0 {
			half = ".5"
		}
		speed := ""
		if r.Speed != "" {
			speed = " " + r.Speed
		}
		printed := fmt.Sprintf("%d%s Gb/sec (%dX%s)", r.DeciGbps/10, half, r.Width, speed)
		if !sameText(in, printed, false) || r.Width <= 0 || r.DeciGbps < 0 {
			t.Fatalf("ParseRate(%q) = %+v, which prints as %q", in, r, printed)
		}
	})
}

func FuzzParseGIDAttrType(f *testing.F) {
	f.Fuzz(func(t *testing.T, in string) {
		g, err := sysfs.ParseGIDAttrType(in)
		if err != nil {
			checkFuzzErr(t, in, err)
			return
		}
		if !sameText(in, g.String(), false) {
			t.Fatalf("ParseGIDAttrType(%q) = %v", in, g)
		}
	})
}
