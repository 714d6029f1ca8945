package sysfs_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/sysfs"
)

// checkParse runs one parser over good and bad inputs: good ones must give
// the value, bad ones a *ParseError matching ErrMalformed.
func checkParse[T any](t *testing.T, parse func(string) (T, error), good map[string]T, bad []string) {
	t.Helper()
	for in, want := range good {
		got, err := parse(in)
		if err != nil {
			t.Errorf("parse(%q): %v", in, err)
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("parse(%q) (-want +got):\n%s", in, diff)
		}
	}
	for _, in := range bad {
		v, err := parse(in)
		var pe *sysfs.ParseError
		if !errors.As(err, &pe) || !errors.Is(err, sysfs.ErrMalformed) {
			t.Errorf("parse(%q) = %v, %v; want a ParseError", in, v, err)
		}
	}
}

func TestParseGUID(t *testing.T) {
	checkParse(t, sysfs.ParseGUID, map[string]sysfs.GUID{
		"0250:56ff:fe8f:c5b3\n": 0x025056fffe8fc5b3,
		"0250:56ff:fe8f:c5b3":   0x025056fffe8fc5b3,
		"B859:9F03:00D4:E6A2\n": 0xb8599f0300d4e6a2,
		"0000:0000:0000:0000\n": 0,
		"ffff:ffff:ffff:ffff\n": 0xffffffffffffffff,
	}, []string{
		"", "\n", "0250:56ff:fe8f", "0250:56ff:fe8f:c5b3:0000", "250:56ff:fe8f:c5b3", "0250:56ff:fe8f:c5b", " 0250:56ff:fe8f:c5b3",
		"0250-56ff-fe8f-c5b3", "0250:56ff:fe8f:c5bg", "025056fffe8fc5b3", "0250:56ff:fe8f:c5b3\n\n", "0250:56ff:fe8f:+5b3",
	})
	if s := sysfs.GUID(0x025056fffe8fc5b3).String(); s != "0250:56ff:fe8f:c5b3" {
		t.Errorf("String() = %q", s)
	}
}

func TestParseGID(t *testing.T) {
	checkParse(t, sysfs.ParseGID, map[string]sysfs.GID{
		"fe80:0000:0000:0000:0250:56ff:fe8f:c5b3\n": mustAddr("fe80::250:56ff:fe8f:c5b3"),
		"0000:0000:0000:0000:0000:ffff:0a63:0001\n": mustAddr("::ffff:10.99.0.1"),
		"0000:0000:0000:0000:0000:0000:0000:0000\n": {},
		"FE80:0000:0000:0000:0000:0000:0000:0001":   mustAddr("fe80::1"),
	}, []string{
		"", "fe80::1", "fe80:0000:0000:0000:0250:56ff:fe8f", "fe80:0000:0000:0000:0250:56ff:fe8f:c5b3:0000",
		"fe80 0000:0000:0000:0250:56ff:fe8f:c5b3", "fe80:0000:0000:0000:0250:56ff:fe8f:c5bx", "::ffff:10.99.0.1",
		strings.Repeat("0", 39),
	})
}

