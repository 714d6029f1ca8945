package mlx5

import (
	"errors"
	"testing"

	"github.com/goverbs/goverbs/internal/provider"
)

// FuzzCQE polls arbitrary bytes as CQEs from an arbitrary consumer index
// over a guarded ring (PROT_NONE on both sides: any access outside it
// faults) with a QP, an SRQ and an XRC SRQ attached. Whatever the bytes,
// Poll must neither panic nor leave the ring, and its results must be
// consistent: every entry it consumed is a completion or the one error
// that ended the batch, and the doorbell record holds the new index.
func FuzzCQE(f *testing.F) {
	const ncqe = 8
	seed := func(cons uint32, fs ...cqeFields) []byte {
		var b []byte
		for k, fl := range fs {
			e := fl.encode(cons+uint32(k), ncqe)
			b = append(b, e[:]...)
		}
		return b
	}
	f.Add(seed(0, cqeFields{opcode: cqeReq, sendOp: reqOpRDMAWrite, qpn: testQPN, wqeCounter: 3}), uint32(0), uint8(4))
	f.Add(seed(6, cqeFields{opcode: cqeRespSendImm, qpn: testQPN, byteCnt: 9, imm: 5},
		cqeFields{opcode: cqeRespSend, qpn: 0x77, srqnUIDX: 0x42, wqeCounter: 2, flags: cqeInlineScatter32, byteCnt: 32},
		cqeFields{opcode: cqeReqErr, qpn: testQPN, syndrome: syndromeRemoteAccess, wqeCounter: 1}), uint32(6), uint8(8))
	f.Add(seed(0xfffffffe, cqeFields{opcode: cqeRespErr, qpn: testQPN, syndrome: 0x99},
		cqeFields{opcode: 9, qpn: testQPN}), uint32(0xfffffffe), uint8(2))
	f.Add(seed(3, cqeFields{opcode: cqeReq, sendOp: reqOpRDMARead, flags: cqeInlineScatter32, qpn: testQPN, byteCnt: 0xffffffff}), uint32(3), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, cons uint32, nPoll uint8) {
		c := newTestCQ(t, ncqe)
		c.cons = cons
		for k := 0; k < ncqe && k*cqeSize < len(data); k++ {
			copy(c.entry(cons + uint32(k))[:], data[k*cqeSize:])
		}
		sq := newFakeSQ(16)
		srq := newFakeRQ(16, true)
		xrc := newFakeRQ(4, true)
		for k := 0; k < 10; k++ {
			sq.post(uint64(k), provider.WCLocalInv)
			srq.post(uint64(k))
		}
		xrc.post(1)
		xrc.post(2)
		if err := c.attach(testQPN, sq, srq); err != nil {
			t.Fatal(err)
		}
		if err := c.attachSRQ(0x42, xrc); err != nil {
			t.Fatal(err)
		}
		wcs := make([]provider.WC, int(nPoll)%(ncqe+2))
		n, err := c.Poll(wcs)
		consumed := c.cons - cons
		if err != nil {
			if !errors.Is(err, ErrBadCQE) {
				t.Fatalf("Poll error %v is not ErrBadCQE", err)
			}
			consumed--
		}
		if n < 0 || n > len(wcs) || uint32(n) != consumed {
			t.Fatalf("Poll = %d, %v over %d slots; consumed %d entries", n, err, len(wcs), c.cons-cons)
		}
		if c.ci() != c.cons&cqConsumerIdxMask {
			t.Fatalf("doorbell record CI %#x, consumer index %#x", c.ci(), c.cons)
		}
		for _, w := range wcs[:n] {
			if w.Status > provider.WCGeneralErr || w.QPNum > maxQPN || w.SrcQP > maxQPN {
				t.Fatalf("completion out of range: %+v", w)
			}
		}
		if sq.tail-0 > sq.head || srq.head < srq.tail {
			t.Fatalf("queues retired beyond what was posted: SQ tail %d head %d", sq.tail, sq.head)
		}
		// The rest of the ring stays readable: a second poll goes on.
		c.Poll(wcs)
		c.detach(testQPN)
	})
}
