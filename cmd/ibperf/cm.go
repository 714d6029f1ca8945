package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/goverbs/goverbs/internal/grh"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

// perftest's rdma_cm mode (-R), as perftest 4.5 does it
// (perftest_communication.c):
//
//   - the exchange runs over an rdma_cm RC connection to the same port
//     (cmControl): one SEND per message, a receive kept posted, the client
//     writing first; addresses travel as the binary big-endian struct
//     pingpong_dest;
//   - after a handshake, the server listens on the port again and the
//     client connects one rdma_cm ID per QP (retrying the whole attempt 10
//     times, 100 ms apart, while the server is not listening yet); the QPs
//     are created on those IDs and moved by the connection manager; another
//     handshake follows;
//   - UD: the client sends to the QPN and Q_Key of the SIDR reply, with an
//     address handle from its address vector; for the latency test it first
//     sends its QPN as the immediate of a 4-byte SEND, from which the server
//     builds its reply address (the server of a bandwidth test only
//     receives).
const (
	cmResolveTimeout = 2000 * time.Millisecond
	cmRetries        = 10 // NUM_OF_RETRIES and rdma_cm_client_connection's max_retries
	cmRetryDelay     = 100 * time.Millisecond
	// cmControlSlot is the room for one control message (the largest is
	// the 56-byte struct pingpong_dest).
	cmControlSlot = 64
	// udQPNMessage is the 4-byte SEND that carries a UD client's QPN.
	udQPNMessage = 4
	// cmLinger bounds how long the test connections stay up after the
	// test, for the peer to disconnect first (closeCM).
	cmLinger = 100 * time.Millisecond
)

// cmControl is the rdma_cm control connection: perftest's comm->rdma_ctx.
type cmControl struct {
	ch   *rdmacm.EventChannel
	id   *rdmacm.ID
	pd   *uverbs.PD
	mem  *uverbs.Buffer
	mr   *uverbs.MR // [0, slot): receives; [slot, 2 slots): sends
	scc  *uverbs.CompChannel
	rcc  *uverbs.CompChannel
	scq  *uverbs.CQ
	rcq  *uverbs.CQ
	ctx  context.Context
	wcs  [1]uverbs.WC
	qpOK bool
	// peerLeft: the peer disconnected (a DISCONNECTED event, taken by
	// wait's watcher).
	peerLeft bool
}

