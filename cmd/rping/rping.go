package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"time"

	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

// The states rping names in its "wait for <state> state <n>" lines (enum
// test_state, counted from IDLE = 1).
const (
	stateRouteResolved     = 4
	stateConnected         = 5
	stateRDMAReadAdv       = 6
	stateRDMAReadComplete  = 7
	stateRDMAWriteAdv      = 8
	stateRDMAWriteComplete = 9
	stateDisconnected      = 10
	stateError             = 11
)

var stateNames = map[int]string{
	stateConnected: "CONNECTED", stateRDMAReadAdv: "RDMA_READ_ADV", stateRDMAReadComplete: "RDMA_READ_COMPLETE",
	stateRDMAWriteAdv: "RDMA_WRITE_ADV", stateRDMAWriteComplete: "RDMA_WRITE_COMPLETE",
}

// errDisconnected ends a wait when the peer disconnects (rping's state
// DISCONNECTED): a normal end for the side that did not ask for it.
var errDisconnected = errors.New("disconnected")

// fatalEvent is a CM error event, which rping's cm thread answers with
// exit(-1) after "cma event <EVENT>, error <status>".
type fatalEvent struct{ msg string }

func (e *fatalEvent) Error() string { return e.msg }

// pinger is one run of rping: its output and configuration.
type pinger struct {
	cfg    *config
	stdout io.Writer
	stderr io.Writer
	ready  func() // tests: called once the server listens

	outMu sync.Mutex // -P: several connections print at once
}

func (r *pinger) printf(w io.Writer, format string, a ...any) {
	r.outMu.Lock()
	defer r.outMu.Unlock()
	fmt.Fprintf(w, format, a...)
}

func (r *pinger) debugf(format string, a ...any) {
	if r.cfg.debug {
		r.printf(r.stdout, format, a...)
	}
}

// conn is one connection: its CM ID, verbs resources and the watcher of
// its CM events.
type conn struct {
	r      *pinger
	id     *rdmacm.ID
	s      *session
	server bool

	// ctx ends when the connection does: the peer disconnected
	// (errDisconnected) or a CM error arrived (a *fatalEvent).
	ctx    context.Context
	cancel context.CancelCauseFunc
	// disconnected is closed when DISCONNECTED has been seen.
	disconnected chan struct{}
	watchDone    chan struct{}
}

// newConn opens the ID's device and sets up the session and QP on it
// (rping_setup_qp, rping_setup_buffers), with one receive posted.
func (r *pinger) newConn(ctx context.Context, id *rdmacm.ID, server bool) (*conn, error) {
	c := &conn{r: r, id: id, server: server, disconnected: make(chan struct{})}
	// The device's context is the package's, shared by the IDs on it.
	dev, err := id.Context()
	if err != nil {
		return nil, fmt.Errorf("setup_qp failed: %w", err)
	}
	if c.s, err = newSession(dev, r.cfg.size, !server); err != nil {
		c.close()
		return nil, fmt.Errorf("setup_qp failed: %w", err)
	}
	if r.cfg.selfQP {
		// rping -q: the program's own QP, moved to INIT by the program.
		if c.s.qp, err = c.s.pd.CreateQP(c.s.qpInitAttr()); err == nil {
			err = c.selfModify(uverbs.QPStateInit)
		}
	} else {
		c.s.qp, err = id.CreateQP(c.s.pd, c.s.qpInitAttr())
	}
	if err != nil {
		c.close()
		return nil, fmt.Errorf("rdma_create_qp: %w", err)
	}
	r.debugf("created pd, channel, cq and qp\n")
	if err := c.s.postRecv(); err != nil {
		c.close()
		return nil, fmt.Errorf("ibv_post_recv failed: %w", err)
	}
	r.debugf("allocated & registered buffers...\n")
	c.ctx, c.cancel = context.WithCancelCause(ctx)
	return c, nil
}

