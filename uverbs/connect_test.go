package uverbs

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func gidOf(s string) GID { return GID(netip.MustParseAddr(s).As16()) }

func TestPickRoCEGID(t *testing.T) {
	linkLocal := GIDEntry{GID: gidOf("fe80::1"), Index: 0, Type: GIDTypeRoCEv2, NetdevIfindex: 2}
	v1 := GIDEntry{GID: gidOf("::ffff:10.0.0.1"), Index: 1, Type: GIDTypeRoCEv1, NetdevIfindex: 2}
	v4 := GIDEntry{GID: gidOf("::ffff:10.0.0.1"), Index: 3, Type: GIDTypeRoCEv2, NetdevIfindex: 2}
	v4b := GIDEntry{GID: gidOf("::ffff:10.0.0.2"), Index: 5, Type: GIDTypeRoCEv2, NetdevIfindex: 2}
	v6 := GIDEntry{GID: gidOf("2001:db8::1"), Index: 2, Type: GIDTypeRoCEv2, NetdevIfindex: 2}
	noNetdev := GIDEntry{GID: gidOf("::ffff:10.0.0.9"), Index: 0, Type: GIDTypeRoCEv2}
	for _, tc := range []struct {
		name string
		in   []GIDEntry
		want GIDEntry
		ok   bool
	}{
		{"empty", nil, GIDEntry{}, false},
		{"only link-local and v1", []GIDEntry{linkLocal, v1}, GIDEntry{}, false},
		{"ipv4-mapped beats ipv6", []GIDEntry{linkLocal, v6, v4}, v4, true},
		{"ipv6 when no ipv4", []GIDEntry{linkLocal, v1, v6}, v6, true},
		{"lowest index among equals", []GIDEntry{v4b, v4}, v4, true},
		{"needs a netdev", []GIDEntry{noNetdev, v6}, v6, true},
		{"not loopback", []GIDEntry{{GID: gidOf("::ffff:127.0.0.1"), Type: GIDTypeRoCEv2, NetdevIfindex: 1}, v6}, v6, true},
		{"not multicast", []GIDEntry{{GID: gidOf("ff02::1"), Type: GIDTypeRoCEv2, NetdevIfindex: 2}}, GIDEntry{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := PickRoCEGID(tc.in)
			if ok != tc.ok || !cmp.Equal(got, tc.want) {
				t.Errorf("PickRoCEGID = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestModifyValidation(t *testing.T) {
	// A QP that exists only on our side: validation runs before any command.
	qp := &QP{typ: QPTypeRC, qpn: 7, pd: &PD{ctx: &Context{}}}
	for _, tc := range []struct {
		name string
		attr QPAttr
		mask QPAttrMask
	}{
		{"reset to rtr", QPAttr{State: QPStateRTR}, QPAttrState},
		{"reset to init without port", QPAttr{State: QPStateInit}, QPAttrState | QPAttrPkeyIndex | QPAttrAccessFlags},
		{"not a state", QPAttr{State: 9}, QPAttrState},
		{"bad mtu", QPAttr{PathMTU: 9}, QPAttrPathMTU},
		{"port 0", QPAttr{State: QPStateInit}, QPAttrState | QPAttrPkeyIndex | QPAttrAccessFlags | QPAttrPort},
		{"empty mask", QPAttr{}, 0},
		{"unknown bits", QPAttr{}, 1 << 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := qp.Modify(&tc.attr, tc.mask); err == nil {
				t.Error("accepted")
			} else {
				t.Log(err)
			}
		})
	}
	if err := qp.Modify(nil, QPAttrState); err == nil {
		t.Error("nil attributes accepted")
	}
}

func TestRequiredAttrsNamed(t *testing.T) {
	got := (requiredAttrs(QPTypeRC, QPStateInit, QPStateRTR)).String()
	want := "AH|PathMTU|RQPSN|MinRNRTimer|MaxDestRdAtomic|DestQPN"
	if got != want {
		t.Errorf("RC INIT->RTR requires %s, want %s", got, want)
	}
}

// TestConnectAttrs: what each step of Connect asks of Modify, defaults
// and options.
func TestConnectAttrs(t *testing.T) {
	peer := Endpoint{QPN: 0x22, PSN: 0x33, LID: 4, GID: gidOf("::ffff:10.99.0.2")}
	defaults := ConnectAttr{SGIDIndex: 1, LocalPSN: 0x11, Remote: peer}
	opts := ConnectAttr{SGIDIndex: 3, LocalPSN: 0x11, Remote: peer, SL: 5, HopLimit: 64, TrafficClass: 0x68, FlowLabel: 0xabcde,
		Timeout: 0, RetryCnt: 0, RNRRetry: 0, MinRNRTimer: 0, MaxRdAtomic: 4, MaxDestRdAtomic: 8,
		Explicit: ExplicitTimeout | ExplicitRetryCnt | ExplicitRNRRetry | ExplicitMinRNRTimer}
	rtrMask := QPAttrState | QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN | QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer
	rtsMask := QPAttrState | QPAttrSQPSN | QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrMaxQPRdAtomic
	for _, tc := range []struct {
		name     string
		a        ConnectAttr
		typ      QPType
		rtr, rts QPAttr
		rtrMask  QPAttrMask
		rtsMask  QPAttrMask
	}{
		{"RC defaults", defaults, QPTypeRC,
			QPAttr{State: QPStateRTR, PathMTU: MTU4096, DestQPN: 0x22, RQPSN: 0x33, MaxDestRdAtomic: 1, MinRNRTimer: 12,
				AH: AHAttr{DLID: 4, PortNum: 1, IsGlobal: true, GRH: GlobalRoute{DGID: peer.GID, SGIDIndex: 1, HopLimit: 1}}},
			QPAttr{State: QPStateRTS, SQPSN: 0x11, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1}, rtrMask, rtsMask},
		{"RC options and explicit zeros", opts, QPTypeRC,
			QPAttr{State: QPStateRTR, PathMTU: MTU4096, DestQPN: 0x22, RQPSN: 0x33, MaxDestRdAtomic: 8, MinRNRTimer: 0,
				AH: AHAttr{DLID: 4, SL: 5, PortNum: 1, IsGlobal: true,
					GRH: GlobalRoute{DGID: peer.GID, SGIDIndex: 3, HopLimit: 64, TrafficClass: 0x68, FlowLabel: 0xabcde}}},
			QPAttr{State: QPStateRTS, SQPSN: 0x11, MaxRdAtomic: 4}, rtrMask, rtsMask},
		{"UC without a GRH", ConnectAttr{SGIDIndex: -1, Remote: peer}, QPTypeUC,
			QPAttr{State: QPStateRTR, PathMTU: MTU4096, DestQPN: 0x22, RQPSN: 0x33, AH: AHAttr{DLID: 4, PortNum: 1}},
			QPAttr{State: QPStateRTS}, QPAttrState | QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN, QPAttrState | QPAttrSQPSN},
		{"UD", defaults, QPTypeUD, QPAttr{State: QPStateRTR}, QPAttr{State: QPStateRTS, SQPSN: 0x11}, QPAttrState, QPAttrState | QPAttrSQPSN},
	} {
		rtr, rm := tc.a.rtr(tc.typ, 1, MTU4096)
		rts, sm := tc.a.rts(tc.typ)
		if diff := cmp.Diff(tc.rtr, rtr); diff != "" || rm != tc.rtrMask {
			t.Errorf("%s: RTR mask %v, want %v (-want +got):\n%s", tc.name, rm, tc.rtrMask, diff)
		}
		if diff := cmp.Diff(tc.rts, rts); diff != "" || sm != tc.rtsMask {
			t.Errorf("%s: RTS mask %v, want %v (-want +got):\n%s", tc.name, sm, tc.rtsMask, diff)
		}
	}
}
