package mlx5

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/provider"
)

const testQPN = 0x123

// attached returns a CQ with one QP (send queue sq, receive queue rq)
// attached.
func attached(t *testing.T, ncqe uint32, srq bool) (*testCQ, *fakeSQ, *fakeRQ) {
	t.Helper()
	c := newTestCQ(t, ncqe)
	sq, rq := newFakeSQ(64), newFakeRQ(64, srq)
	if err := c.attach(testQPN, sq, rq); err != nil {
		t.Fatal(err)
	}
	return c, sq, rq
}

func pollOne(t *testing.T, c *testCQ) provider.WC {
	t.Helper()
	wcs := make([]provider.WC, 2)
	n, err := c.Poll(wcs)
	if n != 1 || err != nil {
		t.Fatalf("Poll = %d, %v; want 1 completion", n, err)
	}
	return wcs[0]
}

func TestPollRequester(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sendOp  uint8
		posted  provider.WCOpcode // what the SQ recorded at post
		byteCnt uint32
		want    provider.WC
	}{
		{"send", reqOpSend, 0, 100, provider.WC{Opcode: provider.WCSend}},
		{"send-inval", reqOpSendInval, 0, 0, provider.WC{Opcode: provider.WCSend}},
		{"send-imm", reqOpSendImm, 0, 0, provider.WC{Opcode: provider.WCSend, Flags: provider.WCWithImm}},
		{"write", reqOpRDMAWrite, 0, 4096, provider.WC{Opcode: provider.WCRDMAWrite}},
		{"write-imm", reqOpRDMAWriteImm, 0, 0, provider.WC{Opcode: provider.WCRDMAWrite, Flags: provider.WCWithImm}},
		{"read", reqOpRDMARead, 0, 777, provider.WC{Opcode: provider.WCRDMARead, ByteLen: 777}},
		{"cas", reqOpAtomicCS, 0, 0, provider.WC{Opcode: provider.WCCompSwap, ByteLen: 8}},
		{"faa", reqOpAtomicFA, 0, 0, provider.WC{Opcode: provider.WCFetchAdd, ByteLen: 8}},
		{"umr-local-inv", reqOpUMR, provider.WCLocalInv, 0, provider.WC{Opcode: provider.WCLocalInv}},
		{"umr-bind", reqOpUMR, provider.WCBindMW, 0, provider.WC{Opcode: provider.WCBindMW}},
		{"nop", reqOpNOP, provider.WCSend, 0, provider.WC{Opcode: provider.WCSend}},
		{"tso", reqOpTSO, 0, 0, provider.WC{Opcode: provider.WCTSO}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, sq, _ := attached(t, 8, false)
			sq.post(1, 0)
			ctr := sq.post(0xabcdef0123, tc.posted)
			c.put(0, cqeFields{opcode: cqeReq, sendOp: tc.sendOp, qpn: testQPN, wqeCounter: ctr, byteCnt: tc.byteCnt,
				imm: 0xdeadbeef, flagsRQPN: 0x3f000042, slid: 9, mlPath: 0x7f})
			got := pollOne(t, c)
			want := tc.want
			want.ID, want.QPNum = 0xabcdef0123, testQPN
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("WC (-want +got):\n%s", d)
			}
			if sq.retired != 2 || sq.tail != 2 {
				t.Errorf("SQ retired %d, tail %d: want the unsignaled WQE before it retired too", sq.retired, sq.tail)
			}
			if c.ci() != 1 {
				t.Errorf("doorbell record CI = %d, want 1", c.ci())
			}
		})
	}
}

