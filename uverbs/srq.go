package uverbs

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/transport"
)

// SRQ is a shared receive queue: receive buffers many QPs draw from.
type SRQ struct {
	pd     *PD
	xrcd   *XRCD // XRC SRQs: the domain and CQ the kernel ties it to
	cq     *CQ
	handle uint32
	maxWr  uint32
	maxSGE uint32
	srqn   uint32
	prov   provider.SRQ
	id     uint64 // user handle: what async events name it by

	mu     sync.Mutex
	closed bool
	ref    *cleanupRef
}

// SRQAttr are the attributes of an SRQ.
type SRQAttr struct {
	MaxWr    uint32
	MaxSGE   uint32
	SRQLimit uint32 // raise EventSRQLimitReached when fewer WRs remain
}

// SRQ modify mask bits (enum ibv_srq_attr_mask).
const (
	SRQAttrMaxWr = 1 << 0
	SRQAttrLimit = 1 << 1
)

// CreateSRQ creates a shared receive queue in the PD.
func (pd *PD) CreateSRQ(attr SRQAttr) (*SRQ, error) {
	return pd.createSRQ("create_srq", attr, nil, nil)
}

// CreateXRCSRQ creates an XRC shared receive queue in the PD and the XRC
// domain: XRC send QPs address it by its Number, the messages arrive
// through an XRC receive QP of the domain, and their completions go to
// cq. Devices without XRC (rxe) refuse with an error matching
// ErrNotSupported.
func (pd *PD) CreateXRCSRQ(xrcd *XRCD, cq *CQ, attr SRQAttr) (*SRQ, error) {
	if err := pd.use(); err != nil {
		return nil, fmt.Errorf("uverbs: create_xsrq: %w", err)
	}
	if err := xrcd.use("create_xsrq", pd.ctx); err != nil {
		return nil, err
	}
	if cq == nil {
		return nil, invalid("create_xsrq", "nil CQ")
	}
	if cq.ctx != pd.ctx {
		return nil, invalid("create_xsrq", "CQ belongs to another context")
	}
	if err := cq.use(); err != nil {
		return nil, fmt.Errorf("uverbs: create_xsrq: CQ: %w", err)
	}
	return pd.createSRQ("create_xsrq", attr, xrcd, cq)
}

