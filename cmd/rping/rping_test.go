package main

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want config
	}{
		{[]string{"rping", "-s"}, config{prog: "rping", server: true, addr: netip.IPv4Unspecified(), port: 7174, size: 64}},
		{[]string{"/usr/bin/rping", "-c", "-a", "10.99.0.1", "-I", "10.99.0.2", "-p", "7200", "-C", "100", "-S", "1024", "-vVdPq"},
			config{prog: "rping", addr: netip.MustParseAddr("10.99.0.1"), source: netip.MustParseAddr("10.99.0.2"), port: 7200,
				count: 100, size: 1024, verbose: true, validate: true, debug: true, persistent: true, selfQP: true}},
		{[]string{"rping", "-s", "-a", "::"}, config{prog: "rping", server: true, addr: netip.IPv6Unspecified(), port: 7174, size: 64}},
	} {
		got, err := parseArgs(tc.args)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(config{}), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.args, diff)
		}
	}
}

// TestParseArgsBad is the table of refused command lines: the message,
// whether the usage follows, and the exit status.
func TestParseArgsBad(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		msg   string
		usage bool
		code  int
	}{
		{"no role", []string{"rping"}, "", true, 22},
		{"unknown option", []string{"rping", "-s", "-x"}, "", true, 22},
		{"missing argument", []string{"rping", "-s", "-p"}, "", true, 22},
		{"-t has no case", []string{"rping", "-s", "-t", "3"}, "", true, 22},
		{"size too small", []string{"rping", "-s", "-S", "22"}, "Invalid size 22 (valid range is 23 to 65536)", false, 22},
		{"size too large", []string{"rping", "-s", "-S", "65536"}, "Invalid size 65536 (valid range is 23 to 65536)", false, 22},
		{"negative count", []string{"rping", "-c", "-C", "-1"}, "Invalid count -1", false, 22},
		{"count not a number", []string{"rping", "-c", "-C", "12abc"}, `rping: -C "12abc": not a decimal number`, true, 22},
		{"port out of range", []string{"rping", "-s", "-p", "65536"}, "rping: -p 65536: not a port", true, 22},
		{"bad address", []string{"rping", "-c", "-a", "no.such.host"}, "getaddrinfo failed (Name or service not known) - invalid hostname or IP address", false, 254},
		{"operand", []string{"rping", "-s", "extra"}, `rping: unexpected operand "extra"`, true, 22},
		{"mixed families", []string{"rping", "-c", "-a", "10.0.0.1", "-I", "::1"}, "rping: -I ::1 and -a 10.0.0.1 are of different address families", true, 22},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseArgs(tc.args)
			var bad *badCommandLine
			if !errors.As(err, &bad) {
				t.Fatalf("parseArgs(%q) = %v, want a *badCommandLine", tc.args, err)
			}
			if bad.msg != tc.msg || bad.usage != tc.usage || bad.code != tc.code {
				t.Errorf("got %q usage=%v code=%d, want %q usage=%v code=%d", bad.msg, bad.usage, bad.code, tc.msg, tc.usage, tc.code)
			}
		})
	}
}

// TestFillPing checks the ping text against rping's (size 64, pings 0 and
// 1, and the wrap from 'z' back to 'A').
func TestFillPing(t *testing.T) {
	buf := make([]byte, 64)
	fillPing(buf, 0)
	if got, want := string(cString(buf)), "rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr"; got != want {
		t.Errorf("ping 0:\n%q\nwant\n%q", got, want)
	}
	if buf[63] != 0 {
		t.Errorf("last byte %#x, want NUL", buf[63])
	}
	fillPing(buf, 1)
	if got, want := string(cString(buf)), "rdma-ping-1: BCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrs"; got != want {
		t.Errorf("ping 1:\n%q\nwant\n%q", got, want)
	}
	fillPing(buf, 57) // starts at 'z'
	if got := cString(buf)[14:16]; string(got) != "zA" {
		t.Errorf("ping 57 starts %q, want \"zA\"", got)
	}
}