func TestPollResponder(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    cqeFields
		want provider.WC
	}{
		{"send", cqeFields{opcode: cqeRespSend, byteCnt: 1000, imm: 0x0007},
			provider.WC{Opcode: provider.WCRecv, ByteLen: 1000, PkeyIndex: 7}},
		{"send-imm", cqeFields{opcode: cqeRespSendImm, byteCnt: 4, imm: 0x11223344},
			provider.WC{Opcode: provider.WCRecv, ByteLen: 4, Imm: 0x11223344, Flags: provider.WCWithImm, PkeyIndex: 0x3344}},
		{"write-imm", cqeFields{opcode: cqeRespWRImm, byteCnt: 0, imm: 0xcafef00d},
			provider.WC{Opcode: provider.WCRecvRDMAWithImm, Imm: 0xcafef00d, Flags: provider.WCWithImm, PkeyIndex: 0xf00d}},
		{"send-inv", cqeFields{opcode: cqeRespSendInv, byteCnt: 8, imm: 0x00abcd01},
			provider.WC{Opcode: provider.WCRecv, ByteLen: 8, Imm: 0x00abcd01, Flags: provider.WCWithInvalidate, PkeyIndex: 0xcd01}},
		{"ud-grh", cqeFields{opcode: cqeRespSend, byteCnt: 40 + 256, flagsRQPN: 2<<28 | 5<<24 | 0x00beef, slid: 0x1234, mlPath: 0xff},
			provider.WC{Opcode: provider.WCRecv, ByteLen: 296, SrcQP: 0xbeef, SL: 5, SLID: 0x1234, DLIDPathBits: 0x7f, Flags: provider.WCWithGRH}},
		{"ud-grh-bits-3", cqeFields{opcode: cqeRespSendImm, byteCnt: 1, imm: 1, flagsRQPN: 3<<28 | 0xf<<24 | 0xffffff},
			provider.WC{Opcode: provider.WCRecv, ByteLen: 1, Imm: 1, PkeyIndex: 1, SrcQP: 0xffffff, SL: 15, Flags: provider.WCWithGRH | provider.WCWithImm}},
	} {
		for _, srq := range []bool{false, true} {
			name := tc.name
			if srq {
				name += "-srq"
			}
			t.Run(name, func(t *testing.T) {
				c, _, rq := attached(t, 8, srq)
				rq.post(5)
				ctr := rq.post(0x5555)
				if !srq {
					// An RQ completes in order, whatever the counter.
					c.put(0, cqeFields{opcode: cqeRespSend, qpn: testQPN, wqeCounter: 0xffff})
					pollOne(t, c)
					ctr = 0x1234
				}
				f := tc.f
				f.qpn, f.wqeCounter = testQPN, ctr
				c.put(c.cons, f)
				got := pollOne(t, c)
				want := tc.want
				want.ID, want.QPNum = 0x5555, testQPN
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("WC (-want +got):\n%s", d)
				}
				if srq && (len(rq.freed) != 1 || rq.freed[0] != 1) {
					t.Errorf("SRQ slots freed %v, want [1]", rq.freed)
				}
			})
		}
	}
}

// TestPollErrorSyndromes checks every syndrome value against libmlx5's
// mapping (mlx5_handle_error_cqe), for requester and responder error CQEs.
func TestPollErrorSyndromes(t *testing.T) {
	libmlx5 := map[uint8]provider.WCStatus{
		0x01: provider.WCLocLenErr, 0x02: provider.WCLocQPOpErr, 0x04: provider.WCLocProtErr,
		0x05: provider.WCWRFlushErr, 0x06: provider.WCMWBindErr, 0x10: provider.WCBadRespErr,
		0x11: provider.WCLocAccessErr, 0x12: provider.WCRemInvReqErr, 0x13: provider.WCRemAccessErr,
		0x14: provider.WCRemOpErr, 0x15: provider.WCRetryExcErr, 0x16: provider.WCRNRRetryExcErr,
		0x22: provider.WCRemAbortErr,
	}
	for _, opcode := range []uint8{cqeReqErr, cqeRespErr} {
		c, sq, rq := attached(t, 512, false)
		for s := 0; s < 256; s++ {
			var id uint64
			var ctr uint16
			if opcode == cqeReqErr {
				id = uint64(s) | 1<<40
				ctr = sq.post(id, 0)
			} else {
				id = uint64(s) | 1<<41
				rq.post(id)
			}
			c.put(uint32(s), cqeFields{opcode: opcode, qpn: testQPN, wqeCounter: ctr, syndrome: uint8(s), vendorErr: uint8(255 - s),
				byteCnt: 99, sendOp: reqOpRDMARead})
			got := pollOne(t, c)
			status, ok := libmlx5[uint8(s)]
			if !ok {
				status = provider.WCGeneralErr
			}
			want := provider.WC{ID: id, Status: status, VendorErr: uint32(255 - s), QPNum: testQPN}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("opcode %d syndrome %#x (-want +got):\n%s", opcode, s, d)
			}
		}
	}
}

