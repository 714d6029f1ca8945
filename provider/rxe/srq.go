package rxe

import (
	"unsafe"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/transport"
)

// NewSRQ implements provider.SRQContext.
func (c *context) NewSRQ(maxWr, maxSGE uint32) (provider.SRQ, error) { return &srq{life: c.life}, nil }

// NewTypedSRQ implements provider.SRQTypeContext: the rxe driver has no
// XRC (nor tag-matching) SRQs.
func (c *context) NewTypedSRQ(init provider.SRQInit) (provider.SRQ, error) {
	switch init.Type {
	case abi.SRQTypeBasic:
		return c.NewSRQ(init.MaxWr, init.MaxSGE)
	case abi.SRQTypeXRC:
		return nil, transport.NotSupported("rxe: XRC SRQs are not supported")
	}
	return nil, transport.NotSupported("rxe: SRQ type %d", init.Type)
}

// srq is rxe's shared receive queue: one kernel ring mapped into the
// process, replaced by a new mapping when the kernel resizes it.
type srq struct {
	resp   abi.RXECreateSRQResp
	link   tracked    // in the context's list of mapped objects
	modMI  abi.MMInfo // the kernel writes here on resize
	modCmd abi.RXEModifySRQCmd
	life   *lifetime
	recvQueue
}

// CreateData implements provider.SRQ.
func (s *srq) CreateData() (in, out []byte) {
	return nil, unsafe.Slice((*byte)(unsafe.Pointer(&s.resp)), unsafe.Sizeof(s.resp))
}

// Created implements provider.SRQ.
func (s *srq) Created(conn *transport.Conn, handle uint32, maxWr, maxSGE uint32) error {
	var q *queue
	err := conn.UseFD(func(fd int) (err error) {
		q, err = mapQueue(fd, s.resp.MI, recvWQESize)
		return err
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.q = q
	s.maxSGE = min(int(maxSGE), (q.elemSize-recvWQESize)/sgeSize)
	s.mu.Unlock()
	if !s.life.track(&s.link, s) {
		// Closing: uverbs unmaps the queues (Destroyed) and destroys it.
		return provider.ErrClosed
	}
	return nil
}

// ModifyData implements provider.SRQ: the address of the mminfo the
// kernel fills when max_wr changes.
func (s *srq) ModifyData() []byte {
	s.modMI = abi.MMInfo{}
	s.modCmd.MmapInfoAddr = uint64(uintptr(unsafe.Pointer(&s.modMI)))
	return unsafe.Slice((*byte)(unsafe.Pointer(&s.modCmd)), unsafe.Sizeof(s.modCmd))
}

// Modify implements provider.SRQModifier. A resize holds the queue's lock
// from before MODIFY_SRQ until the new ring is mapped, as librxe does: the
// kernel copies the posted receives into a new ring and frees the old one,
// so a receive posted into the old ring in between would be lost.
func (s *srq) Modify(conn *transport.Conn, resized bool, send func(drv []byte) error) error {
	if !resized {
		return send(s.ModifyData())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.q == nil {
		return provider.ErrClosed
	}
	if err := send(s.ModifyData()); err != nil {
		return err
	}
	return s.remap(conn)
}

// Modified implements provider.SRQ for callers without SRQModifier: it
// maps the new ring after a resize.
func (s *srq) Modified(conn *transport.Conn, resized bool) error {
	if !resized {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.remap(conn)
}

// remap adopts the ring the kernel made on a resize; s.mu is held. Without
// it the SRQ is lost: the old ring is unmapped either way, and posting
// then fails with ErrClosed instead of going nowhere.
func (s *srq) remap(conn *transport.Conn) error {
	var q *queue
	err := conn.UseFD(func(fd int) (err error) {
		q, err = mapQueue(fd, s.modMI, recvWQESize)
		return err
	})
	if s.q != nil {
		s.q.unmap()
	}
	s.q = q
	return err
}

// Destroyed implements provider.SRQ.
func (s *srq) Destroyed() error {
	s.life.untrack(&s.link)
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.q.unmap()
	s.q = nil
	return err
}
