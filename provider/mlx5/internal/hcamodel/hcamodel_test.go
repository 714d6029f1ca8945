package hcamodel

import (
	"encoding/binary"
	"errors"
	"testing"
	"unsafe"
)

// These tests drive the model with WQEs written here by hand from the PRM
// layouts (the provider's encoder is checked against the model in
// provider/mlx5's loopback tests, and against libmlx5 in its golden
// tests), and read the CQEs back byte by byte.

type rig struct {
	h        *HCA
	a, b     *QP
	cqA, cqB *CQ
	memA     []byte
	memB     []byte
	posted   [2]uint16
}

func newRig(t *testing.T, ncqe uint32) *rig {
	r := &rig{h: New(), memA: make([]byte, 4096), memB: make([]byte, 4096)}
	mk := func(qpn uint32, cq *CQ) *QP {
		return &QP{QPN: qpn, UIDX: qpn & 0xff, SQ: make([]byte, 8*64), SQWQECnt: 8, RQ: make([]byte, 4*32), RQWQECnt: 4, RQStride: 32,
			DBRec: new([2]uint32), SendCQ: cq, RecvCQ: cq}
	}
	r.cqA = &CQ{CQN: 1, Ring: make([]byte, ncqe*64), NCQE: ncqe, DBRec: new([2]uint32)}
	r.cqB = &CQ{CQN: 2, Ring: make([]byte, ncqe*64), NCQE: ncqe, DBRec: new([2]uint32)}
	r.a, r.b = mk(0x100, r.cqA), mk(0x200, r.cqB)
	if err := r.h.Connect(r.a, r.b); err != nil {
		t.Fatal(err)
	}
	all := LocalWrite | RemoteWrite | RemoteRead | RemoteAtomic
	r.h.Register(&Region{Mem: r.memA, Lkey: 0xa, Rkey: 0xa, Access: all})
	r.h.Register(&Region{Mem: r.memB, Lkey: 0xb, Rkey: 0xb, Access: all})
	return r
}

func addr(b []byte, off int) uint64 { return uint64(uintptr(unsafe.Pointer(&b[off]))) }

func beStore(p *uint32, v uint32) {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	*p = binary.NativeEndian.Uint32(b[:])
}

func beLoad(p *uint32) uint32 {
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], *p)
	return binary.BigEndian.Uint32(b[:])
}

// post writes one WQE of 16-byte segments (after the control segment) at
// the QP's counter, wrapping at the end of the send queue, and rings the
// doorbell record.
func (r *rig) post(q *QP, opcode uint8, signaled bool, segs ...[]byte) uint16 {
	var body []byte
	for _, s := range segs {
		body = append(body, s...)
	}
	ds := 1 + len(body)/16
	ctr := r.posted[q.QPN>>9]
	var ctrl [16]byte
	binary.BigEndian.PutUint32(ctrl[0:], uint32(ctr)<<8|uint32(opcode))
	binary.BigEndian.PutUint32(ctrl[4:], q.QPN<<8|uint32(ds))
	if signaled {
		ctrl[11] = ctrlCQUpdate
	}
	wqe := append(ctrl[:], body...)
	size := int(q.SQWQECnt) * 64
	start := int(ctr&uint16(q.SQWQECnt-1)) * 64
	for i, b := range wqe {
		q.SQ[(start+i)%size] = b
	}
	r.posted[q.QPN>>9] += uint16((len(wqe) + 63) / 64)
	beStore(&q.DBRec[1], uint32(r.posted[q.QPN>>9]))
	return ctr
}

func raddr(a uint64, rkey uint32) []byte {
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b, a)
	binary.BigEndian.PutUint32(b[8:], rkey)
	return b
}

func dataSeg(n uint32, lkey uint32, a uint64) []byte {
	b := make([]byte, 16)
	binary.BigEndian.PutUint32(b, n)
	binary.BigEndian.PutUint32(b[4:], lkey)
	binary.BigEndian.PutUint64(b[8:], a)
	return b
}

func inlineSeg(data []byte) []byte {
	b := make([]byte, (4+len(data)+15)&^15)
	binary.BigEndian.PutUint32(b, uint32(len(data))|inlineBit)
	copy(b[4:], data)
	return b
}

// cqeAt reads the CQE at index i: opcode, owner, QPN, counter, syndrome.
func cqeAt(cq *CQ, i uint32) (opcode, owner uint8, qpn uint32, ctr uint16, syndrome uint8, byteCnt uint32) {
	e := cq.Ring[(i%cq.NCQE)*64:]
	return e[63] >> 4, e[63] & 1, binary.BigEndian.Uint32(e[56:]) & 0xffffff, binary.BigEndian.Uint16(e[60:]), e[55], binary.BigEndian.Uint32(e[44:])
}

func consume(cq *CQ, n uint32) { beStore(&cq.DBRec[0], beLoad(&cq.DBRec[0])+n) }