func TestPollInlineScatter(t *testing.T) {
	c, sq, rq := attached(t, 8, false)
	payload := []byte("twenty-one bytes here")
	rq.post(1)
	c.put(0, cqeFields{opcode: cqeRespSend, flags: cqeInlineScatter32, qpn: testQPN, byteCnt: uint32(len(payload)), payload: payload})
	if w := pollOne(t, c); w.Status != provider.WCSuccess || w.ByteLen != uint32(len(payload)) || string(rq.got[0]) != string(payload) {
		t.Fatalf("scatter to CQE: %+v, RQ got %q", w, rq.got[0])
	}
	rq.room = 4
	rq.post(2)
	c.put(1, cqeFields{opcode: cqeRespSend, flags: cqeInlineScatter32, qpn: testQPN, byteCnt: 8, payload: payload})
	if w := pollOne(t, c); w.Status != provider.WCLocLenErr || w.ID != 2 {
		t.Fatalf("scatter beyond the receive buffers: %+v, want a local length error", w)
	}
	ctr := sq.post(3, 0)
	c.put(2, cqeFields{opcode: cqeReq, sendOp: reqOpAtomicFA, flags: cqeInlineScatter32, qpn: testQPN, wqeCounter: ctr, payload: []byte{1, 2, 3, 4, 5, 6, 7, 8, 9}})
	if w := pollOne(t, c); w.Status != provider.WCSuccess || w.Opcode != provider.WCFetchAdd || len(sq.inline[ctr]) != 8 {
		t.Fatalf("atomic response in the CQE: %+v, SQ got %v", w, sq.inline[ctr])
	}
}

// TestPollCorrupt feeds CQEs the provider cannot deliver: each is an error
// naming the entry, is consumed, and polling goes on after it.
func TestPollCorrupt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		f      cqeFields
		reason string
	}{
		{"unknown-opcode-7", cqeFields{opcode: 7, qpn: testQPN}, "opcode"},
		{"unknown-opcode-11", cqeFields{opcode: 11, qpn: testQPN}, "opcode"},
		{"resize-outside-resize", cqeFields{opcode: cqeResizeCQ, qpn: testQPN}, "opcode"},
		{"no-packet", cqeFields{opcode: cqeNoPacket, qpn: testQPN}, "opcode"},
		{"sig-err", cqeFields{opcode: cqeSigErr, qpn: testQPN}, "opcode"},
		{"unknown-qpn-req", cqeFields{opcode: cqeReq, qpn: 0xffffff, wqeCounter: 1}, "no send queue"},
		{"unknown-qpn-resp", cqeFields{opcode: cqeRespSend, qpn: 7}, "no receive queue"},
		{"unknown-qpn-req-err", cqeFields{opcode: cqeReqErr, qpn: 8, syndrome: syndromeWRFlush, wqeCounter: 1}, "no send queue"},
		{"unknown-qpn-resp-err", cqeFields{opcode: cqeRespErr, qpn: 9, syndrome: syndromeWRFlush}, "no receive queue"},
		{"counter-not-outstanding", cqeFields{opcode: cqeReq, qpn: testQPN, wqeCounter: 40}, "no send WQE"},
		{"counter-retired", cqeFields{opcode: cqeReq, qpn: testQPN, wqeCounter: 0}, "no send WQE"},
		{"counter-not-outstanding-err", cqeFields{opcode: cqeReqErr, qpn: testQPN, wqeCounter: 0xffff}, "no send WQE"},
		{"inline-64-in-64-byte-cqe", cqeFields{opcode: cqeRespSend, flags: cqeInlineScatter64, qpn: testQPN}, "64-byte inline"},
		{"inline-64-requester", cqeFields{opcode: cqeReq, sendOp: reqOpRDMARead, flags: cqeInlineScatter64, qpn: testQPN, wqeCounter: 1}, "64-byte inline"},
		{"inline-too-long", cqeFields{opcode: cqeRespSend, flags: cqeInlineScatter32, qpn: testQPN, byteCnt: 33}, "more than 32"},
		{"inline-read-too-long", cqeFields{opcode: cqeReq, sendOp: reqOpRDMARead, flags: cqeInlineScatter32, qpn: testQPN, byteCnt: 1 << 30, wqeCounter: 1}, "more than 32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, sq, rq := attached(t, 4, false)
			sq.post(1, 0)
			c.put(0, cqeFields{opcode: cqeReq, sendOp: reqOpSend, qpn: testQPN})
			c.put(1, tc.f)
			sq.post(2, 0)
			sq.post(3, 0)
			rq.post(4)
			c.put(2, cqeFields{opcode: cqeReq, sendOp: reqOpSend, qpn: testQPN, wqeCounter: 2})
			wcs := make([]provider.WC, 4)
			n, err := c.Poll(wcs)
			var ce *CQEError
			if n != 1 || !errors.As(err, &ce) || !errors.Is(err, ErrBadCQE) {
				t.Fatalf("Poll = %d, %v; want 1 and a CQEError", n, err)
			}
			if ce.Index != 1 || ce.Opcode != tc.f.opcode || ce.QPN != tc.f.qpn || !strings.Contains(ce.Reason, tc.reason) {
				t.Errorf("CQEError %+v does not name entry 1, opcode %d, QPN %#x, %q", ce, tc.f.opcode, tc.f.qpn, tc.reason)
			}
			if c.ci() != 2 {
				t.Errorf("doorbell record CI = %d after the bad entry, want 2 (consumed)", c.ci())
			}
			if sq.tail != 1 || rq.tail != 0 {
				t.Errorf("the bad entry retired work: SQ tail %d, RQ tail %d", sq.tail, rq.tail)
			}
			n, err = c.Poll(wcs)
			if n != 1 || err != nil || wcs[0].ID != 3 {
				t.Fatalf("next Poll = %d, %v, %+v; want the completion after the bad entry", n, err, wcs[0])
			}
		})
	}
	// An RQ with nothing posted.
	c, _, _ := attached(t, 4, false)
	c.put(0, cqeFields{opcode: cqeRespSendImm, qpn: testQPN})
	if _, err := c.Poll(make([]provider.WC, 1)); !errors.Is(err, ErrBadCQE) || !strings.Contains(err.Error(), "no receive WQE") {
		t.Fatalf("receive completion on an empty RQ: %v", err)
	}
}

