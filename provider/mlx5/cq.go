package mlx5

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"sync/atomic"
	"unsafe"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/transport"
)

// CQ is an mlx5 completion queue: a ring of 64-byte CQEs in memory the
// process allocated (the HCA writes into it by DMA) and a doorbell record
// of two big-endian words, the consumer index the HCA reads to know what
// it may overwrite and the arm word.
type CQ struct {
	mu spinLock

	// Poll's state, first so that it shares cache lines.
	ring  unsafe.Pointer // ncqe * cqeSize bytes
	ncqe  uint32         // a power of two
	cons  uint32         // consumer index: counts every CQE consumed, wrapping
	dbrec *[2]uint32     // [0] SET_CI, [1] ARM_DB, both big endian
	last  *cqLink        // the QP of the previous completion, as libmlx5's cur_rsc
	cqn   uint32

	qps  map[uint32]*cqLink
	srqs map[uint32]recvCompleter

	// Arming.
	armSN uint32         // bumped by every completion event (atomic)
	armDB unsafe.Pointer // the UAR's CQ doorbell register (UAR page + 0x20)

	closed bool

	// Creation: what Destroyed gives back, and the driver data.
	ctx  *Context
	buf  queueBuffer
	db   dbRecord
	req  abi.MLX5CreateCQ
	resp abi.MLX5CreateCQResp
}

// Arm doorbell (MLX5_CQ_DB_REQ_NOT*) and the doorbell record's words.
const (
	cqDoorbellOffset  = 0x20 // MLX5_CQ_DOORBELL: the CQ doorbell's offset in a UAR page
	cqDBReqNotSol     = 1 << 24
	cqDBReqNot        = 0
	cqDBRecSetCI      = 0
	cqDBRecArm        = 1
	maxCQEntries      = 1 << 24 // the PRM's log_cq_size limit
	cqeInvalidOpOwn   = cqeInvalid << 4
	cqConsumerIdxMask = 0xffffff
)

// cqEntries is the ring size libmlx5 allocates for a request of cqe
// entries (align_queue_size(cqe + 1)): one more than asked, rounded up to
// a power of two, at most 2^24; the kernel rounds the same way and
// reports one less than the ring as the capacity.
func cqEntries(cqe int) (uint32, error) {
	if cqe < 1 || cqe > 0x7fffffff {
		return 0, &FieldError{Field: "cqe", Value: uint64(int64(cqe)), Reason: "a CQ needs 1 to 2^31-1 entries"}
	}
	n := uint64(1) << bits.Len64(uint64(cqe)) // the power of two above cqe, at least cqe+1
	if n > maxCQEntries {
		return 0, &FieldError{Field: "cqe", Value: uint64(cqe), Reason: "more than 2^24-1 entries"}
	}
	return uint32(n), nil
}

// initRing marks every entry invalid and owned by the hardware, as
// libmlx5's mlx5_alloc_cq_buf does: zeroes with op_own = INVALID<<4.
func initRing(ring []byte) {
	clear(ring)
	for i := cqeOffOpOwn; i < len(ring); i += cqeSize {
		ring[i] = cqeInvalidOpOwn
	}
}

// newCQ builds the CQ's poll state over a ring of ncqe entries (len(ring)
// at least ncqe*cqeSize) and its doorbell record; armDB is the UAR's CQ
// doorbell register (nil: Arm fails).
func newCQ(ring []byte, ncqe uint32, dbrec *[2]uint32, cqn uint32, armDB unsafe.Pointer) (*CQ, error) {
	if ncqe == 0 || ncqe&(ncqe-1) != 0 || ncqe > maxCQEntries {
		return nil, &FieldError{Field: "ncqe", Value: uint64(ncqe), Reason: "not a power of two up to 2^24"}
	}
	if uint64(len(ring)) < uint64(ncqe)*cqeSize {
		return nil, &FieldError{Field: "ring", Value: uint64(len(ring)), Reason: "bytes do not hold the entries"}
	}
	if dbrec == nil {
		return nil, &FieldError{Field: "dbrec", Reason: "missing"}
	}
	return &CQ{ring: unsafe.Pointer(&ring[0]), ncqe: ncqe, dbrec: dbrec, cqn: cqn, armDB: armDB}, nil
}

// CQN returns the CQ number the kernel assigned.
func (cq *CQ) CQN() uint32 { return cq.cqn }

// Entries returns the number of CQEs in the ring (a power of two; the CQ
// holds one fewer).
func (cq *CQ) Entries() int { return int(cq.ncqe) }

// entry returns CQE i of the ring (i is masked).
func (cq *CQ) entry(i uint32) *[cqeSize]byte {
	return (*[cqeSize]byte)(unsafe.Add(cq.ring, uintptr(i&(cq.ncqe-1))*cqeSize))
}

