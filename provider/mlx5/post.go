package mlx5

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
)

// The post paths write WQEs exactly as libmlx5's mlx5_post_send,
// mlx5_post_recv and mlx5_post_srq_recv do, byte for byte, including the
// bytes they leave alone. Unlike libmlx5, a send list is published whole
// or not at all: a bad work request anywhere posts none of the list.

// mlx5Opcode maps the verbs opcodes this provider posts to WQE opcodes;
// 0xff: not supported.
var mlx5Opcode = [...]uint8{
	provider.WRRDMAWrite:         abi.MLX5OpcodeRDMAWrite,
	provider.WRRDMAWriteWithImm:  abi.MLX5OpcodeRDMAWriteImm,
	provider.WRSend:              abi.MLX5OpcodeSend,
	provider.WRSendWithImm:       abi.MLX5OpcodeSendImm,
	provider.WRRDMARead:          abi.MLX5OpcodeRDMARead,
	provider.WRAtomicCmpAndSwp:   abi.MLX5OpcodeAtomicCS,
	provider.WRAtomicFetchAndAdd: abi.MLX5OpcodeAtomicFA,
	provider.WRLocalInv:          abi.MLX5OpcodeUMR,
	provider.WRBindMW:            0xff,
	provider.WRSendWithInv:       abi.MLX5OpcodeSendInval,
}

// opcodeAllowed reports whether a QP type posts an opcode.
func opcodeAllowed(t provider.QPType, op provider.WROpcode) bool {
	if int(op) >= len(mlx5Opcode) || mlx5Opcode[op] == 0xff {
		return false
	}
	switch t {
	case abi.QPTypeRC, abi.QPTypeXRCIni:
		return true
	case abi.QPTypeUC:
		switch op {
		case provider.WRSend, provider.WRSendWithImm, provider.WRSendWithInv,
			provider.WRRDMAWrite, provider.WRRDMAWriteWithImm, provider.WRLocalInv:
			return true
		}
	case abi.QPTypeUD:
		return op == provider.WRSend || op == provider.WRSendWithImm
	case abi.QPTypeRawPacket:
		return op == provider.WRSend
	}
	return false
}

const noWCOpcode = provider.WCOpcode(0xffffffff)

// Ethernet segment checksum offload bits (MLX5_ETH_WQE_L3_CSUM, L4).
const (
	ethCsFlagsOff = int(unsafe.Offsetof(abi.MLX5WQEEthSeg{}.CsFlags))
	ethL3Csum     = 1 << 6
	ethL4Csum     = 1 << 7
)

// PostSend implements provider.Sender.
func (q *QP) PostSend(wrs []provider.SendWR) error { return q.sq.post(wrs) }

// PostRecv implements provider.Receiver.
func (q *QP) PostRecv(wrs []provider.RecvWR) error {
	if q.srq != nil {
		return &provider.PostError{Index: 0, Err: fmt.Errorf("%w: the QP receives through its SRQ", provider.ErrBadWR)}
	}
	return q.rq.post(wrs)
}

// post writes and rings a list of work requests under sq.mu, as one
// function with the doorbell: the list's usual path makes no call but
// those that write WQEs and the doorbell's (post and the ring were three
// functions, each call a frame and spills).
func (sq *sendQueue) post(wrs []provider.SendWR) error {
	if len(wrs) == 0 {
		return nil
	}
	// Unlocked by hand on each way out rather than deferred: a deferred
	// Unlock is a call, this the inlined store. me, the goroutine, is
	// what the locks' bias compares (see spinLock).
	me := sq.mu.whoFast()
	sq.mu.lockAs(me)
	// The context's Close sets closed under sq.mu before it unmaps the
	// UAR (see lifetime): held to the end, the mutex keeps the register
	// mapped through the doorbell.
	//
	// The list is written into the ring's free blocks past curPost, which
	// the HCA reads only once the doorbell record says so, each work
	// request checked before its WQE: runs of plain WQEs (most lists are
	// nothing else) by writePlain, which needs no check, the common
	// others by writeQuick, which checks as it writes, the rest by check
	// and encode. Nothing is published until the whole list is written: a
	// bad work request anywhere takes back what the list moved (curPost
	// and the owed fence; the slots past curPost are free, read by no
	// completion) and posts none of it. A list longer than the room is
	// refused before anything is written.
	free := sq.maxPost - (sq.head - atomic.LoadUint32(&sq.tail))
	if sq.closed || sq.start == nil || sq.bf == nil || uint32(len(wrs)) > free {
		err := sq.refuse(wrs, free)
		sq.mu.unlockAs(me)
		return err
	}
	curPost, fmCache := sq.curPost, sq.fmCache
	n, ctrl, size, inl := 0, unsafe.Pointer(nil), 0, false
	if sq.plain(&wrs[0]) {
		n, ctrl, size = sq.writePlain(wrs, 0)
	} else if len(wrs) == 1 {
		// One work request that writeQuick takes (an inline or UD
		// send, posted alone for its latency) skips the loop below.
		var ok bool
		if ctrl, size, inl, ok = sq.writeQuick(&wrs[0], 0); ok {
			n = 1
		}
	}
	for n < len(wrs) {
		wr := &wrs[n]
		c, sz, wrInl, ok := sq.writeQuick(wr, uint32(n))
		if !ok {
			if !sq.fast(wr) {
				if err := sq.check(wr); err != nil {
					sq.curPost, sq.fmCache = curPost, fmCache
					sq.mu.unlockAs(me)
					return &provider.PostError{Index: n, Err: err}
				}
			}
			c, sz, wrInl = sq.encode(wr, uint32(n))
		}
		ctrl, size = c, sz
		inl = inl || wrInl
		n++
		if n < len(wrs) && sq.plain(&wrs[n]) {
			k, c, sz := sq.writePlain(wrs[n:], uint32(n))
			ctrl, size = c, sz
			n += k
		}
	}
	sq.head += uint32(len(wrs))
	// Published before the doorbell: a CQE for these WQEs can only follow
	// it, and the CQ reads their slots after it loads posted. (The CQE
	// itself, in memory the HCA writes, is no edge the Go memory model or
	// the race detector knows.)
	storeRelease(&sq.posted, sq.curPost)

	// The doorbell (libmlx5's post_send_db): the doorbell record, then the
	// last WQE's first 8 bytes to the BlueFlame register or, for one small
	// WQE (with inline data, or any with BlueFlame preferred, libmlx5's
	// default), the whole WQE.
	bf := sq.bf
	if bf.needLock {
		bf.mu.Lock()
	}
	reg := unsafe.Add(sq.reg, bf.offset)
	if len(wrs) == 1 && (inl || sq.preferBF) && size > 1 && size <= sq.bfMaxDS {
		if size <= wqeBB/16 { // one block
			ringBlueFlame64(sq.dbrec, sq.curPost&0xffff, reg, ctrl)
		} else {
			ringBlueFlame(sq.dbrec, sq.curPost&0xffff, reg, ctrl, int(uint(size*16+wqeBB-1)/wqeBB), sq.start, sq.end)
		}
	} else {
		ringDoorbell(sq.dbrec, sq.curPost&0xffff, reg, ctrl)
	}
	if bf.bufSize != 0 {
		bf.offset ^= bf.bufSize
	}
	if bf.needLock {
		bf.mu.Unlock()
	}
	sq.mu.unlockAs(me)
	return nil
}

