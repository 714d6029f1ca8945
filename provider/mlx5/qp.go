package mlx5

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/transport"
)

// QP is an mlx5 queue pair: one buffer in the process holding the receive
// queue then the send queue (RAW_PACKET QPs: a second buffer for the send
// queue), a doorbell record, and a BlueFlame register.
type QP struct {
	ctx  *Context
	typ  provider.QPType
	req  abi.MLX5CreateQP
	resp abi.MLX5CreateQPResp

	buf     queueBuffer
	sqBuf   queueBuffer
	db      dbRecord
	uidx    uint32
	hasUIdx bool
	bf      *bfreg // from NewQP (dynamic UARs) or Created (static)
	bfOwned bool   // bf came from the context's dynamic pool

	sendCQ, recvCQ *CQ
	srq            *SRQ
	qpn            uint32
	attached       bool

	sq sendQueue
	rq recvQueue
}

// sendQueue is a QP's send side: a ring of 64-byte basic blocks (WQEBBs);
// a WQE takes one to several consecutive blocks and may wrap.
type sendQueue struct {
	mu spinLock

	start, end unsafe.Pointer // the ring: wqeCnt blocks
	wqeCnt     uint32         // a power of two
	closed     bool           // the context closed: set by Close under mu
	curPost    uint32         // blocks posted, wrapping; its low 16 bits are the WQE counter
	head       uint32         // work requests posted
	posted     uint32         // curPost as post published it to the CQ (atomic)
	tail       uint32         // work requests retired by completions (atomic; the CQ writes it)
	tailBB     uint32         // curPost of the oldest outstanding WQE (the CQ's alone)
	maxPost    uint32         // work requests the queue holds
	maxGS      int
	maxInline  int
	sigBits    uint8 // CQ_UPDATE for sq_sig_all
	fmCache    uint8 // fence owed to the next WQE (after a LOCAL_INV)
	qpn        uint32
	typ        provider.QPType
	dbrec      *uint32
	bf         *bfreg
	reg        unsafe.Pointer // bf's register (its first half), in the UAR mapping
	bfMaxDS    int            // the largest WQE, in 16-byte units, a BlueFlame copy takes; 0: none
	ethInline  int
	atomics    bool
	preferBF   bool   // BlueFlame for every single small WQE (MLX5_POST_SEND_PREFER_BF, default on)
	dumpFill   uint32 // lkey whose SGEs scatter-to-CQE data skips
	life       *lifetime

	ops      uint32 // bit n: the QP type posts opcode n (opcodeAllowed, computed once)
	fastOps  uint32 // the opcodes of ops check needs to look no further at (see check)
	plainOps uint32 // the opcodes of ops whose WQEs writePlain writes
	quickOps uint32 // the opcodes of ops whose WQEs writeQuick may write

	// Per block index, for the completions: one entry, one cache line
	// for a post and its completion to touch. len(slots) is wqeCnt.
	slots []sqSlot
}

// sqSlot is what a completion needs of the WQE starting at a block.
type sqSlot struct {
	wrID   uint64
	head   uint32            // head after this WQE's list position: tail moves here + 1
	start  uint32            // curPost of the WQE
	opcode provider.WCOpcode // for UMR WQEs, whose CQE does not say
	blocks uint8             // blocks the WQE takes; 0: no WQE starts here
	_      [11]byte          // to 32 bytes: indexed by a shift, two to a cache line
}

// recvQueue is a QP's receive side: a ring of equal WQEs of data
// segments, consumed in order.
type recvQueue struct {
	mu       sync.Mutex
	start    unsafe.Pointer
	wqeCnt   uint32
	shift    uint32
	head     uint32
	tail     uint32
	maxPost  uint32
	maxGS    int
	dbrec    *uint32
	wrid     []uint64
	life     *lifetime
	typ      provider.QPType
	dumpFill uint32
	// dbHeld: post leaves the doorbell record alone. A raw packet QP's
	// RQ takes packets from INIT on, where the IB spec has a QP receive
	// nothing before RTR: as libmlx5, its record is written only from
	// RTR on (see StateChanged).
	dbHeld bool
}

// qpSizes is what libmlx5's mlx5_calc_wq_size computes for a QP.
type qpSizes struct {
	sqWqeCnt, sqMaxPost uint32
	sqWqeSize           int // bytes of the largest WQE
	sqMaxGS, maxInline  int
	rqWqeCnt, rqShift   uint32
	rqMaxPost           uint32
	rqMaxGS             int
	rqSize, sqSize      int // bytes
}

