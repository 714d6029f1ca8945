package mlx5

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
)

// foreignAH is an AH of another provider.
type foreignAH struct{}

func (foreignAH) CreateData() (in, out []byte) { return nil, nil }
func (foreignAH) Created(uint32) error         { return nil }
func (foreignAH) Destroyed()                   {}

// TestPostSendBadInput: every refusal names the work request with a typed
// error, and nothing of the list reaches the queue's state, its posted
// WQEs, the doorbell record or the UAR.
func TestPostSendBadInput(t *testing.T) {
	c, k := newTestContext(t, testResp())
	rc := newTestQP(t, c, provider.QPInit{Type: abi.QPTypeRC, MaxSendWr: 4, MaxSendSGE: 2, MaxInlineData: 32})
	ud := newTestQP(t, c, provider.QPInit{Type: abi.QPTypeUD, MaxSendWr: 4, MaxSendSGE: 2})
	raw := newTestQP(t, c, provider.QPInit{Type: abi.QPTypeRawPacket, MaxSendWr: 4, MaxSendSGE: 2})
	noSQ := newTestQP(t, c, provider.QPInit{Type: abi.QPTypeRC, MaxRecvWr: 4, MaxRecvSGE: 1})
	c2, _ := newTestContext(t, testResp())
	other := testAH(t, c2)
	gone := testAH(t, c)
	gone.Destroyed()
	ah := testAH(t, c)
	sgl, _ := payload(t, 1, 16, 16, 16)
	send := provider.SendWR{Opcode: provider.WRSend, SGL: sgl[:1]}
	many := make([]provider.SendWR, int(rc.sq.maxPost)+1)
	for i := range many {
		many[i] = send
	}
	short, _ := payload(t, 1, 10)
	inl, _ := payload(t, 1, rc.sq.maxInline-10, 11) // one byte over
	for _, tc := range []struct {
		name  string
		q     *QP
		wrs   []provider.SendWR
		index int
		err   error
	}{
		{"more WRs than the queue holds", rc, many, int(rc.sq.maxPost), provider.ErrQueueFull},
		{"too many SGEs", rc, []provider.SendWR{send, {Opcode: provider.WRSend, SGL: sgl}}, 1, provider.ErrTooManySGE},
		{"inline over the limit", rc, []provider.SendWR{send, send, {Opcode: provider.WRSend, Flags: provider.SendInline, SGL: inl}}, 2, provider.ErrInlineTooLarge},
		{"opcode out of range", rc, []provider.SendWR{{Opcode: 42}}, 0, provider.ErrBadWR},
		{"BIND_MW", rc, []provider.SendWR{{Opcode: provider.WRBindMW}}, 0, provider.ErrBadWR},
		{"READ on UC-like UD", ud, []provider.SendWR{{Opcode: provider.WRRDMARead, AH: &provider.AHRef{AH: ah}}}, 0, provider.ErrBadWR},
		{"UD without AH", ud, []provider.SendWR{{Opcode: provider.WRSend, AH: &provider.AHRef{AH: ah}}, {Opcode: provider.WRSend}}, 1, provider.ErrBadWR},
		{"UD through a destroyed AH", ud, []provider.SendWR{{Opcode: provider.WRSend, AH: &provider.AHRef{AH: gone}}}, 0, provider.ErrBadWR},
		{"UD through another context's AH", ud, []provider.SendWR{{Opcode: provider.WRSend, AH: &provider.AHRef{AH: other}}}, 0, provider.ErrBadWR},
		{"UD through another provider's AH", ud, []provider.SendWR{{Opcode: provider.WRSend, AH: &provider.AHRef{AH: foreignAH{}}}}, 0, provider.ErrBadWR},
		{"raw packet without SGEs", raw, []provider.SendWR{{Opcode: provider.WRSend}}, 0, provider.ErrBadWR},
		{"raw packet shorter than its headers", raw, []provider.SendWR{{Opcode: provider.WRSend, SGL: short}}, 0, provider.ErrBadWR},
		{"raw packet SEND_WITH_IMM", raw, []provider.SendWR{{Opcode: provider.WRSendWithImm, SGL: sgl[:1]}}, 0, provider.ErrBadWR},
		{"QP without a send queue", noSQ, []provider.SendWR{send}, 0, provider.ErrQueueFull},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var posted [][]byte
			if tc.q.sq.start != nil {
				posted = tc.q.sqOutstanding(t)
			}
			state, db := tc.q.sqState(), bytes.Clone(tc.q.dbrecBytes())
			k.clearUARs()
			err := tc.q.PostSend(tc.wrs)
			var pe *provider.PostError
			if !errors.As(err, &pe) || pe.Index != tc.index || !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want work request %d: %v", err, tc.index, tc.err)
			}
			if diff := cmp.Diff(state, tc.q.sqState()); diff != "" {
				t.Errorf("a refused list changed the queue's state (-before +after):\n%s", diff)
			}
			if tc.q.sq.start != nil && !cmp.Equal(posted, tc.q.sqOutstanding(t)) {
				t.Errorf("a refused list changed the posted WQEs")
			}
			if !bytes.Equal(db, tc.q.dbrecBytes()) {
				t.Errorf("a refused list changed the doorbell record")
			}
			for _, off := range k.uarOff {
				if !allZero(k.maps[off]) {
					t.Errorf("a refused list wrote a UAR")
				}
			}
		})
	}
}