// newCMControl sets up the control QP's resources on id's device, creates
// the QP on id and posts its one receive.
func newCMControl(ctx context.Context, ch *rdmacm.EventChannel, id *rdmacm.ID) (c *cmControl, err error) {
	c = &cmControl{ch: ch, id: id, ctx: ctx}
	defer func() {
		if err != nil {
			c.close(false)
		}
	}()
	dev, err := id.Context()
	if err != nil {
		return c, err
	}
	if c.pd, err = dev.AllocPD(); err != nil {
		return c, err
	}
	if c.mem, err = uverbs.AllocBuffer(2 * cmControlSlot); err != nil {
		return c, err
	}
	if c.mr, err = c.pd.RegisterBuffer(c.mem, 0, 2*cmControlSlot, uverbs.AccessLocalWrite); err != nil {
		return c, err
	}
	if c.scc, err = dev.NewCompChannel(); err != nil {
		return c, err
	}
	if c.rcc, err = dev.NewCompChannel(); err != nil {
		return c, err
	}
	if c.scq, err = dev.CreateCQ(1, &uverbs.CQOptions{Channel: c.scc}); err != nil {
		return c, err
	}
	if c.rcq, err = dev.CreateCQ(1, &uverbs.CQOptions{Channel: c.rcc}); err != nil {
		return c, err
	}
	if _, err = id.CreateQP(c.pd, uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: c.scq, RecvCQ: c.rcq,
		Cap: uverbs.QPCap{MaxSendWr: 1, MaxRecvWr: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		return c, err
	}
	c.qpOK = true
	return c, c.postRecv()
}

func (c *cmControl) postRecv() error {
	return c.id.QP().PostRecv([]uverbs.RecvWR{{ID: 5, SGL: []uverbs.SGE{{Addr: c.mr.Addr(), Length: cmControlSlot, Lkey: c.mr.Lkey()}}}})
}

// wait returns the next completion of cq. It also ends, with an error
// wrapping errPeerLeft, when the peer disconnects the control connection
// first (see errPeerLeft); a completion already in cq is still returned.
func (c *cmControl) wait(cq *uverbs.CQ, what string) (uverbs.WC, error) {
	if c.peerLeft {
		return c.pollAfterLeft(cq, what)
	}
	ctx, cancel := context.WithTimeout(c.ctx, exchangeTimeout)
	defer cancel()
	wctx, stop := context.WithCancelCause(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		// DISCONNECTED comes back as an error of WaitFor too (it ends any
		// wait): an error is the wait's end only once wctx is done.
		if _, err := c.id.WaitFor(wctx, rdmacm.EventDisconnected); err != nil && wctx.Err() != nil {
			return
		}
		c.peerLeft = true
		stop(errPeerLeft)
	}()
	_, err := cq.Wait(wctx, c.wcs[:])
	stop(nil)
	<-watched
	switch {
	case err != nil && c.peerLeft:
		return c.pollAfterLeft(cq, what)
	case err != nil:
		return uverbs.WC{}, fmt.Errorf("%s: %w%s", what, err, c.afterTimeout(cq, err))
	}
	return c.completion(cq, what)
}

// completion is c.wcs[0], the completion just taken from cq, or its
// status as an error.
func (c *cmControl) completion(cq *uverbs.CQ, what string) (uverbs.WC, error) {
	if wc := c.wcs[0]; wc.Status != uverbs.WCSuccess {
		return wc, &wcStatusError{what: what, send: cq == c.scq, status: wc.Status}
	}
	return c.wcs[0], nil
}

// errPeerLeft is the peer's disconnect of the control connection seen
// while waiting for a control message's completion. It ends the closing
// handshake without an error: each side disconnects once its part is
// done, and on rxe a side's last message can then stay unacknowledged for
// ever. rxe runs the receiver's side of a loopback SEND in the sender's
// system call: it posts the receive's completion and only then sends the
// acknowledgement, and a peer woken by that completion can reply, read
// the reply's acknowledgement and move its QP to the error state in
// between (a sender thread preempted there, on a loaded host), which
// drops the acknowledgement. The sender then retransmits to a QP that is
// gone, and rxe takes a retry count of 7 as "retry for ever".
var errPeerLeft = errors.New("the peer disconnected")

// pollAfterLeft is wait once the peer has disconnected: a completion
// already in cq, or errPeerLeft.
func (c *cmControl) pollAfterLeft(cq *uverbs.CQ, what string) (uverbs.WC, error) {
	n, err := cq.Poll(c.wcs[:])
	switch {
	case err != nil:
		return uverbs.WC{}, fmt.Errorf("%s: %w", what, err)
	case n == 0:
		return uverbs.WC{}, fmt.Errorf("%s: %w", what, errPeerLeft)
	}
	return c.completion(cq, what)
}

// afterTimeout says, for a wait that ended with its context, what the CQ
// and the QP held then: a completion found now was one whose event never
// came; none, one the device never produced. (A rare failure of the -R
// tests in the VM, a closing SEND that never completed while the peer
// went on, needs telling the two apart.)
func (c *cmControl) afterTimeout(cq *uverbs.CQ, err error) string {
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return ""
	}
	var wcs [1]uverbs.WC
	n, perr := cq.Poll(wcs[:])
	found := "the CQ was empty"
	switch {
	case perr != nil:
		found = fmt.Sprintf("polling the CQ: %v", perr)
	case n > 0:
		found = fmt.Sprintf("a completion was in the CQ without an event (ID %d, %v)", wcs[0].ID, wcs[0].Status)
	}
	state := "unknown"
	if qp := c.id.QP(); qp != nil {
		if a, qerr := qp.Query(); qerr == nil {
			state = fmt.Sprintf("%v (send PSN %#x, receive PSN %#x, timeout %d, retries %d, RNR retries %d)",
				a.State, a.SQPSN, a.RQPSN, a.Timeout, a.RetryCnt, a.RNRRetry)
		}
	}
	return fmt.Sprintf(" (then %s; the QP was in %s)", found, state)
}

// wcStatusError is a control message's completion that did not succeed.
type wcStatusError struct {
	what   string
	send   bool
	status uverbs.WCStatus
}