// sqOverhead is libmlx5's sq_overhead for the QP type's default
// operations.
func sqOverhead(t provider.QPType) (int, error) {
	switch t {
	case abi.QPTypeRC, abi.QPTypeUC:
		return rcOverhead, nil
	case abi.QPTypeXRCIni, abi.QPTypeXRCTgt:
		return rcOverhead + xrcSegSize, nil
	case abi.QPTypeUD:
		return udOverhead, nil
	case abi.QPTypeRawPacket:
		return rawOverhead, nil
	}
	return 0, transport.NotSupported("mlx5: QP type %d", t)
}

// calcQPSizes rounds the requested capabilities as libmlx5 does
// (mlx5_calc_send_wqe, mlx5_calc_sq_size, mlx5_calc_rcv_wqe,
// mlx5_calc_rq_size). Bad requests name the field.
func (c *Context) calcQPSizes(init provider.QPInit) (qpSizes, error) {
	var s qpSizes
	overhead, err := sqOverhead(init.Type)
	if err != nil {
		return s, err
	}
	if init.Type == abi.QPTypeXRCTgt && (init.MaxSendWr != 0 || init.MaxRecvWr != 0 || init.HasSRQ) {
		// Its messages land in the XRC SRQs its senders name.
		return s, fmt.Errorf("mlx5: an XRC_RECV QP has no queues (MaxSendWr %d, MaxRecvWr %d): %w", init.MaxSendWr, init.MaxRecvWr, errInvalid)
	}
	if init.MaxSendWr > 0 {
		inlSize := 0
		if init.MaxInlineData > 0 {
			if init.MaxInlineData > uint32(c.maxSQDescSz) {
				return s, fmt.Errorf("mlx5: MaxInlineData %d beyond the device's %d-byte send WQE: %w", init.MaxInlineData, c.maxSQDescSz, errInvalid)
			}
			inlSize = overhead + alignUp(inlineSegSize+int(init.MaxInlineData), 16)
		}
		maxGather := (c.maxSQDescSz - overhead) / dataSegSize
		if int64(init.MaxSendSGE) > int64(maxGather) {
			return s, fmt.Errorf("mlx5: MaxSendSGE %d beyond the %d a send WQE holds: %w", init.MaxSendSGE, max(maxGather, 0), errInvalid)
		}
		size := overhead + int(init.MaxSendSGE)*dataSegSize
		tot := max(size, inlSize)
		if tot > c.maxSQDescSz {
			return s, fmt.Errorf("mlx5: a send WQE of %d bytes beyond the device's %d: %w", tot, c.maxSQDescSz, errInvalid)
		}
		wqeSize := alignUp(tot, wqeBB)
		if wqeSize > c.maxSQDescSz {
			return s, fmt.Errorf("mlx5: a send WQE of %d bytes beyond the device's %d: %w", wqeSize, c.maxSQDescSz, errInvalid)
		}
		if uint64(init.MaxSendWr) > uint64(0x7fffffff/c.maxSQDescSz) {
			return s, fmt.Errorf("mlx5: MaxSendWr %d too large: %w", init.MaxSendWr, errInvalid)
		}
		wqSize := roundUpPow2(init.MaxSendWr * uint32(wqeSize))
		s.sqWqeCnt = wqSize / wqeBB
		if s.sqWqeCnt > c.maxSendWQEBB {
			return s, fmt.Errorf("mlx5: MaxSendWr %d needs %d WQE blocks, beyond the device's %d: %w", init.MaxSendWr, s.sqWqeCnt, c.maxSendWQEBB, errInvalid)
		}

		s.sqWqeSize = wqeSize
		s.maxInline = wqeSize - overhead - inlineSegSize
		s.sqMaxGS = int(init.MaxSendSGE)
		s.sqMaxPost = wqSize / uint32(wqeSize)
		s.sqSize = int(wqSize)
	}
	if init.MaxRecvWr > 0 && !init.HasSRQ {
		if init.MaxRecvWr > c.maxRecvWr {
			return s, fmt.Errorf("mlx5: MaxRecvWr %d beyond the device's %d: %w", init.MaxRecvWr, c.maxRecvWr, errInvalid)
		}
		size := dataSegSize * int(max(init.MaxRecvSGE, 1))
		if init.MaxRecvSGE > uint32(c.maxRQDescSz) || size > c.maxRQDescSz {
			return s, fmt.Errorf("mlx5: MaxRecvSGE %d beyond the device's %d-byte receive WQE: %w", init.MaxRecvSGE, c.maxRQDescSz, errInvalid)
		}
		wqeSize := roundUpPow2(uint32(size))
		wqSize := max(roundUpPow2(init.MaxRecvWr)*wqeSize, wqeBB)
		s.rqWqeCnt = wqSize / wqeSize
		s.rqShift = ilog2Ceil(wqeSize)
		s.rqMaxPost = 1 << ilog2Ceil(s.rqWqeCnt)
		s.rqMaxGS = int(wqeSize) / dataSegSize
		s.rqSize = int(wqSize)
	}
	return s, nil
}