// watch handles the connection's CM events once it is established, as
// rping's cm thread: DISCONNECTED ends the waits (it cancels their
// context; the QP goes to the error state when this side disconnects); an
// error event is fatal.
func (c *conn) watch() {
	c.watchDone = make(chan struct{})
	go func() {
		defer close(c.watchDone)
		for {
			ev, err := c.id.Event(c.ctx)
			if err != nil {
				return
			}
			c.r.debugf("cma_event type %s cma_id (%s)\n", ev.Type, map[bool]string{true: "child", false: "parent"}[c.server])
			switch ev.Type {
			case rdmacm.EventDisconnected:
				side := "client"
				if c.server {
					side = "server"
				}
				c.r.printf(c.r.stderr, "%s DISCONNECT EVENT...\n", side)
				close(c.disconnected)
				c.cancel(errDisconnected)
				return
			case rdmacm.EventDeviceRemoval:
				c.r.printf(c.r.stderr, "cma detected device removal!!!!\n")
				c.cancel(&fatalEvent{"device removal"})
				return
			case rdmacm.EventAddrError, rdmacm.EventRouteError, rdmacm.EventConnectError,
				rdmacm.EventUnreachable, rdmacm.EventRejected:
				msg := fmt.Sprintf("cma event %s, error %d", ev.Type, ev.Status)
				c.r.printf(c.r.stderr, "%s\n", msg)
				c.cancel(&fatalEvent{msg})
				return
			case rdmacm.EventTimewaitExit, rdmacm.EventEstablished:
			default:
				c.r.printf(c.r.stderr, "unhandled event: %s, ignoring\n", ev.Type)
			}
		}
	}()
}

// wait is sem_wait plus the state check: the next completion, which must be
// what the protocol expects next (want names the state for the message).
// On a disconnect it prints rping's "wait for <state> state 10".
func (c *conn) wait(want int) (uverbs.WC, info, error) {
	wc, in, err := c.s.next(c.ctx)
	if err == nil {
		return wc, in, nil
	}
	state := stateError
	switch cause := context.Cause(c.ctx); {
	case c.ctx.Err() != nil && errors.Is(cause, errDisconnected):
		state = stateDisconnected
		err = errDisconnected
	case c.ctx.Err() != nil:
		err = cause
	case errors.Is(err, errFlushed):
		// The QP was moved to the error state: a disconnect on its way.
		select {
		case <-c.disconnected:
			state, err = stateDisconnected, errDisconnected
		case <-time.After(5 * time.Second):
		}
	default:
		c.r.printf(c.r.stderr, "%v\n", err)
	}
	var fe *fatalEvent
	if !errors.As(err, &fe) {
		c.r.printf(c.r.stderr, "wait for %s state %d\n", stateNames[want], state)
	}
	return wc, in, err
}

// serve is rping_test_server: per ping, READ the client's buffer, print it,
// go ahead, WRITE it back into the client's sink, go ahead.
func (c *conn) serve() error {
	cfg := c.r.cfg
	for {
		_, peer, err := c.wait(stateRDMAReadAdv)
		if err != nil {
			return err
		}
		c.r.debugf("Received rkey %x addr %x len %d from peer\n", peer.Rkey, peer.Addr, peer.Size)
		if err := c.s.rdma(uverbs.WRRDMARead, peer, int(peer.Size)); err != nil {
			c.r.printf(c.r.stderr, "post send error %v\n", err)
			return err
		}
		c.r.debugf("server posted rdma read req \n")
		if _, _, err := c.wait(stateRDMAReadComplete); err != nil {
			return err
		}
		if cfg.verbose {
			c.r.printf(c.r.stdout, "server ping data: %s\n", cString(c.s.rdmaBuf()))
		}
		if err := c.s.sendGoAhead(); err != nil {
			c.r.printf(c.r.stderr, "post send error %v\n", err)
			return err
		}
		c.r.debugf("server posted go ahead\n")
		_, peer, err = c.wait(stateRDMAWriteAdv)
		if err != nil {
			return err
		}
		n := len(cString(c.s.rdmaBuf())) + 1
		if err := c.s.rdma(uverbs.WRRDMAWrite, peer, n); err != nil {
			c.r.printf(c.r.stderr, "post send error %v\n", err)
			return err
		}
		if _, _, err := c.wait(stateRDMAWriteComplete); err != nil {
			return err
		}
		c.r.debugf("server rdma write complete \n")
		if err := c.s.sendGoAhead(); err != nil {
			c.r.printf(c.r.stderr, "post send error %v\n", err)
			return err
		}
		c.r.debugf("server posted go ahead\n")
	}
}

