package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// TestUsage: riostream's options that rstream has and riostream does not
// (-T s, -T r, -k) print riostream's usage and exit 1.
func TestUsage(t *testing.T) {
	for _, args := range [][]string{{"-T", "s"}, {"-T", "r"}, {"-k", "1"}, {"-T", "x"}, {"-S", "0"}} {
		var out, errb bytes.Buffer
		if rc := run(append([]string{"riostream"}, args...), &out, &errb); rc != 1 ||
			!strings.HasPrefix(out.String(), "usage: riostream\n") || strings.Contains(out.String(), "sockets") {
			t.Errorf("%v: exit %d, output %q", args, rc, out.String())
		}
	}
}
