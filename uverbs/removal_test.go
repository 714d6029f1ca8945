package uverbs

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

func TestUverbsRemovalEvent(t *testing.T) {
	event := func(fields ...string) []byte { return []byte(strings.Join(fields, "\x00") + "\x00") }
	const path = "remove@/devices/virtual/infiniband/rxe0/infiniband_verbs/uverbs0"
	const dp = "DEVPATH=/devices/virtual/infiniband/rxe0/infiniband_verbs/uverbs0"
	for _, tc := range []struct {
		name string
		msg  []byte
		rdev uint64
		ok   bool
	}{
		{"uverbs removal", event(path, "ACTION=remove", "DEVPATH=/devices/virtual/infiniband/rxe0/infiniband_verbs/uverbs0",
			"SUBSYSTEM=infiniband_verbs", "MAJOR=231", "MINOR=192", "DEVNAME=infiniband/uverbs0", "SEQNUM=1234"), unix.Mkdev(231, 192), true},
		{"a dynamic minor", event(path, "ACTION=remove", dp, "SUBSYSTEM=infiniband_verbs", "MAJOR=511", "MINOR=3"), unix.Mkdev(511, 3), true},
		{"added, not removed", event(path, "ACTION=add", dp, "SUBSYSTEM=infiniband_verbs", "MAJOR=231", "MINOR=192"), 0, false},
		{"another subsystem", event(path, "ACTION=remove", dp, "SUBSYSTEM=infiniband", "MAJOR=231", "MINOR=192"), 0, false},
		{"no device number", event(path, "ACTION=remove", dp, "SUBSYSTEM=infiniband_verbs"), 0, false},
		{"no DEVPATH", event(path, "ACTION=remove", "SUBSYSTEM=infiniband_verbs", "MAJOR=511", "MINOR=3"), 0, false},
		{"garbage numbers", event(path, "ACTION=remove", dp, "SUBSYSTEM=infiniband_verbs", "MAJOR=x", "MINOR=1"), 0, false},
		{"the summary line only", []byte(path), 0, false},
		{"empty", nil, 0, false},
	} {
		rdev, ok := uverbsRemoval(tc.msg)
		if diff := cmp.Diff([2]any{tc.rdev, tc.ok}, [2]any{rdev, ok}); diff != "" {
			t.Errorf("%s: (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestDeviceRemovedError(t *testing.T) {
	err := error(&removedError{name: "rxe0", err: unix.ENODEV})
	for _, target := range []error{ErrDeviceRemoved, ErrClosed, unix.ENODEV} {
		if !errors.Is(err, target) {
			t.Errorf("errors.Is(%v, %v) = false", err, target)
		}
	}
	if errors.Is(err, unix.EIO) {
		t.Errorf("%v matches EIO", err)
	}
	if !strings.Contains(err.Error(), "rxe0") || !strings.Contains(err.Error(), "device removed") {
		t.Errorf("message %q names neither the device nor the removal", err)
	}
}
