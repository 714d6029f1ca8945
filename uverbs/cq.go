package uverbs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/transport"
)

// CompChannel delivers completion events of the CQs attached to it.
// Waiting parks the goroutine on the Go netpoller.
type CompChannel struct {
	ctx   *Context
	file  *os.File
	id    uint64 // in ctx.chans
	waker eventWaker

	mu       sync.Mutex
	closed   bool
	released bool // the file closed for a removed device
	attached int
}

// NewCompChannel creates a completion channel.
func (c *Context) NewCompChannel() (*CompChannel, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	req := abi.CreateCompChannel{}
	var resp abi.CreateCompChannelResp
	if err := c.conn.Write("create_comp_channel", &transport.Write{
		Cmd: abi.CmdCreateCompChannel, In: asBytes(&req), CoreIn: int(unsafe.Sizeof(req)),
		Out: asBytes(&resp), CoreOut: int(unsafe.Sizeof(resp)),
	}); err != nil {
		return nil, err
	}
	f, err := eventFile(int(int32(resp.FD)), "uverbs-comp-channel")
	if err != nil {
		return nil, err
	}
	ch := &CompChannel{ctx: c, file: f, id: c.nextID.Add(1), waker: eventWaker{rc: rawConn(f)}}
	// Listed under relMu, so that a removal or Close that released the
	// device meanwhile (and drained the list) does not miss it.
	c.relMu.Lock()
	if c.devReleased {
		c.relMu.Unlock()
		f.Close()
		if err := c.check(); err != nil {
			return nil, err
		}
		return nil, ErrClosed
	}
	c.chans.store(ch.id, ch)
	c.relMu.Unlock()
	return ch, nil
}

// FD returns the channel's file descriptor, for callers that poll it
// themselves. It is non-blocking.
func (ch *CompChannel) FD() int { return int(ch.file.Fd()) }

// Wait returns the next CQ with a completion event, waiting until one
// arrives or ctx ends. Acknowledge events with CQ.AckEvents. One goroutine
// at a time may wait on a channel.
func (ch *CompChannel) Wait(ctx context.Context) (*CQ, error) {
	if ch == nil {
		return nil, errNilChannel
	}
	ch.mu.Lock()
	closed := ch.closed
	ch.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("uverbs: get_cq_event: completion channel: %w", ErrClosed)
	}
	return ch.wait(ctx, nil)
}

// wait is Wait that also gives up once stopped reports true (CQ.Wait: its
// CQ closed).
func (ch *CompChannel) wait(ctx context.Context, stopped func() bool) (*CQ, error) {
	var desc abi.CompEventDesc
	if err := readEventUntil(ctx, ch.file, &ch.waker, &desc, stopped); err != nil {
		if errors.Is(err, errStopped) {
			return nil, fmt.Errorf("uverbs: get_cq_event: %w", ErrClosed)
		}
		return nil, ch.ctx.removedErr(fmt.Errorf("uverbs: get_cq_event: %w", err))
	}
	cq := ch.ctx.lookupCQ(desc.CQHandle)
	if cq == nil {
		return nil, fmt.Errorf("uverbs: get_cq_event: event for unknown CQ %d", desc.CQHandle)
	}
	cq.eventsGot.Add(1)
	// Providers that arm the CQ themselves count events (libibverbs'
	// cq_event hook: mlx5's arm sequence number).
	if e, ok := cq.prov.(interface{ Event() }); ok {
		e.Event()
	}
	return cq, nil
}

