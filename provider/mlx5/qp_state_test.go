package mlx5

import (
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
)

// QP states as uverbs passes them to StateChanged (enum ibv_qp_state).
const (
	stReset uint8 = 0
	stInit  uint8 = 1
	stRTR   uint8 = 2
	stRTS   uint8 = 3
)

// setState tells the QP of moves MODIFY_QP made, as uverbs does after the
// command (provider.QPStateFollower).
func setState(t *testing.T, q *QP, states ...uint8) {
	t.Helper()
	f, ok := any(q).(interface{ StateChanged(state uint8) })
	if !ok {
		t.Fatal("the mlx5 QP does not follow the QP's state (provider.QPStateFollower)")
	}
	for _, s := range states {
		f.StateChanged(s)
	}
}

// newStateTestQP is a created QP of number qpn, linked to the CQs init
// names.
func newStateTestQP(t *testing.T, c *Context, init provider.QPInit, qpn uint32) *QP {
	t.Helper()
	p, err := c.NewQP(init)
	if err != nil {
		t.Fatal(err)
	}
	q := p.(*QP)
	if err := q.Created(nil, 1, qpn, init); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Destroyed() })
	return q
}

// doorbellRecords are a QP's doorbell record words.
type doorbellRecords struct{ Recv, Send uint32 }

func (q *QP) doorbellRecords() doorbellRecords {
	b := q.dbrecBytes()
	return doorbellRecords{Recv: binary.BigEndian.Uint32(b[4*abi.MLX5RcvDBR:]), Send: binary.BigEndian.Uint32(b[4*abi.MLX5SndDBR:])}
}

