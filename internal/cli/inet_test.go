package cli

import (
	"encoding/hex"
	"testing"
)

func TestInetNtop6MatchesGlibc(t *testing.T) {
	var vecs []struct{ Hex, Text string }
	readJSON(t, "testdata/inet_ntop6_glibc.json", &vecs)
	if len(vecs) < 100 {
		t.Fatalf("only %d vectors", len(vecs))
	}
	for _, v := range vecs {
		raw, err := hex.DecodeString(v.Hex)
		if err != nil || len(raw) != 16 {
			t.Fatalf("bad vector %q", v.Hex)
		}
		if got := InetNtop6([16]byte(raw)); got != v.Text {
			t.Errorf("InetNtop6(%s) = %q, glibc %q", v.Hex, got, v.Text)
		}
	}
}

// TestInetNtop6 names the GIDs the tools print most: RoCE v2's IPv4-mapped
// GIDs and link-local ones.
func TestInetNtop6(t *testing.T) {
	for _, tc := range []struct {
		in   [16]byte
		want string
	}{
		{[16]byte{}, "::"},
		{[16]byte{10: 0xff, 11: 0xff, 12: 10, 13: 99, 14: 0, 15: 1}, "::ffff:10.99.0.1"},
		{[16]byte{0: 0xfe, 1: 0x80, 8: 0x02, 10: 0x0a, 11: 0xff, 12: 0xfe, 13: 0x63, 15: 1}, "fe80::200:aff:fe63:1"},
		{[16]byte{15: 1}, "::1"},
		{[16]byte{12: 1, 13: 2, 14: 3, 15: 4}, "::1.2.3.4"},
	} {
		if got := InetNtop6(tc.in); got != tc.want {
			t.Errorf("InetNtop6(%x) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