func (pd *PD) createSRQ(verb string, attr SRQAttr, xrcd *XRCD, cq *CQ) (*SRQ, error) {
	defer runtime.KeepAlive(pd) // reachable until the command is done, so no cleanup destroys it meanwhile
	if err := pd.use(); err != nil {
		return nil, fmt.Errorf("uverbs: %s: %w", verb, err)
	}
	if attr.MaxWr == 0 || attr.MaxSGE == 0 {
		return nil, fmt.Errorf("uverbs: %s: MaxWr %d and MaxSGE %d must be positive: %w", verb, attr.MaxWr, attr.MaxSGE, unix.EINVAL)
	}
	c := pd.ctx
	init := provider.SRQInit{Type: abi.SRQTypeBasic, MaxWr: attr.MaxWr, MaxSGE: attr.MaxSGE}
	if xrcd != nil {
		init.Type, init.CQ = abi.SRQTypeXRC, cq.prov
	}
	var ps provider.SRQ
	var err error
	if tc, ok := c.pctx.(provider.SRQTypeContext); ok {
		ps, err = tc.NewTypedSRQ(init)
	} else if pc, ok := c.pctx.(provider.SRQContext); ok && xrcd == nil {
		ps, err = pc.NewSRQ(attr.MaxWr, attr.MaxSGE)
	} else {
		err = ErrNotSupported
	}
	if err != nil {
		return nil, fmt.Errorf("uverbs: %s: %s provider: %w", verb, c.prov.Name(), err)
	}
	s := &SRQ{pd: pd, xrcd: xrcd, cq: cq, prov: ps, ref: &cleanupRef{}}
	id := c.nextID.Add(1)
	s.id = id
	drvIn, drvOut := ps.CreateData()
	var respMaxWr, respMaxSGE, respSRQN uint32
	q := transport.NewIoctl(abi.ObjectSRQ, abi.MethodSRQCreate)
	defer q.Free()
	iHandle := q.NewHandle(abi.AttrCreateSRQHandle)
	q.Handle(abi.AttrCreateSRQPDHandle, pd.handle)
	if xrcd != nil {
		q.Handle(abi.AttrCreateSRQXRCDHandle, xrcd.handle)
		q.Handle(abi.AttrCreateSRQCQHandle, cq.handle)
	}
	q.U64(abi.AttrCreateSRQUserHandle, id)
	q.U32(abi.AttrCreateSRQMaxWR, attr.MaxWr)
	q.U32(abi.AttrCreateSRQMaxSGE, attr.MaxSGE)
	q.U32(abi.AttrCreateSRQLimit, attr.SRQLimit)
	q.Const(abi.AttrCreateSRQType, uint64(init.Type))
	if c.async != nil {
		q.FD(abi.AttrCreateSRQEventFD, int32(c.async.Fd()))
	}
	q.Out(abi.AttrCreateSRQRespMaxWR, asBytes(&respMaxWr))
	q.Out(abi.AttrCreateSRQRespMaxSGE, asBytes(&respMaxSGE))
	if xrcd != nil {
		// The kernel answers the number only for XRC SRQs.
		q.Out(abi.AttrCreateSRQRespSRQNum, asBytes(&respSRQN))
	}
	if len(drvIn) > 0 {
		q.In(abi.AttrUHWIn, drvIn)
	}
	if len(drvOut) > 0 {
		q.Out(abi.AttrUHWOut, drvOut)
	}
	viaWrite := false
	err = c.conn.IoctlOrWrite(verb, transport.OpCreateSRQ, q, func() error {
		viaWrite = true
		var resp abi.CreateSRQResp
		var err error
		if xrcd != nil {
			req := abi.CreateXSRQ{UserHandle: id, SRQType: abi.SRQTypeXRC, PDHandle: pd.handle, MaxWr: attr.MaxWr, MaxSGE: attr.MaxSGE,
				SRQLimit: attr.SRQLimit, XRCDHandle: xrcd.handle, CQHandle: cq.handle}
			err = c.writeDriver(verb, abi.CmdCreateXSRQ, asBytes(&req), drvIn, asBytes(&resp), drvOut)
		} else {
			req := abi.CreateSRQ{UserHandle: id, PDHandle: pd.handle, MaxWr: attr.MaxWr, MaxSGE: attr.MaxSGE, SRQLimit: attr.SRQLimit}
			err = c.writeDriver(verb, abi.CmdCreateSRQ, asBytes(&req), drvIn, asBytes(&resp), drvOut)
		}
		if err != nil {
			return err
		}
		s.handle, respMaxWr, respMaxSGE, respSRQN = resp.SRQHandle, resp.MaxWr, resp.MaxSGE, resp.SRQN
		return nil
	})
	if err == nil && !viaWrite {
		s.handle = uint32(q.Data(iHandle))
	}
	if err == nil {
		s.maxWr, s.maxSGE, s.srqn = respMaxWr, respMaxSGE, respSRQN
		if err = ps.Created(c.conn, s.handle, respMaxWr, respMaxSGE); err != nil {
			destroySRQ(c, s.handle)
		}
	}
	if err != nil {
		ps.Destroyed()
		return nil, err
	}
	c.srqs.store(id, s)
	runtime.AddCleanup(s, func(a srqCleanup) { a.run() }, srqCleanup{c, s.ref, s.handle, id, ps, parents{pd: s.pd, cq: s.cq, xrcd: s.xrcd}})
	return s, nil
}

// Number returns the SRQ's number (srq_num): what XRC send work requests
// carry to address an XRC SRQ. Basic SRQs have no number anyone uses; it
// is 0 when the kernel did not report one.
func (s *SRQ) Number() uint32 { return s.srqn }

// XRCD returns the XRC domain of an XRC SRQ, nil for a basic one.
func (s *SRQ) XRCD() *XRCD { return s.xrcd }

// MaxWr returns the number of receive requests the kernel granted.
func (s *SRQ) MaxWr() uint32 { return s.maxWr }

// MaxSGE returns the scatter entries per receive request the kernel granted.
func (s *SRQ) MaxSGE() uint32 { return s.maxSGE }

// Handle returns the kernel's handle of the SRQ.
func (s *SRQ) Handle() uint32 { return s.handle }

// Provider returns the provider's half of the SRQ, for its data path.
func (s *SRQ) Provider() provider.SRQ { return s.prov }