// TestPostSendRefusedListLeavesQueue: a list refused part way, whose good
// work requests were already written into the ring's free blocks (across
// its wrap, after a LOCAL_INV that owes the next WQE a fence), leaves the
// queue as it was: the next list posts as on a twin queue that never saw
// the refused one.
func TestPostSendRefusedListLeavesQueue(t *testing.T) {
	c, k := newTestContext(t, testResp())
	caps := provider.QPInit{Type: abi.QPTypeRC, MaxSendWr: 8, MaxSendSGE: 2, MaxInlineData: 64}
	probe := newTestQP(t, c, caps)
	sgl, _ := payload(t, 1, 64, 64, probe.sq.maxInline+1)
	write := provider.SendWR{ID: 1, Opcode: provider.WRRDMAWrite, SGL: sgl[:1], RemoteAddr: 0x1000, Rkey: 0x77}
	inline := provider.SendWR{ID: 2, Opcode: provider.WRSend, Flags: provider.SendInline, SGL: sgl[1:2]} // 2 blocks
	inv := provider.SendWR{ID: 3, Opcode: provider.WRLocalInv, InvalidateRkey: 0x1234}                   // 2 blocks
	tooLong := provider.SendWR{ID: 4, Opcode: provider.WRSend, Flags: provider.SendInline, SGL: sgl[2:]}
	tooMany := provider.SendWR{ID: 5, Opcode: provider.WRSend, SGL: sgl}
	// history leaves 3 WQEs outstanding, the last a LOCAL_INV, and the
	// next WQE two blocks before the end of the ring.
	history := func(t *testing.T, q *QP) {
		t.Helper()
		n := int(q.sq.wqeCnt) - 6
		for i := range n {
			if err := q.PostSend([]provider.SendWR{write}); err != nil {
				t.Fatal(err)
			}
			if i < n-1 {
				if _, _, _, ok := q.sq.completeSend(uint16(i), nil); !ok {
					t.Fatalf("completeSend(%d)", i)
				}
			}
		}
		if err := q.PostSend([]provider.SendWR{inline, inv}); err != nil {
			t.Fatal(err)
		}
		if q.sq.curPost != q.sq.wqeCnt-2 || q.sq.fmCache == 0 || q.sq.head-q.sq.tail != 3 {
			t.Fatalf("history: %+v of %d blocks, want block %d next, a fence owed, 3 outstanding", q.sqState(), q.sq.wqeCnt, q.sq.wqeCnt-2)
		}
	}
	room := int(probe.sq.maxPost) - 3
	overRoom := func(wrs ...provider.SendWR) []provider.SendWR {
		for len(wrs) <= room {
			wrs = append(wrs, write)
		}
		return wrs
	}
	good := []provider.SendWR{write, inline, write}
	good[2].ID, good[2].Flags = 9, provider.SendSignaled
	for _, tc := range []struct {
		name  string
		wrs   []provider.SendWR
		index int
		err   error
	}{
		{"too many SGEs after a wrap", []provider.SendWR{write, inline, write, tooMany}, 3, provider.ErrTooManySGE},
		{"inline over the limit", []provider.SendWR{inv, write, tooLong, write}, 2, provider.ErrInlineTooLarge},
		{"opcode out of range", []provider.SendWR{write, inline, inline, {Opcode: 42}}, 3, provider.ErrBadWR},
		{"more than the room", overRoom(inv, inline), room, provider.ErrQueueFull},
		{"a bad one among more than the room", overRoom(write, inline, tooMany), 2, provider.ErrTooManySGE},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newTestQP(t, c, caps)
			twin := newTestQP(t, c, caps)
			history(t, a)
			history(t, twin)
			state, posted, db := a.sqState(), a.sqOutstanding(t), bytes.Clone(a.dbrecBytes())
			k.clearUARs()
			err := a.PostSend(tc.wrs)
			var pe *provider.PostError
			if !errors.As(err, &pe) || pe.Index != tc.index || !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want work request %d: %v", err, tc.index, tc.err)
			}
			if diff := cmp.Diff(state, a.sqState()); diff != "" {
				t.Errorf("the refused list changed the queue's state (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(posted, a.sqOutstanding(t)); diff != "" {
				t.Errorf("the refused list changed the posted WQEs (-before +after):\n%s", diff)
			}
			if !bytes.Equal(db, a.dbrecBytes()) {
				t.Errorf("the refused list changed the doorbell record")
			}
			for _, off := range k.uarOff {
				if !allZero(k.maps[off]) {
					t.Errorf("the refused list wrote a UAR")
				}
			}
			for _, q := range []*QP{a, twin} {
				if err := q.PostSend(good); err != nil {
					t.Fatalf("the list after: %v", err)
				}
			}
			if diff := cmp.Diff(twin.sqState(), a.sqState()); diff != "" {
				t.Errorf("queue state after the next list (-twin +refused one):\n%s", diff)
			}
			if diff := cmp.Diff(twin.sqOutstanding(t), a.sqOutstanding(t)); diff != "" {
				t.Errorf("WQEs after the next list (-twin +refused one):\n%s", diff)
			}
			if !bytes.Equal(twin.dbrecBytes(), a.dbrecBytes()) {
				t.Errorf("doorbell record %x, the twin's %x", a.dbrecBytes(), twin.dbrecBytes())
			}
			last := a.sq.curPost - 1 // the last WQE's last block
			for a.sq.slot(last).blocks == 0 {
				last--
			}
			if id, _, _, ok := a.sq.completeSend(uint16(last), nil); !ok || id != good[2].ID {
				t.Errorf("completion of the last WQE: %d, %v; want work request %d", id, ok, good[2].ID)
			}
		})
	}
}