// TestQPResetStartsOver: moved to RESET, a QP loses its completions still
// in its CQs (the other QPs' stay) and its queues start over as a new
// QP's, doorbell records zeroed, as libmlx5's mlx5_modify_qp does; brought
// up again, it posts from WQE counter 0.
func TestQPResetStartsOver(t *testing.T) {
	for _, tc := range []struct {
		name  string
		oneCQ bool
	}{
		{"one CQ", true},
		{"send and receive CQs", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newTestContext(t, testResp())
			scq, rcq := newXRCTestCQ(t, c), newXRCTestCQ(t, c)
			if tc.oneCQ {
				rcq = scq
			}
			init := provider.QPInit{Type: abi.QPTypeRC, MaxSendWr: 8, MaxSendSGE: 1, MaxRecvWr: 4, MaxRecvSGE: 1, SendCQ: scq, RecvCQ: rcq}
			q := newStateTestQP(t, c, init, 0x123)
			other := newStateTestQP(t, c, init, 0x456)
			setState(t, q, stInit, stRTR, stRTS)
			setState(t, other, stInit, stRTR, stRTS)
			sgl, _ := payload(t, 0x500, 64)
			write := provider.SendWR{Opcode: provider.WRRDMAWrite, Flags: provider.SendSignaled, SGL: sgl, RemoteAddr: 0x1000, Rkey: 1}
			for id := range uint64(3) {
				write.ID = 100 + id
				if err := q.PostSend([]provider.SendWR{write}); err != nil {
					t.Fatal(err)
				}
			}
			write.ID = 200
			if err := other.PostSend([]provider.SendWR{write}); err != nil {
				t.Fatal(err)
			}
			if err := q.PostRecv([]provider.RecvWR{{ID: 300, SGL: sgl}, {ID: 301, SGL: sgl}}); err != nil {
				t.Fatal(err)
			}
			// Completions the HCA wrote before the reset, not yet polled:
			// q's first send and first receive, and other's send.
			put := func(cq *CQ, f cqeFields) {
				i := cq.cons
				for cq.owned(i) { // written already
					i++
				}
				*cq.entry(i) = f.encode(i, cq.ncqe)
			}
			put(scq, cqeFields{opcode: cqeReq, qpn: 0x123, wqeCounter: 0})
			put(rcq, cqeFields{opcode: cqeRespSend, qpn: 0x123, byteCnt: 64})
			put(scq, cqeFields{opcode: cqeReq, qpn: 0x456, wqeCounter: 0})

			setState(t, q, stReset)

			if diff := cmp.Diff(sqState{}, q.sqState()); diff != "" {
				t.Errorf("send queue after RESET (-new QP +got):\n%s", diff)
			}
			if len(q.sqOutstanding(t)) != 0 || q.rq.head != 0 || q.rq.tail != 0 {
				t.Errorf("after RESET: %d WQEs outstanding, RQ head %d tail %d", len(q.sqOutstanding(t)), q.rq.head, q.rq.tail)
			}
			if diff := cmp.Diff(doorbellRecords{}, q.doorbellRecords()); diff != "" {
				t.Errorf("doorbell records after RESET (-want +got):\n%s", diff)
			}
			var got []uint64
			wcs := make([]provider.WC, 8)
			for _, cq := range []*CQ{scq, rcq} {
				n, err := cq.Poll(wcs)
				if err != nil {
					t.Fatal(err)
				}
				for _, wc := range wcs[:n] {
					got = append(got, wc.ID)
				}
				if tc.oneCQ {
					break
				}
			}
			if diff := cmp.Diff([]uint64{200}, got); diff != "" {
				t.Errorf("completions after RESET, the other QP's only (-want +got):\n%s", diff)
			}

			// Up again: the queues start at 0.
			setState(t, q, stInit, stRTR, stRTS)
			write.ID = 400
			if err := q.PostSend([]provider.SendWR{write}); err != nil {
				t.Fatal(err)
			}
			if err := q.PostRecv([]provider.RecvWR{{ID: 500, SGL: sgl}}); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(doorbellRecords{Recv: 1, Send: 1}, q.doorbellRecords()); diff != "" {
				t.Errorf("doorbell records after one post each (-want +got):\n%s", diff)
			}
			if ctr := binary.BigEndian.Uint32(q.sqRing()) >> 8 & 0xffff; ctr != 0 {
				t.Errorf("the first WQE after RESET has counter %d, want 0", ctr)
			}
			put(scq, cqeFields{opcode: cqeReq, qpn: 0x123, wqeCounter: 0})
			put(rcq, cqeFields{opcode: cqeRespSend, qpn: 0x123, byteCnt: 64})
			got = got[:0]
			for _, cq := range []*CQ{scq, rcq} {
				n, err := cq.Poll(wcs)
				if err != nil {
					t.Fatal(err)
				}
				for _, wc := range wcs[:n] {
					got = append(got, wc.ID)
				}
				if tc.oneCQ {
					break
				}
			}
			if diff := cmp.Diff([]uint64{400, 500}, got); diff != "" {
				t.Errorf("completions of the posts after RESET (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRawPacketRecvDoorbellFromRTR: a raw packet QP's RQ takes packets
// from INIT on, so, as libmlx5, its receive doorbell record is left alone
// before RTR and written at RTR with what was posted; after a RESET it is
// held again. Other QP types write it on every post.
func TestRawPacketRecvDoorbellFromRTR(t *testing.T) {
	type step struct {
		state    uint8 // the move, when post is 0
		post     int   // receive WRs to post
		wantRecv uint32
	}
	for _, tc := range []struct {
		name  string
		typ   provider.QPType
		steps []step
	}{
		{"RAW_PACKET", abi.QPTypeRawPacket, []step{
			{post: 1, wantRecv: 0}, // in RESET, as created
			{state: stInit, wantRecv: 0},
			{post: 2, wantRecv: 0},
			{state: stRTR, wantRecv: 3},
			{post: 1, wantRecv: 4},
			{state: stRTS, wantRecv: 4},
			{post: 1, wantRecv: 5},
			{state: stReset, wantRecv: 0},
			{state: stInit, wantRecv: 0},
			{post: 2, wantRecv: 0},
			{state: stRTR, wantRecv: 2},
		}},
		{"UD", abi.QPTypeUD, []step{
			{state: stInit, wantRecv: 0},
			{post: 2, wantRecv: 2},
			{state: stRTR, wantRecv: 2},
			{post: 1, wantRecv: 3},
			{state: stReset, wantRecv: 0},
			{state: stInit, wantRecv: 0},
			{post: 1, wantRecv: 1},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newTestContext(t, testResp())
			q := newStateTestQP(t, c, provider.QPInit{Type: tc.typ, MaxSendWr: 4, MaxSendSGE: 1, MaxRecvWr: 16, MaxRecvSGE: 1}, 0x123)
			sgl, _ := payload(t, 0x500, 64)
			var got, want []doorbellRecords
			for _, s := range tc.steps {
				if s.post > 0 {
					wrs := make([]provider.RecvWR, s.post)
					for i := range wrs {
						wrs[i] = provider.RecvWR{ID: uint64(i), SGL: sgl}
					}
					if err := q.PostRecv(wrs); err != nil {
						t.Fatal(err)
					}
				} else {
					setState(t, q, s.state)
				}
				got = append(got, q.doorbellRecords())
				want = append(want, doorbellRecords{Recv: s.wantRecv})
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("doorbell records after each step (-want +got):\n%s", diff)
			}
		})
	}
}
