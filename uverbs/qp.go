package uverbs

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/transport"
)

// QPType is a queue pair's transport.
type QPType uint8

// QP types.
const (
	// SMI and GSI are the kernel's own management QPs (QP0, QP1); they
	// cannot be created from user space, but RDMA netlink lists them.
	QPTypeSMI       QPType = 0
	QPTypeGSI       QPType = 1
	QPTypeRC        QPType = abi.QPTypeRC
	QPTypeUC        QPType = abi.QPTypeUC
	QPTypeUD        QPType = abi.QPTypeUD
	QPTypeRawPacket QPType = abi.QPTypeRawPacket
	QPTypeXRCSend   QPType = abi.QPTypeXRCIni
	QPTypeXRCRecv   QPType = abi.QPTypeXRCTgt
)

func (t QPType) String() string {
	switch t {
	case QPTypeSMI:
		return "SMI"
	case QPTypeGSI:
		return "GSI"
	case QPTypeRC:
		return "RC"
	case QPTypeUC:
		return "UC"
	case QPTypeUD:
		return "UD"
	case QPTypeRawPacket:
		return "RAW_PACKET"
	case QPTypeXRCSend:
		return "XRC_SEND"
	case QPTypeXRCRecv:
		return "XRC_RECV"
	}
	return fmt.Sprintf("QPType(%d)", uint8(t))
}

// QPCap are a QP's queue sizes: what was asked for, and (from CreateQP)
// what the kernel granted.
type QPCap struct {
	MaxSendWr     uint32
	MaxRecvWr     uint32
	MaxSendSGE    uint32
	MaxRecvSGE    uint32
	MaxInlineData uint32
}

// QPInitAttr describes a QP to create.
type QPInitAttr struct {
	Type   QPType
	SendCQ *CQ
	RecvCQ *CQ
	SRQ    *SRQ // receive from a shared receive queue instead of the QP's own
	Cap    QPCap
	// SignalAll makes every send work request produce a completion.
	SignalAll bool
	// SingleThreaded promises that PostSend is called from one goroutine
	// at a time (PostRecv likewise), as libmlx5's MLX5_SINGLE_THREADED
	// and thread domains do: the mlx5 provider then takes its send
	// queue's lock without a locked instruction, whichever goroutine
	// posts. Close and destroy stay safe from any goroutine; two posts at
	// once corrupt the queue (the race detector reports them). Where the
	// kernel lacks membarrier(2), or on rxe, the locks stay.
	//
	// Without it, on mlx5 (amd64), a queue posted to by only one
	// goroutine costs about the same: the lock is biased to the first
	// goroutine that takes it, which then takes no locked instruction
	// either, until another goroutine takes it (see the package
	// documentation on sharing objects).
	SingleThreaded bool
}

// QP is a queue pair.
type QP struct {
	pd     *PD
	handle uint32
	qpn    uint32
	typ    QPType
	cap    QPCap
	sendCQ *CQ
	recvCQ *CQ
	srq    *SRQ
	xrcd   *XRCD // XRC_RECV QPs: their domain (pd is then a stand-in)
	prov   provider.QP
	id     uint64

	send   provider.Sender   // nil when the provider has no data path
	recv   provider.Receiver // likewise
	stateA atomic.Uint32     // QPState, read by the data path

	mu     sync.Mutex
	closed bool
	ref    *cleanupRef
}

