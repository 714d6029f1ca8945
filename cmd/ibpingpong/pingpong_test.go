package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/uverbs"
)

// TestAV: the address vector to the peer has a GRH when the peer's GID
// has an interface ID, with the examples' hop limit: 64 in ud_pingpong's
// address handle, 1 in the others' RTR.
func TestAV(t *testing.T) {
	gid := uverbs.GID{0xfe, 0x80, 8: 0x02, 15: 0x01}
	grh := func(hops uint8) uverbs.AHAttr {
		return uverbs.AHAttr{DLID: 7, SL: 2, PortNum: 1, IsGlobal: true,
			GRH: uverbs.GlobalRoute{DGID: gid, SGIDIndex: 3, HopLimit: hops}}
	}
	for _, tc := range []struct {
		kind kind
		dgid uverbs.GID
		want uverbs.AHAttr
	}{
		{kindRC, gid, grh(1)},
		{kindUC, gid, grh(1)},
		{kindSRQ, gid, grh(1)},
		{kindUD, gid, grh(64)},
		{kindUD, uverbs.GID{0xfe, 0x80}, uverbs.AHAttr{DLID: 7, SL: 2, PortNum: 1}},
		{kindRC, uverbs.GID{}, uverbs.AHAttr{DLID: 7, SL: 2, PortNum: 1}},
	} {
		cfg := defaults(tc.kind)
		cfg.sl, cfg.gidIdx = 2, 3
		p := &pingpong{cfg: &cfg}
		if diff := cmp.Diff(tc.want, p.av(dest{LID: 7}, tc.dgid)); diff != "" {
			t.Errorf("%v, dgid %v: AHAttr (-want +got):\n%s", tc.kind, tc.dgid, diff)
		}
	}
}
