package rdmacm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/uverbs"
)

// Option configures Dial, Listen and Request.Accept.
type Option func(*options) error

type options struct {
	ps          PortSpace
	privateData []byte
	cap         uverbs.QPCap
	sendCQ      int
	recvCQ      int
	resp, init  uint8
	retry, rnr  uint8
	tos         *uint8
	ackTimeout  *uint8
	src         string
	backlog     int
	reuseAddr   bool
	signalAll   bool
	compChannel bool
	pd          *uverbs.PD
	setup       func(*Conn) error
}

func defaultOptions() options {
	return options{
		ps:   PortSpaceTCP,
		cap:  uverbs.QPCap{MaxSendWr: 16, MaxRecvWr: 16, MaxSendSGE: 1, MaxRecvSGE: 1},
		resp: MaxResources, init: MaxResources, retry: 7, rnr: 7,
	}
}

func buildOptions(opts []Option) (options, error) {
	o := defaultOptions()
	for i, opt := range opts {
		if opt == nil {
			return o, fmt.Errorf("option %d is nil: %w", i, unix.EINVAL)
		}
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}

// WithPrivateData sends b with the connection request (Dial: at most 56
// bytes RC, 180 UD) or the reply (Accept: at most 196 RC, 136 UD).
func WithPrivateData(b []byte) Option {
	return func(o *options) error {
		if len(b) > 196 {
			return fmt.Errorf("WithPrivateData: %d bytes, the most any connection message carries is 196: %w", len(b), unix.EINVAL)
		}
		o.privateData = append([]byte(nil), b...)
		return nil
	}
}

// WithQPCap sets the QP's queue sizes (default 16 send and 16 receive
// work requests of one SGE each).
func WithQPCap(c uverbs.QPCap) Option {
	return func(o *options) error {
		if c.MaxSendWr == 0 && c.MaxRecvWr == 0 {
			return fmt.Errorf("WithQPCap: MaxSendWr and MaxRecvWr are both 0: %w", unix.EINVAL)
		}
		o.cap = c
		return nil
	}
}

// WithCQSize sets the capacity of the send and receive CQs (default the
// QP's MaxSendWr and MaxRecvWr).
func WithCQSize(send, recv int) Option {
	return func(o *options) error {
		if send < 1 || recv < 1 {
			return fmt.Errorf("WithCQSize: sizes %d and %d must be ≥ 1: %w", send, recv, unix.EINVAL)
		}
		o.sendCQ, o.recvCQ = send, recv
		return nil
	}
}

// WithResponderResources sets how many RDMA READ/atomic requests the peer
// may have outstanding against this side (default: the device maximum on
// Dial, the peer's initiator depth on Accept). A peer that RDMA-READs this
// side's memory needs ≥ 1.
func WithResponderResources(n uint8) Option {
	return func(o *options) error { o.resp = n; return nil }
}

// WithInitiatorDepth sets how many RDMA READ/atomic requests this side may
// have outstanding (default: the device maximum on Dial, the peer's
// responder resources on Accept).
func WithInitiatorDepth(n uint8) Option {
	return func(o *options) error { o.init = n; return nil }
}

// WithRetryCount sets the transport retry count, 0..7 (default 7). On
// Soft-RoCE (rxe) 7 retries for ever, like an RNR retry count of 7: a send
// to a peer that is gone never completes in error there, and
// Conn.WaitDisconnect is how to learn that the peer left.
func WithRetryCount(n uint8) Option {
	return func(o *options) error {
		if n > 7 {
			return fmt.Errorf("WithRetryCount: %d is above 7: %w", n, unix.EINVAL)
		}
		o.retry = n
		return nil
	}
}

// WithRNRRetryCount sets the receiver-not-ready retry count, 0..7 where 7
// retries forever (default 7).
func WithRNRRetryCount(n uint8) Option {
	return func(o *options) error {
		if n > 7 {
			return fmt.Errorf("WithRNRRetryCount: %d is above 7: %w", n, unix.EINVAL)
		}
		o.rnr = n
		return nil
	}
}

// WithTOS sets the type of service of the connection's traffic.
func WithTOS(tos uint8) Option {
	return func(o *options) error { o.tos = &tos; return nil }
}

// WithAckTimeout sets the QP's local ACK timeout exponent (4.096 µs·2^t).
func WithAckTimeout(t uint8) Option {
	return func(o *options) error {
		if t > 31 {
			return fmt.Errorf("WithAckTimeout: %d is above 31: %w", t, unix.EINVAL)
		}
		o.ackTimeout = &t
		return nil
	}
}

// WithUD makes the connection unreliable datagram (PortSpaceUDP): Dial
// resolves the listener's QP by SIDR and makes an AH to it.
func WithUD() Option {
	return func(o *options) error { o.ps = PortSpaceUDP; return nil }
}

// WithPortSpace sets the port space of Dial and Listen (default
// PortSpaceTCP; WithUD is PortSpaceUDP). PortSpaceIB carries RC here.
func WithPortSpace(ps PortSpace) Option {
	return func(o *options) error {
		switch ps {
		case PortSpaceTCP, PortSpaceUDP, PortSpaceIB, PortSpaceIPoIB:
			o.ps = ps
			return nil
		}
		return fmt.Errorf("WithPortSpace: %v is not a port space: %w", ps, unix.EINVAL)
	}
}

// WithSource makes Dial resolve from this local address ("10.99.0.2" or
// "10.99.0.2:0").
func WithSource(addr string) Option {
	return func(o *options) error {
		if _, err := parseAddr(addr, true); err != nil {
			return fmt.Errorf("WithSource: %w", err)
		}
		o.src = addr
		return nil
	}
}

// WithBacklog sets Listen's backlog: how many requests may wait, not yet
// taken by Request or Accept, before more are refused (default: the
// kernel's maximum; see ID.Listen).
func WithBacklog(n int) Option {
	return func(o *options) error {
		if n < 0 {
			return fmt.Errorf("WithBacklog: %d is negative: %w", n, unix.EINVAL)
		}
		o.backlog = n
		return nil
	}
}

// WithReuseAddr lets Listen bind a port another ID holds.
func WithReuseAddr() Option {
	return func(o *options) error { o.reuseAddr = true; return nil }
}

// WithSignalAll makes every send work request produce a completion.
func WithSignalAll() Option {
	return func(o *options) error { o.signalAll = true; return nil }
}

// WithCompChannel gives the connection a completion channel
// (Conn.CompChannel) that both CQs report to, so that a program can wait
// for completions with a context instead of polling: RequestNotify on the
// CQ, then CompChannel().Wait(ctx).
func WithCompChannel() Option {
	return func(o *options) error { o.compChannel = true; return nil }
}

// WithPD makes the connection on pd instead of the PD its device's
// connections share. pd must be on the package's context of the device
// that reaches the peer: allocate it on Conn.Context() (or ID.Context())
// of a connection on that device. The connection does not close pd: the
// caller does, after closing the connection.
func WithPD(pd *uverbs.PD) Option {
	return func(o *options) error {
		if pd == nil {
			return fmt.Errorf("WithPD: nil PD: %w", unix.EINVAL)
		}
		o.pd = pd
		return nil
	}
}

// WithSetup runs f once the connection's QP exists and before the
// connection request or reply is sent: the place to register memory and
// post the first receives, so that nothing the peer sends at once finds an
// empty receive queue.
func WithSetup(f func(*Conn) error) Option {
	return func(o *options) error {
		if f == nil {
			return fmt.Errorf("WithSetup: nil function: %w", unix.EINVAL)
		}
		o.setup = f
		return nil
	}
}

// parseAddr parses "ip:port", "ip" (when portOptional), ":port" (the
// unspecified IPv4 address) or "[ip6%zone]:port".
func parseAddr(s string, portOptional bool) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap, nil
	}
	if portOptional {
		if a, err := netip.ParseAddr(s); err == nil {
			return netip.AddrPortFrom(a, 0), nil
		}
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("address %q: want ip:port: %w", s, unix.EINVAL)
	}
	p, err := net.LookupPort("tcp", port)
	if err != nil || p < 0 || p > 65535 {
		return netip.AddrPort{}, fmt.Errorf("address %q: port %q is not a number 0..65535: %w", s, port, unix.EINVAL)
	}
	if host == "" {
		return netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(p)), nil
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("address %q: %q is not an IP address: %w", s, host, unix.EINVAL)
	}
	return netip.AddrPortFrom(a, uint16(p)), nil
}

