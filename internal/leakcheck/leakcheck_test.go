package leakcheck

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMain(m *testing.M) { Main(m) }

func TestDiffNamesTheLeakedFile(t *testing.T) {
	name := t.TempDir() + "/leaked"
	if err := os.WriteFile(name, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	before := Take()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	msg := before.Diff(Take())
	if !strings.Contains(msg, "1 file descriptor(s) left open") || !strings.Contains(msg, name) {
		t.Errorf("with a file left open: %q, want it named", msg)
	}
	f.Close()
	if msg := Settle(before); msg != "" {
		t.Errorf("after closing it: %q", msg)
	}
}

func TestSurplus(t *testing.T) {
	got := surplus([]string{"a", "b", "b"}, []string{"b", "b", "b", "c", "a"})
	if diff := cmp.Diff([]string{"b", "c"}, got); diff != "" {
		t.Errorf("surplus (-want +got):\n%s", diff)
	}
	if d := (Snapshot{Mappings: 2}).Diff(Snapshot{Mappings: 3}); !strings.Contains(d, "2 /dev/infiniband mapping(s) before, 3 after") {
		t.Errorf("mapping diff %q", d)
	}
}

type fakeM struct{ leak bool }

func (m fakeM) Run() int {
	if m.leak {
		f, err := os.Open(os.Args[0])
		if err != nil {
			panic(err)
		}
		leaked = append(leaked, f)
	}
	return 0
}

var leaked []*os.File

func TestRunFailsOnLeak(t *testing.T) {
	var out strings.Builder
	if code := run(fakeM{}, &out); code != 0 {
		t.Errorf("clean run: exit %d (%s)", code, out.String())
	}
	if code := run(fakeM{leak: true}, &out); code != 1 || !strings.Contains(out.String(), "leak check:") {
		t.Errorf("leaking run: exit %d, output %q", code, out.String())
	}
	for _, f := range leaked {
		f.Close()
	}
}