// errInvalid marks capabilities the device cannot give, as the kernel's
// EINVAL would.
var errInvalid = errors.New("invalid argument")

// NewQP implements provider.QPContext: it allocates the queue buffer and
// doorbell record and picks the UAR, filling the driver data as libmlx5's
// create_qp does.
func (c *Context) NewQP(init provider.QPInit) (provider.QP, error) {
	sz, err := c.calcQPSizes(init)
	if err != nil {
		return nil, err
	}
	q := &QP{ctx: c, typ: init.Type}
	if init.SingleThreaded {
		// The send queue's lock only: the receive queue's is also taken
		// by the receive CQ's poller (completeRecv), which may be
		// another goroutine.
		q.sq.mu.setSolo()
	}
	if init.SendCQ != nil {
		q.sendCQ, _ = init.SendCQ.(*CQ)
	}
	if init.RecvCQ != nil {
		q.recvCQ, _ = init.RecvCQ.(*CQ)
	}
	if init.SRQ != nil {
		q.srq, _ = init.SRQ.(*SRQ)
	}
	ok := false
	defer func() {
		if !ok {
			q.release()
		}
	}()
	bufSize, sqOff := sz.rqSize+sz.sqSize, sz.rqSize
	raw := init.Type == abi.QPTypeRawPacket
	if raw {
		bufSize, sqOff = sz.rqSize, 0
	}
	if bufSize > 0 {
		if q.buf, err = c.allocBuf(bufSize, c.pageSize); err != nil {
			return nil, err
		}
	}
	if raw && sz.sqSize > 0 {
		if q.sqBuf, err = c.allocBuf(sz.sqSize, c.pageSize); err != nil {
			return nil, err
		}
	}
	if q.db, err = c.dbrecs.alloc(); err != nil {
		return nil, err
	}
	r := &q.req
	if c.scatterToCQE {
		r.Flags = abi.MLX5QPFlagScatterCQE
	}
	r.BufAddr = q.buf.addr()
	if raw {
		r.SQBufAddr = q.sqBuf.addr()
	}
	r.DBAddr = q.db.addr()
	r.SQWqeCount = sz.sqWqeCnt
	r.RQWqeCount = sz.rqWqeCnt
	r.RQWqeShift = sz.rqShift
	if c.cqeVersion == 0 {
		r.UIdx = 0xffffff
	} else if init.Type != abi.QPTypeXRCTgt {
		// An XRC receive QP's completions name the XRC SRQ, never the
		// QP: libmlx5 gives it no user index (uidx 0).
		if q.uidx, err = c.allocUIdx(); err != nil {
			return nil, err
		}
		q.hasUIdx = true
		r.UIdx = q.uidx
	}
	if !c.noKernDynUAR {
		if q.bf, err = c.qpBfreg(); err != nil {
			return nil, err
		}
		q.bfOwned = true
		if q.bf != nil {
			r.BfregIndex = q.bf.pageID
			r.Flags |= abi.MLX5QPFlagUARPageIndex
		}
	}
	if c.eceSupported {
		r.ECEOptions = abi.MLX5ECEVersion1
	}

	// The queues' software state; Created fills in what the kernel says.
	sq := &q.sq
	if sz.sqWqeCnt > 0 {
		var ring []byte
		if raw {
			ring = q.sqBuf.mem[:sz.sqSize]
		} else {
			ring = q.buf.mem[sqOff : sqOff+sz.sqSize]
		}
		sq.start = unsafe.Pointer(&ring[0])
		sq.end = unsafe.Add(sq.start, sz.sqSize)
		sq.wqeCnt = sz.sqWqeCnt
		sq.maxPost = sz.sqMaxPost
		sq.maxGS = sz.sqMaxGS
		sq.maxInline = sz.maxInline
		sq.slots = make([]sqSlot, sz.sqWqeCnt)
	}
	sq.typ = init.Type
	for op := range provider.WROpcode(32) {
		if opcodeAllowed(init.Type, op) {
			sq.ops |= 1 << op
		}
	}
	switch init.Type {
	case abi.QPTypeRC, abi.QPTypeUC, abi.QPTypeXRCIni:
		sq.fastOps = sq.ops
		if !c.atomics {
			sq.fastOps &^= 1<<provider.WRAtomicCmpAndSwp | 1<<provider.WRAtomicFetchAndAdd
		}
		if init.Type != abi.QPTypeXRCIni {
			sq.plainOps = sq.ops & plainOpcodes
			sq.quickOps = sq.ops & quickOpcodes
		}
	case abi.QPTypeUD:
		sq.quickOps = sq.ops & (1<<provider.WRSend | 1<<provider.WRSendWithImm)
	}
	sq.dbrec = &q.db.words[abi.MLX5SndDBR]
	sq.ethInline = c.ethMinInline
	sq.atomics = c.atomics
	sq.preferBF = c.preferBF
	sq.life = &c.life
	sq.dumpFill = c.dumpFillMkey()
	if init.SQSigAll {
		sq.sigBits = abi.MLX5WQECtrlCQUpdate
	}
	rq := &q.rq
	if sz.rqWqeCnt > 0 {
		rq.start = unsafe.Pointer(&q.buf.mem[0])
		rq.wqeCnt = sz.rqWqeCnt
		rq.shift = sz.rqShift
		rq.maxPost = sz.rqWqeCnt // libmlx5 resets max_post to wqe_cnt after creation
		rq.maxGS = sz.rqMaxGS
		rq.wrid = make([]uint64, sz.rqWqeCnt)
	}
	rq.dbrec = &q.db.words[abi.MLX5RcvDBR]
	rq.life = &c.life
	rq.typ = init.Type
	rq.dumpFill = sq.dumpFill
	rq.dbHeld = init.Type == abi.QPTypeRawPacket // created in RESET
	ok = true
	c.life.addSQ(sq)
	return q, nil
}