func TestInfoRoundTrip(t *testing.T) {
	in := info{Addr: 0x1122334455667788, Rkey: 0x99aabbcc, Size: 64}
	var b [infoSize]byte
	in.marshal(b[:])
	if want := []byte{0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0, 0, 0, 64}; !bytes.Equal(b[:], want) {
		t.Errorf("marshal: % x, want % x", b, want)
	}
	out, err := parseInfo(b[:], infoSize)
	if err != nil || out != in {
		t.Errorf("parseInfo = %+v, %v; want %+v", out, err, in)
	}
	if _, err := parseInfo(b[:], 15); err == nil || err.Error() != "Received bogus data, size 15" {
		t.Errorf("15-byte message: %v, want rping's bogus data error", err)
	}
}

// FuzzParseInfo: any message either is a 16-byte advertisement that
// marshals back to itself or is refused.
func FuzzParseInfo(f *testing.F) {
	f.Add([]byte{0, 0, 0x7f, 0xff, 0x12, 0x34, 0x50, 0x00, 0, 0, 0x1a, 0x2b, 0, 0, 0, 64}, 16)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		in, err := parseInfo(b, n)
		if err != nil {
			return
		}
		var back [infoSize]byte
		in.marshal(back[:])
		if !bytes.Equal(back[:], b[:infoSize]) {
			t.Fatalf("round trip % x -> % x", b[:infoSize], back)
		}
	})
}

// fakeResolver takes addrTime to resolve the address, then fails with
// addrErr or routeErr, and records how long each call's context had left
// when it started.
type fakeResolver struct {
	addrTime          time.Duration
	addrErr, routeErr error
	addrLeft          time.Duration
	routeLeft         time.Duration // -1 if not called
}

func (f *fakeResolver) ResolveAddr(ctx context.Context, src, dst netip.AddrPort) error {
	f.addrLeft = left(ctx)
	time.Sleep(f.addrTime)
	return f.addrErr
}

func (f *fakeResolver) ResolveRoute(ctx context.Context) error {
	f.routeLeft = left(ctx)
	return f.routeErr
}

func left(ctx context.Context) time.Duration {
	d, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	return time.Until(d)
}

// TestResolve: the address and the route each get rping's 2000 ms (its
// rdma_resolve_addr and rdma_resolve_route timeouts), however long the
// address took; a failure names its call.
func TestResolve(t *testing.T) {
	errAddr, errRoute := errors.New("addr"), errors.New("route")
	for _, tc := range []struct {
		name              string
		addrErr, routeErr error
		wantCall          string
		wantErr           error
		wantRoute         bool
	}{
		{"ok", nil, nil, "", nil, true},
		{"addr fails", errAddr, nil, "rdma_resolve_addr", errAddr, false},
		{"route fails", nil, errRoute, "rdma_resolve_route", errRoute, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeResolver{addrTime: 300 * time.Millisecond, addrErr: tc.addrErr, routeErr: tc.routeErr, routeLeft: -1}
			call, err := resolve(context.Background(), f, netip.AddrPort{}, netip.MustParseAddrPort("10.99.0.1:7174"))
			if call != tc.wantCall || err != tc.wantErr {
				t.Errorf("resolve = %q, %v; want %q, %v", call, err, tc.wantCall, tc.wantErr)
			}
			full := resolveTimeoutMS * time.Millisecond
			near := func(d time.Duration) bool { return d > full-100*time.Millisecond && d <= full }
			if !near(f.addrLeft) {
				t.Errorf("ResolveAddr's context had %v left, want %v", f.addrLeft, full)
			}
			switch {
			case !tc.wantRoute && f.routeLeft != -1:
				t.Errorf("ResolveRoute called after the address failed")
			case tc.wantRoute && !near(f.routeLeft):
				t.Errorf("ResolveRoute's context had %v left, want %v", f.routeLeft, full)
			}
		})
	}
}