func TestParseNodeType(t *testing.T) {
	checkParse(t, sysfs.ParseNodeType, map[string]sysfs.NodeType{
		"1: CA\n":          sysfs.NodeCA,
		"2: switch\n":      sysfs.NodeSwitch,
		"4: RNIC\n":        sysfs.NodeRNIC,
		"6: usNIC UDP\n":   sysfs.NodeUSNICUDP,
		"7: unspecified":   sysfs.NodeUnspecified,
		"9: <unknown>\n":   9,
		"0: <unknown>\n":   0,
		"100: something\n": 100,
	}, []string{"", "1", "1:CA", "1: ", "CA", "-1: CA", "01: CA", "+1: CA", "1 : CA", "x: CA", "99999999999: CA", "1: C\x00A"})
	for _, tc := range []struct {
		t         sysfs.NodeType
		name      string
		transport sysfs.Transport
		tname     string
	}{
		{sysfs.NodeCA, "InfiniBand channel adapter", sysfs.TransportIB, "InfiniBand"},
		{sysfs.NodeSwitch, "InfiniBand switch", sysfs.TransportIB, "InfiniBand"},
		{sysfs.NodeRouter, "InfiniBand router", sysfs.TransportIB, "InfiniBand"},
		{sysfs.NodeRNIC, "iWARP NIC", sysfs.TransportIWARP, "iWARP"},
		{sysfs.NodeUSNIC, "usNIC", sysfs.TransportUSNIC, "usNIC"},
		{sysfs.NodeUSNICUDP, "usNIC UDP", sysfs.TransportUSNICUDP, "usNIC UDP"},
		{sysfs.NodeUnspecified, "unspecified", sysfs.TransportUnspecified, "unspecified"},
		{0, "unknown", sysfs.TransportUnknown, "invalid transport"},
		{8, "unknown", sysfs.TransportUnknown, "invalid transport"},
	} {
		if got := tc.t.String(); got != tc.name {
			t.Errorf("NodeType(%d).String() = %q, want %q", tc.t, got, tc.name)
		}
		tr := tc.t.Transport()
		if tr != tc.transport || tr.String() != tc.tname {
			t.Errorf("NodeType(%d).Transport() = %d %q, want %d %q", tc.t, tr, tr, tc.transport, tc.tname)
		}
	}
}

func TestParsePortStates(t *testing.T) {
	checkParse(t, sysfs.ParsePortState, map[string]sysfs.PortState{
		"0: NOP\n": sysfs.PortNOP, "1: DOWN\n": sysfs.PortDown, "2: INIT\n": sysfs.PortInit,
		"3: ARMED\n": sysfs.PortArmed, "4: ACTIVE\n": sysfs.PortActive, "5: ACTIVE_DEFER\n": sysfs.PortActiveDefer,
		"6: UNKNOWN\n": 6, "255: UNKNOWN\n": 255,
	}, []string{"", "ACTIVE", "4:ACTIVE", "4: ", "-4: ACTIVE", "256: UNKNOWN", "260: UNKNOWN\n", "4294967300: UNKNOWN"})
	checkParse(t, sysfs.ParsePhysState, map[string]sysfs.PhysState{
		"1: Sleep\n": sysfs.PhysSleep, "2: Polling\n": sysfs.PhysPolling, "3: Disabled\n": sysfs.PhysDisabled,
		"4: PortConfigurationTraining\n": sysfs.PhysPortConfigurationTraining, "5: LinkUp\n": sysfs.PhysLinkUp,
		"6: LinkErrorRecovery\n": sysfs.PhysLinkErrorRecovery, "7: Phy Test\n": sysfs.PhysPhyTest, "0: <unknown>\n": 0,
		"255: <unknown>\n": 255,
	}, []string{"", "LinkUp", "5:LinkUp", "256: <unknown>", "261: <unknown>\n"})
	for s, want := range map[sysfs.PortState]string{sysfs.PortNOP: "NOP", sysfs.PortActive: "ACTIVE", sysfs.PortActiveDefer: "ACTIVE_DEFER", 6: "UNKNOWN", 255: "UNKNOWN"} {
		if got := s.String(); got != want {
			t.Errorf("PortState(%d).String() = %q, want %q", s, got, want)
		}
	}
	for s, want := range map[sysfs.PhysState]string{sysfs.PhysLinkUp: "LinkUp", sysfs.PhysPhyTest: "Phy Test", 0: "<unknown>", 8: "<unknown>", 255: "<unknown>"} {
		if got := s.String(); got != want {
			t.Errorf("PhysState(%d).String() = %q, want %q", s, got, want)
		}
	}
	// iproute2's rdma link words (rdma/link.c's phys_state_to_str).
	for s, want := range map[sysfs.PhysState]string{0: "NOP", sysfs.PhysPolling: "POLLING",
		sysfs.PhysPortConfigurationTraining: "ARMED", sysfs.PhysLinkUp: "LINK_UP",
		sysfs.PhysLinkErrorRecovery: "LINK_ERROR_RECOVER", sysfs.PhysPhyTest: "PHY_TEST", 8: "UNKNOWN", 255: "UNKNOWN"} {
		if got := s.RDMALinkName(); got != want {
			t.Errorf("PhysState(%d).RDMALinkName() = %q, want %q", s, got, want)
		}
	}
}