// dumpFillMkey is the lkey of SGEs that receive nothing: the kernel's
// dump-fill mkey, or MLX5_INVALID_LKEY without one.
func (c *Context) dumpFillMkey() uint32 {
	if c.resp.CompMask&abi.MLX5UctxRespDumpFillMkey != 0 {
		return c.resp.DumpFillMkey
	}
	return abi.MLX5InvalidLkey
}

// CreateData implements provider.QP.
func (q *QP) CreateData() (in, out []byte) {
	return unsafe.Slice((*byte)(unsafe.Pointer(&q.req)), unsafe.Sizeof(q.req)),
		unsafe.Slice((*byte)(unsafe.Pointer(&q.resp)), unsafe.Sizeof(q.resp))
}

// Created implements provider.QP: with static UARs the kernel chose the
// BlueFlame register; the QP then links itself to its CQs.
func (q *QP) Created(conn *transport.Conn, handle, qpn uint32, caps provider.QPInit) error {
	if qpn > 0xffffff {
		return fmt.Errorf("mlx5: the kernel's QPN %#x is beyond 24 bits", qpn)
	}
	if q.bf == nil {
		idx := q.resp.BfregIndex
		c := q.ctx
		if int(idx) >= len(c.bfs) || c.bfs[idx] == nil {
			return fmt.Errorf("mlx5: the kernel's bfreg index %d is beyond the %d mapped", idx, len(c.bfs))
		}
		q.bf = c.bfs[idx]
	}
	q.qpn = qpn
	q.sq.qpn = qpn
	q.sq.bf = q.bf
	q.sq.reg = unsafe.Add(q.bf.uar.base(), q.bf.regOff)
	if q.bf.uuarn != 0 {
		q.sq.bfMaxDS = q.bf.bufSize / 16
	}
	var sendC sendCompleter
	var recvC recvCompleter
	if q.sq.wqeCnt > 0 {
		sendC = &q.sq
	}
	if q.srq != nil {
		recvC = q.srq
	} else if q.rq.wqeCnt > 0 {
		recvC = &q.rq
	}
	if q.sendCQ != nil && q.sendCQ == q.recvCQ {
		if err := q.sendCQ.attach(qpn, sendC, recvC); err != nil {
			return err
		}
	} else {
		if q.sendCQ != nil {
			if err := q.sendCQ.attach(qpn, sendC, nil); err != nil {
				return err
			}
		}
		if q.recvCQ != nil {
			if err := q.recvCQ.attach(qpn, nil, recvC); err != nil {
				if q.sendCQ != nil {
					q.sendCQ.detach(qpn)
				}
				return err
			}
		}
	}
	q.attached = true
	return nil
}