// TestPollOwnership: an entry is ours only when its owner bit matches the
// pass over the ring; stale entries of the previous pass and invalid ones
// end the batch.
func TestPollOwnership(t *testing.T) {
	const ncqe = 8
	c, sq, _ := attached(t, ncqe, false)
	var next uint64
	wcs := make([]provider.WC, ncqe)
	for pass := uint32(0); pass < 100; pass++ {
		batch := uint32(1 + pass%(ncqe-1))
		for k := uint32(0); k < batch; k++ {
			ctr := sq.post(next, 0)
			next++
			c.put(c.cons+k, cqeFields{opcode: cqeReq, sendOp: reqOpRDMAWrite, qpn: testQPN, wqeCounter: ctr})
		}
		// The entry after the batch is from the previous pass (or never
		// written): its owner bit or opcode says so.
		n, err := c.Poll(wcs)
		if err != nil || uint32(n) != batch {
			t.Fatalf("pass %d: Poll = %d, %v; want %d", pass, n, err, batch)
		}
		for k := 0; k < n; k++ {
			if want := next - uint64(batch) + uint64(k); wcs[k].ID != want {
				t.Fatalf("pass %d: completion %d has ID %d, want %d", pass, k, wcs[k].ID, want)
			}
		}
		if c.ci() != c.cons&0xffffff {
			t.Fatalf("doorbell record CI %d, consumer index %d", c.ci(), c.cons)
		}
	}
	// An entry written with the wrong owner bit for this pass is not ours.
	e := cqeFields{opcode: cqeReq, qpn: testQPN, wqeCounter: sq.post(1, 0)}.encode(c.cons+ncqe, ncqe)
	*c.entry(c.cons) = e
	if n, err := c.Poll(wcs); n != 0 || err != nil {
		t.Fatalf("Poll of an entry with the previous pass's owner bit = %d, %v", n, err)
	}
}

// TestPollConsumerIndexWrap runs the 32-bit consumer index across its
// wrap and the 24-bit doorbell field across its own.
func TestPollConsumerIndexWrap(t *testing.T) {
	for _, start := range []uint32{1<<24 - 3, 1<<32 - 3} {
		c, sq, _ := attached(t, 4, false)
		c.cons = start
		wcs := make([]provider.WC, 1)
		for k := uint32(0); k < 6; k++ {
			c.put(start+k, cqeFields{opcode: cqeReq, sendOp: reqOpSend, qpn: testQPN, wqeCounter: sq.post(uint64(k), 0)})
			if n, err := c.Poll(wcs); n != 1 || err != nil || wcs[0].ID != uint64(k) {
				t.Fatalf("start %#x step %d: Poll = %d, %v, ID %d", start, k, n, err, wcs[0].ID)
			}
			if want := (start + k + 1) & 0xffffff; c.ci() != want {
				t.Fatalf("start %#x step %d: CI %#x, want %#x", start, k, c.ci(), want)
			}
		}
	}
}