// shared is the event channel of the IDs Dial and Listen make, open while
// any of them lives.
var shared struct {
	sync.Mutex
	ch   *EventChannel
	refs int
	// devs are the devices the shared channel's IDs opened, kept open
	// while the channel is (so that a program dialing one connection
	// after another opens each device once, as librdmacm does).
	devs map[*device]bool
}

// holdDevice keeps d open until the shared channel ch closes.
func holdDevice(ch *EventChannel, d *device) {
	shared.Lock()
	defer shared.Unlock()
	if shared.ch != ch || shared.devs[d] {
		return
	}
	if shared.devs == nil {
		shared.devs = make(map[*device]bool)
	}
	devices.Lock()
	d.refs++
	devices.Unlock()
	shared.devs[d] = true
}

func acquireChannel() (*EventChannel, error) {
	shared.Lock()
	defer shared.Unlock()
	if shared.ch == nil {
		ch, err := NewEventChannel()
		if err != nil {
			return nil, err
		}
		shared.ch = ch
	}
	shared.refs++
	return shared.ch, nil
}

// retainChannel takes one more reference on ch if it is the shared
// channel (for the IDs of requests arriving on a Listen listener).
func retainChannel(ch *EventChannel) bool {
	shared.Lock()
	defer shared.Unlock()
	if shared.ch != ch || shared.refs == 0 {
		return false
	}
	shared.refs++
	return true
}

