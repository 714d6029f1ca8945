package mlx5

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"github.com/goverbs/goverbs/internal/provider"
)

// Poll implements provider.Poller, as libmlx5's poll_cq: take the CQEs
// the hardware handed over (owner bit matching the pass over the ring),
// turn each into a work completion, then publish the consumer index in
// the doorbell record once. No allocation and no system call.
//
// A CQE that cannot be delivered (see CQEError) ends the batch: the
// completions before it are in wcs[:n], it is consumed, and the error is
// returned with n.
func (cq *CQ) Poll(wcs []provider.WC) (int, error) {
	me := cq.mu.whoFast() // see spinLock
	cq.mu.lockAs(me)
	if cq.closed {
		cq.mu.unlockAs(me)
		return 0, provider.ErrClosed
	}
	n := 0
	var err error
	for n < len(wcs) {
		cons := cq.cons
		e := (*[cqeSize]byte)(unsafe.Add(cq.ring, uintptr(cons&(cq.ncqe-1))*cqeSize))
		// The trailer (wqe_counter, signature, op_own) is read with one
		// ordered load, and the rest of the entry only after it and the
		// barrier libmlx5 puts there: the hardware writes op_own last,
		// and the entry is ours only once its owner bit matches this pass
		// over the ring.
		trailer := loadBE32(&e[cqeOffTrailer])
		opOwn := uint8(trailer)
		if opOwn>>4 == cqeInvalid || uint32(opOwn&cqeOwnerMask) != passParity(cons, cq.ncqe) {
			break
		}
		cq.cons = cons + 1
		fromDeviceBarrier()
		// Requester completions, the common case, skip parse's
		// dispatch; those of the previous completion's send queue
		// without scattered data, the commonest, are delivered here
		// without a call (anything else, or wrong, goes to parseReq).
		if opOwn>>4 == cqeReq {
			sop := binary.BigEndian.Uint32(e[cqeOffSopDropQPN:])
			if l := cq.last; l != nil && l.qpn == sop&maxQPN && l.sq != nil && opOwn&(cqeInlineScatter32|cqeInlineScatter64) == 0 {
				if s := l.sq.outstanding(uint16(trailer >> 16)); s != nil {
					w := &wcs[n]
					*w = provider.WC{ID: s.wrID, QPNum: sop & maxQPN}
					w.Opcode, w.Flags, w.ByteLen = reqCompletion(sop>>24, e, s.opcode)
					l.sq.retire(s)
					n++
					continue
				}
			}
			err = cq.parseReq(e, uint16(trailer>>16), opOwn, &wcs[n])
		} else {
			err = cq.parse(e, uint16(trailer>>16), opOwn, &wcs[n])
		}
		if err != nil {
			break
		}
		n++
	}
	// A release store (see storeRelease): the hardware only reads the
	// index, after the entries before it were read.
	storeRelease(&cq.dbrec[cqDBRecSetCI], be32(cq.cons&cqConsumerIdxMask))
	cq.mu.unlockAs(me)
	return n, err
}

