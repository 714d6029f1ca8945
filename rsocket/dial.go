package rsocket

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/rdmacm"
)

// Dialer connects rsockets. The zero value dials with librdmacm's
// defaults.
type Dialer struct {
	Config
	// LocalAddr, when valid, is the address to connect from (rbind).
	LocalAddr netip.AddrPort
}

// Dial connects to an rsocket listener ("10.99.0.1:7471") with the default
// Dialer.
func Dial(ctx context.Context, address string) (*Conn, error) {
	var d Dialer
	return d.Dial(ctx, address)
}

// Dial connects to an rsocket listener at address. ctx bounds the
// connection setup only.
func (d *Dialer) Dial(ctx context.Context, address string) (*Conn, error) {
	c, err := d.dial(ctx, address)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "rdma", Addr: addrString(address), Err: err}
	}
	return c, nil
}

type addrString string

func (a addrString) Network() string { return "rdma" }
func (a addrString) String() string  { return string(a) }

func (d *Dialer) dial(ctx context.Context, address string) (*Conn, error) {
	cfg, err := d.Config.withDefaults()
	if err != nil {
		return nil, err
	}
	dst, err := netip.ParseAddrPort(address)
	if err != nil {
		return nil, fmt.Errorf("rsocket: address %q: want ip:port: %w", address, unix.EINVAL)
	}
	ch, err := rdmacm.NewEventChannel()
	if err != nil {
		return nil, err
	}
	ref := &chanRef{ch: ch, refs: 1}
	defer ref.release()
	id, err := ch.CreateID(rdmacm.PortSpaceTCP, 0)
	if err != nil {
		return nil, err
	}
	if err := id.ResolveAddr(ctx, d.LocalAddr, dst); err != nil {
		id.Close()
		return nil, err
	}
	if err := id.ResolveRoute(ctx); err != nil {
		id.Close()
		return nil, err
	}
	c, err := newConn(id, cfg)
	c.chRef = ref
	if err != nil {
		c.free()
		return nil, err
	}
	ev, err := id.Connect(ctx, &rdmacm.ConnParam{PrivateData: c.localConnData(), FlowControl: 1, RetryCount: 7, RNRRetryCount: 7})
	if err != nil {
		c.free()
		return nil, err
	}
	if connDataHook != nil {
		connDataHook(ev.Param.PrivateData)
	}
	peer, err := parseConnData(ev.Param.PrivateData)
	if err != nil {
		c.free()
		return nil, err
	}
	c.start(peer)
	return c, nil
}

// ListenConfig configures a listener; each accepted connection takes its
// Config.
type ListenConfig struct {
	Config
	// Backlog is the listen backlog (0: the kernel's maximum).
	Backlog int
	// AcceptTimeout bounds how long Accept waits for a requester to
	// confirm the connection (default 30 s).
	AcceptTimeout time.Duration
}

// Listen listens for rsocket connections on address ("0.0.0.0:7471",
// ":0") with the default ListenConfig.
func Listen(ctx context.Context, address string) (*Listener, error) {
	var lc ListenConfig
	return lc.Listen(ctx, address)
}

// Listener accepts rsocket connections. It implements net.Listener.
type Listener struct {
	cfg    ListenConfig
	ref    *chanRef
	id     *rdmacm.ID
	addr   net.Addr
	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once
	amu    sync.Mutex
}

// Listen listens on address. ctx is not used after Listen returns.
func (lc *ListenConfig) Listen(ctx context.Context, address string) (*Listener, error) {
	l, err := lc.listen(address)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: "rdma", Addr: addrString(address), Err: err}
	}
	return l, nil
}

func (lc *ListenConfig) listen(address string) (*Listener, error) {
	cfg, err := lc.Config.withDefaults()
	if err != nil {
		return nil, err
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("rsocket: address %q: %w", address, unix.EINVAL)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	ap, err := netip.ParseAddrPort(net.JoinHostPort(host, port))
	if err != nil {
		return nil, fmt.Errorf("rsocket: address %q: want ip:port: %w", address, unix.EINVAL)
	}
	ch, err := rdmacm.NewEventChannel()
	if err != nil {
		return nil, err
	}
	ref := &chanRef{ch: ch, refs: 1}
	id, err := ch.CreateID(rdmacm.PortSpaceTCP, 0)
	if err == nil {
		err = id.Bind(ap)
	}
	if err == nil {
		err = id.Listen(lc.Backlog)
	}
	if err != nil {
		ref.release()
		return nil, err
	}
	l := &Listener{cfg: *lc, ref: ref, id: id, addr: tcpAddr(id.LocalAddr())}
	l.cfg.Config = cfg
	if l.cfg.AcceptTimeout == 0 {
		l.cfg.AcceptTimeout = 30 * time.Second
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	return l, nil
}

// Accept waits for and returns the next connection.
func (l *Listener) Accept() (net.Conn, error) { return l.AcceptRSocket() }

// AcceptRSocket is Accept returning the *Conn.
func (l *Listener) AcceptRSocket() (*Conn, error) {
	l.amu.Lock()
	defer l.amu.Unlock()
	for {
		ev, err := l.id.Event(l.ctx)
		if err != nil {
			if l.ctx.Err() != nil {
				err = net.ErrClosed
			}
			return nil, &net.OpError{Op: "accept", Net: "rdma", Addr: l.addr, Err: err}
		}
		if ev.Type != rdmacm.EventConnectRequest {
			continue
		}
		c, err := l.accept(ev)
		if err != nil {
			if l.ctx.Err() != nil {
				return nil, &net.OpError{Op: "accept", Net: "rdma", Addr: l.addr, Err: net.ErrClosed}
			}
			continue // that requester failed; wait for the next
		}
		return c, nil
	}
}

func (l *Listener) accept(ev rdmacm.Event) (*Conn, error) {
	id := ev.ID
	if connDataHook != nil {
		connDataHook(ev.Param.PrivateData)
	}
	peer, err := parseConnData(ev.Param.PrivateData)
	if err != nil {
		id.Reject(nil)
		id.Close()
		return nil, err
	}
	c, err := newConn(id, l.cfg.Config)
	c.chRef = l.ref
	if err != nil {
		id.Reject(nil)
		c.free()
		return nil, err
	}
	p := ev.Param
	err = id.Accept(&rdmacm.ConnParam{PrivateData: c.localConnData(), FlowControl: p.FlowControl,
		RetryCount: 7, RNRRetryCount: 7})
	if err == nil {
		ctx, cancel := context.WithTimeout(l.ctx, l.cfg.AcceptTimeout)
		_, err = id.WaitFor(ctx, rdmacm.EventEstablished)
		cancel()
	}
	if err != nil {
		c.free()
		return nil, err
	}
	c.start(peer)
	return c, nil
}

// Close stops listening; connections already accepted stay up.
func (l *Listener) Close() error {
	l.once.Do(func() {
		l.cancel()
		l.id.Close()
		l.ref.release()
	})
	return nil
}

// Addr returns the listener's address.
func (l *Listener) Addr() net.Addr { return l.addr }

func tcpAddr(ap netip.AddrPort) net.Addr { return net.TCPAddrFromAddrPort(ap) }

var _ net.Conn = (*Conn)(nil)
var _ net.Listener = (*Listener)(nil)