func releaseChannel(ch *EventChannel) {
	shared.Lock()
	if shared.ch != ch {
		shared.Unlock()
		return
	}
	shared.refs--
	last := shared.refs == 0
	devs := shared.devs
	if last {
		shared.ch, shared.devs = nil, nil
	}
	shared.Unlock()
	if last {
		ch.Close()
		for d := range devs {
			d.release()
		}
	}
}

// newSharedID creates an ID on the shared channel; closing it releases the
// channel.
func newSharedID(ps PortSpace) (*ID, error) {
	ch, err := acquireChannel()
	if err != nil {
		return nil, err
	}
	id, err := ch.CreateID(ps, 0)
	if err != nil {
		releaseChannel(ch)
		return nil, err
	}
	id.sharedChan = true
	return id, nil
}

// Conn is a connection made by Dial or Request.Accept: its ID and the
// verbs objects of its QP. The context and the PD are shared by the
// connections on one device (as librdmacm shares them) and owned by the
// package, which frees them when the last connection or listener using
// the device closes. The CQs, QP (and AH for UD) are the connection's own
// and Close frees them.
type Conn struct {
	id     *ID
	ctx    *uverbs.Context
	pd     *uverbs.PD
	sendCQ *uverbs.CQ
	recvCQ *uverbs.CQ
	qp     *uverbs.QP
	ah     *uverbs.AH
	cch    *uverbs.CompChannel
	remote UDParam
	peer   ConnParam
	once   sync.Once
	err    error
}

// ID returns the connection's connection manager ID (its events arrive on
// ID().Event).
func (c *Conn) ID() *ID { return c.id }

