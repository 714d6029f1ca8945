// Package hcamodel is a software model of a ConnectX HCA's data path, for
// tests of provider/mlx5 without hardware. It reads what the provider
// wrote the way the PRM says the HCA does: the send counter in a QP's
// doorbell record, then each WQE by 64-byte basic block (wrapping at the
// end of the send queue), its control segment and the remote-address,
// atomic, data and inline segments after it; it performs SEND (with
// immediate or invalidate), RDMA WRITE (with immediate), RDMA READ and the
// two atomics between QPs connected back to back (RC loopback) against a
// table of registered regions; it consumes receive WQEs from a QP's RQ
// or its SRQ (following the SRQ's next-WQE links); and it writes CQE64s
// with the owner bit of the current pass, a CQE only for signaled WQEs
// (the counter it carries retires the unsignaled ones before it) and an
// error CQE with the syndrome a ConnectX reports for each violation,
// flushing the rest of the QP's work once it is in error. It detects CQ
// overrun from the consumer index in the CQ's doorbell record.
//
// The model is independent of provider/mlx5's code: it decodes with its
// own offsets from the PRM, so a disagreement shows as a failed test.
// It is not a timing model: Run executes everything posted at once.
package hcamodel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Access is a region's IBV_ACCESS_* flags.
type Access uint32

// Access flags.
const (
	LocalWrite   Access = 1
	RemoteWrite  Access = 2
	RemoteRead   Access = 4
	RemoteAtomic Access = 8
)

// Region is registered memory: Mem's address is the region's virtual
// address.
type Region struct {
	Mem    []byte
	Lkey   uint32
	Rkey   uint32
	Access Access
}

// CQ is a completion queue's ring and doorbell record as the provider
// allocated them.
type CQ struct {
	CQN   uint32
	Ring  []byte     // NCQE * 64 bytes
	NCQE  uint32     // a power of two
	DBRec *[2]uint32 // [0]: consumer index (big endian, 24 bits)

	prod    uint32
	overrun bool
}

// Overrun reports whether the model found the CQ full when it had a CQE
// to write (the HCA then raises a CQ error event and the CQE is lost).
func (cq *CQ) Overrun() bool { return cq.overrun }

// Produced is the number of CQEs the model wrote.
func (cq *CQ) Produced() uint32 { return cq.prod }

// SRQ is a shared receive queue: WQEs of Stride bytes, each a 16-byte
// next segment and data segments, linked by their next_wqe_index.
type SRQ struct {
	SRQN   uint32
	Buf    []byte
	WQECnt uint32
	Stride uint32
	DBRec  *[2]uint32 // [0]: the WQE counter (big endian)

	next     uint16 // the WQE the next message takes
	consumed uint16
}

// QP is a queue pair's queues as the provider laid them out.
type QP struct {
	QPN  uint32
	UIDX uint32 // the user index CQE version 1 completions carry
	// SQ is the send queue's SQWQECnt basic blocks of 64 bytes.
	SQ       []byte
	SQWQECnt uint32
	// RQ holds RQWQECnt WQEs of RQStride bytes (data segments).
	RQ       []byte
	RQWQECnt uint32
	RQStride uint32
	DBRec    *[2]uint32 // [0]: receive counter, [1]: send counter (big endian, 16 bits)
	SRQ      *SRQ
	SendCQ   *CQ
	RecvCQ   *CQ
	// ScatterToCQE: receive payloads of at most 32 bytes go into the CQE
	// (MLX5_INLINE_SCATTER_32) instead of the receive buffers, as the
	// HCA does for QPs created with MLX5_QP_FLAG_SCATTER_CQE.
	ScatterToCQE bool

	peer   *QP
	sqNext uint16 // WQE counter of the next WQE to execute
	rqNext uint16
	err    bool // the QP is in the error state: everything flushes
}

// InError reports whether the QP went to the error state.
func (q *QP) InError() bool { return q.err }

// HCA is the model: registered regions and connected QPs.
type HCA struct {
	mu     sync.Mutex
	byLkey map[uint32]*Region
	byRkey map[uint32]*Region
	qps    []*QP
	Trace  func(format string, args ...any) // optional

	scattered int
}

// ScatteredToCQE is the number of receives whose data went into the CQE.
func (h *HCA) ScatteredToCQE() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.scattered
}