// Modify changes the SRQ's limit (SRQAttrLimit) or size (SRQAttrMaxWr).
func (s *SRQ) Modify(attr SRQAttr, mask int) error {
	if err := s.use(); err != nil {
		return fmt.Errorf("uverbs: modify_srq: %w", err)
	}
	if mask == 0 || mask&^(SRQAttrMaxWr|SRQAttrLimit) != 0 {
		return fmt.Errorf("uverbs: modify_srq: mask %#x: want SRQAttrMaxWr and/or SRQAttrLimit: %w", mask, unix.EINVAL)
	}
	// Some kernels (rxe on 6.1) take a limit above the queue's size, which
	// can never be crossed; refuse it as the others do.
	maxWr := s.maxWr
	if mask&SRQAttrMaxWr != 0 {
		maxWr = attr.MaxWr
	}
	if mask&SRQAttrLimit != 0 && attr.SRQLimit > maxWr {
		return fmt.Errorf("uverbs: modify_srq: SRQLimit %d is above MaxWr %d: %w", attr.SRQLimit, maxWr, unix.EINVAL)
	}
	c := s.pd.ctx
	req := abi.ModifySRQ{SRQHandle: s.handle, AttrMask: uint32(mask), MaxWr: attr.MaxWr, SRQLimit: attr.SRQLimit}
	send := func(drv []byte) error {
		return c.conn.Write("modify_srq", &transport.Write{
			Cmd: abi.CmdModifySRQ, In: concat(asBytes(&req), drv), CoreIn: int(unsafe.Sizeof(req)),
		})
	}
	resized := mask&SRQAttrMaxWr != 0
	var err error
	if m, ok := s.prov.(provider.SRQModifier); ok {
		err = m.Modify(c.conn, resized, send)
	} else if err = send(s.prov.ModifyData()); err == nil {
		err = s.prov.Modified(c.conn, resized)
	}
	if err == nil && resized {
		s.maxWr = attr.MaxWr
	}
	return err
}

// Query returns the SRQ's attributes from the kernel.
func (s *SRQ) Query() (SRQAttr, error) {
	defer runtime.KeepAlive(s) // reachable until the command is done, so no cleanup destroys it meanwhile
	if err := s.use(); err != nil {
		return SRQAttr{}, fmt.Errorf("uverbs: query_srq: %w", err)
	}
	req := abi.QuerySRQ{SRQHandle: s.handle}
	var resp abi.QuerySRQResp
	if err := s.pd.ctx.conn.Write("query_srq", &transport.Write{
		Cmd: abi.CmdQuerySRQ, In: asBytes(&req), CoreIn: int(unsafe.Sizeof(req)),
		Out: asBytes(&resp), CoreOut: int(unsafe.Sizeof(resp)),
	}); err != nil {
		return SRQAttr{}, err
	}
	return SRQAttr{MaxWr: resp.MaxWr, MaxSGE: resp.MaxSGE, SRQLimit: resp.SRQLimit}, nil
}

// Close destroys the SRQ. The kernel refuses (EBUSY) while QPs use it.
// Closing twice is a no-op.
func (s *SRQ) Close() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	c := s.pd.ctx
	if err := c.destroy(func() error { return destroySRQ(c, s.handle) }); err != nil {
		return err
	}
	s.closed = true
	s.ref.finish()
	c.srqs.remove(s.id)
	return s.prov.Destroyed()
}

func (s *SRQ) use() error {
	if s == nil {
		return errNilSRQ
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("uverbs: SRQ %d: %w", s.handle, ErrClosed)
	}
	return s.pd.ctx.check()
}

func destroySRQ(c *Context, handle uint32) error {
	var resp abi.DestroySRQResp
	q := transport.NewIoctl(abi.ObjectSRQ, abi.MethodSRQDestroy)
	defer q.Free()
	q.Out(abi.AttrDestroySRQResp, asBytes(&resp))
	q.Handle(abi.AttrDestroySRQHandle, handle)
	return c.conn.IoctlOrWrite("destroy_srq", transport.OpDestroySRQ, q, func() error {
		req := abi.DestroySRQ{SRQHandle: handle}
		return c.conn.Write("destroy_srq", &transport.Write{
			Cmd: abi.CmdDestroySRQ, In: asBytes(&req), CoreIn: int(unsafe.Sizeof(req)),
			Out: asBytes(&resp), CoreOut: int(unsafe.Sizeof(resp)),
		})
	})
}

type srqCleanup struct {
	ctx    *Context
	ref    *cleanupRef
	handle uint32
	id     uint64
	prov   provider.SRQ
	parents
}

func (a srqCleanup) run() {
	if !a.ref.finish() {
		return
	}
	a.ctx.srqs.remove(a.id)
	if !a.ctx.isClosed() {
		if err := destroySRQ(a.ctx, a.handle); err != nil && !a.ctx.isClosed() {
			a.ctx.keepUntilClose(func() { a.prov.Destroyed() })
			return
		}
	}
	a.prov.Destroyed()
}