// Context returns the uverbs context of the connection's device.
func (c *Conn) Context() *uverbs.Context { return c.ctx }

// PD returns the connection's protection domain: register memory on it.
// Unless WithPD gave another, it is the PD every Dial and Accept
// connection on the same device shares, so memory registered on it is
// reachable through any of them by its rkey (librdmacm's default too).
// Do not close it: the package deallocates it with the device's context,
// once every connection and listener on the device has closed.
func (c *Conn) PD() *uverbs.PD { return c.pd }

// SendCQ returns the CQ of the QP's send queue.
func (c *Conn) SendCQ() *uverbs.CQ { return c.sendCQ }

// RecvCQ returns the CQ of the QP's receive queue.
func (c *Conn) RecvCQ() *uverbs.CQ { return c.recvCQ }

// CompChannel returns the completion channel of the connection's CQs
// (WithCompChannel), or nil.
func (c *Conn) CompChannel() *uverbs.CompChannel { return c.cch }

// QP returns the connection's QP, in RTS once connected.
func (c *Conn) QP() *uverbs.QP { return c.qp }

// AH returns the address handle of the peer's QP (UD Dial), or nil.
func (c *Conn) AH() *uverbs.AH { return c.ah }

// Remote returns the peer's QP number and Q_Key (UD Dial).
func (c *Conn) Remote() UDParam { return c.remote }

// PrivateData returns the private data the peer sent: the request's on the
// accepting side, the reply's on the dialing side (fixed length,
// zero-padded).
func (c *Conn) PrivateData() []byte { return c.peer.PrivateData }

// PeerParam returns the connection parameters the peer sent.
func (c *Conn) PeerParam() ConnParam { return c.peer }

// LocalAddr returns the connection's local address.
func (c *Conn) LocalAddr() netip.AddrPort { return c.id.LocalAddr() }

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() netip.AddrPort { return c.id.RemoteAddr() }

// WaitDisconnect waits until the peer disconnects (or the device goes),
// then answers the peer's disconnect request, which a librdmacm peer
// blocked in rdma_disconnect waits for. The QP is then in the error state:
// its outstanding work requests complete flushed. Until the answer the QP
// is left as it was, so that sends the peer acknowledged before it left
// complete successfully (DISCONNECTED alone does not flush anything).
func (c *Conn) WaitDisconnect(ctx context.Context) error {
	if _, err := c.id.WaitFor(ctx, EventDisconnected); err != nil {
		return err
	}
	c.id.Disconnect() // sends the DREP; refused only when already done
	return nil
}

// Close disconnects (RC) and frees the AH, QP, CQs and ID, children
// before parents (the PD is the device's, or WithPD's caller's). It is
// idempotent and returns the first call's result.
func (c *Conn) Close() error {
	if c == nil {
		return nil
	}
	c.once.Do(func() {
		var errs []error
		ignore := func(err error) bool {
			return err == nil || errors.Is(err, uverbs.ErrDeviceRemoved) || errors.Is(err, uverbs.ErrClosed)
		}
		if c.qp != nil && c.id.qpType == uverbs.QPTypeRC {
			c.id.Disconnect() // refused when never connected or already gone: nothing to undo
		}
		if c.ah != nil {
			if err := c.ah.Close(); !ignore(err) {
				errs = append(errs, err)
			}
		}
		if err := c.id.DestroyQP(); !ignore(err) {
			errs = append(errs, err)
		}
		for _, cq := range []*uverbs.CQ{c.sendCQ, c.recvCQ} {
			if cq != nil {
				if err := cq.Close(); !ignore(err) {
					errs = append(errs, err)
				}
			}
		}
		if c.cch != nil {
			if err := c.cch.Close(); !ignore(err) {
				errs = append(errs, err)
			}
		}
		if err := c.id.Close(); !ignore(err) {
			errs = append(errs, err)
		}
		c.err = errors.Join(errs...)
	})
	return c.err
}