// Destroyed implements provider.QP.
func (q *QP) Destroyed() error {
	if q.attached {
		if q.sendCQ != nil {
			q.sendCQ.detach(q.qpn)
		}
		if q.recvCQ != nil && q.recvCQ != q.sendCQ {
			q.recvCQ.detach(q.qpn)
		}
		q.attached = false
	}
	q.ctx.life.removeSQ(&q.sq)
	q.sq.mu.LockExcl()
	q.rq.mu.Lock()
	q.sq.start, q.sq.end, q.sq.wqeCnt = nil, nil, 0
	q.rq.start, q.rq.wqeCnt = nil, 0
	err := q.release()
	q.rq.mu.Unlock()
	q.sq.mu.UnlockExcl()
	return err
}

var _ provider.QPStateFollower = (*QP)(nil)

// QP states StateChanged tells apart (enum ibv_qp_state).
const (
	qpStateReset = 0
	qpStateRTR   = 2
)

// StateChanged implements provider.QPStateFollower as libmlx5's
// mlx5_modify_qp does after the command succeeded. Moved to RESET, the
// QP loses its completions still in its CQs (an SRQ gets their WQEs
// back) and both queues start over as a new QP's: indices, the send
// queue's records of its WQEs and the fence it owed, and both doorbell
// records are zero. A raw packet QP's receive doorbell record is
// withheld before RTR and written at RTR with what was posted since.
func (q *QP) StateChanged(state uint8) {
	if state == qpStateReset {
		// Cleaned before the queues' locks are taken: a poller holds its
		// CQ's lock while it completes into the RQ, under rq.mu. In
		// RESET the QP gets no completion after the clean.
		if q.recvCQ != nil {
			q.recvCQ.cleanQP(q.qpn)
		}
		if q.sendCQ != nil && q.sendCQ != q.recvCQ {
			q.sendCQ.cleanQP(q.qpn)
		}
		q.sq.mu.LockExcl()
		defer q.sq.mu.UnlockExcl()
	}
	q.rq.mu.Lock()
	defer q.rq.mu.Unlock()
	if q.db.words == nil {
		return // destroyed: the records are no longer the QP's
	}
	if state == qpStateReset {
		sq := &q.sq
		sq.curPost, sq.head, sq.tailBB, sq.fmCache = 0, 0, 0, 0
		storeRelease(&sq.posted, 0)
		atomic.StoreUint32(&sq.tail, 0)
		clear(sq.slots)
		q.rq.head, q.rq.tail = 0, 0
		storeDBRec(sq.dbrec, 0)
		storeDBRec(q.rq.dbrec, 0)
	}
	if q.typ == abi.QPTypeRawPacket {
		q.rq.dbHeld = state < qpStateRTR
		if state == qpStateRTR {
			storeDBRec(q.rq.dbrec, q.rq.head&0xffff)
		}
	}
}

func (q *QP) release() error {
	c := q.ctx
	errs := []error{q.buf.free(), q.sqBuf.free(), c.dbrecs.release(q.db)}
	q.db = dbRecord{}
	if q.hasUIdx {
		c.freeUIdx(q.uidx)
		q.hasUIdx = false
	}
	if q.bfOwned {
		c.putQPBfreg(q.bf)
		q.bfOwned = false
	}
	return errors.Join(errs...)
}

// QPN returns the queue pair number.
func (q *QP) QPN() uint32 { return q.qpn }

// MaxInlineData is the inline data a send WQE holds, as libmlx5 reports
// it in the capabilities.
func (q *QP) MaxInlineData() int { return q.sq.maxInline }

// MaxSendWr is the work requests the send queue holds (libmlx5's
// sq.max_post).
func (q *QP) MaxSendWr() int { return int(q.sq.maxPost) }