func TestParseLinkLayer(t *testing.T) {
	checkParse(t, sysfs.ParseLinkLayer, map[string]sysfs.LinkLayer{
		"InfiniBand\n": sysfs.LinkLayerInfiniBand, "Ethernet\n": sysfs.LinkLayerEthernet, "Unknown\n": sysfs.LinkLayerUnspecified,
	}, []string{"", "ethernet", "IB", "Ethernet\n\n"})
	// String is ibv_devinfo's name, which differs from the file's for 0.
	for l, want := range map[sysfs.LinkLayer]string{sysfs.LinkLayerUnspecified: "Unspecified", sysfs.LinkLayerInfiniBand: "InfiniBand",
		sysfs.LinkLayerEthernet: "Ethernet", 3: "Unknown", 255: "Unknown"} {
		if got := l.String(); got != want {
			t.Errorf("LinkLayer(%d).String() = %q, want %q", l, got, want)
		}
	}
}

func TestParsePKey(t *testing.T) {
	checkParse(t, sysfs.ParsePKey, map[string]uint16{
		"0xffff\n": 0xffff, "0x0000\n": 0, "0x8001": 0x8001, "0x7fff\n": 0x7fff, "0xFFFF\n": 0xffff,
	}, []string{"", "ffff", "0x", "0x10000", "-0x1", "0x-1", "0x+1", "65535", "0xfff_f", " 0xffff"})
}

func TestParseGIDAttrType(t *testing.T) {
	checkParse(t, sysfs.ParseGIDAttrType, map[string]sysfs.GIDAttrType{
		"IB/RoCE v1\n": sysfs.GIDAttrIBRoCEv1, "RoCE v2\n": sysfs.GIDAttrRoCEv2,
	}, []string{"", "RoCE v1", "IB", "roce v2", "RoCE v2 "})
	for _, tc := range []struct {
		t    sysfs.GIDAttrType
		ll   sysfs.LinkLayer
		want sysfs.GIDType
	}{
		{sysfs.GIDAttrIBRoCEv1, sysfs.LinkLayerInfiniBand, sysfs.GIDTypeIB},
		{sysfs.GIDAttrIBRoCEv1, sysfs.LinkLayerUnspecified, sysfs.GIDTypeIB},
		{sysfs.GIDAttrIBRoCEv1, sysfs.LinkLayerEthernet, sysfs.GIDTypeRoCEv1},
		{sysfs.GIDAttrRoCEv2, sysfs.LinkLayerEthernet, sysfs.GIDTypeRoCEv2},
	} {
		if got := tc.t.Resolve(tc.ll); got != tc.want {
			t.Errorf("%v.Resolve(%v) = %v, want %v", tc.t, tc.ll, got, tc.want)
		}
	}
	for typ, want := range map[sysfs.GIDType]string{sysfs.GIDTypeIB: "IB", sysfs.GIDTypeRoCEv1: "RoCE v1",
		sysfs.GIDTypeRoCEv2: "RoCE v2", 3: "GIDType(3)", 1 << 31: "GIDType(2147483648)"} {
		if got := typ.String(); got != want {
			t.Errorf("GIDType(%d).String() = %q, want %q", typ, got, want)
		}
	}
}