func (e *wcStatusError) Error() string {
	return fmt.Sprintf("%s: completion status %v (%d)", e.what, e.status, int(e.status))
}

// flushedLastSend reports whether err is a send of the closing handshake
// flushed. Each side disconnects as soon as its part of the handshake is
// done, and a QP can leave before its device acknowledged the other
// side's message: that side then sees its send flushed when the CM's
// disconnect moves its QP to the error state (the server's reply, after
// the client read it; or the client's message, once the server read it
// and replied, which happens on rxe when the acknowledgement is late). The
// peer had what it needed: the exchange is over.
func flushedLastSend(err error) bool {
	var we *wcStatusError
	return errors.As(err, &we) && we.send && we.status == uverbs.WCWRFlushErr
}

// write is rdma_write_data: one signaled SEND of b, waited for.
func (c *cmControl) write(b []byte) error {
	if len(b) > cmControlSlot {
		return fmt.Errorf("write to the peer: %d-byte message, the most is %d", len(b), cmControlSlot)
	}
	send := c.mr.Bytes()[cmControlSlot:]
	copy(send, b)
	if err := c.id.QP().PostSend([]uverbs.SendWR{{ID: 5, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{{Addr: c.mr.Addr() + cmControlSlot, Length: uint32(len(b)), Lkey: c.mr.Lkey()}}}}); err != nil {
		return fmt.Errorf("write to the peer: %w", err)
	}
	_, err := c.wait(c.scq, "write to the peer")
	return err
}

// read is rdma_read_data: the next message, which must be len(b) bytes,
// and the receive posted again.
func (c *cmControl) read(b []byte) error {
	wc, err := c.wait(c.rcq, "read from the peer")
	if err != nil {
		return err
	}
	if int(wc.ByteLen) != len(b) {
		return fmt.Errorf("read from the peer: %w: a %d-byte message, want %d", ErrBadMessage, wc.ByteLen, len(b))
	}
	copy(b, c.mr.Bytes()[:len(b)])
	if err := c.postRecv(); err != nil {
		return fmt.Errorf("read from the peer: post a receive: %w", err)
	}
	return nil
}

// close disconnects and frees the control connection.
func (c *cmControl) close(bool) error {
	if c.qpOK {
		c.id.Disconnect()
	}
	c.id.Close() // and the QP
	for _, cq := range []*uverbs.CQ{c.scq, c.rcq} {
		if cq != nil {
			cq.Close()
		}
	}
	for _, cc := range []*uverbs.CompChannel{c.scc, c.rcc} {
		if cc != nil {
			cc.Close()
		}
	}
	if c.mr != nil {
		c.mr.Close()
	}
	if c.mem != nil {
		c.mem.Close()
	}
	if c.pd != nil {
		c.pd.Close()
	}
	if c.ch != nil {
		c.ch.Close()
	}
	return nil
}

// serverAddr is the address a client connects to (-R takes IP addresses:
// rdma_cm reaches the peer through the netdev that owns it).
func (p *perf) serverAddr() (netip.AddrPort, error) {
	a, err := netip.ParseAddr(p.cfg.server)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("-R needs the server's IP address, not %q: %w", p.cfg.server, err)
	}
	return netip.AddrPortFrom(a.Unmap(), uint16(p.cfg.tcpPort)), nil
}

// connectCM is rdma_client_connect or rdma_server_connect, then the
// prologue: connectTCP's counterpart for -R.
func (p *perf) connectCM(ctx context.Context) error {
	ch, err := rdmacm.NewEventChannel()
	if err != nil {
		return p.fail(err, " Unable to create the resources needed by comm struct")
	}
	var ctl *cmControl
	if p.isClient() {
		ctl, err = p.cmControlClient(ctx, ch)
	} else {
		fmt.Fprintf(p.stdout, "\n************************************\n* Waiting for client to connect... *\n************************************\n")
		ctl, err = p.cmControlServer(ctx, ch)
	}
	if err != nil {
		ch.Close()
		return p.fail(err, " Unable to perform rdma_%s function\n Unable to init the socket connection", map[bool]string{true: "client", false: "server"}[p.isClient()])
	}
	p.comm = &comm{ch: ctl, client: p.isClient(), withGID: p.gidIdx != -1, binaryDest: true}
	return p.prologueDone()
}

