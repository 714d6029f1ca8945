package sysfs

import (
	"errors"
	"io/fs"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

func TestPortCounters(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	const p = "sys/class/infiniband/"
	fsys := fstest.MapFS{
		p + "rxe0/ports/1/hw_counters/sent_pkts":            file("12\n"),
		p + "rxe0/ports/1/hw_counters/rcvd_pkts":            file("18446744073709551615\n"),
		p + "rxe0/ports/1/hw_counters/lifespan":             file("10\n"),
		p + "mlx5_0/ports/1/counters/port_xmit_data":        file("4096\n"),
		p + "mlx5_0/ports/1/counters/symbol_error":          file("0\n"),
		p + "mlx5_0/ports/1/hw_counters/out_of_buffer":      file("3\n"),
		p + "bad0/ports/1/hw_counters/sent_pkts":            file("many\n"),
		p + "bad1/ports/1/counters/" + CounterPortRcvData:   file("-1\n"),
		p + "bad2/ports/1/hw_counters/" + CounterLinkDowned: file(""),
		p + "none0/ports/1/state":                           file("4: ACTIVE\n"),
	}
	f := NewFS(fsys)
	for _, tc := range []struct {
		dev     string
		port    int
		want    PortCounters
		wantErr error
	}{
		{"rxe0", 1, PortCounters{HW: map[string]uint64{"sent_pkts": 12, "rcvd_pkts": 1<<64 - 1}}, nil},
		{"mlx5_0", 1, PortCounters{IB: map[string]uint64{CounterPortXmitData: 4096, CounterSymbolError: 0},
			HW: map[string]uint64{"out_of_buffer": 3}}, nil},
		{"none0", 1, PortCounters{}, nil},
		{"bad0", 1, PortCounters{}, ErrMalformed},
		{"bad1", 1, PortCounters{}, ErrMalformed},
		{"bad2", 1, PortCounters{}, ErrMalformed},
		{"rxe0", 2, PortCounters{}, fs.ErrNotExist},
		{"nosuch", 1, PortCounters{}, ErrNoDevice},
		{"../rxe0", 1, PortCounters{}, ErrNoDevice},
	} {
		got, err := f.PortCounters(tc.dev, tc.port)
		if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
			t.Errorf("PortCounters(%s, %d): err = %v, want %v", tc.dev, tc.port, err, tc.wantErr)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("PortCounters(%s, %d) (-want +got):\n%s", tc.dev, tc.port, diff)
		}
	}
}
