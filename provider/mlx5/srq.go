package mlx5

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/transport"
)

// SRQ is an mlx5 shared receive queue: WQEs linked into a free list by
// their next-segment (the HCA takes them from the head, completions give
// them back at the tail), in a buffer the process allocated. As libmlx5,
// it allocates room for a wait queue beyond the entries the kernel is
// told about (used by libmlx5 for ODP page-fault recovery; here it is
// only laid out, never used).
type SRQ struct {
	ctx  *Context
	req  abi.MLX5CreateSRQ
	resp abi.MLX5CreateSRQResp
	buf  queueBuffer
	db   dbRecord

	mu         sync.Mutex
	start      unsafe.Pointer
	shift      uint32
	max        uint32 // entries in the buffer
	maxGS      int
	head, tail uint32 // free list: head is posted next, tail is the last free entry
	counter    uint32 // WQEs posted; its low 16 bits are the doorbell record's value
	wrid       []uint64
	posted     []bool // the WQE at an index is the HCA's
	userMaxWr  uint32
	srqn       uint32
	// An XRC SRQ's completions arrive on xrcCQ naming the SRQ rather
	// than a QP of this process: by its user index under CQE version 1
	// (uidx, taken from the context's table as libmlx5 does), else by its
	// number. rsn is that name, attached tells Destroyed to detach it.
	xrcCQ    *CQ
	hasUIdx  bool
	uidx     uint32
	rsn      uint32
	attached bool
	life     *lifetime
	dumpFill uint32
}

// srqSizes is libmlx5's mlx5_alloc_srq_buf arithmetic.
func (c *Context) srqSizes(maxWr, maxSGE uint32) (wqeSize, maxGS, entries, tail uint32, waitQ bool, err error) {
	if maxWr > c.maxSRQRecvWr {
		return 0, 0, 0, 0, false, fmt.Errorf("mlx5: MaxWr %d beyond the device's %d: %w", maxWr, c.maxSRQRecvWr, errInvalid)
	}
	if maxSGE > uint32(c.maxRQDescSz/dataSegSize) {
		return 0, 0, 0, 0, false, fmt.Errorf("mlx5: MaxSGE %d beyond the device's %d: %w", maxSGE, c.maxRQDescSz/dataSegSize, errInvalid)
	}
	want := uint64(maxWr)*2 + 1
	waitQ = true
	if want > uint64(c.maxSRQRecvWr) {
		want = uint64(maxWr) + 1
		waitQ = false
	}
	wqeSize = roundUpPow2(max(32, uint32(srqNextSegSize)+maxSGE*uint32(dataSegSize)))
	maxGS = (wqeSize - uint32(srqNextSegSize)) / uint32(dataSegSize)
	entries = roundUpPow2(uint32(want))
	tail = roundUpPow2(maxWr+1) - 1
	return wqeSize, maxGS, entries, tail, waitQ, nil
}

// NewSRQ implements provider.SRQContext.
func (c *Context) NewSRQ(maxWr, maxSGE uint32) (provider.SRQ, error) {
	wqeSize, maxGS, entries, tail, waitQ, err := c.srqSizes(maxWr, maxSGE)
	if err != nil {
		return nil, err
	}
	s := &SRQ{ctx: c, life: &c.life, dumpFill: c.dumpFillMkey()}
	if s.buf, err = c.allocBuf(int(entries*wqeSize), c.pageSize); err != nil {
		return nil, err
	}
	if s.db, err = c.dbrecs.alloc(); err != nil {
		s.buf.free()
		return nil, err
	}
	s.start = unsafe.Pointer(&s.buf.mem[0])
	s.shift = ilog2Ceil(wqeSize)
	s.max = entries
	s.maxGS = int(maxGS)
	s.head, s.tail = 0, tail
	s.userMaxWr = tail
	for i := uint32(0); i < tail; i++ {
		s.setNext(i, i+1)
	}
	if waitQ {
		for i := tail + 1; i < entries-1; i++ {
			s.setNext(i, i+1)
		}
	}
	s.wrid = make([]uint64, entries)
	s.posted = make([]bool, entries)
	s.req.BufAddr = s.buf.addr()
	s.req.DBAddr = s.db.addr()
	return s, nil
}

// NewTypedSRQ implements provider.SRQTypeContext: basic SRQs, and XRC SRQs
// as libmlx5's mlx5_create_srq_ex makes them (the same queue, plus a user
// index and the CQ their completions go to).
func (c *Context) NewTypedSRQ(init provider.SRQInit) (provider.SRQ, error) {
	switch init.Type {
	case abi.SRQTypeBasic:
		return c.NewSRQ(init.MaxWr, init.MaxSGE)
	case abi.SRQTypeXRC:
	default:
		return nil, transport.NotSupported("mlx5: SRQ type %d", init.Type)
	}
	cq, ok := init.CQ.(*CQ)
	if !ok || cq == nil {
		return nil, fmt.Errorf("mlx5: an XRC SRQ needs an mlx5 CQ, got %T: %w", init.CQ, errInvalid)
	}
	p, err := c.NewSRQ(init.MaxWr, init.MaxSGE)
	if err != nil {
		return nil, err
	}
	s := p.(*SRQ)
	s.xrcCQ = cq
	if c.cqeVersion == 0 {
		s.req.UIdx = 0xffffff
	} else {
		if s.uidx, err = c.allocUIdx(); err != nil {
			s.Destroyed()
			return nil, err
		}
		s.hasUIdx = true
		s.req.UIdx = s.uidx
	}
	return s, nil
}