// passParity is (i/ncqe)&1, the owner bit of the entries of pass i/ncqe
// over a ring of ncqe entries, a power of two: without the division,
// which the compiler cannot turn into a shift and which costs several
// nanoseconds per CQE.
func passParity(i, ncqe uint32) uint32 {
	if i&ncqe != 0 {
		return 1
	}
	return 0
}

// owned reports whether entry i holds a CQE the hardware handed over for
// consumer index i.
func (cq *CQ) owned(i uint32) bool {
	opOwn := uint8(loadBE32(&cq.entry(i)[cqeOffTrailer]))
	return opOwn>>4 != cqeInvalid && uint32(opOwn&cqeOwnerMask) == passParity(i, cq.ncqe)
}

// clean removes l's completions from the unpolled part of the ring, moving
// later ones down over them (libmlx5's __mlx5_cq_clean): the QP is gone or
// in reset, so nothing new of it can arrive. Receive completions give
// their WQE back to the queue (an SRQ slot must be freed).
func (cq *CQ) clean(l *cqLink) {
	prod := cq.cons
	for cq.owned(prod) && prod-cq.cons < cq.ncqe {
		prod++
	}
	freed := uint32(0)
	for prod != cq.cons {
		prod--
		e := cq.entry(prod)
		trailer := loadBE32(&e[cqeOffTrailer])
		opcode := uint8(trailer) >> 4
		if binary.BigEndian.Uint32(e[cqeOffSopDropQPN:])&maxQPN == l.qpn {
			if (opcode >= cqeRespWRImm && opcode <= cqeRespSendInv || opcode == cqeRespErr) && l.recv != nil {
				l.recv.completeRecv(uint16(trailer>>16), nil)
			}
			freed++
			continue
		}
		if freed > 0 {
			dst := cq.entry(prod + freed)
			owner := dst[cqeOffOpOwn] & cqeOwnerMask
			*dst = *e
			dst[cqeOffOpOwn] = dst[cqeOffOpOwn]&^cqeOwnerMask | owner
		}
	}
	if freed > 0 {
		cq.cons += freed
		atomic.StoreUint32(&cq.dbrec[cqDBRecSetCI], be32(cq.cons&cqConsumerIdxMask))
	}
}

// NewCQ implements provider.CQContext as libmlx5's create_cq: a ring of
// roundup_pow_of_two(cqe+1) 64-byte CQEs in page-aligned memory, every
// entry invalid and owned by the hardware, a zeroed doorbell record, and
// the driver data naming them (and the NC UAR page the CQ is armed
// through, when the context has one).
func (c *Context) NewCQ(cqe int) (provider.CQ, error) {
	ncqe, err := cqEntries(cqe)
	if err != nil {
		return nil, err
	}
	buf, err := c.allocBuf(int(ncqe)*cqeSize, c.pageSize)
	if err != nil {
		return nil, err
	}
	initRing(buf.mem[:int(ncqe)*cqeSize])
	db, err := c.dbrecs.alloc()
	if err != nil {
		buf.free()
		return nil, err
	}
	uar, pageID, named := c.CQUAR()
	var armDB unsafe.Pointer
	if uar != nil {
		armDB = unsafe.Add(uar, cqDoorbellOffset)
	}
	cq, err := newCQ(buf.mem, ncqe, db.words, 0, armDB)
	if err != nil {
		buf.free()
		c.dbrecs.release(db)
		return nil, err
	}
	cq.ctx, cq.buf, cq.db = c, buf, db
	cq.req = abi.MLX5CreateCQ{BufAddr: buf.addr(), DBAddr: db.addr(), CQESize: cqeSize}
	if named {
		cq.req.Flags |= abi.MLX5CreateCQFlagUARPageIndex
		cq.req.UARPageIndex = uint16(pageID)
	}
	return cq, nil
}

// SetSingleThreaded implements provider.SingleThreadedCQ: Poll and Arm
// then take the CQ's lock without a locked instruction from any goroutine
// (see spinLock),
// as libmlx5's poll does under MLX5_SINGLE_THREADED. It fails only where
// the kernel has no membarrier for the control side.
func (cq *CQ) SetSingleThreaded() bool { return cq.mu.setSolo() }

// CreateData implements provider.CQ.
func (cq *CQ) CreateData() (in, out []byte) {
	return unsafe.Slice((*byte)(unsafe.Pointer(&cq.req)), unsafe.Sizeof(cq.req)),
		unsafe.Slice((*byte)(unsafe.Pointer(&cq.resp)), unsafe.Sizeof(cq.resp))
}

// Created implements provider.CQ: the CQN comes from the driver response.
// The kernel rounds as libmlx5 does, so the capacity it grants is the
// ring less one.
func (cq *CQ) Created(_ *transport.Conn, _ uint32, cqe int) error {
	cq.mu.LockExcl()
	defer cq.mu.UnlockExcl()
	if cqe != int(cq.ncqe)-1 {
		return fmt.Errorf("mlx5: create_cq: the kernel granted %d entries for a ring of %d", cqe, cq.ncqe)
	}
	cq.cqn = cq.resp.CQN
	return nil
}