// refuse is the answer to a list post cannot take, which writes nothing:
// the context closed, no send queue, or a list longer than the queue's
// free room, free (then the first bad work request of those that fit,
// else the first that does not fit).
func (sq *sendQueue) refuse(wrs []provider.SendWR, free uint32) error {
	if sq.closed {
		return &provider.PostError{Index: 0, Err: provider.ErrClosed}
	}
	if sq.start == nil || sq.bf == nil {
		return &provider.PostError{Index: 0, Err: fmt.Errorf("%w: the QP has no send queue", provider.ErrQueueFull)}
	}
	for i := range wrs[:free] {
		if wr := &wrs[i]; !sq.fast(wr) {
			if err := sq.check(wr); err != nil {
				return &provider.PostError{Index: i, Err: err}
			}
		}
	}
	return &provider.PostError{Index: int(free), Err: provider.ErrQueueFull}
}

// fast reports whether a work request that is not plain needs no check:
// on a connected QP, without inline data. fastOps holds only opcodes that
// need no more checking.
func (sq *sendQueue) fast(wr *provider.SendWR) bool {
	return opIn(sq.fastOps, wr.Opcode) && len(wr.SGL) <= sq.maxGS && wr.Flags&provider.SendInline == 0
}

// check refuses what the WQE could not hold or the QP type cannot send.
func (sq *sendQueue) check(wr *provider.SendWR) error {
	if wr.Opcode >= 32 || sq.ops&(1<<wr.Opcode) == 0 {
		return fmt.Errorf("%w: opcode %v on a QP of type %d", provider.ErrBadWR, wr.Opcode, sq.typ)
	}
	if len(wr.SGL) > sq.maxGS {
		return fmt.Errorf("%w: %d SGEs, the queue takes %d", provider.ErrTooManySGE, len(wr.SGL), sq.maxGS)
	}
	atomicOp := wr.Opcode == provider.WRAtomicCmpAndSwp || wr.Opcode == provider.WRAtomicFetchAndAdd
	if atomicOp && !sq.atomics {
		return fmt.Errorf("%w: the device does not do atomics", provider.ErrBadWR)
	}
	if (atomicOp || wr.Opcode == provider.WRRDMARead) && wr.Flags&provider.SendInline != 0 {
		// Their SGEs are where the response lands: there is nothing to
		// send inline (libmlx5 would copy the buffer into the WQE).
		return fmt.Errorf("%w: Flags has SendInline on %v, whose SGEs receive data", provider.ErrBadWR, wr.Opcode)
	}
	first, off := 0, uint32(0)
	switch sq.typ {
	case abi.QPTypeUD:
		if wr.AH == nil {
			return fmt.Errorf("%w: a UD send needs an AH", provider.ErrBadWR)
		}
		ah, ok := wr.AH.AH.(*AH)
		if !ok || ah == nil {
			return fmt.Errorf("%w: the AH is not an mlx5 AH", provider.ErrBadWR)
		}
		if ah.destroyed.Load() {
			return fmt.Errorf("%w: the AH was destroyed", provider.ErrBadWR)
		}
		if ah.ctx == nil || &ah.ctx.life != sq.life {
			return fmt.Errorf("%w: the AH belongs to another context", provider.ErrBadWR)
		}
	case abi.QPTypeRawPacket:
		var err error
		if first, off, err = sq.ethHeaderSplit(wr); err != nil {
			return err
		}
	}
	if wr.Flags&provider.SendInline != 0 && len(wr.SGL) > 0 {
		total := int64(0)
		for i := first; i < len(wr.SGL); i++ {
			total += int64(wr.SGL[i].Length) - int64(off)
			off = 0
		}
		if total > int64(sq.maxInline) {
			return fmt.Errorf("%w: %d bytes inline, the queue takes %d", provider.ErrInlineTooLarge, total, sq.maxInline)
		}
	}
	return nil
}