// New returns an HCA with nothing registered.
func New() *HCA {
	return &HCA{byLkey: map[uint32]*Region{}, byRkey: map[uint32]*Region{}}
}

// Register adds a memory region.
func (h *HCA) Register(r *Region) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.byLkey[r.Lkey] = r
	h.byRkey[r.Rkey] = r
}

// Deregister removes a region: later accesses through its keys fail.
func (h *HCA) Deregister(r *Region) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.byLkey, r.Lkey)
	delete(h.byRkey, r.Rkey)
}

// Connect adds two QPs connected to each other (RC, both in RTS).
func (h *HCA) Connect(a, b *QP) error {
	for _, q := range []*QP{a, b} {
		if q.SQWQECnt == 0 || q.SQWQECnt&(q.SQWQECnt-1) != 0 || uint64(len(q.SQ)) < uint64(q.SQWQECnt)*64 {
			return fmt.Errorf("hcamodel: QP %#x: send queue of %d basic blocks in %d bytes", q.QPN, q.SQWQECnt, len(q.SQ))
		}
		if q.SRQ == nil && (q.RQWQECnt&(q.RQWQECnt-1) != 0 || uint64(len(q.RQ)) < uint64(q.RQWQECnt)*uint64(q.RQStride)) {
			return fmt.Errorf("hcamodel: QP %#x: receive queue of %d WQEs of %d bytes in %d", q.QPN, q.RQWQECnt, q.RQStride, len(q.RQ))
		}
		if q.DBRec == nil || q.SendCQ == nil || q.RecvCQ == nil {
			return fmt.Errorf("hcamodel: QP %#x: doorbell record or CQ missing", q.QPN)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	a.peer, b.peer = b, a
	h.qps = append(h.qps, a, b)
	return nil
}

// ResizeCQ switches cq to a new ring of ncqe entries as the HCA does when
// the kernel resizes a CQ: a RESIZE_CQ CQE at the producer index of the old
// ring, then the CQEs after it in the new ring, from the next index.
func (h *HCA) ResizeCQ(cq *CQ, ring []byte, ncqe uint32) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ncqe == 0 || ncqe&(ncqe-1) != 0 || uint64(len(ring)) < uint64(ncqe)*64 {
		return fmt.Errorf("hcamodel: resize CQ %#x to %d entries in %d bytes", cq.CQN, ncqe, len(ring))
	}
	if err := h.write(cq, cqe{opcode: cqeResizeCQ}); err != nil {
		return err
	}
	cq.Ring, cq.NCQE = ring, ncqe
	return nil
}

// ErrCQOverrun is returned by Run when a CQ had no room for a CQE.
var ErrCQOverrun = errors.New("hcamodel: CQ overrun")

// Run executes every send WQE posted so far on every QP, in posting order
// per QP, and returns how many it executed. A CQ overrun stops it with
// ErrCQOverrun (the overrun CQ reports Overrun). A send that finds no
// receive WQE waits (an RNR retry count of 7 retries forever): Run leaves
// it for a later call.
func (h *HCA) Run() (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	total := 0
	for {
		progress := 0
		for _, q := range h.qps {
			n, err := h.runQP(q)
			progress += n
			if err != nil {
				return total + progress, err
			}
		}
		total += progress
		if progress == 0 {
			return total, nil
		}
	}
}

// Syndromes of the error CQEs the model writes (the PRM's).
const (
	SyndromeLocalLength    = 0x01
	SyndromeLocalQPOp      = 0x02
	SyndromeLocalProt      = 0x04
	SyndromeWRFlush        = 0x05
	SyndromeRemoteInvalReq = 0x12
	SyndromeRemoteAccess   = 0x13
	SyndromeRemoteOp       = 0x14
)

// MLX5 send opcodes (the control segment's opcode byte).
const (
	opNOP          = 0x00
	opSendInval    = 0x01
	opRDMAWrite    = 0x08
	opRDMAWriteImm = 0x09
	opSend         = 0x0a
	opSendImm      = 0x0b
	opRDMARead     = 0x10
	opAtomicCS     = 0x11
	opAtomicFA     = 0x12
	opUMR          = 0x25
)

// CQE opcodes.
const (
	cqeReq         = 0
	cqeRespWRImm   = 1
	cqeRespSend    = 2
	cqeRespSendImm = 3
	cqeRespSendInv = 4
	cqeResizeCQ    = 5
	cqeReqErr      = 13
	cqeRespErr     = 14
)

const (
	ctrlCQUpdate = 0x08 // fm_ce_se: a CQE for this WQE
	inlineBit    = 0x80000000
	invalidLkey  = 0x100 // MLX5_INVALID_LKEY: ends a receive WQE's list
)

// wqe is one decoded send WQE.
type wqe struct {
	counter  uint16
	opcode   uint8
	ds       uint32 // 16-byte units
	signaled bool
	imm      [4]byte // as in the control segment (big endian already)
	segs     []byte  // ds*16 bytes, the control segment included, unwrapped
}

// runQP executes q's posted send WQEs.
func (h *HCA) runQP(q *QP) (int, error) {
	posted := uint16(binary.BigEndian.Uint32(be(atomic.LoadUint32(&q.DBRec[1]))))
	n := 0
	var w wqe
	for q.sqNext != posted {
		if err := h.decode(q, &w); err != nil {
			h.trace("QP %#x WQE %d: %v", q.QPN, q.sqNext, err)
			if e := h.fail(q, &w, SyndromeLocalQPOp, 0); e != nil {
				return n, e
			}
			n++
			continue
		}
		if q.err {
			if err := h.flushSend(q, &w); err != nil {
				return n, err
			}
			n++
			continue
		}
		done, err := h.execute(q, &w)
		if err != nil {
			return n, err
		}
		if !done {
			return n, nil // waits for a receive WQE
		}
		n++
	}
	return n, nil
}

// decode reads the WQE at the send queue's next counter.
func (h *HCA) decode(q *QP, w *wqe) error {
	size := q.SQWQECnt * 64
	start := (uint32(q.sqNext) & (q.SQWQECnt - 1)) * 64
	var ctrl [16]byte
	copy(ctrl[:], q.SQ[start:start+16])
	word0 := binary.BigEndian.Uint32(ctrl[0:])
	word1 := binary.BigEndian.Uint32(ctrl[4:])
	*w = wqe{
		counter:  q.sqNext,
		opcode:   uint8(word0),
		ds:       word1 & 0x3f,
		signaled: ctrl[11]&ctrlCQUpdate != 0,
	}
	copy(w.imm[:], ctrl[12:16])
	if uint16(word0>>8) != q.sqNext {
		w.ds = 1
		return fmt.Errorf("WQE index %d in the control segment, at counter %d", uint16(word0>>8), q.sqNext)
	}
	if word1>>8 != q.QPN {
		w.ds = 1
		return fmt.Errorf("QPN %#x in the control segment", word1>>8)
	}
	if w.ds == 0 || w.ds*16 > size {
		w.ds = 1
		return fmt.Errorf("ds %d", word1&0x3f)
	}
	w.segs = make([]byte, w.ds*16)
	for i := uint32(0); i < w.ds*16; i++ {
		w.segs[i] = q.SQ[(start+i)%size]
	}
	return nil
}

// bbs is the number of basic blocks the WQE takes.
func (w *wqe) bbs() uint16 { return uint16((w.ds*16 + 63) / 64) }

// sge is one decoded data segment, or inline data.
type sge struct {
	addr   uint64
	length uint32
	lkey   uint32
	inline []byte
}

// dataSegs decodes the data and inline segments from byte off of the WQE.
func dataSegs(w *wqe, off uint32) ([]sge, error) {
	var out []sge
	for off < uint32(len(w.segs)) {
		word := binary.BigEndian.Uint32(w.segs[off:])
		if word&inlineBit != 0 {
			n := word &^ inlineBit
			if off+4+n > uint32(len(w.segs)) {
				return nil, fmt.Errorf("inline segment of %d bytes beyond ds", n)
			}
			out = append(out, sge{length: n, inline: w.segs[off+4 : off+4+n]})
			off += (4 + n + 15) &^ 15
			continue
		}
		s := sge{length: word, lkey: binary.BigEndian.Uint32(w.segs[off+4:]), addr: binary.BigEndian.Uint64(w.segs[off+8:])}
		if s.length == 0 {
			s.length = 1 << 31 // the PRM: a byte count of 0 means 2 GiB
		}
		out = append(out, s)
		off += 16
	}
	return out, nil
}

// local returns the bytes of a local segment, checking its key, bounds
// and (for writes) Local Write access.
func (h *HCA) local(s sge, write bool) ([]byte, bool) {
	if s.inline != nil {
		return s.inline, !write
	}
	r := h.byLkey[s.lkey]
	if r == nil || (write && r.Access&LocalWrite == 0) {
		return nil, false
	}
	return span(r, s.addr, uint64(s.length))
}

// remote returns the bytes an rkey names, checking access and bounds.
func (h *HCA) remote(rkey uint32, addr, length uint64, need Access) ([]byte, bool) {
	r := h.byRkey[rkey]
	if r == nil || r.Access&need == 0 {
		return nil, false
	}
	return span(r, addr, length)
}

func span(r *Region, addr, length uint64) ([]byte, bool) {
	if len(r.Mem) == 0 {
		return nil, false
	}
	base := uint64(uintptr(unsafe.Pointer(&r.Mem[0])))
	if addr < base || length > uint64(len(r.Mem)) || addr-base > uint64(len(r.Mem))-length {
		return nil, false
	}
	return r.Mem[addr-base : addr-base+length], true
}

// gather concatenates the local segments' bytes.
func (h *HCA) gather(segs []sge) ([]byte, bool) {
	var out []byte
	for _, s := range segs {
		b, ok := h.local(s, false)
		if !ok {
			return nil, false
		}
		out = append(out, b...)
	}
	return out, true
}

// scatter writes data over the local segments; ok is false for a bad
// segment, short for data beyond them.
func (h *HCA) scatter(segs []sge, data []byte) (ok, short bool) {
	for _, s := range segs {
		if len(data) == 0 {
			return true, false
		}
		// The HCA checks the key and bounds of what it writes, not of the
		// whole entry (a zero byte count, 2 GiB, only matters if the
		// message reaches it).
		part := s
		part.length = uint32(min(uint64(len(data)), uint64(s.length)))
		b, good := h.local(part, true)
		if !good {
			return false, false
		}
		data = data[copy(b, data):]
	}
	return true, len(data) > 0
}

// execute performs one WQE; done is false when it must wait for a
// receive WQE.
func (h *HCA) execute(q *QP, w *wqe) (done bool, err error) {
	p := q.peer
	switch w.opcode {
	case opNOP, opUMR:
		// Local operations: a NOP, or a UMR (LOCAL_INV, BIND_MW) whose
		// memory-key effects the model does not track.
		return true, h.complete(q, w, 0)

	case opSend, opSendImm, opSendInval, opRDMAWriteImm:
		segsOff := uint32(16)
		var raddr, rkey uint64
		if w.opcode == opRDMAWriteImm {
			raddr = binary.BigEndian.Uint64(w.segs[16:])
			rkey = uint64(binary.BigEndian.Uint32(w.segs[24:]))
			segsOff = 32
		}
		segs, err := dataSegs(w, segsOff)
		if err != nil {
			return true, h.fail(q, w, SyndromeLocalQPOp, 0)
		}
		data, ok := h.gather(segs)
		if !ok {
			return true, h.fail(q, w, SyndromeLocalProt, 0)
		}
		if p.err {
			return true, h.fail(q, w, SyndromeRemoteOp, 0)
		}
		if w.opcode == opRDMAWriteImm {
			dst, ok := h.remote(uint32(rkey), raddr, uint64(len(data)), RemoteWrite)
			if !ok && len(data) > 0 {
				return true, h.fail(q, w, SyndromeRemoteAccess, 0)
			}
			if !p.recvReady() {
				return false, nil
			}
			copy(dst, data)
			recv := p.takeRecv()
			if err := h.respond(p, q, recv, cqeRespWRImm, w.imm, uint32(len(data)), nil); err != nil {
				return true, err
			}
			return true, h.complete(q, w, uint32(len(data)))
		}
		if !p.recvReady() {
			return false, nil
		}
		recv := p.takeRecv()
		op := uint8(cqeRespSend)
		switch w.opcode {
		case opSendImm:
			op = cqeRespSendImm
		case opSendInval:
			op = cqeRespSendInv
		}
		if p.ScatterToCQE && len(data) <= 32 {
			if len(data) > recv.capacity() {
				return true, h.recvLengthError(p, q, w, recv)
			}
			if err := h.respond(p, q, recv, op, w.imm, uint32(len(data)), data); err != nil {
				return true, err
			}
			return true, h.complete(q, w, uint32(len(data)))
		}
		ok, short := h.scatter(recv.segs, data)
		switch {
		case !ok:
			if err := h.respondError(p, recv, SyndromeLocalProt); err != nil {
				return true, err
			}
			return true, h.fail(q, w, SyndromeRemoteOp, 0)
		case short:
			return true, h.recvLengthError(p, q, w, recv)
		}
		if err := h.respond(p, q, recv, op, w.imm, uint32(len(data)), nil); err != nil {
			return true, err
		}
		return true, h.complete(q, w, uint32(len(data)))

	case opRDMAWrite:
		raddr := binary.BigEndian.Uint64(w.segs[16:])
		rkey := binary.BigEndian.Uint32(w.segs[24:])
		segs, err := dataSegs(w, 32)
		if err != nil {
			return true, h.fail(q, w, SyndromeLocalQPOp, 0)
		}
		data, ok := h.gather(segs)
		if !ok {
			return true, h.fail(q, w, SyndromeLocalProt, 0)
		}
		if p.err {
			return true, h.fail(q, w, SyndromeRemoteOp, 0)
		}
		dst, ok := h.remote(rkey, raddr, uint64(len(data)), RemoteWrite)
		if !ok && len(data) > 0 {
			return true, h.fail(q, w, SyndromeRemoteAccess, 0)
		}
		copy(dst, data)
		return true, h.complete(q, w, uint32(len(data)))

	case opRDMARead:
		raddr := binary.BigEndian.Uint64(w.segs[16:])
		rkey := binary.BigEndian.Uint32(w.segs[24:])
		segs, err := dataSegs(w, 32)
		if err != nil || hasInline(segs) {
			return true, h.fail(q, w, SyndromeLocalQPOp, 0)
		}
		var total uint64
		for _, s := range segs {
			total += uint64(s.length)
		}
		if p.err {
			return true, h.fail(q, w, SyndromeRemoteOp, 0)
		}
		src, ok := h.remote(rkey, raddr, total, RemoteRead)
		if !ok && total > 0 {
			return true, h.fail(q, w, SyndromeRemoteAccess, 0)
		}
		if ok, _ := h.scatter(segs, src); !ok {
			return true, h.fail(q, w, SyndromeLocalProt, 0)
		}
		return true, h.complete(q, w, uint32(total))

	case opAtomicCS, opAtomicFA:
		raddr := binary.BigEndian.Uint64(w.segs[16:])
		rkey := binary.BigEndian.Uint32(w.segs[24:])
		if w.ds != 4 {
			return true, h.fail(q, w, SyndromeLocalQPOp, 0)
		}
		swapAdd := binary.BigEndian.Uint64(w.segs[32:])
		compare := binary.BigEndian.Uint64(w.segs[40:])
		segs, err := dataSegs(w, 48)
		if err != nil || len(segs) != 1 || segs[0].inline != nil || segs[0].length != 8 {
			return true, h.fail(q, w, SyndromeLocalQPOp, 0)
		}
		res, ok := h.local(segs[0], true)
		if !ok {
			return true, h.fail(q, w, SyndromeLocalProt, 0)
		}
		if p.err {
			return true, h.fail(q, w, SyndromeRemoteOp, 0)
		}
		dst, ok := h.remote(rkey, raddr, 8, RemoteAtomic)
		if !ok || raddr%8 != 0 {
			return true, h.fail(q, w, SyndromeRemoteAccess, 0)
		}
		// The target is a 64-bit word in host byte order and the original
		// value comes back in host order: mlx5_core sets the HCA's
		// atomic_req_8B_endianness_mode to host endianness, and mlx5_ib
		// reports IBV_ATOMIC_HCA only then. The operands in the WQE are big
		// endian.
		old := binary.NativeEndian.Uint64(dst)
		nv := old + swapAdd
		if w.opcode == opAtomicCS {
			nv = old
			if old == compare {
				nv = swapAdd
			}
		}
		binary.NativeEndian.PutUint64(dst, nv)
		binary.NativeEndian.PutUint64(res, old)
		return true, h.complete(q, w, 8)

	default:
		return true, h.fail(q, w, SyndromeLocalQPOp, 0)
	}
}

func hasInline(segs []sge) bool {
	for _, s := range segs {
		if s.inline != nil {
			return true
		}
	}
	return false
}

// recvWQE is a receive WQE taken from an RQ or SRQ.
type recvWQE struct {
	counter uint16 // RQ: the running counter; SRQ: the WQE index
	segs    []sge
}

func (r recvWQE) capacity() int {
	n := 0
	for _, s := range r.segs {
		n += int(s.length)
	}
	return n
}

func (q *QP) recvReady() bool {
	if s := q.SRQ; s != nil {
		counter := uint16(binary.BigEndian.Uint32(be(atomic.LoadUint32(&s.DBRec[0]))))
		return s.consumed != counter
	}
	counter := uint16(binary.BigEndian.Uint32(be(atomic.LoadUint32(&q.DBRec[0]))))
	return q.rqNext != counter
}

// takeRecv consumes the next receive WQE (recvReady must be true).
func (q *QP) takeRecv() recvWQE {
	if s := q.SRQ; s != nil {
		idx := s.next & uint16(s.WQECnt-1)
		wq := s.Buf[uint32(idx)*s.Stride : (uint32(idx)+1)*s.Stride]
		s.next = binary.BigEndian.Uint16(wq[2:])
		s.consumed++
		return recvWQE{counter: idx, segs: recvSegs(wq[16:])}
	}
	idx := uint32(q.rqNext) & (q.RQWQECnt - 1)
	r := recvWQE{counter: q.rqNext, segs: recvSegs(q.RQ[idx*q.RQStride : (idx+1)*q.RQStride])}
	q.rqNext++
	return r
}

func recvSegs(b []byte) []sge {
	var out []sge
	for off := 0; off+16 <= len(b); off += 16 {
		s := sge{length: binary.BigEndian.Uint32(b[off:]), lkey: binary.BigEndian.Uint32(b[off+4:]), addr: binary.BigEndian.Uint64(b[off+8:])}
		if s.lkey == invalidLkey {
			break
		}
		if s.length == 0 {
			s.length = 1 << 31
		}
		out = append(out, s)
	}
	return out
}

// cqe is what the model puts in a CQE.
type cqe struct {
	opcode     uint8
	flags      uint8 // op_own bits 1..3
	sendOp     uint8
	qpn        uint32
	wqeCounter uint16
	byteCnt    uint32
	immInval   [4]byte
	flagsRQPN  uint32
	srqnUIDX   uint32
	syndrome   uint8
	vendorErr  uint8
	payload    []byte
}

// write puts a CQE at the CQ's producer index, owner bit of this pass,
// checking the consumer index for room first.
func (h *HCA) write(cq *CQ, c cqe) error {
	ci := binary.BigEndian.Uint32(be(atomic.LoadUint32(&cq.DBRec[0]))) & 0xffffff
	if (cq.prod-ci)&0xffffff >= cq.NCQE {
		cq.overrun = true
		return fmt.Errorf("%w: CQ %#x has %d CQEs unpolled of %d", ErrCQOverrun, cq.CQN, (cq.prod-ci)&0xffffff, cq.NCQE)
	}
	off := (cq.prod & (cq.NCQE - 1)) * 64
	e := cq.Ring[off : off+64 : off+64]
	// Everything but the last word first; the word with op_own last, in
	// one store, so the poller sees a whole entry once it owns it.
	clear(e[:60])
	if c.payload != nil {
		// Scatter to CQE: the data takes the first 32 bytes, fields
		// there (flags_rqpn, slid, ml_path) included.
		copy(e[:32], c.payload)
	} else {
		binary.BigEndian.PutUint32(e[24:], c.flagsRQPN)
	}
	copy(e[36:40], c.immInval[:])
	binary.BigEndian.PutUint32(e[32:], c.srqnUIDX)
	binary.BigEndian.PutUint32(e[44:], c.byteCnt)
	binary.BigEndian.PutUint32(e[56:], uint32(c.sendOp)<<24|c.qpn)
	if c.opcode == cqeReqErr || c.opcode == cqeRespErr {
		e[54] = c.vendorErr
		e[55] = c.syndrome
	}
	var tail [4]byte
	binary.BigEndian.PutUint16(tail[0:], c.wqeCounter)
	tail[3] = c.opcode<<4 | c.flags&0xe | uint8((cq.prod/cq.NCQE)&1)
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&e[60])), binary.NativeEndian.Uint32(tail[:]))
	cq.prod++
	return nil
}