func (s *SRQ) wqe(i uint32) unsafe.Pointer { return unsafe.Add(s.start, uintptr(i)<<s.shift) }

func (s *SRQ) next(i uint32) uint32 { return uint32(readBE32(s.wqe(i)) & 0xffff) }

func (s *SRQ) setNext(i, next uint32) { putBE16(unsafe.Add(s.wqe(i), 2), uint16(next)) }

// CreateData implements provider.SRQ.
func (s *SRQ) CreateData() (in, out []byte) {
	return unsafe.Slice((*byte)(unsafe.Pointer(&s.req)), unsafe.Sizeof(s.req)),
		unsafe.Slice((*byte)(unsafe.Pointer(&s.resp)), unsafe.Sizeof(s.resp))
}

// Created implements provider.SRQ.
func (s *SRQ) Created(conn *transport.Conn, handle uint32, maxWr, maxSGE uint32) error {
	s.srqn = s.resp.SRQN
	if s.xrcCQ == nil {
		return nil
	}
	s.rsn = s.srqn
	if s.hasUIdx {
		s.rsn = s.uidx
	}
	if err := s.xrcCQ.attachSRQ(s.rsn, s); err != nil {
		return fmt.Errorf("mlx5: XRC SRQ %#x: %w", s.srqn, err)
	}
	s.attached = true
	return nil
}

// ModifyData implements provider.SRQ: mlx5 sends no driver data.
func (s *SRQ) ModifyData() []byte { return nil }

// Modified implements provider.SRQ: mlx5 SRQs are not resized (the
// kernel refuses), so a resize cannot have happened.
func (s *SRQ) Modified(conn *transport.Conn, resized bool) error {
	if resized {
		return transport.NotSupported("mlx5: SRQ resize")
	}
	return nil
}

// Destroyed implements provider.SRQ.
func (s *SRQ) Destroyed() error {
	// Detached before taking the SRQ's lock: a poller holds the CQ's
	// while it completes into the SRQ.
	if s.attached {
		s.xrcCQ.detachSRQ(s.rsn)
		s.attached = false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start = nil
	err := errors.Join(s.buf.free(), s.ctx.dbrecs.release(s.db))
	s.db = dbRecord{}
	if s.hasUIdx {
		s.ctx.freeUIdx(s.uidx)
		s.hasUIdx = false
	}
	return err
}

// SRQN returns the SRQ's number.
func (s *SRQ) SRQN() uint32 { return s.srqn }

// PostRecv implements provider.Receiver, as libmlx5's mlx5_post_srq_recv.
func (s *SRQ) PostRecv(wrs []provider.RecvWR) error {
	if len(wrs) == 0 {
		return nil
	}
	// The SRQ's doorbell is its record, in process memory: no UAR.
	if s.life.closed.Load() {
		return &provider.PostError{Index: 0, Err: provider.ErrClosed}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.start == nil {
		return &provider.PostError{Index: 0, Err: provider.ErrClosed}
	}
	// Walk the free list to see that the whole list fits.
	h := s.head
	for i := range wrs {
		if len(wrs[i].SGL) > s.maxGS {
			return &provider.PostError{Index: i, Err: fmt.Errorf("%w: %d SGEs, the SRQ takes %d", provider.ErrTooManySGE, len(wrs[i].SGL), s.maxGS)}
		}
		if h == s.tail || h >= s.max {
			return &provider.PostError{Index: i, Err: provider.ErrQueueFull}
		}
		h = s.next(h)
	}
	for i := range wrs {
		ind := s.head
		s.wrid[ind] = wrs[i].ID
		s.posted[ind] = true
		w := s.wqe(ind)
		s.head = s.next(ind)
		scat := unsafe.Add(w, srqNextSegSize)
		j := 0
		for _, sge := range wrs[i].SGL {
			setDataSeg(unsafe.Add(scat, j*dataSegSize), sge.Length, sge.Lkey, sge.Addr)
			j++
		}
		if j < s.maxGS {
			setDataSeg(unsafe.Add(scat, j*dataSegSize), 0, abi.MLX5InvalidLkey, 0)
		}
	}
	s.counter += uint32(len(wrs))
	// libmlx5's counter is 16 bits: the record holds the low 16 bits.
	storeDBRec(&s.db.words[0], s.counter&0xffff)
	return nil
}

// completeRecv implements recvCompleter: the WQE at wqeCounter is given
// back to the free list's tail (mlx5_free_srq_wqe).
func (s *SRQ) completeRecv(wqeCounter uint16, inline []byte) (uint64, provider.WCStatus, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ind := uint32(wqeCounter)
	if s.start == nil || ind >= s.max || !s.posted[ind] {
		return 0, 0, false
	}
	wrID := s.wrid[ind]
	status := provider.WCSuccess
	if inline != nil {
		if _, done := copyToScat(unsafe.Add(s.wqe(ind), srqNextSegSize), inline, s.maxGS, s.dumpFill); !done {
			status = provider.WCLocLenErr
		}
	}
	s.posted[ind] = false
	s.setNext(s.tail, ind)
	s.tail = ind
	return wrID, status, true
}