func TestPostRecvBadInput(t *testing.T) {
	c, _ := newTestContext(t, testResp())
	q := newTestQP(t, c, provider.QPInit{Type: abi.QPTypeRC, MaxSendWr: 1, MaxRecvWr: 4, MaxRecvSGE: 2})
	sp, err := c.NewSRQ(4, 1)
	if err != nil {
		t.Fatal(err)
	}
	s := sp.(*SRQ)
	withSRQ := newTestQP(t, c, provider.QPInit{Type: abi.QPTypeRC, MaxSendWr: 1, HasSRQ: true, SRQ: s})
	sgl, _ := payload(t, 1, 8, 8, 8, 8)
	wr := provider.RecvWR{SGL: sgl[:1]}
	for _, tc := range []struct {
		name  string
		r     provider.Receiver
		ring  func() []byte
		wrs   []provider.RecvWR
		index int
		err   error
	}{
		{"RQ: more than it holds", q, q.rqRing, []provider.RecvWR{wr, wr, wr, wr, wr}, 4, provider.ErrQueueFull},
		{"RQ: too many SGEs", q, q.rqRing, []provider.RecvWR{wr, {SGL: sgl[:3]}}, 1, provider.ErrTooManySGE},
		{"SRQ: more than it holds", s, s.ring, []provider.RecvWR{wr, wr, wr, wr, wr, wr, wr, wr}, int(s.tail), provider.ErrQueueFull},
		{"SRQ: too many SGEs", s, s.ring, []provider.RecvWR{{SGL: sgl}}, 0, provider.ErrTooManySGE},
		{"QP with an SRQ", withSRQ, s.ring, []provider.RecvWR{wr}, 0, provider.ErrBadWR},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := bytes.Clone(tc.ring())
			err := tc.r.PostRecv(tc.wrs)
			var pe *provider.PostError
			if !errors.As(err, &pe) || pe.Index != tc.index || !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want work request %d: %v", err, tc.index, tc.err)
			}
			if !bytes.Equal(before, tc.ring()) {
				t.Errorf("a refused list changed the queue")
			}
		})
	}
}