// ethHeaderSplit finds where a raw packet's data continues after the
// Ethernet headers the WQE carries inline (libmlx5's
// copy_eth_inline_headers): the SGE and the offset in it.
func (sq *sendQueue) ethHeaderSplit(wr *provider.SendWR) (int, uint32, error) {
	if len(wr.SGL) < 1 {
		return 0, 0, fmt.Errorf("%w: a raw packet needs at least one SGE", provider.ErrBadWR)
	}
	hdr := uint32(sq.ethInline)
	length, copied, j := wr.SGL[0].Length, uint32(0), 0
	if length >= abi.MLX5EthL2InlineHeaderSize {
		copied = hdr
	} else {
		left := hdr
		for j = 0; j < len(wr.SGL) && left > 0; j++ {
			length = wr.SGL[j].Length
			copied = min(length, left)
			left -= copied
		}
		if left > 0 {
			return 0, 0, fmt.Errorf("%w: the packet has fewer than the %d bytes of Ethernet headers the device wants inline", provider.ErrBadWR, hdr)
		}
		if j > 0 {
			j--
		}
	}
	if length == copied {
		j++
		copied = 0
	}
	return j, copied, nil
}

// plainOpcodes are the opcodes whose WQE on a connected QP (RC, UC) can be
// plain: a control segment, a remote address segment for the RDMA ones,
// data segments.
const plainOpcodes = 1<<provider.WRRDMAWrite | 1<<provider.WRRDMAWriteWithImm | 1<<provider.WRSend |
	1<<provider.WRSendWithImm | 1<<provider.WRSendWithInv | 1<<provider.WRRDMARead

// writePlain writes the WQEs of the work requests at the start of wrs
// (nreq the first one's position in the list; the caller found it plain)
// that are plain: an opcode
// of sq.plainOps, at most maxGS SGEs, no inline data. They need no check
// (sq.plainOps holds only opcodes the QP posts) and come out as encode
// writes them, byte for byte. It stops at the first that is not, and
// returns how many it wrote and the last one's control segment and size
// in 16-byte units.
//
// A loop of its own without calls, which the compiler keeps in
// registers: called per work request, encode costs a frame, spills and
// its dispatch on the QP type and opcode (BenchmarkVsLibmlx5/list16
// takes about a third less CPU time this way). The queue's fields
// that do not change are read where used: held in locals, they outnumber
// the registers and are spilled.
func (sq *sendQueue) writePlain(wrs []provider.SendWR, nreq uint32) (int, unsafe.Pointer, int) {
	cur, head, owed := sq.curPost, sq.head+nreq, sq.fmCache
	var ctrl unsafe.Pointer
	size, n := 0, 0
	for { // the caller found the first plain
		wr := &wrs[n]
		idx := cur & (sq.wqeCnt - 1)
		ctrl = unsafe.Add(sq.start, uintptr(idx)<<abi.MLX5SendWQEShift)
		storeBE64(unsafe.Add(ctrl, 8), uint64(fmCeSe(wr.Flags, owed, sq.sigBits))<<32|uint64(wrImm(wr)))
		owed = 0
		dp := unsafe.Add(ctrl, ctrlSegSize)
		size = ctrlSegSize / 16
		if wr.Opcode == provider.WRRDMAWrite || wr.Opcode == provider.WRRDMAWriteWithImm || wr.Opcode == provider.WRRDMARead {
			setRaddrSeg(dp, wr.RemoteAddr, wr.Rkey)
			dp = unsafe.Add(dp, raddrSegSize)
			size += raddrSegSize / 16
		}
		for i := range wr.SGL {
			if dp == sq.end {
				dp = sq.start
			}
			sge := &wr.SGL[i]
			if sge.Length == 0 {
				continue
			}
			setDataSeg(dp, sge.Length, sge.Lkey, sge.Addr)
			dp = unsafe.Add(dp, dataSegSize)
			size++
		}
		storeBE64(ctrl, ctrlHead(cur, wr.Opcode, size, sq.qpn))
		blocks := uint32(size*16+wqeBB-1) / wqeBB
		sq.record(idx, blocks, wr.ID, head+uint32(n), cur, noWCOpcode)
		cur += blocks
		if n++; n == len(wrs) || !sq.plain(&wrs[n]) {
			break
		}
	}
	sq.curPost, sq.fmCache = cur, owed
	return n, ctrl, size
}