// newConn makes the verbs objects of a connection on the ID's device.
func newConn(id *ID, o *options) (*Conn, error) {
	c := &Conn{id: id}
	if err := id.use("context"); err != nil {
		return c, err
	}
	d, err := id.device()
	if err != nil {
		return c, err
	}
	c.ctx = d.ctx
	if o.pd != nil {
		if o.pd.Context() != d.ctx {
			return c, fmt.Errorf("WithPD: the PD is on another context than %s's shared one (allocate it on Conn.Context()): %w", d.name, unix.EINVAL)
		}
		c.pd = o.pd
	} else if c.pd, err = d.sharedPD(); err != nil {
		return c, err
	}
	send, recv := o.sendCQ, o.recvCQ
	if send == 0 {
		send = int(max(o.cap.MaxSendWr, 1))
	}
	if recv == 0 {
		recv = int(max(o.cap.MaxRecvWr, 1))
	}
	var cqOpts *uverbs.CQOptions
	if o.compChannel {
		if c.cch, err = c.ctx.NewCompChannel(); err != nil {
			return c, err
		}
		cqOpts = &uverbs.CQOptions{Channel: c.cch}
	}
	if c.sendCQ, err = c.ctx.CreateCQ(send, cqOpts); err != nil {
		return c, err
	}
	if c.recvCQ, err = c.ctx.CreateCQ(recv, cqOpts); err != nil {
		return c, err
	}
	c.qp, err = id.CreateQP(c.pd, uverbs.QPInitAttr{SendCQ: c.sendCQ, RecvCQ: c.recvCQ, Cap: o.cap, SignalAll: o.signalAll})
	if err != nil {
		return c, err
	}
	if o.setup != nil {
		if err := o.setup(c); err != nil {
			return c, fmt.Errorf("setup: %w", err)
		}
	}
	return c, nil
}

// Dial connects to a listener at address ("10.99.0.1:7471"): it resolves
// the address and route, creates the connection's CQs and QP on the
// device that reaches the address (on the device's shared PD, or
// WithPD's), and connects. ctx bounds the whole
// setup (the address resolution's kernel timeout is its deadline).
//
// Errors: *NoDeviceError when no RDMA device reaches the address,
// *RejectedError (errors.Is unix.ECONNREFUSED) when the peer refuses or
// nobody listens, ctx.Err() when ctx ends first, ErrNotLoaded and
// permission errors from the connection manager's device.
func Dial(ctx context.Context, address string, opts ...Option) (*Conn, error) {
	c, err := dial(ctx, address, opts)
	if err != nil {
		if c != nil {
			c.Close()
		}
		return nil, fmt.Errorf("rdmacm: dial %s: %w", address, trimPrefix(err))
	}
	return c, nil
}