// SetDeadline sets a time after which Wait returns an error matching
// os.ErrDeadlineExceeded, for a Wait blocked at that moment as for later
// ones; the context given to Wait still applies too. A time in the past
// wakes a blocked Wait at once, so another goroutine can hand the waiter
// news (a deadline of its own that changed, a shutdown) without a context
// per wait. The zero time clears it, as net.Conn's deadlines do.
func (ch *CompChannel) SetDeadline(t time.Time) error {
	if ch == nil {
		return errNilChannel
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.closed || ch.released {
		return fmt.Errorf("uverbs: completion channel: %w", ErrClosed)
	}
	return ch.waker.setOwn(t, ch.file)
}

// Close destroys the channel. It fails with ErrBusy while CQs use it.
func (ch *CompChannel) Close() error {
	if ch == nil {
		return nil
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.closed {
		return nil
	}
	if ch.released {
		ch.closed = true
		return nil
	}
	if ch.attached > 0 {
		return fmt.Errorf("uverbs: destroy_comp_channel: %d CQ(s) still use it: %w", ch.attached, ErrBusy)
	}
	ch.closed = true
	ch.ctx.chans.remove(ch.id)
	ch.waker.close()
	return ch.file.Close()
}

// release closes the channel's file when the device was removed, whatever
// CQs still use it: the file keeps the kernel's device in use. A waiter
// wakes with ErrDeviceRemoved.
func (ch *CompChannel) release() {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if !ch.closed && !ch.released {
		ch.released = true
		ch.waker.close()
		ch.file.Close()
	}
}

func (ch *CompChannel) attach() error {
	if ch == nil {
		return errNilChannel
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.closed {
		return fmt.Errorf("uverbs: completion channel: %w", ErrClosed)
	}
	ch.attached++
	return nil
}

func (ch *CompChannel) detach() {
	ch.mu.Lock()
	ch.attached--
	ch.mu.Unlock()
}

// CQOptions are the optional parameters of CreateCQ.
type CQOptions struct {
	// Channel receives the CQ's completion events (nil: none).
	Channel *CompChannel
	// CompVector is the completion vector (interrupt) to use, below
	// Context.NumCompVectors.
	CompVector int
	// SingleThreaded promises that Poll, RequestNotify and Wait are
	// called from one goroutine at a time (rdma-core's
	// IBV_CREATE_CQ_ATTR_SINGLE_THREADED; libmlx5's poll under
	// MLX5_SINGLE_THREADED): the mlx5 provider then takes the CQ's lock
	// without a locked instruction, whichever goroutine polls (a CQ
	// polled by one goroutine only is as cheap without it, see
	// QPInitAttr.SingleThreaded). Close,
	// Resize and QPs created or destroyed on the CQ stay safe from any
	// goroutine; two polls at once corrupt the CQ (the race detector
	// reports them). CQ.SingleThreaded says whether the lock went.
	SingleThreaded bool
}

// CQ is a completion queue.
type CQ struct {
	ctx      *Context
	handle   uint32
	id       uint64
	capacity int
	channel  *CompChannel
	prov     provider.CQ
	poll     provider.Poller // nil when the provider has no data path
	solo     bool            // the provider's poll takes no locked instruction

	eventsGot atomic.Uint32
	eventsAck atomic.Uint32

	waiting chan struct{} // one Wait at a time (a token, so waiting honours ctx); nil without a channel

	// RequestNotify's command, kept so that arming allocates nothing
	armMu  sync.Mutex
	armReq abi.ReqNotifyCQ
	armCmd transport.Write

	mu     sync.Mutex
	closed bool
}

// CreateCQ creates a completion queue of at least cqe entries.
func (c *Context) CreateCQ(cqe int, opts *CQOptions) (*CQ, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	var o CQOptions
	if opts != nil {
		o = *opts
	}
	if cqe < 1 {
		return nil, fmt.Errorf("uverbs: create_cq: cqe %d: a CQ needs at least one entry: %w", cqe, unix.EINVAL)
	}
	if cqe > 0x7fffffff {
		return nil, fmt.Errorf("uverbs: create_cq: cqe %d is beyond the ABI: %w", cqe, unix.EINVAL)
	}
	if o.CompVector < 0 || (c.numCV > 0 && o.CompVector >= c.numCV) {
		return nil, fmt.Errorf("uverbs: create_cq: comp vector %d: the device has %d (0..%d): %w", o.CompVector, c.numCV, c.numCV-1, unix.EINVAL)
	}
	pc, ok := c.pctx.(provider.CQContext)
	if !ok {
		return nil, fmt.Errorf("uverbs: create_cq: %s provider: %w", c.prov.Name(), ErrNotSupported)
	}
	if o.Channel != nil {
		if o.Channel.ctx != c {
			return nil, fmt.Errorf("uverbs: create_cq: the completion channel belongs to another context: %w", unix.EINVAL)
		}
		if err := o.Channel.attach(); err != nil {
			return nil, fmt.Errorf("uverbs: create_cq: %w", err)
		}
	}
	pcq, err := pc.NewCQ(cqe)
	if err != nil {
		if o.Channel != nil {
			o.Channel.detach()
		}
		return nil, fmt.Errorf("uverbs: create_cq: %s provider: %w", c.prov.Name(), err)
	}
	cq := &CQ{ctx: c, id: c.nextID.Add(1), channel: o.Channel, prov: pcq}
	if o.Channel != nil { // Wait needs a channel
		cq.waiting = make(chan struct{}, 1)
	}
	if st, ok := pcq.(provider.SingleThreadedCQ); ok && o.SingleThreaded {
		cq.solo = st.SetSingleThreaded()
	}
	handle, got, err := c.createCQ(cq.id, cqe, o, pcq)
	if err == nil {
		cq.handle, cq.capacity = handle, got
		if err = pcq.Created(c.conn, handle, got); err != nil {
			destroyCQ(c, handle)
		}
	}
	if err != nil {
		pcq.Destroyed()
		if o.Channel != nil {
			o.Channel.detach()
		}
		return nil, err
	}
	cq.poll, _ = pcq.(provider.Poller)
	c.cqs.store(cq.id, cq)
	runtime.AddCleanup(cq, func(a cqCleanup) { a.run() }, cqCleanup{c, handle, cq.id, pcq, o.Channel})
	return cq, nil
}

func (c *Context) createCQ(id uint64, cqe int, o CQOptions, pcq provider.CQ) (handle uint32, got int, err error) {
	drvIn, drvOut := pcq.CreateData()
	var respCQE uint32
	q := transport.NewIoctl(abi.ObjectCQ, abi.MethodCQCreate)
	defer q.Free()
	iHandle := q.NewHandle(abi.AttrCreateCQHandle)
	q.Out(abi.AttrCreateCQRespCQE, asBytes(&respCQE))
	q.U32(abi.AttrCreateCQCQE, uint32(cqe))
	q.U64(abi.AttrCreateCQUserHandle, id)
	if o.Channel != nil {
		q.FD(abi.AttrCreateCQCompChannel, int32(o.Channel.FD()))
	}
	q.U32(abi.AttrCreateCQCompVector, uint32(o.CompVector))
	if c.async != nil {
		q.Optional(q.FD(abi.AttrCreateCQEventFD, int32(c.async.Fd())))
	}
	if len(drvIn) > 0 {
		q.In(abi.AttrUHWIn, drvIn)
	}
	if len(drvOut) > 0 {
		q.Out(abi.AttrUHWOut, drvOut)
	}
	viaWrite := false
	err = c.conn.IoctlOrWrite("create_cq", transport.OpCreateCQ, q, func() error {
		viaWrite = true
		channel := int32(-1)
		if o.Channel != nil {
			channel = int32(o.Channel.FD())
		}
		req := abi.CreateCQ{UserHandle: id, CQE: uint32(cqe), CompVector: uint32(o.CompVector), CompChannel: channel}
		var resp abi.CreateCQResp
		if err := c.writeDriver("create_cq", abi.CmdCreateCQ, asBytes(&req), drvIn, asBytes(&resp), drvOut); err != nil {
			return err
		}
		handle, respCQE = resp.CQHandle, resp.CQE
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	if !viaWrite {
		handle = uint32(q.Data(iHandle))
	}
	return handle, int(respCQE), nil
}

// Capacity returns the number of entries the kernel granted (at least the
// number asked for).
func (cq *CQ) Capacity() int {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	return cq.capacity
}

// SingleThreaded reports whether the CQ was created with
// CQOptions.SingleThreaded and its provider left its lock out for it.
func (cq *CQ) SingleThreaded() bool { return cq.solo }

// Handle returns the kernel's handle of the CQ.
func (cq *CQ) Handle() uint32 { return cq.handle }

// Provider returns the provider's half of the CQ, for the provider's data
// path.
func (cq *CQ) Provider() provider.CQ { return cq.prov }

// RequestNotify arms the CQ: the next completion (the next solicited one
// with solicitedOnly) raises an event on its channel.
func (cq *CQ) RequestNotify(solicitedOnly bool) error {
	if err := cq.use(); err != nil {
		return err
	}
	if a, ok := cq.prov.(interface{ Arm(bool) error }); ok {
		return a.Arm(solicitedOnly)
	}
	cq.armMu.Lock()
	defer cq.armMu.Unlock()
	cq.armReq = abi.ReqNotifyCQ{CQHandle: cq.handle}
	if solicitedOnly {
		cq.armReq.SolicitedOnly = 1
	}
	cq.armCmd = transport.Write{Cmd: abi.CmdReqNotifyCQ, In: asBytes(&cq.armReq), CoreIn: int(unsafe.Sizeof(cq.armReq))}
	return cq.ctx.conn.Write("req_notify_cq", &cq.armCmd)
}

// Resize changes the CQ's capacity to at least cqe entries, keeping the
// completions it holds.
func (cq *CQ) Resize(cqe int) error {
	if err := cq.use(); err != nil {
		return fmt.Errorf("uverbs: resize_cq: %w", err)
	}
	if cqe < 1 || cqe > 0x7fffffff {
		return fmt.Errorf("uverbs: resize_cq: cqe %d out of range: %w", cqe, unix.EINVAL)
	}
	r, ok := cq.prov.(provider.CQResizer)
	sr, sized := cq.prov.(provider.CQSizedResizer)
	if !ok && !sized {
		return fmt.Errorf("uverbs: resize_cq: %s provider: %w", cq.ctx.prov.Name(), ErrNotSupported)
	}
	var resp abi.ResizeCQResp
	send := func(drvIn, drvOut []byte) (int, error) {
		req := abi.ResizeCQ{CQHandle: cq.handle, CQE: uint32(cqe)}
		if err := cq.ctx.writeDriver("resize_cq", abi.CmdResizeCQ, asBytes(&req), drvIn, asBytes(&resp), drvOut); err != nil {
			return 0, err
		}
		return int(resp.CQE), nil
	}
	var err error
	if sized {
		err = sr.ResizeTo(cq.ctx.conn, cqe, send)
	} else {
		err = r.Resize(cq.ctx.conn, send)
	}
	if err != nil {
		return err
	}
	cq.mu.Lock()
	cq.capacity = int(resp.CQE)
	cq.mu.Unlock()
	return nil
}

// Wait moves up to len(wcs) completions into wcs, waiting until there is
// at least one or ctx ends, and returns how many. It is the loop every
// event-driven program writes, done race-free: poll; arm the CQ
// (RequestNotify); poll again, since a completion that came before the arm
// raises no event; wait on the channel, parked on the Go netpoller with no
// thread held; acknowledge the event; repeat. The completions' statuses are
// the caller's to check (WC.Err).
//
// The CQ needs a completion channel of its own (CQOptions.Channel, shared
// with no other CQ): events of another CQ would be taken from it. Calls on
// one CQ take turns; do not mix Wait with CompChannel.Wait on its channel.
// Poll stays the way to busy-poll. A Close of the CQ from another
// goroutine ends a Wait blocked on it with an error matching ErrClosed.
func (cq *CQ) Wait(ctx context.Context, wcs []WC) (int, error) {
	if cq == nil {
		return 0, errNilCQ
	}
	if len(wcs) == 0 {
		return 0, fmt.Errorf("uverbs: CQ.Wait: no room for a completion (len(wcs) is 0): %w", unix.EINVAL)
	}
	ch := cq.channel
	if ch == nil {
		return 0, fmt.Errorf("uverbs: CQ.Wait: CQ %d was created without a completion channel (CQOptions.Channel): %w", cq.handle, unix.EINVAL)
	}
	ch.mu.Lock()
	shared := ch.attached
	ch.mu.Unlock()
	if shared > 1 {
		return 0, fmt.Errorf("uverbs: CQ.Wait: CQ %d shares its completion channel with %d other CQ(s); use CompChannel.Wait: %w", cq.handle, shared-1, unix.EINVAL)
	}
	select {
	case cq.waiting <- struct{}{}:
	case <-ctx.Done():
		return 0, fmt.Errorf("uverbs: CQ.Wait: %w", ctx.Err())
	}
	defer func() { <-cq.waiting }()
	for {
		if n, err := cq.Poll(wcs); n > 0 || err != nil {
			return n, err
		}
		if err := cq.RequestNotify(false); err != nil {
			return 0, fmt.Errorf("uverbs: CQ.Wait: %w", err)
		}
		if n, err := cq.Poll(wcs); n > 0 || err != nil {
			// Armed with nothing to wait for: the event this arm raises
			// later is taken (and acknowledged) by the next Wait.
			return n, err
		}
		got, err := ch.wait(ctx, cq.isClosed)
		if err != nil {
			return 0, fmt.Errorf("uverbs: CQ.Wait: %w", err)
		}
		got.AckEvents(1)
		if got != cq {
			return 0, fmt.Errorf("uverbs: CQ.Wait: an event of CQ %d on CQ %d's channel: %w", got.handle, cq.handle, unix.EINVAL)
		}
	}
}

// AckEvents acknowledges n completion events received from Wait.
func (cq *CQ) AckEvents(n int) {
	if n > 0 {
		cq.eventsAck.Add(uint32(n))
	}
}

// Close destroys the CQ. The kernel refuses (EBUSY) while QPs or SRQs use
// it. Events returned by Wait but not acknowledged are reported as an
// error after the CQ is destroyed, since rdma-core would block forever on
// them. A Wait blocked on the CQ returns ErrClosed. Closing twice is a
// no-op.
func (cq *CQ) Close() error {
	if cq == nil {
		return nil
	}
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.closed {
		return nil
	}
	c := cq.ctx
	if err := c.destroy(func() error { _, err := destroyCQ(c, cq.handle); return err }); err != nil {
		return err
	}
	cq.closed = true
	c.cqs.remove(cq.id)
	if ch := cq.channel; ch != nil {
		ch.detach()
		// A CQ.Wait blocked on the channel (which no other CQ shares)
		// finds the CQ closed; no event can come for it any more.
		ch.waker.kick(ch.file)
	}
	err := cq.prov.Destroyed()
	if got, acked := cq.eventsGot.Load(), cq.eventsAck.Load(); got != acked {
		err = errors.Join(err, fmt.Errorf("uverbs: destroy_cq: %d completion event(s) received but %d acknowledged", got, acked))
	}
	return err
}

func (cq *CQ) isClosed() bool {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	return cq.closed
}

func (cq *CQ) use() error {
	if cq == nil {
		return errNilCQ
	}
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.closed {
		return fmt.Errorf("uverbs: CQ %d: %w", cq.handle, ErrClosed)
	}
	return cq.ctx.check()
}

func destroyCQ(c *Context, handle uint32) (abi.DestroyCQResp, error) {
	var resp abi.DestroyCQResp
	q := transport.NewIoctl(abi.ObjectCQ, abi.MethodCQDestroy)
	defer q.Free()
	q.Out(abi.AttrDestroyCQResp, asBytes(&resp))
	q.Handle(abi.AttrDestroyCQHandle, handle)
	err := c.conn.IoctlOrWrite("destroy_cq", transport.OpDestroyCQ, q, func() error {
		req := abi.DestroyCQ{CQHandle: handle}
		return c.conn.Write("destroy_cq", &transport.Write{
			Cmd: abi.CmdDestroyCQ, In: asBytes(&req), CoreIn: int(unsafe.Sizeof(req)),
			Out: asBytes(&resp), CoreOut: int(unsafe.Sizeof(resp)),
		})
	})
	return resp, err
}

func (c *Context) lookupCQ(id uint64) *CQ {
	return c.cqs.load(id)
}

// cqCleanup destroys a CQ the program forgot to close.
type cqCleanup struct {
	ctx     *Context
	handle  uint32
	id      uint64
	prov    provider.CQ
	channel *CompChannel
}

func (a cqCleanup) run() {
	if live := a.ctx.cqs.remove(a.id); !live {
		return // closed explicitly
	}
	if !a.ctx.isClosed() {
		if _, err := destroyCQ(a.ctx, a.handle); err != nil && !a.ctx.isClosed() {
			// Still in the kernel, which may still write its ring.
			a.ctx.keepUntilClose(a.letGo)
			return
		}
	}
	a.letGo()
}

func (a cqCleanup) letGo() {
	a.prov.Destroyed()
	if a.channel != nil {
		a.channel.detach()
	}
}

var _ = unix.EBUSY