func TestGID(t *testing.T) {
	for _, tc := range []struct {
		g    sysfs.GID
		want string
		zero bool
	}{
		{sysfs.GID{}, "::", true},
		{mustAddr("fe80::250:56ff:fe8f:c5b3"), "fe80::250:56ff:fe8f:c5b3", false},
		{mustAddr("::ffff:10.99.0.1"), "::ffff:10.99.0.1", false},
	} {
		if got := tc.g.String(); got != tc.want || tc.g.IsZero() != tc.zero || tc.g.Addr().String() != tc.want {
			t.Errorf("GID % x: String %q, IsZero %v, Addr %v; want %q, %v", [16]byte(tc.g), got, tc.g.IsZero(), tc.g.Addr(), tc.want, tc.zero)
		}
	}
}

func TestParseRate(t *testing.T) {
	checkParse(t, sysfs.ParseRate, map[string]sysfs.Rate{
		"2.5 Gb/sec (1X SDR)\n":   {DeciGbps: 25, Width: 1, Speed: "SDR"},
		"10 Gb/sec (4X)\n":        {DeciGbps: 100, Width: 4},
		"10 Gb/sec (1X FDR10)\n":  {DeciGbps: 100, Width: 1, Speed: "FDR10"},
		"56 Gb/sec (4X FDR)\n":    {DeciGbps: 560, Width: 4, Speed: "FDR"},
		"100 Gb/sec (4X EDR)\n":   {DeciGbps: 1000, Width: 4, Speed: "EDR"},
		"400 Gb/sec (4X NDR)\n":   {DeciGbps: 4000, Width: 4, Speed: "NDR"},
		"30 Gb/sec (12X SDR)":     {DeciGbps: 300, Width: 12, Speed: "SDR"},
		"5 Gb/sec (2X SDR)\n":     {DeciGbps: 50, Width: 2, Speed: "SDR"},
		"1600 Gb/sec (8X XDR)\n":  {DeciGbps: 16000, Width: 8, Speed: "XDR"},
		"0 Gb/sec (1X SDR)\n":     {DeciGbps: 0, Width: 1, Speed: "SDR"},
		"800 Gb/sec (4X NEXT2)\n": {DeciGbps: 8000, Width: 4, Speed: "NEXT2"},
	}, []string{
		"", "fast", "100 Gb/sec", "100 Gb/sec (4X EDR", "100 Gb/sec 4X EDR)", "100 Gb/s (4X EDR)", "100Gb/sec (4X EDR)",
		"2.4 Gb/sec (1X SDR)", "-2 Gb/sec (1X SDR)", "100 Gb/sec (X EDR)", "100 Gb/sec (0X EDR)", "100 Gb/sec (4XEDR)",
		"100 Gb/sec (4X E-DR)", "100 Gb/sec (4X )", "100 Gb/sec (4 EDR)", "0100 Gb/sec (4X EDR)", "100 Gb/sec (256X EDR)",
		"99999999999 Gb/sec (4X EDR)",
	})
}

func TestParseDevNum(t *testing.T) {
	checkParse(t, sysfs.ParseDevNum, map[string]sysfs.DevNum{
		"231:192\n": {Major: 231, Minor: 192}, "231:0": {Major: 231}, "4095:1048575\n": {Major: 4095, Minor: 1048575},
	}, []string{"", "231", "231:", ":192", "231:192:1", "0x e7:c0", "231 :192", "-1:1", "231:4294967296"})
	if s := (sysfs.DevNum{Major: 231, Minor: 192}).String(); s != "231:192" {
		t.Errorf("String() = %q", s)
	}
}

func TestParseErrorMessage(t *testing.T) {
	_, err := sysfs.ParseGUID("junk")
	if got, want := err.Error(), `sysfs: "junk" is not a GUID like 0002:c903:0042:43a0`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	long := strings.Repeat("x", 200)
	_, err = sysfs.ParseGUID(long)
	var pe *sysfs.ParseError
	if !errors.As(err, &pe) || len(pe.Text) != 80 {
		t.Errorf("long input kept as %d bytes, want 80", len(pe.Text))
	}
	_ = fmt.Sprint(err)
}
