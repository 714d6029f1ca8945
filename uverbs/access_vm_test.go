package uverbs

import (
	"bytes"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

// TestLocalKeyOfAnotherPD completes the access-control cases of
// TestRemoteAccessErrors (which covers remote keys: missing remote access
// flags, stale rkeys, bounds, an rkey of another PD) with local keys: a QP
// whose work request names an MR of another PD, as the source of a send,
// the target of an RDMA read's data, or a receive buffer. Each ends in an
// error completion, and no byte of either side's memory changes.
func TestLocalKeyOfAnotherPD(t *testing.T) {
	vmenv.RequireRXE(t)
	d := itOpen(t, vmenv.RXE0)
	otherPD, err := d.c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer otherPD.Close()
	const page = 4096
	// foreign registers page bytes at off of s's buffer in the other PD.
	foreign := func(t *testing.T, s *aeSide, off int) SGE {
		mr, err := otherPD.RegisterBuffer(s.buf, off, page, AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mr.Close() })
		return SGE{Addr: mr.Addr(), Length: 64, Lkey: mr.Lkey()}
	}
	for _, tc := range []struct {
		name string
		op   WROpcode
		// recvForeign: the responder's receive names the foreign MR;
		// otherwise the requester's SGE does.
		recvForeign bool
		// Requester's first completion, per kernel (rxe departs from the
		// spec's local protection error the way it does for any bad lkey:
		// see TestRemoteAccessErrors), and the responder's receive where
		// the request reached it.
		want     map[string]WCStatus
		wantRecv map[string]WCStatus
	}{
		{name: "send from an lkey of another PD", op: WRSend,
			want: map[string]WCStatus{"6.1": WCLocQPOpErr, "6.12": WCWRFlushErr},
		},
		{name: "RDMA read into an lkey of another PD", op: WRRDMARead,
			want: map[string]WCStatus{"6.1": WCLocProtErr, "6.12": WCLocProtErr},
		},
		{name: "receive into an lkey of another PD", op: WRSend, recvForeign: true,
			want: map[string]WCStatus{"6.1": WCRemOpErr, "6.12": WCRemOpErr},
			// The spec's local protection error; rxe's responder fails
			// the copy as a malformed receive WQE (RESPST_ERR_MALFORMED_WQE),
			// which it completes as a local QP operation error.
			wantRecv: map[string]WCStatus{"6.1": WCLocQPOpErr, "6.12": WCLocQPOpErr}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := aeNewSide(t, d), aeNewSide(t, d)
			for _, x := range [][2]*aeSide{{a, b}, {b, a}} {
				if err := x[0].qp.Connect(ConnectAttr{SGIDIndex: d.gid.Index, Timeout: 18, RetryCnt: 1, RNRRetry: 1,
					Access: AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead,
					Remote: Endpoint{QPN: x[1].qp.QPN(), GID: d.gid.GID}}); err != nil {
					t.Fatal(err)
				}
			}
			recv := SGE{Addr: b.mr.Addr() + 3*page, Length: 64, Lkey: b.mr.Lkey()}
			if tc.recvForeign {
				recv = foreign(t, b, 3*page)
			}
			if err := b.qp.PostRecv([]RecvWR{{ID: 900, SGL: []SGE{recv}}}); err != nil {
				t.Fatal(err)
			}
			src := SGE{Addr: a.mr.Addr() + 2*page, Length: 64, Lkey: a.mr.Lkey()}
			if !tc.recvForeign {
				src = foreign(t, a, 2*page)
			}
			wr := SendWR{ID: 1, Opcode: tc.op, Flags: SendSignaled, SGL: []SGE{src}, RemoteAddr: b.mr.Addr() + page, Rkey: b.mr.Rkey()}
			if err := a.qp.PostSend([]SendWR{wr}); err != nil {
				t.Fatal(err)
			}
			got := aePollN(t, d.scq, 1)[0]
			t.Logf("requester: %v (vendor_err %d)", got.Status, got.VendorErr)
			if got.ID != 1 || got.Status == WCSuccess {
				t.Errorf("requester's completion %+v: want an error", got)
			}
			if want, ok := tc.want[vmenv.KernelName()]; ok && got.Status != want {
				t.Errorf("requester: %v, want %v on %s", got.Status, want, vmenv.KernelName())
			}
			if tc.wantRecv != nil {
				gotRecv := aePollN(t, d.rcq, 1)[0]
				t.Logf("responder's receive: %v", gotRecv.Status)
				if gotRecv.ID != 900 || gotRecv.Status == WCSuccess {
					t.Errorf("responder's receive completion %+v: want an error", gotRecv)
				}
				if want, ok := tc.wantRecv[vmenv.KernelName()]; ok && gotRecv.Status != want {
					t.Errorf("responder's receive: %v, want %v on %s", gotRecv.Status, want, vmenv.KernelName())
				}
			}
			for name, s := range map[string]*aeSide{"requester": a, "responder": b} {
				if !bytes.Equal(s.buf.Bytes(), s.want) {
					i := 0
					for s.buf.Bytes()[i] == s.want[i] {
						i++
					}
					t.Errorf("%s memory changed at offset %d", name, i)
				}
			}
			time.Sleep(20 * time.Millisecond)
			var rest [4]WC
			for _, cq := range []*CQ{d.scq, d.rcq} {
				if k, _ := cq.Poll(rest[:]); k != 0 {
					t.Errorf("extra completions %+v", rest[:k])
				}
			}
			// Flush what is left (the responder's receive where the
			// request never reached it), so the shared CQs start the next
			// case empty.
			flushed := 0
			for _, s := range []*aeSide{a, b} {
				if qa, err := s.qp.Query(); err == nil && qa.State != QPStateErr {
					if err := s.qp.Modify(&QPAttr{State: QPStateErr}, QPAttrState); err != nil {
						t.Fatal(err)
					}
				}
			}
			if tc.wantRecv == nil {
				flushed = 1
			}
			for _, wc := range aePollN(t, d.rcq, flushed) {
				if wc.Status != WCWRFlushErr {
					t.Errorf("left-over receive %+v (%v), want flushed", wc, wc.Status)
				}
			}
		})
	}
}