// complete retires a successful WQE, with a CQE if it is signaled.
func (h *HCA) complete(q *QP, w *wqe, byteCnt uint32) error {
	q.sqNext += w.bbs()
	if !w.signaled {
		return nil
	}
	return h.write(q.SendCQ, cqe{opcode: cqeReq, sendOp: w.opcode, qpn: q.QPN, wqeCounter: w.counter, byteCnt: byteCnt, srqnUIDX: q.UIDX})
}

// fail completes a WQE in error (a CQE whether or not signaled) and puts
// the QP in the error state, flushing its receive queue.
func (h *HCA) fail(q *QP, w *wqe, syndrome, vendorErr uint8) error {
	q.sqNext += w.bbs()
	h.trace("QP %#x WQE %d opcode %#x: syndrome %#x", q.QPN, w.counter, w.opcode, syndrome)
	if err := h.write(q.SendCQ, cqe{opcode: cqeReqErr, sendOp: w.opcode, qpn: q.QPN, wqeCounter: w.counter,
		srqnUIDX: q.UIDX, syndrome: syndrome, vendorErr: vendorErr}); err != nil {
		return err
	}
	return h.toError(q)
}

// toError moves q to the error state: its posted receive WQEs complete
// with flush errors (an SRQ's stay for the other QPs).
func (h *HCA) toError(q *QP) error {
	if q.err {
		return nil
	}
	q.err = true
	if q.SRQ != nil {
		return nil
	}
	for q.recvReady() {
		r := q.takeRecv()
		if err := h.write(q.RecvCQ, cqe{opcode: cqeRespErr, qpn: q.QPN, wqeCounter: r.counter, srqnUIDX: q.UIDX,
			syndrome: SyndromeWRFlush}); err != nil {
			return err
		}
	}
	return nil
}