// quickOpcodes are the opcodes whose WQE writeQuick writes on a
// connected QP (RC, UC) when it carries inline data; on a UD QP it writes
// those of SEND and SEND_WITH_IMM, inline or not.
const quickOpcodes = 1<<provider.WRRDMAWrite | 1<<provider.WRRDMAWriteWithImm | 1<<provider.WRSend |
	1<<provider.WRSendWithImm | 1<<provider.WRSendWithInv

// writeQuick writes the WQE of a work request that is not plain but
// common, with the checks check would make of it: on a connected QP an
// inline SEND or RDMA WRITE, on a UD QP a SEND. It reports false, having
// written nothing, for any other work request and for one check would
// refuse, which the caller then gives to check and encode. What it writes
// is what encode writes, byte for byte (TestWriteQuickIsEncode); it saves
// check's separate pass and encode's dispatch on the QP type and opcode.
func (sq *sendQueue) writeQuick(wr *provider.SendWR, nreq uint32) (unsafe.Pointer, int, bool, bool) {
	if !opIn(sq.quickOps, wr.Opcode) || len(wr.SGL) > sq.maxGS {
		return nil, 0, false, false
	}
	inline := wr.Flags&provider.SendInline != 0 && len(wr.SGL) > 0
	if inline {
		total := uint64(0)
		for i := range wr.SGL {
			total += uint64(wr.SGL[i].Length)
		}
		if total > uint64(sq.maxInline) {
			return nil, 0, false, false
		}
	}
	var ah *AH
	if sq.typ == abi.QPTypeUD {
		if wr.AH == nil {
			return nil, 0, false, false
		}
		a, ok := wr.AH.AH.(*AH)
		if !ok || a == nil || a.destroyed.Load() || a.ctx == nil || &a.ctx.life != sq.life {
			return nil, 0, false, false
		}
		ah = a
	} else if !inline {
		return nil, 0, false, false
	}

	cur := sq.curPost
	idx := cur & (sq.wqeCnt - 1)
	ctrl := unsafe.Add(sq.start, uintptr(idx)<<abi.MLX5SendWQEShift)
	storeBE64(unsafe.Add(ctrl, 8), uint64(fmCeSe(wr.Flags, sq.fmCache, sq.sigBits))<<32|uint64(wrImm(wr)))
	sq.fmCache = 0
	seg := unsafe.Add(ctrl, ctrlSegSize)
	size := ctrlSegSize / 16
	if ah != nil {
		*(*[datagramSegSize]byte)(seg) = ah.av
		putBE32(unsafe.Add(seg, avOffDQPDCT), wr.RemoteQPN|abi.MLX5ExtendedUDAV)
		putBE32(unsafe.Add(seg, avOffQkey), wr.RemoteQkey)
		seg = unsafe.Add(seg, datagramSegSize)
		size += datagramSegSize / 16
		if seg == sq.end {
			seg = sq.start
		}
	} else if wr.Opcode == provider.WRRDMAWrite || wr.Opcode == provider.WRRDMAWriteWithImm {
		setRaddrSeg(seg, wr.RemoteAddr, wr.Rkey)
		seg = unsafe.Add(seg, raddrSegSize)
		size += raddrSegSize / 16
	}
	if inline {
		// One SGE that does not reach the ring's end, the usual inline
		// send, without setInline's call and loop.
		if n := uintptr(wr.SGL[0].Length); len(wr.SGL) == 1 && n != 0 && n+uintptr(inlineSegSize) <= uintptr(sq.end)-uintptr(seg) {
			dst, src := unsafe.Add(seg, inlineSegSize), *(*unsafe.Pointer)(unsafe.Pointer(&wr.SGL[0].Addr))
			if n >= 16 && n <= 64 {
				// Two or four 16-byte moves, overlapping, cover 16
				// to 64 bytes without a loop.
				move16(dst, src, 0)
				move16(dst, src, n-16)
				if n > 32 {
					move16(dst, src, 16)
					move16(dst, src, n-32)
				}
			} else {
				copyInline(dst, src, n)
			}
			putBE32(seg, uint32(n)|abi.MLX5InlineSeg)
			size += (int(n) + inlineSegSize + 15) / 16
		} else {
			size += sq.setInline(seg, wr.SGL, 0, 0)
		}
	} else {
		for i := range wr.SGL {
			if seg == sq.end {
				seg = sq.start
			}
			sge := &wr.SGL[i]
			if sge.Length == 0 {
				continue
			}
			setDataSeg(seg, sge.Length, sge.Lkey, sge.Addr)
			seg = unsafe.Add(seg, dataSegSize)
			size++
		}
	}
	storeBE64(ctrl, ctrlHead(cur, wr.Opcode, size, sq.qpn))
	blocks := uint32(size*16+wqeBB-1) / wqeBB
	sq.record(idx, blocks, wr.ID, sq.head+nreq, cur, noWCOpcode)
	sq.curPost = cur + blocks
	return ctrl, size, inline, true
}

// plain reports whether writePlain writes a work request's WQE.
func (sq *sendQueue) plain(wr *provider.SendWR) bool {
	return opIn(sq.plainOps, wr.Opcode) && len(wr.SGL) <= sq.maxGS && wr.Flags&provider.SendInline == 0
}

// opIn reports whether the bit of opcode op is set in the mask ops: a
// bit test, where 1<<op costs the instructions that make a shift by 32 or
// more come out 0.
func opIn(ops uint32, op provider.WROpcode) bool { return op < 32 && ops&(1<<(op&31)) != 0 }