// cmControlClient resolves the server (ADDR_ERROR and ROUTE_ERROR retried,
// 10 in all), creates the control QP, posts its receive and connects: no
// READ resources, retries 7.
func (p *perf) cmControlClient(ctx context.Context, ch *rdmacm.EventChannel) (*cmControl, error) {
	dst, err := p.serverAddr()
	if err != nil {
		return nil, err
	}
	id, err := ch.CreateID(rdmacm.PortSpaceTCP, 0)
	if err != nil {
		return nil, err
	}
	if err := resolve(ctx, id, dst); err != nil {
		id.Close()
		return nil, err
	}
	ctl, err := newCMControl(ctx, ch, id) // owns ch from here on
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(dialRetry)
	for {
		_, err = ctl.id.Connect(ctx, &rdmacm.ConnParam{RetryCount: 7, RNRRetryCount: 7})
		var rej *rdmacm.RejectedError
		if err == nil || !errors.As(err, &rej) || !rej.NobodyListening() || time.Now().After(deadline) {
			break
		}
		// Like ibperf's TCP client, wait a little for a server started at
		// the same time, with a new ID: a rejected one cannot connect.
		ctl.close(false)
		time.Sleep(20 * time.Millisecond)
		if id, err = p.cmNewResolved(ctx, dst); err != nil {
			return nil, err
		}
		if ctl, err = newCMControl(ctx, id.Channel(), id); err != nil {
			return nil, err
		}
	}
	if err != nil {
		ctl.close(false)
		return nil, err
	}
	return ctl, nil
}

// cmNewResolved opens a new channel with an ID resolved to dst.
func (p *perf) cmNewResolved(ctx context.Context, dst netip.AddrPort) (*rdmacm.ID, error) {
	ch, err := rdmacm.NewEventChannel()
	if err != nil {
		return nil, err
	}
	id, err := ch.CreateID(rdmacm.PortSpaceTCP, 0)
	if err == nil {
		if err = resolve(ctx, id, dst); err != nil {
			id.Close()
		}
	}
	if err != nil {
		ch.Close()
		return nil, err
	}
	return id, nil
}

// resolve resolves dst's address and route, retrying resolution errors as
// perftest does.
func resolve(ctx context.Context, id *rdmacm.ID, dst netip.AddrPort) error {
	var err error
	for try := 0; try < cmRetries; try++ {
		rctx, cancel := context.WithTimeout(ctx, cmResolveTimeout)
		if err = id.ResolveAddr(rctx, netip.AddrPort{}, dst); err == nil {
			err = id.ResolveRoute(rctx)
		}
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
	}
	return fmt.Errorf("Received %d times ADDR_ERROR: %w", cmRetries, err)
}

// cmControlServer listens on the port (any address), takes one request,
// sets up the control QP, posts its receive, accepts and closes the
// listener (freeing the port for the test's listener).
func (p *perf) cmControlServer(ctx context.Context, ch *rdmacm.EventChannel) (*cmControl, error) {
	l, err := ch.CreateID(rdmacm.PortSpaceTCP, 0)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	if err := l.Bind(netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(p.cfg.tcpPort))); err != nil {
		return nil, err
	}
	if err := l.Listen(1); err != nil {
		return nil, err
	}
	if p.ready != nil {
		p.ready(nil)
	}
	ev, err := l.WaitFor(ctx, rdmacm.EventConnectRequest)
	if err != nil {
		return nil, err
	}
	ctl, err := newCMControl(ctx, nil, ev.ID)
	if err != nil {
		ev.ID.Close()
		return nil, err
	}
	ctl.ch = ch
	if err := ev.ID.Accept(&rdmacm.ConnParam{RetryCount: 7, RNRRetryCount: 7}); err != nil {
		ctl.close(false)
		return nil, err
	}
	return ctl, nil
}

// cmTest is the test connections of -R: an ID per QP and the channel they
// live on.
type cmTest struct {
	ch       *rdmacm.EventChannel
	ids      []*rdmacm.ID
	udQPN    []uint32 // UD: where each QP sends
	udQkey   uint32
	listener *rdmacm.ID
}