// ping is rping_test_client.
func (c *conn) ping() error {
	cfg := c.r.cfg
	start, sink := c.s.startBuf(), c.s.rdmaBuf()
	for n := 0; cfg.count == 0 || n < cfg.count; n++ {
		fillPing(start, n)
		if err := c.s.sendInfo(c.s.start, cfg.size); err != nil {
			c.r.printf(c.r.stderr, "post send error %v\n", err)
			return err
		}
		if _, _, err := c.wait(stateRDMAWriteAdv); err != nil {
			return err
		}
		if err := c.s.sendInfo(c.s.rdmaMR, cfg.size); err != nil {
			c.r.printf(c.r.stderr, "post send error %v\n", err)
			return err
		}
		if _, _, err := c.wait(stateRDMAWriteComplete); err != nil {
			return err
		}
		if cfg.validate && string(start) != string(sink) {
			c.r.printf(c.r.stderr, "data mismatch!\n")
			return errors.New("data mismatch")
		}
		if cfg.verbose {
			c.r.printf(c.r.stdout, "ping data: %s\n", cString(sink))
		}
	}
	return nil
}

// disconnect is rping_disconnect: the QP to the error state and a
// DISCONNECT.
func (c *conn) disconnect() {
	if c.r.cfg.selfQP {
		c.s.qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState)
	}
	if err := c.id.Disconnect(); err != nil {
		c.r.debugf("rdma_disconnect: %v\n", err)
	}
}

// close ends the watcher and frees the connection: the ID (and the QP it
// made), the session, the device.
func (c *conn) close() {
	if c.cancel != nil {
		c.cancel(context.Canceled)
	}
	if c.watchDone != nil {
		<-c.watchDone
	}
	if c.r.cfg.selfQP && c.s != nil && c.s.qp != nil {
		c.s.qp.Close()
	}
	c.id.Close()
	if c.s != nil {
		c.s.close()
	}
}

// selfModify is rping_self_modify_qp for -q: each state with the
// attributes the kernel gives for it (rdma_init_qp_attr).
func (c *conn) selfModify(states ...uverbs.QPState) error {
	for _, st := range states {
		attr, mask, err := c.id.InitQPAttr(st)
		if err != nil {
			return err
		}
		if err := c.s.qp.Modify(&attr, mask); err != nil {
			return err
		}
	}
	return nil
}

// connParam is rping_init_conn_param: one outstanding READ each way (the
// server reads the client's buffer), retries 7; with -q, the QP's number.
func (c *conn) connParam() *rdmacm.ConnParam {
	p := &rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}
	if c.r.cfg.selfQP {
		p.QPNum = c.s.qp.QPN()
	}
	return p
}

// runServer is rping_run_server (and, with -P, the persistent server):
// bind, listen, and serve one connection (or every one).
func (r *pinger) runServer(ctx context.Context, ch *rdmacm.EventChannel) error {
	cfg := r.cfg
	l, err := ch.CreateID(rdmacm.PortSpaceTCP, 0)
	if err != nil {
		r.printf(r.stderr, "rdma_create_id: %v\n", err)
		return err
	}
	defer l.Close()
	if err := l.Bind(netip.AddrPortFrom(cfg.addr, cfg.port)); err != nil {
		r.printf(r.stderr, "rdma_bind_addr: %v\n", err)
		return err
	}
	r.debugf("rdma_bind_addr successful\n")
	r.debugf("rdma_listen\n")
	if err := l.Listen(backlog); err != nil {
		r.printf(r.stderr, "rdma_listen: %v\n", err)
		return err
	}
	if r.ready != nil {
		r.ready()
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		ev, err := l.WaitFor(ctx, rdmacm.EventConnectRequest)
		if err != nil {
			if ev.Type != 0 {
				r.printf(r.stderr, "cma event %s, error %d\n", ev.Type, ev.Status)
				return &fatalEvent{err.Error()}
			}
			return err
		}
		r.debugf("child cma\n")
		if !cfg.persistent {
			return r.serveOne(ctx, ev.ID)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.serveOne(ctx, ev.ID)
		}()
	}
}