func TestPollClosedAndEmptySlice(t *testing.T) {
	c, sq, _ := attached(t, 4, false)
	c.put(0, cqeFields{opcode: cqeReq, qpn: testQPN, wqeCounter: sq.post(1, 0)})
	if n, err := c.Poll(nil); n != 0 || err != nil {
		t.Fatalf("Poll(nil) = %d, %v", n, err)
	}
	c.closed = true
	if _, err := c.Poll(make([]provider.WC, 1)); !errors.Is(err, provider.ErrClosed) {
		t.Fatalf("Poll of a closed CQ: %v", err)
	}
}

func TestAttachErrors(t *testing.T) {
	c, _, _ := attached(t, 4, false)
	var fe *FieldError
	if err := c.attach(testQPN, newFakeSQ(4), nil); !errors.As(err, &fe) || fe.Field != "qpn" {
		t.Errorf("attaching a QPN twice: %v", err)
	}
	if err := c.attach(1<<24, newFakeSQ(4), nil); !errors.As(err, &fe) || fe.Field != "qpn" {
		t.Errorf("attaching QPN 2^24: %v", err)
	}
	if err := c.attachSRQ(1<<24, newFakeRQ(4, true)); !errors.As(err, &fe) || fe.Field != "srqn" {
		t.Errorf("attaching SRQ 2^24: %v", err)
	}
}

// TestXRCSRQ: a receive completion naming an unknown QP (the XRC target)
// reaches the SRQ its srqn_uidx names.
func TestXRCSRQ(t *testing.T) {
	c := newTestCQ(t, 4)
	srq := newFakeRQ(8, true)
	if err := c.attachSRQ(0x42, srq); err != nil {
		t.Fatal(err)
	}
	srq.post(1)
	ctr := srq.post(2)
	c.put(0, cqeFields{opcode: cqeRespSend, qpn: 0x999, srqnUIDX: 0x42, wqeCounter: ctr, byteCnt: 3})
	if w := pollOne(t, c); w.ID != 2 || w.QPNum != 0x999 {
		t.Fatalf("XRC SRQ completion %+v", w)
	}
	c.detachSRQ(0x42)
	c.put(1, cqeFields{opcode: cqeRespSend, qpn: 0x999, srqnUIDX: 0x42})
	if _, err := c.Poll(make([]provider.WC, 1)); !errors.Is(err, ErrBadCQE) {
		t.Fatalf("completion for a detached SRQ: %v", err)
	}
}

// TestDetachCleans: destroying a QP removes its unpolled completions and
// keeps the others in order, as libmlx5's __mlx5_cq_clean.
func TestDetachCleans(t *testing.T) {
	const ncqe = 8
	c := newTestCQ(t, ncqe)
	a, b := newFakeSQ(16), newFakeSQ(16)
	srq := newFakeRQ(16, true)
	if err := c.attach(1, a, srq); err != nil {
		t.Fatal(err)
	}
	if err := c.attach(2, b, nil); err != nil {
		t.Fatal(err)
	}
	// Start mid-ring so that the sweep crosses the wrap.
	c.cons = 5
	for i := uint32(0); i < 5; i++ {
		c.put(i, cqeFields{opcode: cqeInvalid})
	}
	var wantIDs []uint64
	for k := uint32(0); k < 7; k++ {
		if k%2 == 0 {
			c.put(c.cons+k, cqeFields{opcode: cqeReq, qpn: 2, wqeCounter: b.post(uint64(100+k), 0)})
			wantIDs = append(wantIDs, uint64(100+k))
		} else if k == 3 {
			c.put(c.cons+k, cqeFields{opcode: cqeRespSend, qpn: 1, wqeCounter: srq.post(uint64(k))})
		} else {
			c.put(c.cons+k, cqeFields{opcode: cqeReq, qpn: 1, wqeCounter: a.post(uint64(k), 0)})
		}
	}
	c.detach(1)
	if len(srq.freed) != 1 {
		t.Errorf("SRQ slots freed by the clean: %v, want the one its completion held", srq.freed)
	}
	if c.cons != 5+3 || c.ci() != 8 {
		t.Errorf("consumer index %d (CI %d) after removing 3 entries from 5", c.cons, c.ci())
	}
	wcs := make([]provider.WC, ncqe)
	n, err := c.Poll(wcs)
	var got []uint64
	for _, w := range wcs[:n] {
		got = append(got, w.ID)
	}
	if err != nil || !cmp.Equal(got, wantIDs) {
		t.Fatalf("after detach: Poll = %v, %v; want %v", got, err, wantIDs)
	}
}