// fmCeSe is a control segment's fence, completion and solicited bits
// (fm_ce_se): owed the fence a LOCAL_INV owes the next WQE, sigBits
// CQ_UPDATE for sq_sig_all.
func fmCeSe(flags provider.SendFlags, owed, sigBits uint8) uint8 {
	if flags&provider.SendFence != 0 {
		owed = abi.MLX5WQECtrlFence
	}
	f := sigBits | owed
	if flags&provider.SendSignaled != 0 {
		f |= abi.MLX5WQECtrlCQUpdate
	}
	if flags&provider.SendSolicited != 0 {
		f |= abi.MLX5WQECtrlSolicited
	}
	return f
}

// wrImm is a control segment's immediate: the immediate data, or the
// key a SEND_WITH_INV or LOCAL_INV invalidates.
func wrImm(wr *provider.SendWR) uint32 {
	switch wr.Opcode {
	case provider.WRSendWithImm, provider.WRRDMAWriteWithImm:
		return wr.Imm
	case provider.WRSendWithInv, provider.WRLocalInv:
		return wr.InvalidateRkey
	}
	return 0
}

// ctrlHead is a control segment's first 8 bytes: the WQE counter and
// opcode, the QPN and the size in 16-byte units.
func ctrlHead(cur uint32, op provider.WROpcode, size int, qpn uint32) uint64 {
	return uint64((cur&0xffff)<<8|uint32(mlx5Opcode[op]))<<32 | uint64(uint32(size)|qpn<<8)
}

// record fills the slot of a WQE of blocks blocks at block idx, posted
// at cur as work request head of the queue, and marks its other blocks
// as starting no WQE. Field by field: a composite literal is built on
// the stack in narrow stores and copied in 16-byte loads that wait for
// them.
func (sq *sendQueue) record(idx, blocks uint32, wrID uint64, head, cur uint32, op provider.WCOpcode) {
	slot := sq.slot(idx)
	slot.wrID = wrID
	slot.head = head
	slot.start = cur
	slot.opcode = op
	slot.blocks = uint8(blocks)
	for k := uint32(1); k < blocks; k++ {
		sq.slot(idx + k).blocks = 0
	}
}

// encode writes one WQE at the producer index and returns its control
// segment, its size in 16-byte units and whether it carries inline data.
func (sq *sendQueue) encode(wr *provider.SendWR, nreq uint32) (unsafe.Pointer, int, bool) {
	idx := sq.curPost & (sq.wqeCnt - 1)
	ctrl := unsafe.Add(sq.start, uintptr(idx)<<abi.MLX5SendWQEShift)
	// The control segment is written in two 8-byte stores (storeBE64),
	// the first once the size is known. Bytes 8 to 15: signature and
	// stream id (0), fm_ce_se, the immediate.
	storeBE64(unsafe.Add(ctrl, 8), uint64(fmCeSe(wr.Flags, sq.fmCache, sq.sigBits))<<32|uint64(wrImm(wr)))
	sq.fmCache = 0

	seg := unsafe.Add(ctrl, ctrlSegSize)
	size := ctrlSegSize / 16
	wcOp := noWCOpcode
	sgFirst, sgOff := 0, uint32(0)
	switch sq.typ {
	case abi.QPTypeXRCIni, abi.QPTypeRC, abi.QPTypeUC:
		if sq.typ == abi.QPTypeXRCIni && wr.Opcode != provider.WRLocalInv {
			putBE32(seg, wr.XRCRemoteSRQN)
			seg = unsafe.Add(seg, xrcSegSize)
			size += xrcSegSize / 16
		}
		switch wr.Opcode {
		case provider.WRRDMARead, provider.WRRDMAWrite, provider.WRRDMAWriteWithImm:
			setRaddrSeg(seg, wr.RemoteAddr, wr.Rkey)
			seg = unsafe.Add(seg, raddrSegSize)
			size += raddrSegSize / 16
		case provider.WRAtomicCmpAndSwp, provider.WRAtomicFetchAndAdd:
			setRaddrSeg(seg, wr.RemoteAddr, wr.Rkey)
			seg = unsafe.Add(seg, raddrSegSize)
			if wr.Opcode == provider.WRAtomicCmpAndSwp {
				putBE64(seg, wr.Swap)
				putBE64(unsafe.Add(seg, 8), wr.CompareAdd)
			} else {
				putBE64(seg, wr.CompareAdd) // the compare word is left as it was
			}
			seg = unsafe.Add(seg, atomicSegSize)
			size += (raddrSegSize + atomicSegSize) / 16
		case provider.WRLocalInv:
			sq.fmCache = abi.MLX5WQECtrlInitiatorSmallFence
			seg, size = sq.setLocalInv(seg, size)
			wcOp = provider.WCLocalInv
		}
	case abi.QPTypeUD:
		ah := wr.AH.AH.(*AH)
		*(*[datagramSegSize]byte)(seg) = ah.av
		putBE32(unsafe.Add(seg, avOffDQPDCT), wr.RemoteQPN|abi.MLX5ExtendedUDAV)
		putBE32(unsafe.Add(seg, avOffQkey), wr.RemoteQkey)
		seg = unsafe.Add(seg, datagramSegSize)
		size += datagramSegSize / 16
		if seg == sq.end {
			seg = sq.start
		}
	case abi.QPTypeRawPacket:
		sgFirst, sgOff = sq.setEthSeg(seg, wr)
		if wr.Flags&provider.SendIPCsum != 0 {
			*(*uint8)(unsafe.Add(seg, ethCsFlagsOff)) = ethL3Csum | ethL4Csum
		}
		// As libmlx5: offsetof(inline_hdr) and the inline header
		// bytes, in whole 16-byte units: one with no header inline,
		// two with 18.
		seg = unsafe.Add(seg, (ethInlineHdrRest+sq.ethInline)&^0xf)
		size += (ethInlineHdrRest + sq.ethInline) >> 4
	}

	inline := false
	if wr.Flags&provider.SendInline != 0 && len(wr.SGL) > 0 {
		// The segments before may end at the ring's end (a LOCAL_INV's
		// two blocks): the inline segment then starts the ring.
		if seg == sq.end {
			seg = sq.start
		}
		size += sq.setInline(seg, wr.SGL, sgFirst, sgOff)
		inline = true
	} else {
		atomic := wr.Opcode == provider.WRAtomicCmpAndSwp || wr.Opcode == provider.WRAtomicFetchAndAdd
		dp := seg
		off := sgOff
		for i := sgFirst; i < len(wr.SGL); i++ {
			if dp == sq.end {
				dp = sq.start
			}
			sge := &wr.SGL[i]
			if sge.Length == 0 {
				continue
			}
			if atomic {
				setDataSeg(dp, atomicSize, sge.Lkey, sge.Addr)
			} else {
				setDataSeg(dp, sge.Length-off, sge.Lkey, sge.Addr+uint64(off))
			}
			off = 0
			dp = unsafe.Add(dp, dataSegSize)
			size++
		}
	}

	storeBE64(ctrl, ctrlHead(sq.curPost, wr.Opcode, size, sq.qpn))
	blocks := uint32(size*16+wqeBB-1) / wqeBB
	sq.record(idx, blocks, wr.ID, sq.head+nreq, sq.curPost, wcOp)
	sq.curPost += blocks
	return ctrl, size, inline
}

