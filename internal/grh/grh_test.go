package grh

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/leakcheck"
	"github.com/goverbs/goverbs/uverbs"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// ipv4Header is what rxe puts in a UD receive from 10.99.0.2 to 10.99.0.1
// (RoCE v2 over IPv4): 20 undefined bytes, then the IPv4 header.
func ipv4Header() []byte {
	b := make([]byte, Size)
	ip := b[20:]
	ip[0] = 0x45                             // version 4, IHL 5
	ip[1] = 0x00                             // TOS
	binary.BigEndian.PutUint16(ip[2:], 1084) // total length
	ip[8], ip[9] = 64, 17                    // TTL, UDP
	copy(ip[12:], []byte{10, 99, 0, 2})      // source
	copy(ip[16:], []byte{10, 99, 0, 1})      // destination
	binary.BigEndian.PutUint16(ip[10:], ipv4Checksum(ip))
	return b
}

func grhHeader(next byte) []byte {
	b := make([]byte, Size)
	binary.BigEndian.PutUint32(b[0:], 6<<28|0x12<<20|0xabcde)
	b[6], b[7] = next, 0x40
	src, dst := mapped([]byte{10, 99, 0, 2}), mapped([]byte{10, 99, 0, 1})
	copy(b[8:24], src[:])
	copy(b[24:40], dst[:])
	return b
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		want Header
	}{
		{"RoCE v2 IPv4", ipv4Header(), Header{SGID: mapped([]byte{10, 99, 0, 2}), DGID: mapped([]byte{10, 99, 0, 1}),
			IPv4: true, RoCEv2: true, HopLimit: 64}},
		{"RoCE v2 IPv6 GRH", grhHeader(nextHeaderUDP), Header{SGID: mapped([]byte{10, 99, 0, 2}), DGID: mapped([]byte{10, 99, 0, 1}),
			RoCEv2: true, HopLimit: 0x40, TrafficClass: 0x12, FlowLabel: 0xabcde}},
		{"IB GRH", grhHeader(nextHeaderIB), Header{SGID: mapped([]byte{10, 99, 0, 2}), DGID: mapped([]byte{10, 99, 0, 1}),
			HopLimit: 0x40, TrafficClass: 0x12, FlowLabel: 0xabcde}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := Parse(tc.b)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, h); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseBad(t *testing.T) {
	badSum := ipv4Header()
	badSum[20+10] ^= 1
	badSum[0] = 0 // not a GRH either
	mcast := ipv4Header()
	mcast[20+16] = 239
	binary.BigEndian.PutUint16(mcast[30:], ipv4Checksum(mcast[20:]))
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"nil", nil},
		{"short", ipv4Header()[:39]},
		{"no version", make([]byte, Size)},
		{"GRH next header TCP", grhHeader(6)},
		{"multicast destination", mcast},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Parse(tc.b); !errors.Is(err, ErrBadHeader) {
				t.Errorf("Parse(% x) = %v, want ErrBadHeader", tc.b, err)
			}
		})
	}
	// A version 4 header with a bad checksum is still read as IPv4 when
	// the first bytes are no GRH (libibverbs checks the sum only to tell
	// the two apart).
	if h, err := Parse(badSum); err != nil || !h.IPv4 {
		t.Errorf("IPv4 header with a bad checksum: %+v, %v", h, err)
	}
}

// FuzzParse: any 40 bytes parse or are refused with ErrBadHeader, and a
// parsed header's addresses come from the input.
func FuzzParse(f *testing.F) {
	f.Add(ipv4Header())
	f.Add(grhHeader(nextHeaderUDP))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := Parse(b)
		if err != nil {
			if !errors.Is(err, ErrBadHeader) {
				t.Fatalf("error %v does not wrap ErrBadHeader", err)
			}
			return
		}
		if h.IPv4 && (h.SGID != mapped(b[32:36]) || h.DGID != mapped(b[36:40])) {
			t.Fatalf("IPv4 addresses %v %v not from the header", h.SGID, h.DGID)
		}
		if !h.IPv4 && (h.SGID != uverbs.GID(b[8:24]) || h.DGID != uverbs.GID(b[24:40])) {
			t.Fatalf("GRH addresses %v %v not from the header", h.SGID, h.DGID)
		}
	})
}