// serveOne accepts the connection of id and serves it to its end.
func (r *pinger) serveOne(ctx context.Context, id *rdmacm.ID) error {
	c, err := r.newConn(ctx, id, true)
	if err != nil {
		r.printf(r.stderr, "%v\n", err)
		id.Reject(nil)
		id.Close()
		return err
	}
	defer c.close()
	r.debugf("accepting client connection request\n")
	var p *rdmacm.ConnParam // rping accepts with NULL: the request's values
	if cfg := r.cfg; cfg.selfQP {
		if err := c.selfModify(uverbs.QPStateInit, uverbs.QPStateRTR, uverbs.QPStateRTS); err != nil {
			r.printf(r.stderr, "rdma_accept: %v\n", err)
			return err
		}
		p = c.connParam()
	}
	if err := id.Accept(p); err != nil {
		r.printf(r.stderr, "rdma_accept: %v\n", err)
		r.printf(r.stderr, "connect error %d\n", -1)
		return err
	}
	if _, err := id.WaitFor(c.ctx, rdmacm.EventEstablished); err != nil {
		r.debugf("%v\n", err)
		r.printf(r.stderr, "wait for CONNECTED state %d\n", stateError)
		r.printf(r.stderr, "connect error %d\n", -1)
		return err
	}
	c.watch()
	err = c.serve()
	if errors.Is(err, errDisconnected) {
		err = nil
	} else { // serve ends only with an error
		var fe *fatalEvent
		if !errors.As(err, &fe) {
			r.printf(r.stderr, "rping server failed: %d\n", -1)
		}
	}
	c.disconnect()
	return err
}

// resolver is what resolve resolves with: an *rdmacm.ID.
type resolver interface {
	ResolveAddr(ctx context.Context, src, dst netip.AddrPort) error
	ResolveRoute(ctx context.Context) error
}

// resolve is the client's rdma_resolve_addr and rdma_resolve_route, each
// with its own resolveTimeoutMS as rping gives them. On failure it
// returns the failed call's name with the error.
func resolve(ctx context.Context, id resolver, src, dst netip.AddrPort) (string, error) {
	timed := func(f func(context.Context) error) error {
		ctx, cancel := context.WithTimeout(ctx, resolveTimeoutMS*time.Millisecond)
		defer cancel()
		return f(ctx)
	}
	if err := timed(func(ctx context.Context) error { return id.ResolveAddr(ctx, src, dst) }); err != nil {
		return "rdma_resolve_addr", err
	}
	if err := timed(id.ResolveRoute); err != nil {
		return "rdma_resolve_route", err
	}
	return "", nil
}

// runClient is rping_run_client: resolve, connect, ping, disconnect.
func (r *pinger) runClient(ctx context.Context, ch *rdmacm.EventChannel) error {
	cfg := r.cfg
	id, err := ch.CreateID(rdmacm.PortSpaceTCP, 0)
	if err != nil {
		r.printf(r.stderr, "rdma_create_id: %v\n", err)
		return err
	}
	var src netip.AddrPort
	if cfg.source.IsValid() {
		src = netip.AddrPortFrom(cfg.source, 0)
	}
	if call, err := resolve(ctx, id, src, netip.AddrPortFrom(cfg.addr, cfg.port)); err != nil {
		id.Close()
		r.printf(r.stderr, "%s: %v\n", call, err)
		return err
	}
	r.debugf("rdma_resolve_addr - rdma_resolve_route successful\n")
	c, err := r.newConn(ctx, id, false)
	if err != nil {
		r.printf(r.stderr, "%v\n", err)
		id.Close()
		return err
	}
	defer c.close()
	if ev, err := id.Connect(c.ctx, c.connParam()); err != nil {
		if ev.Type != 0 {
			// rping's cm thread reports the event and exits; its main
			// thread, woken first, has time for its own two lines.
			msg := fmt.Sprintf("cma event %s, error %d", ev.Type, ev.Status)
			r.printf(r.stderr, "%s\nwait for CONNECTED state %d\nconnect error %d\n", msg, stateRouteResolved, -1)
			return &fatalEvent{msg}
		}
		r.printf(r.stderr, "rdma_connect: %v\n", err)
		return err
	}
	if cfg.selfQP {
		err := c.selfModify(uverbs.QPStateInit, uverbs.QPStateRTR, uverbs.QPStateRTS)
		if err == nil {
			err = id.Establish()
		}
		if err != nil {
			r.printf(r.stderr, "rping_modify_qp: %v\n", err)
			return err
		}
	}
	r.debugf("rdma_connect successful\n")
	c.watch()
	err = c.ping()
	if errors.Is(err, errDisconnected) {
		return nil // the server went first: rping ends with success
	}
	if err != nil {
		var fe *fatalEvent
		if !errors.As(err, &fe) {
			r.printf(r.stderr, "rping client failed: %d\n", -1)
		}
		c.disconnect()
		return err
	}
	c.disconnect()
	// rping's cm thread reports the DISCONNECTED the server's reply brings
	// while the main thread tears down.
	select {
	case <-c.disconnected:
	case <-time.After(2 * time.Second):
	}
	return nil
}