func dial(ctx context.Context, address string, opts []Option) (*Conn, error) {
	if ctx == nil {
		return nil, fmt.Errorf("nil context: %w", unix.EINVAL)
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	dst, err := parseAddr(address, false)
	if err != nil {
		return nil, err
	}
	if dst.Addr().IsUnspecified() {
		return nil, fmt.Errorf("address %q: cannot dial the unspecified address: %w", address, unix.EINVAL)
	}
	var src netip.AddrPort
	if o.src != "" {
		src, _ = parseAddr(o.src, true)
	}
	id, err := newSharedID(o.ps)
	if err != nil {
		return nil, err
	}
	fail := func(c *Conn, err error) (*Conn, error) {
		if c == nil {
			id.Close()
		}
		return c, err
	}
	if o.tos != nil {
		if err := id.SetTOS(*o.tos); err != nil {
			return fail(nil, err)
		}
	}
	if err := id.resolveAddr(ctx, src, dst, true); err != nil {
		return fail(nil, err)
	}
	if o.ackTimeout != nil && id.qpType == uverbs.QPTypeRC {
		if err := id.SetAckTimeout(*o.ackTimeout); err != nil {
			return fail(nil, err)
		}
	}
	c, err := newConn(id, &o)
	if err != nil {
		return fail(c, err)
	}
	p := &ConnParam{PrivateData: o.privateData, ResponderResources: o.resp, InitiatorDepth: o.init,
		RetryCount: o.retry, RNRRetryCount: o.rnr}
	ev, err := id.Connect(ctx, p)
	if err != nil {
		return fail(c, err)
	}
	c.peer = ev.Param
	if ev.UD != nil {
		c.remote = *ev.UD
		if c.ah, err = c.pd.CreateAH(ev.UD.AH); err != nil {
			return fail(c, fmt.Errorf("create AH to the peer's QP %d: %w", ev.UD.QPNum, err))
		}
	}
	return c, nil
}

// trimPrefix drops a leading "rdmacm: " so wrapped messages read once.
func trimPrefix(err error) error {
	return prefixTrimmed{err}
}

type prefixTrimmed struct{ error }

func (p prefixTrimmed) Error() string {
	s := p.error.Error()
	const pre = "rdmacm: "
	if len(s) > len(pre) && s[:len(pre)] == pre {
		return s[len(pre):]
	}
	return s
}

func (p prefixTrimmed) Unwrap() error { return p.error }

// Listener listens for connections on an address.
type Listener struct {
	id   *ID
	opts []Option
	o    options
}

// Listen listens on address ("10.99.0.1:7471"; ":7471" or "0.0.0.0:7471"
// for every RDMA device; port 0 picks one, Addr tells which). opts apply
// to the listener (WithBacklog, WithReuseAddr, WithUD) and are the
// defaults of every Accept.
func Listen(ctx context.Context, address string, opts ...Option) (*Listener, error) {
	l, err := listen(ctx, address, opts)
	if err != nil {
		return nil, fmt.Errorf("rdmacm: listen %s: %w", address, trimPrefix(err))
	}
	return l, nil
}

func listen(ctx context.Context, address string, opts []Option) (*Listener, error) {
	if ctx == nil {
		return nil, fmt.Errorf("nil context: %w", unix.EINVAL)
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	addr, err := parseAddr(address, false)
	if err != nil {
		return nil, err
	}
	id, err := newSharedID(o.ps)
	if err != nil {
		return nil, err
	}
	if o.reuseAddr {
		if err := id.SetReuseAddr(true); err != nil {
			id.Close()
			return nil, err
		}
	}
	if err := id.Bind(addr); err != nil {
		id.Close()
		return nil, err
	}
	if err := id.Listen(o.backlog); err != nil {
		id.Close()
		return nil, err
	}
	return &Listener{id: id, opts: opts, o: o}, nil
}

// Addr returns the address the listener is bound to.
func (l *Listener) Addr() netip.AddrPort { return l.id.LocalAddr() }

// ID returns the listener's ID.
func (l *Listener) ID() *ID { return l.id }

// Close stops listening; requests not yet taken with Request or Accept are
// refused. Connections already accepted stay up. Close is idempotent.
func (l *Listener) Close() error {
	if l == nil {
		return nil
	}
	return l.id.Close()
}

// Request is an incoming connection request: accept or reject it (until
// then its ID stays open, and the requester waits).
type Request struct {
	// ID is the new connection's ID.
	ID *ID
	// Param is what the requester sent: private data (56 bytes RC, 180 UD,
	// zero-padded), its RDMA READ depths (seen from this side) and retry
	// counts.
	Param ConnParam
	l     *Listener
	done  bool
}

// Request waits for the next connection request.
func (l *Listener) Request(ctx context.Context) (*Request, error) {
	if l == nil {
		return nil, fmt.Errorf("rdmacm: request: nil Listener: %w", unix.EINVAL)
	}
	ev, err := l.id.waitFor(ctx, "request", EventConnectRequest)
	if err != nil {
		return nil, err
	}
	return &Request{ID: ev.ID, Param: ev.Param, l: l}, nil
}

// Accept waits for the next connection request and accepts it with the
// listener's options, overridden by opts.
func (l *Listener) Accept(ctx context.Context, opts ...Option) (*Conn, error) {
	r, err := l.Request(ctx)
	if err != nil {
		return nil, err
	}
	return r.Accept(ctx, opts...)
}

// PrivateData returns the requester's private data.
func (r *Request) PrivateData() []byte { return r.Param.PrivateData }

// Reject refuses the request with private data (at most 148 bytes; 136
// UD) the requester sees in its *RejectedError, and frees its ID.
func (r *Request) Reject(privateData []byte) error {
	if r == nil || r.done {
		return fmt.Errorf("rdmacm: reject: the request was already answered: %w", unix.EINVAL)
	}
	err := r.ID.Reject(privateData)
	if err != nil && errors.Is(err, unix.EINVAL) && len(privateData) > maxPrivateData("reject", r.ID.qpType) {
		return err // bad input: the request can still be answered
	}
	r.done = true
	if cerr := r.ID.Close(); err == nil {
		err = cerr
	}
	return err
}

// Accept creates the connection's CQs and QP (on the device's shared PD,
// or WithPD's), accepts, and (RC) waits
// for the requester's confirmation until ctx ends. opts override the
// listener's.
func (r *Request) Accept(ctx context.Context, opts ...Option) (*Conn, error) {
	if r == nil || r.done {
		return nil, fmt.Errorf("rdmacm: accept: the request was already answered: %w", unix.EINVAL)
	}
	if ctx == nil {
		return nil, fmt.Errorf("rdmacm: accept: nil context: %w", unix.EINVAL)
	}
	o, err := buildOptions(append(append([]Option(nil), r.l.opts...), opts...))
	if err != nil {
		return nil, fmt.Errorf("rdmacm: accept: %w", err)
	}
	r.done = true
	c, err := r.accept(ctx, &o)
	if err != nil {
		if c != nil {
			c.Close()
		} else {
			r.ID.Close()
		}
		return nil, fmt.Errorf("rdmacm: accept: %w", trimPrefix(err))
	}
	return c, nil
}

func (r *Request) accept(ctx context.Context, o *options) (*Conn, error) {
	id := r.ID
	if o.ackTimeout != nil && id.qpType == uverbs.QPTypeRC {
		if err := id.SetAckTimeout(*o.ackTimeout); err != nil {
			return nil, err
		}
	}
	c, err := newConn(id, o)
	if err != nil {
		return c, err
	}
	c.peer = r.Param
	d, err := id.device()
	if err != nil {
		return c, err
	}
	p := &ConnParam{PrivateData: o.privateData, RetryCount: o.retry, RNRRetryCount: o.rnr,
		ResponderResources: min(r.Param.ResponderResources, d.maxRdAtom),
		InitiatorDepth:     min(r.Param.InitiatorDepth, d.maxInitRdAtom)}
	if o.resp != MaxResources {
		p.ResponderResources = o.resp
	}
	if o.init != MaxResources {
		p.InitiatorDepth = o.init
	}
	if err := id.Accept(p); err != nil {
		return c, err
	}
	if id.qpType == uverbs.QPTypeRC {
		// A requester that disconnects at once may have its DREQ arrive
		// before (or instead of) the RTU: the connection was made and is
		// already over, as a TCP accept that returns a closed stream.
		// DISCONNECTED stays queued for WaitDisconnect.
		ev, err := id.waitFor(ctx, "accept", EventEstablished, EventDisconnected, EventRejected, EventUnreachable, EventConnectError)
		if err != nil {
			return c, err
		}
		if ev.Type == EventDisconnected {
			id.unshift(ev)
		} else if err := ev.Err(); err != nil {
			return c, err
		}
	}
	return c, nil
}
