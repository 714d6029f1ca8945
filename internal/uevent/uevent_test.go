package uevent

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func msg(parts ...string) []byte { return []byte(strings.Join(parts, "\x00") + "\x00") }

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      []byte
		want    Event
		wantErr bool
	}{
		{"rename", msg("move@/devices/virtual/infiniband/rnlx", "ACTION=move", "DEVPATH=/devices/virtual/infiniband/rnlx",
			"SUBSYSTEM=infiniband", "DEVPATH_OLD=/devices/virtual/infiniband/rxe2", "SEQNUM=1234"),
			Event{Action: "move", DevPath: "/devices/virtual/infiniband/rnlx", Subsystem: "infiniband", Env: map[string]string{
				"ACTION": "move", "DEVPATH": "/devices/virtual/infiniband/rnlx", "SUBSYSTEM": "infiniband",
				"DEVPATH_OLD": "/devices/virtual/infiniband/rxe2", "SEQNUM": "1234"}}, false},
		{"uverbs removal", msg("remove@/devices/virtual/infiniband_verbs/uverbs2", "ACTION=remove",
			"DEVPATH=/devices/virtual/infiniband_verbs/uverbs2", "SUBSYSTEM=infiniband_verbs", "MAJOR=231", "MINOR=194"),
			Event{Action: "remove", DevPath: "/devices/virtual/infiniband_verbs/uverbs2", Subsystem: "infiniband_verbs", Env: map[string]string{
				"ACTION": "remove", "DEVPATH": "/devices/virtual/infiniband_verbs/uverbs2", "SUBSYSTEM": "infiniband_verbs",
				"MAJOR": "231", "MINOR": "194"}}, false},
		{"no summary", msg("ACTION=add", "DEVPATH=/x", "SUBSYSTEM=y"), Event{}, true},
		{"udev", msg("libudev", "ACTION=add"), Event{}, true},
		{"no subsystem", msg("add@/x", "ACTION=add", "DEVPATH=/x"), Event{}, true},
		{"summary disagrees", msg("add@/x", "ACTION=remove", "DEVPATH=/x", "SUBSYSTEM=y"), Event{}, true},
		{"empty", nil, Event{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.in)
			if (err != nil) != tc.wantErr || (err != nil && !errors.Is(err, ErrMalformed)) {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzParse: Parse never panics, fails only with ErrMalformed, and what it
// accepts has its summary line's action and path.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := Parse(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not match ErrMalformed", err)
			}
			return
		}
		if !strings.HasPrefix(string(b), e.Action+"@"+e.DevPath+"\x00") && string(b) != e.Action+"@"+e.DevPath {
			t.Fatalf("accepted %q with action %q, path %q", b, e.Action, e.DevPath)
		}
		if len(e.Env) > len(b) {
			t.Fatalf("%d keys from %d bytes", len(e.Env), len(b))
		}
	})
}