func TestArm(t *testing.T) {
	c, sq, _ := attached(t, 4, false)
	be64 := func() uint64 { return binary.BigEndian.Uint64(c.uar[cqDoorbellOffset:]) }
	armRec := func() uint32 {
		return binary.BigEndian.Uint32(unsafe.Slice((*byte)(unsafe.Pointer(&c.dbrec[cqDBRecArm])), 4))
	}
	if err := c.Arm(false); err != nil {
		t.Fatal(err)
	}
	if got, want := be64(), uint64(0)<<32|0x77; got != want {
		t.Errorf("doorbell %#x, want %#x", got, want)
	}
	for k := uint32(0); k < 3; k++ {
		c.put(k, cqeFields{opcode: cqeReq, qpn: testQPN, wqeCounter: sq.post(1, 0)})
	}
	if n, _ := c.Poll(make([]provider.WC, 4)); n != 3 {
		t.Fatal(n)
	}
	for ev := uint32(1); ev <= 5; ev++ {
		c.Event()
		if err := c.Arm(true); err != nil {
			t.Fatal(err)
		}
		word := (ev&3)<<28 | 1<<24 | 3
		if got, want := be64(), uint64(word)<<32|0x77; got != want {
			t.Errorf("event %d: doorbell %#x, want %#x", ev, got, want)
		}
		if armRec() != word {
			t.Errorf("event %d: arm record %#x, want %#x", ev, armRec(), word)
		}
	}
	c.armDB = nil
	if err := c.Arm(false); !errors.Is(err, ErrNoCQDoorbell) {
		t.Errorf("Arm without a UAR: %v", err)
	}
}

func TestPollAllocs(t *testing.T) {
	c, sq, _ := attached(t, 64, false)
	wcs := make([]provider.WC, 16)
	allocs := testing.AllocsPerRun(100, func() {
		for k := uint32(0); k < 16; k++ {
			c.put(c.cons+k, cqeFields{opcode: cqeReq, sendOp: reqOpRDMAWrite, qpn: testQPN, wqeCounter: sq.post(1, 0)})
		}
		if n, err := c.Poll(wcs); n != 16 || err != nil {
			t.Fatal(n, err)
		}
		c.Poll(wcs)
	})
	if allocs != 0 {
		t.Errorf("Poll allocates %.1f times per call", allocs)
	}
}

// csumRQ is a receive queue that reports checksum validation (a raw
// packet QP with IBV_DEVICE_RAW_IP_CSUM).
type csumRQ struct {
	*fakeRQ
	valid bool
}

func (r *csumRQ) rxCSumValid() bool { return r.valid }

// TestPollRxChecksum: IBV_WC_IP_CSUM_OK needs L3 and L4 OK on an IPv4
// packet, and a queue that reports checksums (libmlx5's get_csum_ok).
func TestPollRxChecksum(t *testing.T) {
	for _, tc := range []struct {
		name   string
		valid  bool
		hdsExt byte // hds_ip_ext
		l3Type byte
		want   provider.WCFlags
	}{
		{"ipv4-ok", true, cqeL3OK | cqeL4OK, cqeL3HdrTypeIPv4, provider.WCIPCSumOK},
		{"ipv4-ok-l2-ok-too", true, cqeL3OK | cqeL4OK | 1, cqeL3HdrTypeIPv4, provider.WCIPCSumOK},
		{"l4-bad", true, cqeL3OK, cqeL3HdrTypeIPv4, 0},
		{"l3-bad", true, cqeL4OK, cqeL3HdrTypeIPv4, 0},
		{"ipv6", true, cqeL3OK | cqeL4OK, 1, 0},
		{"queue-does-not-report", false, cqeL3OK | cqeL4OK, cqeL3HdrTypeIPv4, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCQ(t, 4)
			rq := &csumRQ{fakeRQ: newFakeRQ(4, false), valid: tc.valid}
			if err := c.attach(testQPN, nil, rq); err != nil {
				t.Fatal(err)
			}
			rq.post(1)
			c.put(0, cqeFields{opcode: cqeRespSend, qpn: testQPN, byteCnt: 60})
			e := c.entry(0)
			e[cqeOffHdsIPExt] = tc.hdsExt
			e[cqeOffL4HdrTypeEtc] = tc.l3Type << 2
			if w := pollOne(t, c); w.Flags != tc.want {
				t.Errorf("flags %#x, want %#x", w.Flags, tc.want)
			}
		})
	}
}