func (t *cmTest) closeIDs() {
	for _, id := range t.ids {
		id.Disconnect()
		id.Close()
	}
	t.ids = nil
}

// createResourcesCM is create_rdma_cm_connection with ctx_init: a
// handshake, the test connections (whose first brings the PD, buffer, MR
// and CQs up on the connection's device), and another handshake.
func (p *perf) createResourcesCM(ctx context.Context) error {
	ch, err := rdmacm.NewEventChannel()
	if err != nil {
		return p.fail(err, "Failed to create RDMA CM event channel.")
	}
	p.cm = &cmTest{ch: ch, udQkey: defQkey}
	if !p.isClient() {
		// The server listens before the handshake that lets the client
		// connect (perftest's server listens after it, and a client that
		// connects first is refused and retries): a client never finds
		// the port closed.
		if err := p.cmListen(); err != nil {
			return p.fail(err, "Failed to create RDMA CM connection.")
		}
	}
	if err := p.sync0(); err != nil {
		return p.fail(err, "Failed to sync between client and server before creating RDMA CM connection.")
	}
	if p.isClient() {
		err = p.cmTestClient(ctx)
	} else {
		err = p.cmTestServer(ctx)
	}
	if err != nil {
		return p.fail(err, "Failed to create RDMA CM connection.")
	}
	if err := p.sync0(); err != nil {
		return p.fail(err, "Failed to sync between client and server after creating RDMA CM connection.")
	}
	p.localDests()
	return nil
}

// sync0 is a handshake of a zero address: create_rdma_cm_connection's,
// made before the QPs exist.
func (p *perf) sync0() error {
	_, err := p.comm.handshake(dest{})
	return err
}

// cmBase brings up the test's PD, buffer, MR and CQs on the device of the
// first connection (ctx_init): the device -d named must be that one.
func (p *perf) cmBase(id *rdmacm.ID) error {
	if p.pd != nil {
		return nil
	}
	name, err := id.DeviceName()
	if err != nil {
		return err
	}
	if name != p.dev.Name() {
		return fmt.Errorf("the connection runs on %s, not on the device %s: give -d %s (or connect to an address of %s)",
			name, p.dev.Name(), name, p.dev.Name())
	}
	return p.createBase()
}

// cmQP creates QP i on id.
func (p *perf) cmQP(id *rdmacm.ID) error {
	qp, err := id.CreateQP(p.pd, p.qpInitAttr())
	if err != nil && p.inline > 0 && !p.cfg.reqInline {
		p.inline = 0
		qp, err = id.CreateQP(p.pd, p.qpInitAttr())
	}
	if err != nil {
		return fmt.Errorf("Failed to create QP.: %w", err)
	}
	p.qps = append(p.qps, qp)
	return nil
}

// cmConnParam is the test connections' parameters: READ resources for
// read and atomic tests, retries 7.
func (p *perf) cmConnParam() *rdmacm.ConnParam {
	prm := &rdmacm.ConnParam{RetryCount: 7, RNRRetryCount: 7}
	if p.cfg.test.verb == verbRead || p.cfg.test.verb == verbAtomic {
		prm.ResponderResources, prm.InitiatorDepth = uint8(p.outReads), uint8(p.outReads)
	}
	return prm
}

func (p *perf) portSpace() rdmacm.PortSpace {
	if p.cfg.conn == connUD {
		return rdmacm.PortSpaceUDP
	}
	return rdmacm.PortSpaceTCP
}

// cmTestClient is rdma_cm_client_connection.
func (p *perf) cmTestClient(ctx context.Context) error {
	dst, err := p.serverAddr()
	if err != nil {
		return err
	}
	for try := 1; ; try++ {
		err = p.cmTestClientOnce(ctx, dst)
		if err == nil || ctx.Err() != nil {
			return err
		}
		p.qps = nil // the IDs' QPs go with them
		p.ahs = closeAHs(p.ahs)
		p.cm.closeIDs()
		if try == cmRetries {
			return fmt.Errorf("Failed to connect RDMA CM client, tried %d times: %w", cmRetries, err)
		}
		time.Sleep(cmRetryDelay)
	}
}

func closeAHs(ahs []*uverbs.AH) []*uverbs.AH {
	for _, ah := range ahs {
		ah.Close()
	}
	return nil
}

