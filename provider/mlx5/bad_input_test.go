package mlx5

import (
	"bytes"
	"errors"
	"testing"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
)

// foreignAH is an AH of another provider.
type foreignAH struct{}

func (foreignAH) CreateData() (in, out []byte) { return nil, nil }
func (foreignAH) Created(uint32) error         { return nil }
func (foreignAH) Destroyed()                   {}

// TestPostSendBadInput: every refusal names the work request with a typed
// error, and nothing of the list reaches the queue, the doorbell record or
// the UAR.
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
			var ring []byte
			if tc.q.sq.start != nil {
				ring = tc.q.sqRing()
			}
			before, db := bytes.Clone(ring), bytes.Clone(tc.q.dbrecBytes())
			k.clearUARs()
			head := tc.q.sq.head
			err := tc.q.PostSend(tc.wrs)
			var pe *provider.PostError
			if !errors.As(err, &pe) || pe.Index != tc.index || !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want work request %d: %v", err, tc.index, tc.err)
			}
			if !bytes.Equal(before, ring) || !bytes.Equal(db, tc.q.dbrecBytes()) || tc.q.sq.head != head {
				t.Errorf("a refused list changed the queue")
			}
			for _, off := range k.uarOff {
				if !allZero(k.maps[off]) {
					t.Errorf("a refused list wrote a UAR")
				}
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
