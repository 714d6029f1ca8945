package mlx5

import (
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/provider"
)

// TestSRQDoorbellCounter16: an SRQ's doorbell record holds the count of
// WQEs posted as libmlx5's 16-bit counter does, wrapping past 65535.
func TestSRQDoorbellCounter16(t *testing.T) {
	c, _ := newTestContext(t, testResp())
	p, err := c.NewSRQ(8, 1)
	if err != nil {
		t.Fatal(err)
	}
	s := p.(*SRQ)
	if err := s.Created(nil, 1, 8, 1); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Destroyed() })
	sgl, _ := payload(t, 0x500, 64)
	checks := []struct {
		posted int
		want   uint32
	}{{1, 1}, {0xfffe, 0xfffe}, {0xffff, 0xffff}, {0x10000, 0}, {0x10001, 1}, {0x10005, 5}}
	var want, got []uint32
	posted := 0
	for _, ck := range checks {
		// One WR a post, each completed at once: the free list never runs
		// out.
		for ; posted < ck.posted; posted++ {
			ind := s.head
			if err := s.PostRecv([]provider.RecvWR{{ID: uint64(posted), SGL: sgl}}); err != nil {
				t.Fatalf("post %d: %v", posted, err)
			}
			if _, _, ok := s.completeRecv(uint16(ind), nil); !ok {
				t.Fatalf("post %d: completeRecv(%d) found no WQE", posted, ind)
			}
		}
		want = append(want, ck.want)
		got = append(got, binary.BigEndian.Uint32(s.dbrecBytes()))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("doorbell record after 1, 0xfffe, 0xffff, 0x10000, 0x10001, 0x10005 posts (-libmlx5 +goverbs):\n%s", diff)
	}
}