func (p *perf) cmTestClientOnce(ctx context.Context, dst netip.AddrPort) error {
	c := p.cfg
	p.cm.udQPN = nil
	for i := 0; i < c.numQPs; i++ {
		id, err := p.cm.ch.CreateID(p.portSpace(), 0)
		if err != nil {
			return err
		}
		p.cm.ids = append(p.cm.ids, id)
		rctx, cancel := context.WithTimeout(ctx, cmResolveTimeout)
		if err = id.ResolveAddr(rctx, netip.AddrPort{}, dst); err == nil {
			err = id.ResolveRoute(rctx)
		}
		cancel()
		if err != nil {
			return err
		}
		if err := p.cmBase(id); err != nil {
			return err
		}
		if err := p.cmQP(id); err != nil {
			return err
		}
		ev, err := id.Connect(ctx, p.cmConnParam())
		if err != nil {
			return err
		}
		if c.conn != connUD {
			continue
		}
		if ev.UD == nil {
			return fmt.Errorf("a UD connection without the peer's QP (event %v)", ev.Type)
		}
		ah, err := p.pd.CreateAH(ev.UD.AH)
		if err != nil {
			return fmt.Errorf("Failed to create AH for RDMA CM connection.: %w", err)
		}
		p.ahs = append(p.ahs, ah)
		p.cm.udQPN = append(p.cm.udQPN, ev.UD.QPNum)
		p.cm.udQkey = ev.UD.QKey
		if c.test.kind == kindLat {
			if err := p.sendQPN(ctx, i); err != nil {
				return err
			}
		}
	}
	return nil
}

// sendQPN is rdma_cm_send_ud_connection_parameters: a 4-byte SEND with our
// QPN as its immediate, from the start of the buffer.
func (p *perf) sendQPN(ctx context.Context, i int) error {
	qp := p.qps[i]
	if err := qp.PostSend([]uverbs.SendWR{{ID: 0, Opcode: uverbs.WRSendWithImm, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{{Addr: p.mr.Addr(), Length: udQPNMessage, Lkey: p.mr.Lkey()}}, Imm: qp.QPN(),
		AH: p.ahs[i], RemoteQPN: p.cm.udQPN[i], RemoteQkey: p.cm.udQkey}}); err != nil {
		return fmt.Errorf("Failed to send UD connection parameters to the remote node.: %w", err)
	}
	var wc [1]uverbs.WC
	if err := p.pollOne(ctx, p.sendCQ, wc[:], "send"); err != nil {
		return err
	}
	return nil
}

// cmListen is the start of rdma_cm_server_connection: listen on the port
// again, on any address.
func (p *perf) cmListen() error {
	l, err := p.cm.ch.CreateID(p.portSpace(), 0)
	if err != nil {
		return err
	}
	if err := l.Bind(netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(p.cfg.tcpPort))); err != nil {
		l.Close()
		return fmt.Errorf("Failed to bind RDMA CM address on the server.: %w", err)
	}
	if err := l.Listen(p.cfg.numQPs); err != nil {
		l.Close()
		return fmt.Errorf("Failed to listen on RDMA CM server listen ID.: %w", err)
	}
	p.cm.listener = l
	return nil
}

// cmTestServer is the rest of rdma_cm_server_connection: take
// one request per QP (the first brings the resources up), accept each with
// its QP and close the listener.
func (p *perf) cmTestServer(ctx context.Context) error {
	c := p.cfg
	l := p.cm.listener
	defer func() {
		l.Close()
		p.cm.listener = nil
	}()
	for i := 0; i < c.numQPs; i++ {
		ev, err := l.WaitFor(ctx, rdmacm.EventConnectRequest)
		if err != nil {
			return err
		}
		id := ev.ID
		p.cm.ids = append(p.cm.ids, id)
		if err := p.cmBase(id); err != nil {
			id.Reject(nil)
			return err
		}
		if err := p.cmQP(id); err != nil {
			id.Reject(nil)
			return err
		}
		prm := p.cmConnParam()
		udLat := c.conn == connUD && c.test.kind == kindLat
		if udLat {
			// rdma_cm_request_ud_connection_parameters: a receive for
			// the client's QPN (40 bytes of header and 4 of message).
			if err := p.qps[i].PostRecv([]uverbs.RecvWR{{ID: 0, SGL: []uverbs.SGE{{Addr: p.mr.Addr(),
				Length: grh.Size + udQPNMessage, Lkey: p.mr.Lkey()}}}}); err != nil {
				return fmt.Errorf("Failed to post receive for connection %d for RDMA CM UD request connection parameters.: %w", i, err)
			}
		}
		if err := id.Accept(prm); err != nil {
			return fmt.Errorf("Failed to accept RDMA CM connection.: %w", err)
		}
		if c.conn == connRC {
			// The RNR timer perftest sets after accepting.
			p.qps[i].Modify(&uverbs.QPAttr{MinRNRTimer: minRNRTimer}, uverbs.QPAttrMinRNRTimer)
		}
		if udLat {
			if err := p.recvQPN(ctx, i); err != nil {
				return err
			}
		}
	}
	return nil
}