// parse turns one CQE into a work completion (mlx5_parse_cqe). Fields a
// completion does not carry are zero.
func (cq *CQ) parse(e *[cqeSize]byte, wqeCounter uint16, opOwn uint8, w *provider.WC) error {
	sop := binary.BigEndian.Uint32(e[cqeOffSopDropQPN:])
	qpn := sop & maxQPN
	opcode := opOwn >> 4
	switch opcode {
	case cqeReq:
		return cq.parseReq(e, wqeCounter, opOwn, w)

	case cqeRespWRImm, cqeRespSend, cqeRespSendImm, cqeRespSendInv:
		r, l := cq.recvQueue(qpn, e)
		if r == nil {
			return cq.bad(e, opOwn, wqeCounter, "no receive queue of this QPN or SRQ is attached to the CQ")
		}
		byteLen := binary.BigEndian.Uint32(e[cqeOffByteCnt:])
		var inline []byte
		if opOwn&(cqeInlineScatter32|cqeInlineScatter64) != 0 {
			if opOwn&cqeInlineScatter64 != 0 {
				return cq.bad(e, opOwn, wqeCounter, "64-byte inline scatter in a 64-byte CQE")
			}
			if byteLen > 32 {
				return cq.bad(e, opOwn, wqeCounter, "inline scatter of more than 32 bytes")
			}
			inline = e[:byteLen]
		}
		wrID, status, ok := r.completeRecv(wqeCounter, inline)
		if !ok {
			return cq.bad(e, opOwn, wqeCounter, "no receive WQE with this counter is outstanding")
		}
		if status != provider.WCSuccess {
			// libmlx5 returns as soon as the scatter fails: only the
			// fields set before it are meaningful.
			*w = provider.WC{ID: wrID, Status: status, QPNum: qpn, ByteLen: byteLen}
			return nil
		}
		flagsRQPN := binary.BigEndian.Uint32(e[cqeOffFlagsRQPN:])
		immInvalPkey := binary.BigEndian.Uint32(e[cqeOffImmInvalPkey:])
		*w = provider.WC{
			ID:           wrID,
			Opcode:       provider.WCRecv,
			ByteLen:      byteLen,
			QPNum:        qpn,
			SrcQP:        flagsRQPN & maxQPN,
			PkeyIndex:    uint16(immInvalPkey),
			SLID:         binary.BigEndian.Uint16(e[cqeOffSLID:]),
			SL:           uint8(flagsRQPN>>24) & 0xf,
			DLIDPathBits: e[cqeOffMLPath] & 0x7f,
		}
		switch opcode {
		case cqeRespWRImm:
			w.Opcode = provider.WCRecvRDMAWithImm
			w.Flags = provider.WCWithImm
			w.Imm = immInvalPkey
		case cqeRespSendImm:
			w.Flags = provider.WCWithImm
			w.Imm = immInvalPkey
		case cqeRespSendInv:
			w.Flags = provider.WCWithInvalidate
			w.Imm = immInvalPkey
		}
		if (flagsRQPN>>28)&3 != 0 {
			w.Flags |= provider.WCWithGRH
		}
		if l != nil && l.rxSum != nil && l.rxSum.rxCSumValid() {
			w.Flags |= csumOK(e)
		}
		return nil

	case cqeReqErr, cqeRespErr:
		status := syndromeStatus(e[cqeOffSyndrome])
		var wrID uint64
		if opcode == cqeReqErr {
			l := cq.lookup(qpn)
			if l == nil || l.send == nil {
				return cq.bad(e, opOwn, wqeCounter, "no send queue of this QPN is attached to the CQ")
			}
			var ok bool
			if wrID, _, _, ok = l.send.completeSend(wqeCounter, nil); !ok {
				return cq.bad(e, opOwn, wqeCounter, "no send WQE with this counter is outstanding")
			}
		} else {
			r, _ := cq.recvQueue(qpn, e)
			if r == nil {
				return cq.bad(e, opOwn, wqeCounter, "no receive queue of this QPN or SRQ is attached to the CQ")
			}
			var ok bool
			if wrID, _, ok = r.completeRecv(wqeCounter, nil); !ok {
				return cq.bad(e, opOwn, wqeCounter, "no receive WQE with this counter is outstanding")
			}
		}
		*w = provider.WC{ID: wrID, Status: status, VendorErr: uint32(e[cqeOffVendorErr]), QPNum: qpn}
		return nil

	default:
		// RESIZE_CQ only appears in a ring being replaced (Resize consumes
		// it); NO_PACKET and SIG_ERR belong to tag matching and signature
		// offloads, which this provider never enables; the rest are not
		// defined.
		return cq.bad(e, opOwn, wqeCounter, "CQE opcode the provider does not expect")
	}
}

// parseReq turns a requester CQE into a work completion.
func (cq *CQ) parseReq(e *[cqeSize]byte, wqeCounter uint16, opOwn uint8, w *provider.WC) error {
	sop := binary.BigEndian.Uint32(e[cqeOffSopDropQPN:])
	qpn := sop & maxQPN
	l := cq.lookup(qpn)
	if l == nil || l.send == nil {
		return cq.bad(e, opOwn, wqeCounter, "no send queue of this QPN is attached to the CQ")
	}
	var inline []byte
	if opOwn&(cqeInlineScatter32|cqeInlineScatter64) != 0 {
		if opOwn&cqeInlineScatter64 != 0 {
			return cq.bad(e, opOwn, wqeCounter, "64-byte inline scatter in a 64-byte CQE")
		}
		n := reqScatterLen(sop>>24, binary.BigEndian.Uint32(e[cqeOffByteCnt:]))
		if n > 32 {
			return cq.bad(e, opOwn, wqeCounter, "inline scatter of more than 32 bytes")
		}
		inline = e[:n]
	}
	wrID, wrOpcode, status, ok := l.send.completeSend(wqeCounter, inline)
	if !ok {
		return cq.bad(e, opOwn, wqeCounter, "no send WQE with this counter is outstanding")
	}
	// Zeroed, then the fields set in place: a literal of all of them is
	// built on the stack in narrow stores and copied in 16-byte loads
	// that wait for those stores (8 ns more per post and poll in
	// BenchmarkPostPollRDMAWrite).
	*w = provider.WC{ID: wrID, Status: status, QPNum: qpn}
	w.Opcode, w.Flags, w.ByteLen = reqCompletion(sop>>24, e, wrOpcode)
	return nil
}