// flushSend completes a WQE posted to a QP in error.
func (h *HCA) flushSend(q *QP, w *wqe) error {
	q.sqNext += w.bbs()
	return h.write(q.SendCQ, cqe{opcode: cqeReqErr, sendOp: w.opcode, qpn: q.QPN, wqeCounter: w.counter,
		srqnUIDX: q.UIDX, syndrome: SyndromeWRFlush})
}

// respond writes a responder's completion.
func (h *HCA) respond(p, from *QP, r recvWQE, op uint8, imm [4]byte, n uint32, inline []byte) error {
	c := cqe{opcode: op, qpn: p.QPN, wqeCounter: r.counter, byteCnt: n, immInval: imm, flagsRQPN: from.QPN, srqnUIDX: p.UIDX}
	if inline != nil {
		c.flags = 0x4 // MLX5_INLINE_SCATTER_32
		c.payload = inline
		h.scattered++
	}
	return h.write(p.RecvCQ, c)
}

// respondError writes a responder's error completion and moves it to the
// error state.
func (h *HCA) respondError(p *QP, r recvWQE, syndrome uint8) error {
	if err := h.write(p.RecvCQ, cqe{opcode: cqeRespErr, qpn: p.QPN, wqeCounter: r.counter, srqnUIDX: p.UIDX, syndrome: syndrome}); err != nil {
		return err
	}
	return h.toError(p)
}

// recvLengthError: the message does not fit the receive WQE; the
// responder reports a local length error, the requester an invalid
// request NAK.
func (h *HCA) recvLengthError(p, q *QP, w *wqe, r recvWQE) error {
	if err := h.respondError(p, r, SyndromeLocalLength); err != nil {
		return err
	}
	return h.fail(q, w, SyndromeRemoteInvalReq, 0)
}

func (h *HCA) trace(format string, args ...any) {
	if h.Trace != nil {
		h.Trace(format, args...)
	}
}

// be returns the in-memory bytes of a word loaded from memory.
func be(v uint32) []byte {
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], v)
	return b[:]
}