// The segments are written 8 bytes at a time, for the doorbell and
// BlueFlame copies (see storeBE64).

func setRaddrSeg(seg unsafe.Pointer, raddr uint64, rkey uint32) {
	storeBE64(seg, raddr)
	storeBE64(unsafe.Add(seg, 8), uint64(rkey)<<32) // rkey, reserved
}

func setDataSeg(seg unsafe.Pointer, byteCount, lkey uint32, addr uint64) {
	storeBE64(seg, uint64(byteCount)<<32|uint64(lkey))
	storeBE64(unsafe.Add(seg, 8), addr)
}

// setLocalInv writes the UMR segments of a LOCAL_INV (libmlx5's
// set_bind_wr of a type 2 window with no length): UMR control, then the
// mkey context's free bit and key.
func (sq *sendQueue) setLocalInv(seg unsafe.Pointer, size int) (unsafe.Pointer, int) {
	*(*[umrCtrlSegSize]byte)(seg) = [umrCtrlSegSize]byte{}
	*(*uint8)(seg) = abi.MLX5UMRCtrlFlagInline | abi.MLX5UMRCtrlFlagTranslationOffset | abi.MLX5UMRCtrlFlagCheckQPN
	putBE64(unsafe.Add(seg, 8), abi.MLX5UMRCtrlMkeyMaskFree|abi.MLX5UMRCtrlMkeyMaskMkey|abi.MLX5UMRCtrlMkeyMaskQPN)
	seg = unsafe.Add(seg, umrCtrlSegSize)
	size += umrCtrlSegSize / 16
	if seg == sq.end {
		seg = sq.start
	}
	putBE32(unsafe.Add(seg, 4), 0xffffff00) // qpn_mkey: no QPN, key byte 0
	*(*uint8)(seg) = abi.MLX5MkeyContextFree
	seg = unsafe.Add(seg, mkeySegSize)
	size += mkeySegSize / 16
	return seg, size
}

// userBytes is the process memory an SGE names. Posting promises the
// memory is registered, so it is mapped; inline sends and raw packet
// headers read it like the HCA would.
func userBytes(addr uint64, n uint32) []byte {
	if n == 0 {
		return nil
	}
	return unsafe.Slice(*(**byte)(unsafe.Pointer(&addr)), n)
}

// setEthSeg writes a raw packet's Ethernet segment with the headers the
// device wants inline and returns where the data continues.
func (sq *sendQueue) setEthSeg(seg unsafe.Pointer, wr *provider.SendWR) (int, uint32) {
	*(*[ethSegSize]byte)(seg) = [ethSegSize]byte{}
	hdr := uint32(sq.ethInline)
	dst := unsafe.Slice((*byte)(unsafe.Add(seg, ethInlineHdrOff)), abi.MLX5EthL2InlineHeaderSize)
	length, copied, j := wr.SGL[0].Length, uint32(0), 0
	if length >= abi.MLX5EthL2InlineHeaderSize {
		copied = hdr
		copy(dst, userBytes(wr.SGL[0].Addr, hdr))
	} else {
		left := hdr
		for j = 0; j < len(wr.SGL) && left > 0; j++ {
			length = wr.SGL[j].Length
			copied = min(length, left)
			copy(dst[abi.MLX5EthL2InlineHeaderSize-left:], userBytes(wr.SGL[j].Addr, copied))
			left -= copied
		}
		if j > 0 {
			j--
		}
	}
	putBE16(unsafe.Add(seg, ethInlineHdrOff-2), uint16(hdr))
	if length == copied {
		j++
		copied = 0
	}
	return j, copied
}