// Destroyed implements provider.CQ: the ring and the doorbell record go
// back once the kernel no longer lets the HCA write them.
func (cq *CQ) Destroyed() error {
	cq.mu.LockExcl()
	defer cq.mu.UnlockExcl()
	if cq.closed {
		return nil
	}
	cq.closed = true
	cq.ring = nil
	cq.last, cq.qps, cq.srqs = nil, nil, nil
	var errs []error
	if cq.ctx != nil {
		errs = append(errs, cq.ctx.dbrecs.release(cq.db))
	}
	errs = append(errs, cq.buf.free())
	return errors.Join(errs...)
}

// ResizeTo implements provider.CQSizedResizer as libmlx5's mlx5_resize_cq:
// a new ring of roundup_pow_of_two(cqe+1) entries named in the RESIZE_CQ
// driver data; once the kernel has switched the HCA to it, the
// completions not yet polled are copied from the old ring, up to the
// RESIZE_CQ entry the HCA wrote there when it switched, to the same
// consumer indexes of the new ring (mlx5_cq_resize_copy_cqes), and that
// entry is consumed. Pollers are kept off the CQ meanwhile.
func (cq *CQ) ResizeTo(_ *transport.Conn, cqe int, send func(in, out []byte) (int, error)) error {
	ncqe, err := cqEntries(cqe)
	if err != nil {
		return err
	}
	cq.mu.LockExcl()
	defer cq.mu.UnlockExcl()
	if cq.closed {
		return provider.ErrClosed
	}
	if cq.ctx == nil {
		return errors.New("mlx5: resize_cq: the CQ was not made by a context")
	}
	req := abi.MLX5ResizeCQ{CQESize: cqeSize}
	reqBytes := unsafe.Slice((*byte)(unsafe.Pointer(&req)), unsafe.Sizeof(req))
	if ncqe == cq.ncqe {
		// The kernel does nothing for the same size (libmlx5 does not
		// even ask); asking keeps uverbs' capacity from the answer.
		req.BufAddr = cq.buf.addr()
		_, err := send(reqBytes, nil)
		return err
	}
	buf, err := cq.ctx.allocBuf(int(ncqe)*cqeSize, cq.ctx.pageSize)
	if err != nil {
		return err
	}
	initRing(buf.mem[:int(ncqe)*cqeSize])
	req.BufAddr = buf.addr()
	granted, err := send(reqBytes, nil)
	if err != nil {
		buf.free()
		return err
	}
	if granted != int(ncqe)-1 {
		// The kernel switched to a ring whose size it counts differently:
		// nothing here can poll it safely.
		cq.closed = true
		return fmt.Errorf("mlx5: resize_cq: the kernel granted %d entries for a ring of %d", granted, ncqe)
	}
	newRing := &CQ{ring: unsafe.Pointer(&buf.mem[0]), ncqe: ncqe}
	_, copyErr := cq.copyForResize(newRing)
	cq.ring, cq.ncqe = newRing.ring, ncqe
	oldBuf := cq.buf
	cq.buf = buf
	if copyErr != nil {
		// As libmlx5, the CQ goes on with the new ring from the consumer
		// index; what the old ring held past it is lost.
		oldBuf.free()
		return fmt.Errorf("mlx5: resize_cq: %w", copyErr)
	}
	cq.cons++ // the RESIZE_CQ entry
	atomic.StoreUint32(&cq.dbrec[cqDBRecSetCI], be32(cq.cons&cqConsumerIdxMask))
	return oldBuf.free()
}

// copyForResize copies the old ring's CQEs from the consumer index up to
// the RESIZE_CQ entry into dst at the next indexes, with dst's owner bits.
func (cq *CQ) copyForResize(dst *CQ) (int, error) {
	i := cq.cons
	for n := uint32(0); n < cq.ncqe; n++ {
		if n >= dst.ncqe {
			return int(n), &CQEError{CQN: cq.cqn, Index: i, Reason: "more unpolled completions than the new ring holds"}
		}
		if !cq.owned(i) {
			return int(n), &CQEError{CQN: cq.cqn, Index: i, Reason: "the ring ends before the RESIZE_CQ entry the HCA writes when it switches rings"}
		}
		fromDeviceBarrier()
		src := cq.entry(i)
		if src[cqeOffOpOwn]>>4 == cqeResizeCQ {
			return int(n), nil
		}
		d := dst.entry(i + 1)
		*d = *src
		d[cqeOffOpOwn] = d[cqeOffOpOwn]&^cqeOwnerMask | uint8(passParity(i+1, dst.ncqe))
		i++
	}
	return int(cq.ncqe), &CQEError{CQN: cq.cqn, Index: i, Reason: "no RESIZE_CQ entry in the whole ring"}
}