// reqCompletion is what a requester CQE of send opcode op says of its
// work request: the completion's opcode, flags and byte count; recorded
// is the opcode the queue recorded at post.
func reqCompletion(op uint32, e *[cqeSize]byte, recorded provider.WCOpcode) (provider.WCOpcode, provider.WCFlags, uint32) {
	switch op {
	case reqOpRDMAWriteImm:
		return provider.WCRDMAWrite, provider.WCWithImm, 0
	case reqOpRDMAWrite:
		return provider.WCRDMAWrite, 0, 0
	case reqOpSendImm:
		return provider.WCSend, provider.WCWithImm, 0
	case reqOpSend, reqOpSendInval:
		return provider.WCSend, 0, 0
	case reqOpRDMARead:
		return provider.WCRDMARead, 0, binary.BigEndian.Uint32(e[cqeOffByteCnt:])
	case reqOpAtomicCS:
		return provider.WCCompSwap, 0, 8
	case reqOpAtomicFA:
		return provider.WCFetchAdd, 0, 8
	case reqOpTSO:
		return provider.WCTSO, 0, 0
	}
	// UMR, SET_PSV, NOP and MMO say nothing more; for the others libmlx5
	// leaves the opcode as it was: the WQE was retired, so the completion
	// is delivered with what the queue recorded.
	return recorded, 0, 0
}

// reqScatterLen is the payload length of a requester CQE's inline scatter
// (libmlx5: byte_cnt for RDMA READ, 8 for atomics, nothing else).
func reqScatterLen(sendOpcode, byteCnt uint32) uint32 {
	switch sendOpcode {
	case reqOpRDMARead:
		return byteCnt
	case reqOpAtomicCS, reqOpAtomicFA:
		return 8
	}
	return 0
}

// lookup finds the QP a CQE names, trying the previous completion's QP
// first as libmlx5 does.
func (cq *CQ) lookup(qpn uint32) *cqLink {
	if l := cq.last; l != nil && l.qpn == qpn {
		return l
	}
	l := cq.qps[qpn]
	if l != nil {
		cq.last = l
	}
	return l
}

// recvQueue finds the receive queue of a responder CQE: the QP's (its RQ,
// or its SRQ), else an XRC SRQ by the CQE's srqn_uidx. l is the QP's
// entry, nil for an XRC SRQ.
func (cq *CQ) recvQueue(qpn uint32, e *[cqeSize]byte) (recvCompleter, *cqLink) {
	if l := cq.lookup(qpn); l != nil && l.recv != nil {
		return l.recv, l
	}
	if cq.srqs == nil {
		return nil, nil
	}
	return cq.srqs[binary.BigEndian.Uint32(e[cqeOffSRQNUIDX:])&maxQPN], nil
}

// csumOK is libmlx5's get_csum_ok: the HCA validated the L3 and L4
// checksums of an IPv4 packet.
func csumOK(e *[cqeSize]byte) provider.WCFlags {
	if e[cqeOffHdsIPExt]&(cqeL3OK|cqeL4OK) == cqeL3OK|cqeL4OK && (e[cqeOffL4HdrTypeEtc]>>2)&3 == cqeL3HdrTypeIPv4 {
		return provider.WCIPCSumOK
	}
	return 0
}

//go:noinline
func (cq *CQ) bad(e *[cqeSize]byte, opOwn uint8, wqeCounter uint16, reason string) error {
	return &CQEError{
		CQN:        cq.cqn,
		Index:      cq.cons - 1,
		Opcode:     opOwn >> 4,
		QPN:        binary.BigEndian.Uint32(e[cqeOffSopDropQPN:]) & maxQPN,
		WQECounter: wqeCounter,
		Reason:     reason,
	}
}

// loadBE32 reads the big-endian word at p (4-byte aligned) with an
// ordered load.
func loadBE32(p *byte) uint32 {
	v := atomic.LoadUint32((*uint32)(unsafe.Pointer(p)))
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], v)
	return binary.BigEndian.Uint32(b[:])
}

// be32 returns the value whose in-memory bytes are v big endian.
func be32(v uint32) uint32 {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return binary.NativeEndian.Uint32(b[:])
}