// setInline copies the SGEs' bytes into an inline segment, wrapping at the
// end of the ring, and returns its size in 16-byte units.
func (sq *sendQueue) setInline(seg unsafe.Pointer, sgl []provider.SGE, first int, off uint32) int {
	p := unsafe.Add(seg, inlineSegSize)
	inl := uint32(0)
	for i := first; i < len(sgl); i++ {
		n := uintptr(sgl[i].Length - off)
		src := *(*unsafe.Pointer)(unsafe.Pointer(&sgl[i].Addr))
		src = unsafe.Add(src, off)
		off = 0
		inl += uint32(n)
		if room := uintptr(sq.end) - uintptr(p); n > room {
			copyInline(p, src, room)
			src, n = unsafe.Add(src, room), n-room
			p = sq.start
		}
		copyInline(p, src, n)
		p = unsafe.Add(p, n)
	}
	if inl == 0 {
		return 0
	}
	putBE32(seg, inl|abi.MLX5InlineSeg)
	return alignUp(int(inl)+inlineSegSize, 16) / 16
}

// copyInline copies n bytes from src, process memory an SGE names, to
// dst in the send queue: in 16-byte moves, the last one overlapping the
// one before it. Inline data is a few tens of bytes, for which a call of
// memmove (copy) and its dispatch on the length cost more than the
// moves. Fewer than 16 bytes go to copy.
func copyInline(dst, src unsafe.Pointer, n uintptr) {
	if n < 16 {
		copy(unsafe.Slice((*byte)(dst), n), unsafe.Slice((*byte)(src), n))
		return
	}
	for i := uintptr(0); i < n-16; i += 16 {
		*(*[16]byte)(unsafe.Add(dst, i)) = *(*[16]byte)(unsafe.Add(src, i))
	}
	// A larger array would be copied by a call of memmove.
	*(*[16]byte)(unsafe.Add(dst, n-16)) = *(*[16]byte)(unsafe.Add(src, n-16))
}

// move16 copies the 16 bytes at src+off to dst+off in one load and one
// store.
func move16(dst, src unsafe.Pointer, off uintptr) {
	*(*[16]byte)(unsafe.Add(dst, off)) = *(*[16]byte)(unsafe.Add(src, off))
}

// completeSend implements sendCompleter. It takes no lock: the QP's send
// CQ is its one consumer (and calls it under the CQ's mutex), the only
// writer of tail and tailBB, while post, under sq.mu, is the only writer
// of the slots and of posted. The slots of a WQE are written before
// posted is stored and read here only after posted is loaded and says
// the WQE is outstanding; they are overwritten only after tail, stored
// last here, frees them. Destroyed detaches the QP from its CQs, under
// the CQs' mutex, before it frees the ring.
func (sq *sendQueue) completeSend(wqeCounter uint16, inline []byte) (uint64, provider.WCOpcode, provider.WCStatus, bool) {
	s := sq.outstanding(wqeCounter)
	if s == nil {
		return 0, 0, 0, false
	}
	status := provider.WCSuccess
	if inline != nil {
		status = sq.copyToWQE(uint32(wqeCounter)&(sq.wqeCnt-1), inline)
	}
	wrID, op := s.wrID, s.opcode
	sq.retire(s)
	return wrID, op, status, true
}

// outstanding returns the slot of the outstanding WQE whose counter is
// wqeCounter, or nil when none is. With nothing posted (a queue without a
// ring posts nothing) no counter is outstanding. outstanding and retire
// are completeSend's parts that the compiler inlines, for the CQ's
// requester path.
func (sq *sendQueue) outstanding(wqeCounter uint16) *sqSlot {
	posted := atomic.LoadUint32(&sq.posted)
	if (uint32(wqeCounter)-sq.tailBB)&0xffff >= posted-sq.tailBB {
		return nil
	}
	s := sq.slot(uint32(wqeCounter))
	if s.blocks == 0 || uint16(s.start) != wqeCounter {
		return nil
	}
	return s
}

// retire frees the blocks of the WQE of slot s, which outstanding
// returned, and the work requests up to its own, for post. The caller
// reads what it needs of s and of the WQE before.
func (sq *sendQueue) retire(s *sqSlot) {
	sq.tailBB = s.start + uint32(s.blocks)
	storeRelease(&sq.tail, s.head+1)
}

// slot returns the slot of block i modulo the ring (len(slots) is a
// power of two), without a bounds check: the mask keeps it inside.
func (sq *sendQueue) slot(i uint32) *sqSlot {
	return (*sqSlot)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(sq.slots)), uintptr(i&uint32(len(sq.slots)-1))*unsafe.Sizeof(sqSlot{})))
}