// recvQPN is rdma_cm_initialize_ud_connection_parameters: the client's
// first datagram gives its QPN (the immediate) and the reply address (its
// header); the Q_Key is our QP's.
func (p *perf) recvQPN(ctx context.Context, i int) error {
	var wc [1]uverbs.WC
	if err := p.pollOne(ctx, p.recvCQ, wc[:], "receive"); err != nil {
		return err
	}
	if wc[0].Opcode != uverbs.WCRecv || wc[0].Flags&uverbs.WCWithImm == 0 {
		return fmt.Errorf("the client's first datagram carries no QPN (opcode %d, flags %#x)", wc[0].Opcode, wc[0].Flags)
	}
	attr, err := grh.ReplyAH(p.dev, p.cfg.ibPort, wc[0], p.mr.Bytes()[:grh.Size])
	if err != nil {
		return fmt.Errorf("Unable to create AH from WC: %w", err)
	}
	ah, err := p.pd.CreateAH(attr)
	if err != nil {
		return fmt.Errorf("Unable to create AH from WC: %w", err)
	}
	p.ahs = append(p.ahs, ah)
	p.cm.udQPN = append(p.cm.udQPN, wc[0].Imm)
	p.cm.udQkey = cmQkey
	return nil
}

// cmQkey is the Q_Key the connection manager gives UD QPs of the UDP port
// space (RDMA_UDP_QKEY), which the server's QP has.
const cmQkey = 0x01234567

// closeCM disconnects the test connections (the client waits for each
// DISCONNECTED, as rdma_cm_disconnect_nodes) and frees the IDs, their
// QPs and the channel. It runs before the verbs resources go.
func (p *perf) closeCM() {
	t := p.cm
	if t == nil {
		return
	}
	p.qps = nil // the IDs' QPs: destroyed with them
	if p.cfg.conn != connUD {
		// The peer's last work requests may still wait for this side's
		// acknowledgement: a write_lat peer's last RDMA WRITE is in this
		// side's memory, which ended the test here, before this side's
		// device acknowledged it. Disconnect moves the QP to the error
		// state, after which rxe acknowledges nothing, and rxe retries
		// forever where retry_count is 7 (the CM's default): perftest's
		// server then polls for that completion without end. So the QPs
		// stay up until the peer disconnects, which it does once its own
		// test is over, or for cmLinger.
		gone := make([]bool, len(t.ids))
		lctx, lcancel := context.WithTimeout(context.Background(), cmLinger)
		for i, id := range t.ids {
			_, err := id.WaitFor(lctx, rdmacm.EventDisconnected)
			gone[i] = err == nil
		}
		lcancel()
		for _, id := range t.ids {
			id.Disconnect()
		}
		// Both sides wait for DISCONNECTED before destroying the IDs, as
		// perftest's rdma_cm_disconnect_nodes does: destroying an ID whose
		// DREQ is not yet answered cancels the DREQ's retransmission, and a
		// perftest client, which waits for DISCONNECTED without a time
		// limit, would never see one if that first DREQ were lost.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		for i, id := range t.ids {
			if !gone[i] {
				id.WaitFor(ctx, rdmacm.EventDisconnected)
			}
		}
		cancel()
	}
	for _, id := range t.ids {
		id.Close()
	}
	t.ids = nil
	if t.listener != nil {
		t.listener.Close()
	}
	t.ch.Close()
	p.cm = nil
}