// CreateQP creates a queue pair in the PD.
func (pd *PD) CreateQP(attr QPInitAttr) (*QP, error) {
	if err := pd.use(); err != nil {
		return nil, fmt.Errorf("uverbs: create_qp: %w", err)
	}
	c := pd.ctx
	xrcSend := attr.Type == QPTypeXRCSend
	switch attr.Type {
	case QPTypeRC, QPTypeUC, QPTypeUD, QPTypeRawPacket, QPTypeXRCSend:
	case QPTypeXRCRecv:
		return nil, fmt.Errorf("uverbs: create_qp: XRC_RECV QPs are created in an XRC domain (XRCD.CreateQP), not a PD: %w", ErrNotSupported)
	default:
		return nil, fmt.Errorf("uverbs: create_qp: Type %v is not a QP type: %w", attr.Type, unix.EINVAL)
	}
	if xrcSend {
		// An XRC send QP only sends: what it would receive goes to the SRQ
		// its peer's work requests name, on the peer's side.
		if attr.SendCQ == nil {
			return nil, fmt.Errorf("uverbs: create_qp: SendCQ is required: %w", unix.EINVAL)
		}
		if attr.RecvCQ != nil || attr.SRQ != nil || attr.Cap.MaxRecvWr != 0 || attr.Cap.MaxRecvSGE != 0 {
			return nil, fmt.Errorf("uverbs: create_qp: an XRC_SEND QP has no receive side: RecvCQ, SRQ, Cap.MaxRecvWr and MaxRecvSGE must be unset: %w", unix.EINVAL)
		}
	} else {
		if attr.SendCQ == nil || (attr.RecvCQ == nil && attr.SRQ == nil) {
			return nil, fmt.Errorf("uverbs: create_qp: SendCQ and RecvCQ are required: %w", unix.EINVAL)
		}
		if attr.RecvCQ == nil {
			return nil, fmt.Errorf("uverbs: create_qp: RecvCQ is required (also with an SRQ): %w", unix.EINVAL)
		}
	}
	for _, cq := range []struct {
		field string
		cq    *CQ
	}{{"SendCQ", attr.SendCQ}, {"RecvCQ", attr.RecvCQ}} {
		if cq.cq == nil {
			continue // XRC_SEND's RecvCQ
		}
		if cq.cq.ctx != c {
			return nil, fmt.Errorf("uverbs: create_qp: %s belongs to another context: %w", cq.field, unix.EINVAL)
		}
		if err := cq.cq.use(); err != nil {
			return nil, fmt.Errorf("uverbs: create_qp: %s: %w", cq.field, err)
		}
	}
	if attr.SRQ != nil {
		if err := attr.SRQ.use(); err != nil {
			return nil, fmt.Errorf("uverbs: create_qp: %w", err)
		}
		if attr.SRQ.pd.ctx != c {
			return nil, fmt.Errorf("uverbs: create_qp: the SRQ belongs to another context: %w", unix.EINVAL)
		}
		if attr.Cap.MaxRecvWr != 0 || attr.Cap.MaxRecvSGE != 0 {
			return nil, fmt.Errorf("uverbs: create_qp: Cap.MaxRecvWr and MaxRecvSGE must be 0 with an SRQ: %w", unix.EINVAL)
		}
	}
	return pd.newQP(attr, nil)
}

// CreateQP creates an XRC receive QP (Type QPTypeXRCRecv) in the domain:
// it has no queues, CQs or PD of its own; the messages that XRC send QPs
// address to an XRC SRQ of the domain arrive through it. Devices without
// XRC refuse with an error matching ErrNotSupported.
func (x *XRCD) CreateQP(attr QPInitAttr) (*QP, error) {
	if x == nil {
		return nil, invalid("create_qp", "nil XRCD")
	}
	if err := x.use("create_qp", x.ctx); err != nil {
		return nil, err
	}
	if err := x.ctx.check(); err != nil {
		return nil, fmt.Errorf("uverbs: create_qp: %w", err)
	}
	if attr.Type != QPTypeXRCRecv {
		return nil, invalid("create_qp", "Type %v: an XRC domain holds XRC_RECV QPs only", attr.Type)
	}
	if attr.SendCQ != nil || attr.RecvCQ != nil || attr.SRQ != nil || attr.Cap != (QPCap{}) || attr.SignalAll {
		return nil, invalid("create_qp", "an XRC_RECV QP has no queues: SendCQ, RecvCQ, SRQ, Cap and SignalAll must be unset")
	}
	// The QP's verbs reach the context through qp.pd: a stand-in that
	// names no kernel PD (create sends the domain's handle instead).
	return (&PD{ctx: x.ctx, ref: &cleanupRef{}}).newQP(attr, x)
}