func TestWriteSignalingAndOwner(t *testing.T) {
	r := newRig(t, 4)
	copy(r.memA, "0123456789abcdef")
	// Two unsignaled writes and a signaled one: one CQE, with the third's
	// counter; three passes over a 4-entry CQ flip the owner bit.
	for pass := 0; pass < 3; pass++ {
		for k := 0; k < 4; k++ {
			var last uint16
			for j := 0; j < 3; j++ {
				last = r.post(r.a, opRDMAWrite, j == 2, raddr(addr(r.memB, 100*j), 0xb), dataSeg(16, 0xa, addr(r.memA, 0)))
			}
			if n, err := r.h.Run(); n != 3 || err != nil {
				t.Fatalf("Run = %d, %v", n, err)
			}
			i := uint32(pass*4 + k)
			op, owner, qpn, ctr, _, _ := cqeAt(r.cqA, i)
			if op != cqeReq || owner != uint8(pass&1) || qpn != 0x100 || ctr != last {
				t.Fatalf("CQE %d: opcode %d owner %d QPN %#x counter %d; want 0, %d, 0x100, %d", i, op, owner, qpn, ctr, pass&1, last)
			}
			consume(r.cqA, 1)
		}
	}
	if string(r.memB[200:216]) != "0123456789abcdef" {
		t.Fatalf("target %q", r.memB[200:216])
	}
	if r.cqA.Produced() != 12 {
		t.Fatalf("%d CQEs", r.cqA.Produced())
	}
}

func TestInlineWrapsSendQueue(t *testing.T) {
	r := newRig(t, 8)
	msg := []byte("inline data that takes a second basic block: more than forty-four bytes here")
	// Seven single-block WQEs, then a two-block one that wraps.
	for j := 0; j < 7; j++ {
		r.post(r.a, opNOP, false)
	}
	// Executed (and so retired) before the next WQE reuses block 0.
	if n, err := r.h.Run(); n != 7 || err != nil {
		t.Fatalf("Run = %d, %v", n, err)
	}
	r.post(r.a, opRDMAWrite, true, raddr(addr(r.memB, 1000), 0xb), inlineSeg(msg))
	if _, err := r.h.Run(); err != nil {
		t.Fatal(err)
	}
	if string(r.memB[1000:1000+len(msg)]) != string(msg) {
		t.Fatalf("wrapped inline write landed as %q", r.memB[1000:1000+len(msg)])
	}
	if op, _, _, ctr, _, n := cqeAt(r.cqA, 0); op != cqeReq || ctr != 7 || n != uint32(len(msg)) {
		t.Fatalf("CQE: opcode %d counter %d bytes %d", op, ctr, n)
	}
}

func TestSendReceiveAndAtomics(t *testing.T) {
	r := newRig(t, 8)
	// A receive of two segments at b.
	seg := append(dataSeg(3, 0xb, addr(r.memB, 10)), dataSeg(100, 0xb, addr(r.memB, 20))...)
	seg = append(seg, dataSeg(0, invalidLkey, 0)[:0]...)
	copy(r.b.RQ, seg)
	beStore(&r.b.DBRec[0], 1)
	copy(r.memA, "hello, world")
	r.post(r.a, opSend, true, dataSeg(12, 0xa, addr(r.memA, 0)))
	binary.NativeEndian.PutUint64(r.memB[512:], 40)
	atom := make([]byte, 16)
	binary.BigEndian.PutUint64(atom, 2) // add
	r.post(r.a, opAtomicFA, true, raddr(addr(r.memB, 512), 0xb), atom, dataSeg(8, 0xa, addr(r.memA, 64)))
	if _, err := r.h.Run(); err != nil {
		t.Fatal(err)
	}
	if string(r.memB[10:13])+string(r.memB[20:29]) != "hello, world" {
		t.Fatalf("scattered %q %q", r.memB[10:13], r.memB[20:29])
	}
	if op, _, qpn, _, _, n := cqeAt(r.cqB, 0); op != cqeRespSend || qpn != 0x200 || n != 12 {
		t.Fatalf("responder CQE: opcode %d QPN %#x bytes %d", op, qpn, n)
	}
	if got, old := binary.NativeEndian.Uint64(r.memB[512:]), binary.NativeEndian.Uint64(r.memA[64:]); got != 42 || old != 40 {
		t.Fatalf("fetch-and-add: target %d, returned %d", got, old)
	}
}

func TestErrorsFlushAndOverrun(t *testing.T) {
	r := newRig(t, 4)
	beStore(&r.a.DBRec[0], 2) // two receives posted at a: flushed when a fails
	copy(r.a.RQ, dataSeg(8, 0xa, addr(r.memA, 0)))
	copy(r.a.RQ[32:], dataSeg(8, 0xa, addr(r.memA, 8)))
	r.post(r.a, opRDMAWrite, false, raddr(addr(r.memB, 0), 0x99), dataSeg(8, 0xa, addr(r.memA, 0)))
	r.post(r.a, opRDMAWrite, false, raddr(addr(r.memB, 0), 0xb), dataSeg(8, 0xa, addr(r.memA, 0)))
	if _, err := r.h.Run(); err != nil {
		t.Fatal(err)
	}
	want := []struct{ op, syndrome uint8 }{{cqeReqErr, SyndromeRemoteAccess}, {cqeRespErr, SyndromeWRFlush}, {cqeRespErr, SyndromeWRFlush}, {cqeReqErr, SyndromeWRFlush}}
	for i, w := range want {
		if op, _, _, _, syn, _ := cqeAt(r.cqA, uint32(i)); op != w.op || syn != w.syndrome {
			t.Errorf("CQE %d: opcode %d syndrome %#x, want %d %#x", i, op, syn, w.op, w.syndrome)
		}
	}
	if !r.a.InError() {
		t.Error("QP not in error")
	}
	// The ring is full (4 unpolled of 4): the next CQE overruns.
	r.post(r.a, opNOP, true)
	if _, err := r.h.Run(); !errors.Is(err, ErrCQOverrun) || !r.cqA.Overrun() {
		t.Fatalf("Run with a full CQ: %v", err)
	}
}
