// Package grh reads the 40 bytes the device puts before the payload of a UD
// receive (the GRH, or on RoCE v2 over IPv4 the IPv4 header in its last 20
// bytes) and turns them into the address vector of a reply, as libibverbs'
// ibv_init_ah_from_wc does: the tools that answer a datagram from an
// unknown sender (udaddy's server, perftest's UD rdma_cm server) need it.
package grh

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/goverbs/goverbs/uverbs"
)

// Size is the room a UD receive buffer keeps before the payload.
const Size = 40

// ErrBadHeader is wrapped by the errors of headers that cannot be read.
var ErrBadHeader = errors.New("grh: unreadable header")

// Header is what a received datagram's header says about its route.
type Header struct {
	// SGID is the sender's address, DGID the receiver's (ours): IPv4-mapped
	// for an IPv4 header.
	SGID, DGID   uverbs.GID
	IPv4         bool // RoCE v2 over IPv4 (else a GRH: IB, RoCE v1 or RoCE v2 over IPv6)
	RoCEv2       bool // UDP-encapsulated (IPv4, or a GRH whose next header is UDP)
	HopLimit     uint8
	TrafficClass uint8
	FlowLabel    uint32
}

const (
	nextHeaderUDP = 17   // IPPROTO_UDP
	nextHeaderIB  = 0x1b // IB_NEXT_HDR: the BTH follows (IB, RoCE v1)
)

// Parse reads a header as get_grh_header_version decides it: a GRH when
// its version is 6, unless the last 20 bytes are an IPv4 header with a
// good checksum (RoCE v2 puts an IPv4 header there and leaves the first
// 20 bytes undefined).
func Parse(b []byte) (Header, error) {
	if len(b) < Size {
		return Header{}, fmt.Errorf("%w: %d bytes, want %d", ErrBadHeader, len(b), Size)
	}
	b = b[:Size]
	ip4 := b[20:]
	v6 := b[0]>>4 == 6
	v4 := ip4[0]>>4 == 4
	if v6 && v4 && ip4[0]&0xf == 5 && ipv4Checksum(ip4) == binary.BigEndian.Uint16(ip4[10:]) {
		v6 = false
	}
	var h Header
	switch {
	case v6:
		vtf := binary.BigEndian.Uint32(b[0:])
		h.TrafficClass = uint8(vtf >> 20)
		h.FlowLabel = vtf & 0xfffff
		h.HopLimit = b[7]
		copy(h.SGID[:], b[8:24])
		copy(h.DGID[:], b[24:40])
		switch b[6] {
		case nextHeaderUDP:
			h.RoCEv2 = true
		case nextHeaderIB:
		default:
			return Header{}, fmt.Errorf("%w: GRH next header %#x is neither UDP nor IB", ErrBadHeader, b[6])
		}
	case v4:
		h.IPv4, h.RoCEv2 = true, true
		h.TrafficClass = ip4[1]
		h.HopLimit = ip4[8]
		h.FlowLabel = binary.BigEndian.Uint32(b[0:]) & 0xfffff
		h.SGID = mapped(ip4[12:16])
		h.DGID = mapped(ip4[16:20])
	default:
		return Header{}, fmt.Errorf("%w: neither a GRH (version %d) nor an IPv4 header (version %d)", ErrBadHeader, b[0]>>4, ip4[0]>>4)
	}
	if h.DGID[0] == 0xff || h.IPv4 && h.DGID[12]&0xf0 == 0xe0 {
		return Header{}, fmt.Errorf("%w: sent to a multicast address, which is no address to answer from", ErrBadHeader)
	}
	return h, nil
}

func mapped(ip []byte) uverbs.GID {
	var g uverbs.GID
	g[10], g[11] = 0xff, 0xff
	copy(g[12:], ip)
	return g
}

// ipv4Checksum is the header checksum of a 20-byte IPv4 header, its own
// checksum field taken as zero.
func ipv4Checksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i < 20; i += 2 {
		if i == 10 {
			continue
		}
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// ReplyAH is the address vector of a reply to the datagram wc describes,
// whose 40 header bytes are hdr, received on port of dev: back to the
// sender's GID, from the local GID the datagram was sent to (of the same
// RoCE type), with the header's hop limit, traffic class and flow label.
func ReplyAH(dev *uverbs.Context, port uint8, wc uverbs.WC, hdr []byte) (uverbs.AHAttr, error) {
	a := uverbs.AHAttr{DLID: wc.SLID, SL: wc.SL, SrcPathBits: wc.DLIDPathBits, PortNum: port}
	if wc.Flags&uverbs.WCWithGRH == 0 {
		return a, nil
	}
	h, err := Parse(hdr)
	if err != nil {
		return a, err
	}
	gids, err := dev.QueryGIDTable()
	if err != nil {
		return a, fmt.Errorf("grh: %w", err)
	}
	want := uverbs.GIDTypeRoCEv1
	if h.RoCEv2 {
		want = uverbs.GIDTypeRoCEv2
	}
	for _, e := range gids {
		if e.Port == port && e.GID == h.DGID && (e.Type == want || e.Type == uverbs.GIDTypeIB && !h.RoCEv2) {
			a.IsGlobal = true
			a.GRH = uverbs.GlobalRoute{DGID: h.SGID, SGIDIndex: e.Index, HopLimit: h.HopLimit,
				TrafficClass: h.TrafficClass, FlowLabel: h.FlowLabel}
			return a, nil
		}
	}
	return a, fmt.Errorf("grh: no GID %v on port %d of %s to answer from", h.DGID, port, dev.Name())
}