func (pd *PD) newQP(attr QPInitAttr, xrcd *XRCD) (*QP, error) {
	defer runtime.KeepAlive(pd) // reachable until the command is done, so no cleanup destroys it meanwhile
	c := pd.ctx
	pc, ok := c.pctx.(provider.QPContext)
	if !ok {
		return nil, fmt.Errorf("uverbs: create_qp: %s provider: %w", c.prov.Name(), ErrNotSupported)
	}
	init := provider.QPInit{
		Type: provider.QPType(attr.Type), MaxSendWr: attr.Cap.MaxSendWr, MaxRecvWr: attr.Cap.MaxRecvWr,
		MaxSendSGE: attr.Cap.MaxSendSGE, MaxRecvSGE: attr.Cap.MaxRecvSGE, MaxInlineData: attr.Cap.MaxInlineData,
		HasSRQ: attr.SRQ != nil, SQSigAll: attr.SignalAll, SingleThreaded: attr.SingleThreaded,
	}
	if attr.SendCQ != nil {
		init.SendCQ = attr.SendCQ.prov
	}
	if attr.RecvCQ != nil {
		init.RecvCQ = attr.RecvCQ.prov
	}
	if attr.SRQ != nil {
		init.SRQ = attr.SRQ.prov
	}
	pqp, err := pc.NewQP(init)
	if err != nil {
		return nil, fmt.Errorf("uverbs: create_qp: %s provider: %w", c.prov.Name(), err)
	}
	qp := &QP{pd: pd, xrcd: xrcd, typ: attr.Type, sendCQ: attr.SendCQ, recvCQ: attr.RecvCQ, srq: attr.SRQ, prov: pqp, id: c.nextID.Add(1), ref: &cleanupRef{}}
	caps, err := qp.create(attr)
	if err == nil {
		qp.cap = caps
		init.MaxSendWr, init.MaxRecvWr = caps.MaxSendWr, caps.MaxRecvWr
		init.MaxSendSGE, init.MaxRecvSGE, init.MaxInlineData = caps.MaxSendSGE, caps.MaxRecvSGE, caps.MaxInlineData
		if err = pqp.Created(c.conn, qp.handle, qp.qpn, init); err != nil {
			destroyQP(c, qp.handle)
		}
	}
	if err != nil {
		pqp.Destroyed()
		return nil, err
	}
	c.qps.store(qp.id, qp)
	qp.send, _ = pqp.(provider.Sender)
	qp.recv, _ = pqp.(provider.Receiver)
	runtime.AddCleanup(qp, func(a qpCleanup) { a.run() }, qpCleanup{c, qp.ref, qp.handle, qp.id, pqp, parents{pd: qp.pd, cq: qp.sendCQ, recvCQ: qp.recvCQ, srq: qp.srq, xrcd: qp.xrcd}})
	return qp, nil
}

func (qp *QP) create(attr QPInitAttr) (QPCap, error) {
	c := qp.pd.ctx
	drvIn, drvOut := qp.prov.CreateData()
	// What the kernel reads and writes through the ioctl's pointers, in
	// one allocation (three, as separate variables).
	io := &struct {
		kcap, respCap abi.QPCap
		qpn           uint32
	}{kcap: abi.QPCap{
		MaxSendWr: attr.Cap.MaxSendWr, MaxRecvWr: attr.Cap.MaxRecvWr, MaxSendSGE: attr.Cap.MaxSendSGE,
		MaxRecvSGE: attr.Cap.MaxRecvSGE, MaxInlineData: attr.Cap.MaxInlineData,
	}}
	kcap, respCap, qpn := &io.kcap, &io.respCap, &io.qpn
	// Attributes in rdma-core's order, so the bytes match libibverbs'.
	q := transport.NewIoctl(abi.ObjectQP, abi.MethodQPCreate)
	defer q.Free()
	// An XRC receive QP names its domain instead of a PD and CQs (the
	// kernel refuses those with it); the write form carries the domain in
	// pd_handle.
	pdHandle, sendCQHandle := qp.pd.handle, uint32(0)
	if qp.xrcd != nil {
		pdHandle = qp.xrcd.handle
		q.Handle(abi.AttrCreateQPXRCDHandle, pdHandle)
	} else {
		q.Handle(abi.AttrCreateQPPDHandle, pdHandle)
	}
	if attr.SendCQ != nil {
		sendCQHandle = attr.SendCQ.handle
		q.Handle(abi.AttrCreateQPSendCQHandle, sendCQHandle)
	}
	var recvCQHandle uint32
	if attr.RecvCQ != nil {
		recvCQHandle = attr.RecvCQ.handle
		q.Handle(abi.AttrCreateQPRecvCQHandle, recvCQHandle)
	}
	iHandle := q.NewHandle(abi.AttrCreateQPHandle)
	q.Const(abi.AttrCreateQPType, uint64(attr.Type))
	q.U64(abi.AttrCreateQPUserHandle, qp.id)
	q.In(abi.AttrCreateQPCap, asBytes(kcap))
	if c.async != nil {
		q.FD(abi.AttrCreateQPEventFD, int32(c.async.Fd()))
	}
	if attr.SignalAll {
		q.U32(abi.AttrCreateQPFlags, abi.QPCreateSQSigAll)
	}
	if attr.SRQ != nil {
		q.Handle(abi.AttrCreateQPSRQHandle, attr.SRQ.handle)
	}
	q.Out(abi.AttrCreateQPRespCap, asBytes(respCap))
	q.Out(abi.AttrCreateQPRespQPNum, asBytes(qpn))
	if len(drvIn) > 0 {
		q.In(abi.AttrUHWIn, drvIn)
	}
	if len(drvOut) > 0 {
		q.Out(abi.AttrUHWOut, drvOut)
	}
	viaWrite := false
	err := c.conn.IoctlOrWrite("create_qp", transport.OpCreateQP, q, func() error {
		viaWrite = true
		req := abi.CreateQP{
			UserHandle: qp.id, PDHandle: pdHandle, SendCQHandle: sendCQHandle, RecvCQHandle: recvCQHandle,
			MaxSendWr: kcap.MaxSendWr, MaxRecvWr: kcap.MaxRecvWr, MaxSendSGE: kcap.MaxSendSGE, MaxRecvSGE: kcap.MaxRecvSGE,
			MaxInlineData: kcap.MaxInlineData, QPType: uint8(attr.Type),
		}
		if attr.SignalAll {
			req.SQSigAll = 1
		}
		if attr.SRQ != nil {
			req.SRQHandle, req.IsSRQ = attr.SRQ.handle, 1
		}
		var resp abi.CreateQPResp
		if err := c.writeDriver("create_qp", abi.CmdCreateQP, asBytes(&req), drvIn, asBytes(&resp), drvOut); err != nil {
			return err
		}
		qp.handle, *qpn = resp.QPHandle, resp.QPN
		*respCap = abi.QPCap{MaxSendWr: resp.MaxSendWr, MaxRecvWr: resp.MaxRecvWr, MaxSendSGE: resp.MaxSendSGE,
			MaxRecvSGE: resp.MaxRecvSGE, MaxInlineData: resp.MaxInlineData}
		return nil
	})
	if err != nil {
		return QPCap{}, err
	}
	if !viaWrite {
		qp.handle = uint32(q.Data(iHandle))
	}
	qp.qpn = *qpn
	return QPCap{respCap.MaxSendWr, respCap.MaxRecvWr, respCap.MaxSendSGE, respCap.MaxRecvSGE, respCap.MaxInlineData}, nil
}

