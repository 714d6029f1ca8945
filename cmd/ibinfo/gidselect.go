package main

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/goverbs/goverbs/uverbs"
)

// recommendedRoCEGID picks the GID table entry a RoCE application should
// use on a port by default: the one whose packets are routable and that
// rdma_cm-free programs (perftest -x, NCCL_IB_GID_INDEX, UCX) are usually
// told to use by hand.
//
// The rules, in order:
//
//  1. Only RoCE v2 entries: RoCE v1 (and IB) GIDs are not routable over IP.
//  2. Only entries bound to a network device (NetdevIfindex != 0): without
//     one the kernel has no source address or route for the packets.
//  3. No link-local addresses (fe80::/10, or IPv4 169.254/16 mapped), no
//     loopback, multicast or unspecified address: they do not leave the
//     link, or are not unicast at all.
//  4. IPv4-mapped addresses (::ffff:a.b.c.d) before IPv6 ones: IPv4 RoCE
//     fabrics are the common case, and peers often resolve IPv4 only.
//  5. Then the lowest index, so the choice is stable while the table holds
//     the same entries.
//
// ok is false when no entry qualifies (an IB port, or a RoCE port whose
// netdev has no usable address yet).
func recommendedRoCEGID(entries []uverbs.GIDEntry) (best uverbs.GIDEntry, ok bool) {
	var cands []uverbs.GIDEntry
	for _, e := range entries {
		if e.Type != uverbs.GIDTypeRoCEv2 || e.NetdevIfindex == 0 || !routableGID(e.GID) {
			continue
		}
		cands = append(cands, e)
	}
	if len(cands) == 0 {
		return uverbs.GIDEntry{}, false
	}
	return slices.MinFunc(cands, func(a, b uverbs.GIDEntry) int {
		if a4, b4 := a.GID.Addr().Is4In6(), b.GID.Addr().Is4In6(); a4 != b4 {
			if a4 {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.Index, b.Index)
	}), true
}

// routableGID reports whether a GID is a unicast address that can leave
// its link.
func routableGID(g uverbs.GID) bool {
	a := netip.AddrFrom16(g)
	if a.Is4In6() {
		a = a.Unmap()
	}
	return a.IsValid() && !a.IsUnspecified() && !a.IsLoopback() && !a.IsMulticast() &&
		!a.IsLinkLocalUnicast() && !a.IsLinkLocalMulticast() && !a.IsInterfaceLocalMulticast()
}