// TestPostAfterClose: once the context closed (its UARs unmapped), posts
// fail with ErrClosed and touch nothing.
func TestPostAfterClose(t *testing.T) {
	c, _ := newTestContext(t, testResp())
	q := newTestQP(t, c, provider.QPInit{Type: abi.QPTypeRC, MaxSendWr: 4, MaxSendSGE: 1, MaxRecvWr: 4, MaxRecvSGE: 1})
	if _, ok := c.HCACoreClock(); !ok {
		t.Fatal("no clock page before Close")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.HCACoreClock(); ok {
		t.Error("HCACoreClock read the clock page after Close")
	}
	if err := q.PostSend([]provider.SendWR{{Opcode: provider.WRSend}}); !errors.Is(err, provider.ErrClosed) {
		t.Errorf("PostSend after Close: %v", err)
	}
	if err := q.PostRecv([]provider.RecvWR{{}}); !errors.Is(err, provider.ErrClosed) {
		t.Errorf("PostRecv after Close: %v", err)
	}
}

// TestCreateBadCaps: capabilities the device cannot give are refused at
// NewQP/NewSRQ, naming the field, as libmlx5 refuses them.
func TestCreateBadCaps(t *testing.T) {
	c, _ := newTestContext(t, testResp())
	for _, tc := range []struct {
		name string
		init provider.QPInit
		want string
	}{
		{"send SGEs beyond a WQE", provider.QPInit{Type: abi.QPTypeRC, MaxSendWr: 1, MaxSendSGE: 21}, "MaxSendSGE"},
		{"inline beyond a WQE", provider.QPInit{Type: abi.QPTypeRC, MaxSendWr: 1, MaxInlineData: 400}, "send WQE"},
		{"send WRs beyond the device", provider.QPInit{Type: abi.QPTypeRC, MaxSendWr: 1 << 16, MaxSendSGE: 1}, "MaxSendWr"},
		{"recv WRs beyond the device", provider.QPInit{Type: abi.QPTypeRC, MaxRecvWr: 1<<15 + 1, MaxRecvSGE: 1}, "MaxRecvWr"},
		{"recv SGEs beyond a WQE", provider.QPInit{Type: abi.QPTypeRC, MaxRecvWr: 1, MaxRecvSGE: 33}, "MaxRecvSGE"},
		{"XRC receive QP with a send queue", provider.QPInit{Type: abi.QPTypeXRCTgt, MaxSendWr: 1}, "XRC_RECV QP has no queues (MaxSendWr"},
	} {
		if _, err := c.NewQP(tc.init); err == nil || !bytes.Contains([]byte(err.Error()), []byte(tc.want)) {
			t.Errorf("%s: err %v, want one naming %s", tc.name, err, tc.want)
		}
	}
	if _, err := c.NewSRQ(1<<15+1, 1); err == nil {
		t.Errorf("SRQ beyond max_srq_recv_wr accepted")
	}
	if _, err := c.NewSRQ(4, 33); err == nil {
		t.Errorf("SRQ with 33 SGEs accepted")
	}
}