// copyToWQE puts data the HCA scattered into the CQE (an RDMA READ or
// atomic response) into the WQE's local SGEs (mlx5_copy_to_send_wqe).
func (sq *sendQueue) copyToWQE(idx uint32, data []byte) provider.WCStatus {
	if sq.typ != abi.QPTypeRC {
		return provider.WCGeneralErr
	}
	ctrl := unsafe.Add(sq.start, uintptr(idx)<<abi.MLX5SendWQEShift)
	off := ctrlSegSize
	switch readBE32(ctrl) & 0xff {
	case abi.MLX5OpcodeRDMARead:
		off += raddrSegSize
	case abi.MLX5OpcodeAtomicCS, abi.MLX5OpcodeAtomicFA:
		off += raddrSegSize + atomicSegSize
	default:
		return provider.WCRemInvReqErr
	}
	n := int(readBE32(unsafe.Add(ctrl, 4))&0x3f) - off/16
	scat := unsafe.Add(ctrl, off)
	if room := int(uintptr(sq.end)-uintptr(scat)) / dataSegSize; n > room {
		if rest, done := copyToScat(scat, data, room, sq.dumpFill); done {
			return provider.WCSuccess
		} else {
			data, n, scat = rest, n-room, sq.start
		}
	}
	if _, done := copyToScat(scat, data, n, sq.dumpFill); done {
		return provider.WCSuccess
	}
	return provider.WCLocLenErr
}

// copyToScat copies data into up to n data segments (copy_to_scat) and
// returns what did not fit and whether everything did.
func copyToScat(scat unsafe.Pointer, data []byte, n int, dumpFill uint32) ([]byte, bool) {
	if len(data) == 0 {
		return nil, true
	}
	for i := 0; i < n; i++ {
		d := unsafe.Add(scat, i*dataSegSize)
		c := min(len(data), int(readBE32(d)))
		if readBE32(unsafe.Add(d, 4)) != dumpFill {
			addr := uint64(readBE32(unsafe.Add(d, 8)))<<32 | uint64(readBE32(unsafe.Add(d, 12)))
			copy(userBytes(addr, uint32(c)), data[:c])
		}
		data = data[c:]
		if len(data) == 0 {
			return nil, true
		}
	}
	return data, false
}

func (rq *recvQueue) post(wrs []provider.RecvWR) error {
	if len(wrs) == 0 {
		return nil
	}
	// The receive doorbell is the record, in process memory: no UAR.
	if rq.life.closed.Load() {
		return &provider.PostError{Index: 0, Err: provider.ErrClosed}
	}
	rq.mu.Lock()
	defer rq.mu.Unlock()
	if rq.start == nil {
		return &provider.PostError{Index: 0, Err: fmt.Errorf("%w: the QP has no receive queue", provider.ErrQueueFull)}
	}
	free := rq.maxPost - (rq.head - rq.tail)
	for i := range wrs {
		if uint32(i) >= free {
			return &provider.PostError{Index: i, Err: provider.ErrQueueFull}
		}
		if len(wrs[i].SGL) > rq.maxGS {
			return &provider.PostError{Index: i, Err: fmt.Errorf("%w: %d SGEs, the queue takes %d", provider.ErrTooManySGE, len(wrs[i].SGL), rq.maxGS)}
		}
	}
	ind := rq.head & (rq.wqeCnt - 1)
	for i := range wrs {
		scat := unsafe.Add(rq.start, uintptr(ind)<<rq.shift)
		j := 0
		for _, sge := range wrs[i].SGL {
			if sge.Length == 0 {
				continue
			}
			setDataSeg(unsafe.Add(scat, j*dataSegSize), sge.Length, sge.Lkey, sge.Addr)
			j++
		}
		if j < rq.maxGS {
			setDataSeg(unsafe.Add(scat, j*dataSegSize), 0, abi.MLX5InvalidLkey, 0)
		}
		rq.wrid[ind] = wrs[i].ID
		ind = (ind + 1) & (rq.wqeCnt - 1)
	}
	rq.head += uint32(len(wrs))
	if !rq.dbHeld {
		storeDBRec(rq.dbrec, rq.head&0xffff)
	}
	return nil
}

// completeRecv implements recvCompleter: a QP's receive queue completes
// in order.
func (rq *recvQueue) completeRecv(_ uint16, inline []byte) (uint64, provider.WCStatus, bool) {
	rq.mu.Lock()
	defer rq.mu.Unlock()
	if rq.wqeCnt == 0 || rq.head == rq.tail {
		return 0, 0, false
	}
	idx := rq.tail & (rq.wqeCnt - 1)
	wrID := rq.wrid[idx]
	rq.tail++
	status := provider.WCSuccess
	if inline != nil {
		if _, done := copyToScat(unsafe.Add(rq.start, uintptr(idx)<<rq.shift), inline, 1<<(rq.shift-4), rq.dumpFill); !done {
			status = provider.WCLocLenErr
		}
	}
	return wrID, status, true
}

// rxCSumValid implements rxCSummer: the receive completions of a raw
// packet QP report the HCA's IP checksum check, as libmlx5 sets
// MLX5_RX_CSUM_VALID for them (raw packet QPs exist only on Ethernet
// ports, and every ConnectX that has them checks IP checksums).
func (rq *recvQueue) rxCSumValid() bool { return rq.typ == abi.QPTypeRawPacket }
