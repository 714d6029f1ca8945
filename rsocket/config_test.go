package rsocket

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

func TestConfigDefaults(t *testing.T) {
	got, err := Config{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	want := Config{SendBuffer: 131072, RecvBuffer: 131072, Inline: 64, SQSize: 384, RQSize: 384,
		PollTime: defaultPollTime}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	keep := Config{PollTime: spinTime, KeepAlive: time.Second}
	if got, err := keep.withDefaults(); err != nil || got.PollTime != spinTime || got.KeepAlive != time.Second {
		t.Errorf("set fields: %+v, %v", got, err)
	}
}

// TestConfigBad: each bad field gives EINVAL and an error naming it.
func TestConfigBad(t *testing.T) {
	for _, tc := range []struct {
		cfg   Config
		field string
	}{
		{Config{SendBuffer: 100}, "SendBuffer"},
		{Config{SendBuffer: 1<<30 + 1}, "SendBuffer"},
		{Config{RecvBuffer: 4097}, "RecvBuffer"},
		{Config{RecvBuffer: -2}, "RecvBuffer"},
		{Config{Inline: -1}, "Inline"},
		{Config{Inline: 1025}, "Inline"},
		{Config{SQSize: 15}, "SQSize"},
		{Config{RQSize: 0xFFFF}, "RQSize"},
		{Config{KeepAlive: -time.Second}, "KeepAlive"},
		{Config{KeepAlive: time.Microsecond}, "KeepAlive"},
		{Config{PollTime: -time.Microsecond}, "PollTime"},
		{Config{IOMapSize: -1}, "IOMapSize"},
		{Config{IOMapSize: 129}, "IOMapSize"},
		{Config{IOMapSize: 300}, "IOMapSize"},
		{Config{IOMapSize: 32768}, "IOMapSize"},
	} {
		_, err := tc.cfg.withDefaults()
		if !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "Config."+tc.field) {
			t.Errorf("%+v: %v, want EINVAL naming Config.%s", tc.cfg, err, tc.field)
		}
	}
}