// QPN returns the queue pair number peers address.
func (qp *QP) QPN() uint32 { return qp.qpn }

// Handle returns the kernel's handle of the QP.
func (qp *QP) Handle() uint32 { return qp.handle }

// Type returns the QP's transport.
func (qp *QP) Type() QPType { return qp.typ }

// Cap returns the queue sizes the kernel granted.
func (qp *QP) Cap() QPCap { return qp.cap }

// State returns the state the QP was last moved to (Query asks the kernel).
func (qp *QP) State() QPState { return QPState(qp.stateA.Load()) }

// Provider returns the provider's half of the QP, for its data path.
func (qp *QP) Provider() provider.QP { return qp.prov }

// Close destroys the QP. Closing twice is a no-op.
func (qp *QP) Close() error {
	if qp == nil {
		return nil
	}
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.closed {
		return nil
	}
	c := qp.pd.ctx
	if err := c.destroy(func() error { return destroyQP(c, qp.handle) }); err != nil {
		return err
	}
	qp.closed = true
	qp.ref.finish()
	c.qps.remove(qp.id)
	return qp.prov.Destroyed()
}

func (qp *QP) use() error {
	if qp == nil {
		return errNilQP
	}
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.closed {
		return fmt.Errorf("uverbs: QP %d: %w", qp.qpn, ErrClosed)
	}
	return qp.pd.ctx.check()
}

func destroyQP(c *Context, handle uint32) error {
	var resp abi.DestroyQPResp
	q := transport.NewIoctl(abi.ObjectQP, abi.MethodQPDestroy)
	defer q.Free()
	q.Out(abi.AttrDestroyQPResp, asBytes(&resp))
	q.Handle(abi.AttrDestroyQPHandle, handle)
	return c.conn.IoctlOrWrite("destroy_qp", transport.OpDestroyQP, q, func() error {
		req := abi.DestroyQP{QPHandle: handle}
		return c.conn.Write("destroy_qp", &transport.Write{
			Cmd: abi.CmdDestroyQP, In: asBytes(&req), CoreIn: int(unsafe.Sizeof(req)),
			Out: asBytes(&resp), CoreOut: int(unsafe.Sizeof(resp)),
		})
	})
}

type qpCleanup struct {
	ctx    *Context
	ref    *cleanupRef
	handle uint32
	id     uint64
	prov   provider.QP
	parents
}

func (a qpCleanup) run() {
	if !a.ref.finish() {
		return
	}
	a.ctx.qps.remove(a.id)
	if !a.ctx.isClosed() {
		if err := destroyQP(a.ctx, a.handle); err != nil && !a.ctx.isClosed() {
			// Still in the kernel, which may still use its queues: they
			// stay until the context closes.
			a.ctx.keepUntilClose(func() { a.prov.Destroyed() })
			return
		}
	}
	a.prov.Destroyed()
}
