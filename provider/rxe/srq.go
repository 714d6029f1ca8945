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
	q, err := mapQueue(conn.FD(), s.resp.MI, recvWQESize)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.q = q
	s.maxSGE = min(int(maxSGE), (q.elemSize-recvWQESize)/sgeSize)
	s.mu.Unlock()
	s.life.track(&s.link, s)
	return nil
}

// ModifyData implements provider.SRQ: the address of the mminfo the
// kernel fills when max_wr changes.
func (s *srq) ModifyData() []byte {
	s.modMI = abi.MMInfo{}
	s.modCmd.MmapInfoAddr = uint64(uintptr(unsafe.Pointer(&s.modMI)))
	return unsafe.Slice((*byte)(unsafe.Pointer(&s.modCmd)), unsafe.Sizeof(s.modCmd))
}

// Modified implements provider.SRQ: after a resize the old queue is gone
// and the new one must be mapped.
func (s *srq) Modified(conn *transport.Conn, resized bool) error {
	if !resized {
		return nil
	}
	q, err := mapQueue(conn.FD(), s.modMI, recvWQESize)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.q.unmap()
	s.q = q
	s.mu.Unlock()
	return nil
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
