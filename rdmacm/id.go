package rdmacm

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/uverbs"
)

// PortSpace is the port space of an ID (enum rdma_ucm_port_space): it fixes
// the QP type and which peers can reach the ID's port.
type PortSpace uint16

// Port spaces.
const (
	// PortSpaceTCP is for reliable connected QPs (RC); librdmacm's
	// RDMA_PS_TCP, what rping, ucmatose and perftest -R use.
	PortSpaceTCP PortSpace = abi.RDMAPSTCP
	// PortSpaceUDP is for unreliable datagram QPs (UD): SIDR "connections"
	// and multicast; udaddy and mckey use it.
	PortSpaceUDP PortSpace = abi.RDMAPSUDP
	// PortSpaceIB takes its QP type from CreateID (RC by default).
	PortSpaceIB PortSpace = abi.RDMAPSIB
	// PortSpaceIPoIB is UD on an InfiniBand link only (EINVAL on RoCE).
	PortSpaceIPoIB PortSpace = abi.RDMAPSIPoIB
)

// String returns the port space's librdmacm name.
func (ps PortSpace) String() string {
	switch ps {
	case PortSpaceTCP:
		return "RDMA_PS_TCP"
	case PortSpaceUDP:
		return "RDMA_PS_UDP"
	case PortSpaceIB:
		return "RDMA_PS_IB"
	case PortSpaceIPoIB:
		return "RDMA_PS_IPOIB"
	}
	return fmt.Sprintf("PortSpace(%#x)", uint16(ps))
}

// DefaultResolveTimeout bounds address and route resolution when the
// context has no deadline (librdmacm's examples use 2000 ms).
const DefaultResolveTimeout = 2 * time.Second

// ID is a connection manager identifier (librdmacm's rdma_cm_id): a port
// bound, resolved, listening or connected, with at most one QP it created
// (CreateQP) and the events the kernel reports for it (Event).
//
// Methods may be called from several goroutines, but the protocol's order
// (resolve, connect, ...) is the caller's. Close is idempotent; every method
// of a closed ID returns an error matching uverbs.ErrClosed.
type ID struct {
	ch       *EventChannel
	uid      uint64
	handle   uint32
	ps       PortSpace
	qpType   uverbs.QPType
	listener *ID

	mu         sync.Mutex
	queue      []Event
	notify     chan struct{} // closed and replaced by a push while waiters > 0
	waiters    int           // goroutines in next holding notify
	closed     bool
	removed    bool
	dev        *device
	qp         *uverbs.QP
	reqResp    uint8 // from CONNECT_REQUEST: the peer's initiator depth
	reqInit    uint8 // and its responder resources
	offered    ConnParam
	mcs        []*Multicast // LEAVE_MCAST is sent by whoever takes one out, under mu
	backlog    int          // Listen's bound on requests (0: not listening)
	requests   int          // CONNECT_REQUESTs queued and not yet taken
	sharedChan bool         // Close releases the shared channel (IDs of Dial and Listen)
	// routeBy, set by Dial's resolution, makes the event reader answer
	// ADDR_RESOLVED with RESOLVE_ROUTE (its kernel timeout ending at
	// routeBy) instead of queueing it: Dial's goroutine then wakes once
	// for both resolutions, as librdmacm's event loops chain them.
	routeBy time.Time

	// qpOp is held by the event reader while it moves the QP to the error
	// state (DEVICE_REMOVAL) and by DestroyQP: the kernel
	// refuses to destroy a QP (EBUSY) while another command on it runs.
	qpOp sync.Mutex
}

// errQP moves the ID's QP, if any, to the error state when the event
// reader sees DEVICE_REMOVAL, under qpOp.
func (id *ID) errQP() {
	id.qpOp.Lock()
	defer id.qpOp.Unlock()
	if qp := id.QP(); qp != nil {
		qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState)
	}
}

// CreateID creates an ID on the channel. qpType is the QP type the ID will
// carry: 0 picks the port space's (RC for PortSpaceTCP and PortSpaceIB, UD
// for PortSpaceUDP and PortSpaceIPoIB); only PortSpaceIB accepts another.
func (ch *EventChannel) CreateID(ps PortSpace, qpType uverbs.QPType) (*ID, error) {
	if ch == nil {
		return nil, fmt.Errorf("rdmacm: create id: nil EventChannel: %w", unix.EINVAL)
	}
	def := uverbs.QPTypeRC
	switch ps {
	case PortSpaceTCP, PortSpaceIB:
	case PortSpaceUDP, PortSpaceIPoIB:
		def = uverbs.QPTypeUD
	default:
		return nil, fmt.Errorf("rdmacm: create id: PortSpace %v is not a port space: %w", ps, unix.EINVAL)
	}
	if qpType == 0 {
		qpType = def
	} else if qpType != def && ps != PortSpaceIB {
		return nil, fmt.Errorf("rdmacm: create id: QPType %v does not go with %v (which takes %v): %w", qpType, ps, def, unix.EINVAL)
	} else if qpType != uverbs.QPTypeRC && qpType != uverbs.QPTypeUD {
		return nil, fmt.Errorf("rdmacm: create id: QPType %v: only RC and UD: %w", qpType, unix.EINVAL)
	}
	ch.mu.Lock()
	closed := ch.closed
	ch.mu.Unlock()
	if closed {
		return nil, errClosed("create id")
	}
	// The ID is listed only once the kernel made it: a Close meanwhile
	// would destroy a handle the ID does not have yet. No event comes
	// before a command on the ID.
	id := &ID{ch: ch, uid: nextUID.Add(1), ps: ps, qpType: qpType, notify: make(chan struct{})}
	req := &abi.UCMCreateID{UID: id.uid, PS: uint16(ps), QPType: uint8(qpType)}
	resp, err := writeResp[abi.UCMCreateID, abi.UCMCreateIDResp](ch, abi.UCMCmdCreateID, req, &req.Response)
	if err != nil {
		return nil, cmdErr("create id", err)
	}
	id.handle = resp.ID
	if err := ch.register(id); err != nil {
		ch.destroyHandle(id.handle) // the channel closed meanwhile
		return nil, err
	}
	return id, nil
}

// newChild makes the ID of an incoming connection (CONNECT_REQUEST),
// ch.mu held.
func (ch *EventChannel) newChild(l *ID, handle uint32) *ID {
	id := &ID{ch: ch, handle: handle, ps: l.ps, qpType: l.qpType, listener: l, notify: make(chan struct{})}
	id.uid = nextUID.Add(1)
	ch.ids[id.uid] = id
	uids.Lock()
	uids.ids[id.uid] = id
	uids.Unlock()
	return id
}

// pushRequest queues the CONNECT_REQUEST ev on the listener l, unless l
// is closed or holds its backlog of requests not yet taken (false: the
// reader refuses it). The new ID of a Dial/Listen listener takes its
// reference on the shared channel here, under l's lock: l, open, holds
// one, so the channel is open and the new ID's reference is never the
// last while the reader holds it.
func (l *ID) pushRequest(ev Event) bool {
	l.mu.Lock()
	if l.closed || (l.backlog > 0 && l.requests >= l.backlog) {
		l.mu.Unlock()
		return false
	}
	if l.sharedChan {
		ev.ID.sharedChan = retainChannel(ev.ID.ch)
	}
	l.requests++
	l.queue = append(l.queue, ev)
	l.mu.Unlock()
	l.wakeUp()
	return true
}

// refuse destroys the ID of a CONNECT_REQUEST its listener did not queue,
// which refuses the requester (as the kernel does when its own backlog is
// full). The reader does it directly, not by Close: the ID has nothing
// yet (QP, device, memberships, reference on the shared channel), and
// the channel's Close may have destroyed it already.
func (id *ID) refuse() {
	id.mu.Lock()
	done := id.closed
	id.closed = true
	id.mu.Unlock()
	if !done {
		id.ch.destroyHandle(id.handle)
	}
	id.ch.unregister(id)
}

// PortSpace returns the ID's port space.
func (id *ID) PortSpace() PortSpace { return id.ps }

// QPType returns the type of QP the ID carries.
func (id *ID) QPType() uverbs.QPType { return id.qpType }

// Handle returns the kernel's handle of the ID on its channel.
func (id *ID) Handle() uint32 { return id.handle }

// Channel returns the event channel the ID lives on.
func (id *ID) Channel() *EventChannel { return id.ch }

// QP returns the QP CreateQP made, or nil.
func (id *ID) QP() *uverbs.QP {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.qp
}

// use checks that the ID can take a command.
func (id *ID) use(op string) error {
	if id == nil {
		return fmt.Errorf("rdmacm: %s: nil ID: %w", op, unix.EINVAL)
	}
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.closed {
		return errClosed(op)
	}
	if id.removed {
		return fmt.Errorf("rdmacm: %s: %w", op, uverbs.ErrDeviceRemoved)
	}
	return nil
}

// Bind binds the ID to a local address: a specific IP binds it to the RDMA
// device of the netdev that has it; the unspecified address (0.0.0.0, ::)
// binds only the port. Port 0 picks a free one (LocalAddr tells which).
func (id *ID) Bind(addr netip.AddrPort) error {
	const op = "bind"
	if err := id.use(op); err != nil {
		return err
	}
	req := &abi.UCMBind{ID: id.handle}
	n, err := putSockaddr(req.Addr[:], addr, "addr")
	if err != nil {
		return fmt.Errorf("rdmacm: %s: %w", op, err)
	}
	req.AddrSize = uint16(n)
	if err := write(id.ch, abi.UCMCmdBind, req, 0); err != nil {
		return addrErr(op, addr.Addr(), err)
	}
	return nil
}

// resolveDeadline is when a resolution bounded by ctx gives up.
func resolveDeadline(ctx context.Context) time.Time {
	if dl, ok := ctx.Deadline(); ok {
		return dl
	}
	return time.Now().Add(DefaultResolveTimeout)
}

// attemptTimeout is the kernel timeout of one address resolution attempt:
// short at first and doubling, within what is left before deadline. The
// kernel retries an unanswered neighbour lookup only when its timeout
// fires (or a neighbour update arrives, which some links never send), so
// short attempts resolve a neighbour as soon as it answers.
func attemptTimeout(attempt int, deadline time.Time) uint32 {
	d := 20 * time.Millisecond << min(attempt, 6)
	if left := time.Until(deadline); left < d {
		d = left
	}
	return uint32(max(d.Milliseconds(), 1))
}

// ResolveAddr resolves dst (and binds the ID to the device that reaches it,
// from src if src is valid) and waits for the result: the kernel's
// ADDR_RESOLVED, or an error naming the address. The kernel's timeout is
// the context's deadline, or DefaultResolveTimeout; a cancelled context
// returns ctx.Err() and leaves the ID to be closed.
func (id *ID) ResolveAddr(ctx context.Context, src, dst netip.AddrPort) error {
	return id.resolveAddr(ctx, src, dst, false)
}

// resolveAddr is ResolveAddr, followed by ResolveRoute when route is set:
// the event reader sends RESOLVE_ROUTE on ADDR_RESOLVED, and this waits for
// ROUTE_RESOLVED.
func (id *ID) resolveAddr(ctx context.Context, src, dst netip.AddrPort, route bool) error {
	const op = "resolve addr"
	if err := id.use(op); err != nil {
		return err
	}
	if ctx == nil {
		return fmt.Errorf("rdmacm: %s: nil context: %w", op, unix.EINVAL)
	}
	req := &abi.UCMResolveAddr{ID: id.handle}
	n, err := putSockaddr(req.DstAddr[:], dst, "dst")
	if err != nil {
		return fmt.Errorf("rdmacm: %s: %w", op, err)
	}
	req.DstSize = uint16(n)
	if src.IsValid() {
		n, err := putSockaddr(req.SrcAddr[:], src, "src")
		if err != nil {
			return fmt.Errorf("rdmacm: %s: %w", op, err)
		}
		if src.Addr().Unmap().Is4() != dst.Addr().Unmap().Is4() {
			return fmt.Errorf("rdmacm: %s: src %v and dst %v are of different families: %w", op, src, dst, unix.EINVAL)
		}
		req.SrcSize = uint16(n)
	}
	// A device error is about the source when one is given.
	owner := dst.Addr()
	if src.IsValid() && !src.Addr().IsUnspecified() {
		owner = src.Addr()
	}
	deadline := resolveDeadline(ctx)
	want := []EventType{EventAddrResolved, EventAddrError}
	if route {
		want = []EventType{EventRouteResolved, EventAddrError, EventRouteError}
		id.mu.Lock()
		id.routeBy = deadline
		id.mu.Unlock()
		defer func() {
			id.mu.Lock()
			id.routeBy = time.Time{}
			id.mu.Unlock()
		}()
	}
	for attempt := 0; ; attempt++ {
		req.TimeoutMs = attemptTimeout(attempt, deadline)
		if err := write(id.ch, abi.UCMCmdResolveAddr, req, 0); err != nil {
			if errors.Is(err, unix.ENODEV) || errors.Is(err, unix.EADDRNOTAVAIL) {
				return addrErr(op, owner, err)
			}
			return addrErr(op, dst.Addr(), err)
		}
		ev, err := id.waitFor(ctx, op, want...)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("rdmacm: %s: %v did not answer before the context ended: %w", op, dst.Addr(), ctx.Err())
			}
			return err
		}
		switch ev.Type {
		case EventAddrResolved, EventRouteResolved:
			return nil
		case EventRouteError:
			return fmt.Errorf("rdmacm: resolve route: %w", statusErrno(ev.Status))
		}
		if ev.Status != -int(unix.ETIMEDOUT) || !time.Now().Before(deadline) {
			a := dst.Addr()
			if ev.Status == -int(unix.ENODEV) {
				a = owner
			}
			err := addrErr(op, a, statusErrno(ev.Status))
			if ctx.Err() != nil {
				return fmt.Errorf("%w: %w", err, ctx.Err())
			}
			if _, ok := ctx.Deadline(); ok && ev.Status == -int(unix.ETIMEDOUT) {
				<-ctx.Done() // the deadline is a moment away: report it
				return fmt.Errorf("%w: %w", err, ctx.Err())
			}
			return err
		}
	}
}

// ResolveRoute resolves the route to the address ResolveAddr found (local
// on RoCE) and waits for ROUTE_RESOLVED.
func (id *ID) ResolveRoute(ctx context.Context) error {
	const op = "resolve route"
	if err := id.use(op); err != nil {
		return err
	}
	if ctx == nil {
		return fmt.Errorf("rdmacm: %s: nil context: %w", op, unix.EINVAL)
	}
	if err := id.writeResolveRoute(resolveDeadline(ctx)); err != nil {
		return cmdErr(op, err)
	}
	ev, err := id.waitFor(ctx, op, EventRouteResolved, EventRouteError)
	if err != nil {
		return err
	}
	if ev.Type == EventRouteError {
		return fmt.Errorf("rdmacm: %s: %w", op, statusErrno(ev.Status))
	}
	return nil
}

// writeResolveRoute sends RESOLVE_ROUTE with a kernel timeout ending at
// deadline (at least 1 ms).
func (id *ID) writeResolveRoute(deadline time.Time) error {
	req := &abi.UCMResolveRoute{ID: id.handle, TimeoutMs: uint32(max(time.Until(deadline).Milliseconds(), 1))}
	return write(id.ch, abi.UCMCmdResolveRoute, req, 0)
}

// chainRoute answers an ADDR_RESOLVED of an ID that resolveAddr told to
// go on with the route: it sends RESOLVE_ROUTE and reports true, so the
// event is not queued; a refused command becomes a ROUTE_ERROR with the
// command's errno, queued in its place. It reports false for any other ID.
func (id *ID) chainRoute(ev *Event) bool {
	id.mu.Lock()
	by := id.routeBy
	id.routeBy = time.Time{}
	id.mu.Unlock()
	if by.IsZero() {
		return false
	}
	err := id.writeResolveRoute(by)
	if err == nil {
		return true
	}
	ev.Type, ev.Status = EventRouteError, -int(unix.EINVAL)
	if errno, ok := errors.AsType[unix.Errno](err); ok {
		ev.Status = -int(errno)
	}
	return false
}

// Listen makes a bound ID listen for connections. Each request arrives as
// a CONNECT_REQUEST event on the listener (Event), whose ID is the new
// connection's.
//
// backlog bounds the requests queued on the listener and not yet taken
// (by Event, WaitFor or Listener.Request), as the kernel's backlog bounds
// those not yet read from the channel (the channel's reader reads each at
// once, so the kernel's never fills). A request past it is refused as the
// kernel refuses one past its own: its ID is destroyed, and the requester
// sees a reject (reason 28, consumer defined; a SIDR reject for UD).
// backlog ≤ 0, or above the kernel's maximum, is that maximum, as the
// kernel's ucma takes it: /proc/sys/net/rdma_ucm/max_backlog, 1024 where
// that cannot be read.
func (id *ID) Listen(backlog int) error {
	const op = "listen"
	if err := id.use(op); err != nil {
		return err
	}
	if backlog < 0 {
		backlog = 0
	}
	if backlog > 1<<30 {
		return fmt.Errorf("rdmacm: %s: backlog %d is out of range: %w", op, backlog, unix.EINVAL)
	}
	bound := backlog
	if max := maxBacklog(); bound == 0 || bound > max {
		bound = max
	}
	// Set before LISTEN: a request may arrive as soon as it is written.
	id.mu.Lock()
	id.backlog = bound
	id.mu.Unlock()
	if err := write(id.ch, abi.UCMCmdListen, &abi.UCMListen{ID: id.handle, Backlog: uint32(backlog)}, 0); err != nil {
		return cmdErr(op, err)
	}
	return nil
}

// maxBacklogPath is the kernel's bound on LISTEN backlogs (rdma_ucm's
// sysctl net.rdma_ucm.max_backlog).
const maxBacklogPath = "/proc/sys/net/rdma_ucm/max_backlog"

// maxBacklog returns the kernel's bound on LISTEN backlogs, or its
// default, 1024, where the sysctl cannot be read (another network
// namespace, or rdma_ucm not loaded).
func maxBacklog() int {
	b, err := os.ReadFile(maxBacklogPath)
	if err != nil {
		return 1024
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || v <= 0 {
		return 1024
	}
	return v
}

// The most private data, in bytes, the kernel accepts in each message over
// IP addressing (the IB CM's limits less the 36-byte header the kernel
// prepends to requests). A UD ID rejects with a SIDR REP.
const (
	MaxConnectPrivateDataRC = abi.IBCMREQPrivateDataBytes - abi.CMAHdrBytes   // 56
	MaxConnectPrivateDataUD = abi.IBCMSIDRREQPrivateDataLen - abi.CMAHdrBytes // 180
	MaxAcceptPrivateDataRC  = abi.IBCMREPPrivateDataBytes                     // 196
	MaxAcceptPrivateDataUD  = abi.IBCMSIDRREPPrivateDataLen                   // 136
	MaxRejectPrivateData    = abi.IBCMREJPrivateDataBytes                     // 148
	MaxRejectPrivateDataUD  = abi.IBCMSIDRREPPrivateDataLen                   // 136
)

// maxPrivateData is the limit of op ("connect", "accept", "reject").
func maxPrivateData(op string, qpType uverbs.QPType) int {
	ud := qpType == uverbs.QPTypeUD
	switch {
	case op == "connect" && ud:
		return MaxConnectPrivateDataUD
	case op == "connect":
		return MaxConnectPrivateDataRC
	case op == "accept" && ud:
		return MaxAcceptPrivateDataUD
	case op == "accept":
		return MaxAcceptPrivateDataRC
	case ud:
		return MaxRejectPrivateDataUD
	}
	return MaxRejectPrivateData
}

// connParam encodes p for CONNECT or ACCEPT.
func (id *ID) connParam(op string, p *ConnParam) (abi.UCMConnParam, error) {
	var c abi.UCMConnParam
	if max := maxPrivateData(op, id.qpType); len(p.PrivateData) > max {
		return c, fmt.Errorf("rdmacm: %s: PrivateData is %d bytes, the most a %v %s carries is %d: %w",
			op, len(p.PrivateData), id.qpType, op, max, unix.EINVAL)
	}
	if p.RetryCount > 7 {
		return c, fmt.Errorf("rdmacm: %s: RetryCount %d is above 7: %w", op, p.RetryCount, unix.EINVAL)
	}
	if p.RNRRetryCount > 7 {
		return c, fmt.Errorf("rdmacm: %s: RNRRetryCount %d is above 7: %w", op, p.RNRRetryCount, unix.EINVAL)
	}
	if p.QPNum > 0xFFFFFF {
		return c, fmt.Errorf("rdmacm: %s: QPNum %#x is wider than 24 bits: %w", op, p.QPNum, unix.EINVAL)
	}
	c.PrivateDataLen = uint8(copy(c.PrivateData[:], p.PrivateData))
	c.ResponderResources = p.ResponderResources
	c.InitiatorDepth = p.InitiatorDepth
	c.FlowControl = p.FlowControl
	c.RetryCount = p.RetryCount
	c.RNRRetryCount = p.RNRRetryCount
	if p.SRQ {
		c.SRQ = 1
	}
	c.QPNum = p.QPNum
	c.Qkey = p.QKey
	c.Valid = 1
	id.mu.Lock()
	qp := id.qp
	id.mu.Unlock()
	if qp != nil && c.QPNum == 0 {
		c.QPNum = qp.QPN()
	}
	if id.qpType == uverbs.QPTypeRC {
		if err := id.resolveResources(op, &c); err != nil {
			return c, err
		}
	}
	return c, nil
}

// resolveResources replaces MaxResources by the device's limits and checks
// explicit values against them, as librdmacm's ucma_valid_param.
func (id *ID) resolveResources(op string, c *abi.UCMConnParam) error {
	dev, err := id.device()
	if err != nil {
		if c.ResponderResources == MaxResources || c.InitiatorDepth == MaxResources {
			return fmt.Errorf("rdmacm: %s: the device maximum of ResponderResources/InitiatorDepth is unknown: %w", op, err)
		}
		return nil
	}
	if c.ResponderResources == MaxResources {
		c.ResponderResources = dev.maxRdAtom
	} else if c.ResponderResources > dev.maxRdAtom {
		return fmt.Errorf("rdmacm: %s: ResponderResources %d is above %s's max_qp_rd_atom %d: %w", op,
			c.ResponderResources, dev.name, dev.maxRdAtom, unix.EINVAL)
	}
	if c.InitiatorDepth == MaxResources {
		c.InitiatorDepth = dev.maxInitRdAtom
	} else if c.InitiatorDepth > dev.maxInitRdAtom {
		return fmt.Errorf("rdmacm: %s: InitiatorDepth %d is above %s's max_qp_init_rd_atom %d: %w", op,
			c.InitiatorDepth, dev.name, dev.maxInitRdAtom, unix.EINVAL)
	}
	return nil
}

// Connect sends a connection request (RC) or a SIDR request (UD) after
// ResolveRoute and waits for the answer.
//
// RC with a QP from CreateQP: on the reply it moves the QP INIT→INIT→RTR→RTS
// with the kernel's attributes and confirms (RTU), as librdmacm, and
// returns the ESTABLISHED event with the peer's private data. Without a QP
// (p.QPNum names the caller's own) it returns the CONNECT_RESPONSE event:
// move the QP with InitQPAttr, then call Establish.
//
// UD: returns the ESTABLISHED event, whose UD field holds the remote QPN,
// Q_Key and address vector.
//
// A rejection returns a *RejectedError (errors.Is(err, unix.ECONNREFUSED);
// reason 8 when nobody listens on the port); no answer returns an error
// matching unix.ETIMEDOUT; a cancelled ctx returns ctx.Err() (close the ID).
func (id *ID) Connect(ctx context.Context, p *ConnParam) (Event, error) {
	const op = "connect"
	if err := id.use(op); err != nil {
		return Event{}, err
	}
	if ctx == nil {
		return Event{}, fmt.Errorf("rdmacm: %s: nil context: %w", op, unix.EINVAL)
	}
	if p == nil {
		p = &ConnParam{ResponderResources: MaxResources, InitiatorDepth: MaxResources, RetryCount: 7, RNRRetryCount: 7}
	}
	c, err := id.connParam(op, p)
	if err != nil {
		return Event{}, err
	}
	id.mu.Lock()
	id.offered = *p
	id.offered.ResponderResources, id.offered.InitiatorDepth = c.ResponderResources, c.InitiatorDepth
	qp := id.qp
	id.mu.Unlock()
	if err := write(id.ch, abi.UCMCmdConnect, &abi.UCMConnect{ConnParam: c, ID: id.handle}, 0); err != nil {
		return Event{}, cmdErr(op, err)
	}
	if id.qpType == uverbs.QPTypeUD {
		ev, err := id.waitFor(ctx, op, EventEstablished, EventUnreachable, EventRejected, EventConnectError)
		if err != nil {
			return Event{}, err
		}
		return ev, ev.Err()
	}
	ev, err := id.waitFor(ctx, op, EventConnectResponse, EventUnreachable, EventRejected, EventConnectError, EventEstablished)
	if err != nil {
		return Event{}, err
	}
	if err := ev.Err(); err != nil {
		if qp != nil {
			qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState)
		}
		return ev, err
	}
	if ev.Type != EventConnectResponse || qp == nil {
		return ev, nil
	}
	if err := id.moveToRTS(qp, MaxResources, MaxResources); err != nil {
		qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState)
		id.Reject(nil)
		return ev, fmt.Errorf("rdmacm: %s: %w", op, err)
	}
	if err := id.Establish(); err != nil {
		qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState)
		return ev, fmt.Errorf("rdmacm: %s: %w", op, err)
	}
	ev.Type = EventEstablished
	return ev, nil
}

// Establish tells the kernel the active side's QP is ready (it sends the
// RTU): the last step of a Connect whose caller moves its own QP.
func (id *ID) Establish() error {
	const op = "establish"
	if err := id.use(op); err != nil {
		return err
	}
	if err := write(id.ch, abi.UCMCmdAccept, &abi.UCMAccept{ID: id.handle}, 0); err != nil {
		return cmdErr(op, err)
	}
	return nil
}

// Accept accepts the connection request that created this ID (an ID from a
// CONNECT_REQUEST event). With a QP from CreateQP it first moves the QP to
// RTS, limiting its RDMA READ depths to what is accepted. p nil accepts
// with the request's resources (within the device's) and retry counts 7.
//
// An RC connection is ESTABLISHED when the peer confirms: wait for it with
// WaitFor(ctx, EventEstablished). A UD accept sends the SIDR reply and is
// complete.
func (id *ID) Accept(p *ConnParam) error {
	const op = "accept"
	if err := id.use(op); err != nil {
		return err
	}
	if id.listener == nil {
		return fmt.Errorf("rdmacm: %s: the ID did not come from a CONNECT_REQUEST: %w", op, unix.EINVAL)
	}
	id.mu.Lock()
	reqResp, reqInit := id.reqResp, id.reqInit
	qp := id.qp
	id.mu.Unlock()
	if p == nil {
		p = &ConnParam{ResponderResources: reqResp, InitiatorDepth: reqInit, RetryCount: 7, RNRRetryCount: 7}
		if dev, err := id.device(); err == nil {
			p.ResponderResources = min(p.ResponderResources, dev.maxRdAtom)
			p.InitiatorDepth = min(p.InitiatorDepth, dev.maxInitRdAtom)
		}
	}
	c, err := id.connParam(op, p)
	if err != nil {
		return err
	}
	if id.qpType == uverbs.QPTypeUD && c.Qkey == 0 {
		c.Qkey = abi.RDMAUDPQkey
	}
	if qp != nil && id.qpType == uverbs.QPTypeRC {
		if err := id.moveToRTS(qp, c.ResponderResources, c.InitiatorDepth); err != nil {
			return fmt.Errorf("rdmacm: %s: %w", op, err)
		}
	}
	if err := write(id.ch, abi.UCMCmdAccept, &abi.UCMAccept{UID: id.uid, ConnParam: c, ID: id.handle}, 0); err != nil {
		if qp != nil {
			qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState)
		}
		return cmdErr(op, err)
	}
	return nil
}

// Reject refuses the connection request that created this ID, with private
// data (at most 148 bytes; 136 on a UD ID, whose reject is a SIDR REP) the
// peer sees in its *RejectedError.
func (id *ID) Reject(privateData []byte) error {
	const op = "reject"
	if err := id.use(op); err != nil {
		return err
	}
	if max := maxPrivateData(op, id.qpType); len(privateData) > max {
		return fmt.Errorf("rdmacm: %s: PrivateData is %d bytes, the most a %v reject carries is %d: %w", op, len(privateData),
			id.qpType, max, unix.EINVAL)
	}
	req := &abi.UCMReject{ID: id.handle, Reason: abi.CMRejConsumerDefined}
	req.PrivateDataLen = uint8(copy(req.PrivateData[:], privateData))
	if err := write(id.ch, abi.UCMCmdReject, req, 0); err != nil {
		return cmdErr(op, err)
	}
	return nil
}

// Disconnect moves the ID's QP (if it made one) to the error state, which
// flushes its work requests, and disconnects; the peer gets DISCONNECTED,
// and so does this side when the peer answers.
func (id *ID) Disconnect() error {
	const op = "disconnect"
	if err := id.use(op); err != nil {
		return err
	}
	if qp := id.QP(); qp != nil {
		qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState)
	}
	if err := write(id.ch, abi.UCMCmdDisconnect, &abi.UCMDisconnect{ID: id.handle}, 0); err != nil {
		return cmdErr(op, err)
	}
	return nil
}

// Notify tells the kernel of a QP event it cannot see: COMM_EST when the
// passive side's QP received data before the RTU.
func (id *ID) Notify(commEst bool) error {
	const op = "notify"
	if err := id.use(op); err != nil {
		return err
	}
	if !commEst {
		return fmt.Errorf("rdmacm: %s: only COMM_EST can be notified: %w", op, unix.EINVAL)
	}
	if err := write(id.ch, abi.UCMCmdNotify, &abi.UCMNotify{ID: id.handle, Event: abi.IBEventCommEst}, 0); err != nil {
		return cmdErr(op, err)
	}
	return nil
}

// setOption sends SET_OPTION with a value of type T.
func setOption[T any](id *ID, op string, level, name uint32, v T) error {
	if err := id.use(op); err != nil {
		return err
	}
	val := onHeap[T]()
	*val = v
	req := &abi.UCMSetOption{OptVal: uint64(uintptr(unsafe.Pointer(val))), ID: id.handle, Level: level,
		OptName: name, OptLen: uint32(unsafe.Sizeof(v))}
	err := write(id.ch, abi.UCMCmdSetOption, req, 0)
	keepAlive(val)
	if err != nil {
		return cmdErr(op, err)
	}
	return nil
}

// SetTOS sets the type of service of the ID's traffic (before
// ResolveRoute).
func (id *ID) SetTOS(tos uint8) error {
	return setOption(id, "set option TOS", abi.RDMAOptionID, abi.RDMAOptionIDTOS, tos)
}

// SetReuseAddr lets the ID bind a port another ID holds (before Bind).
func (id *ID) SetReuseAddr(on bool) error {
	return setOption(id, "set option REUSEADDR", abi.RDMAOptionID, abi.RDMAOptionIDReuseAddr, boolInt(on))
}

// SetAFOnly restricts an IPv6 ID to IPv6 (before Bind).
func (id *ID) SetAFOnly(on bool) error {
	return setOption(id, "set option AFONLY", abi.RDMAOptionID, abi.RDMAOptionIDAFOnly, boolInt(on))
}

// SetAckTimeout sets the QP's local ACK timeout exponent (4.096 µs·2^t) of
// an RC ID, which also shortens the CM's own timeouts on RoCE.
func (id *ID) SetAckTimeout(t uint8) error {
	if t > 31 {
		return fmt.Errorf("rdmacm: set option ACK_TIMEOUT: %d is above 31: %w", t, unix.EINVAL)
	}
	return setOption(id, "set option ACK_TIMEOUT", abi.RDMAOptionID, abi.RDMAOptionIDAckTimeout, t)
}

func boolInt(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

// Close destroys the ID: its QP (if CreateQP made it) and multicast
// memberships first, then the kernel's ID. Events still queued for it are
// dropped and no more are delivered. Closing a listener refuses the
// requests it has not handed out. Close is idempotent.
func (id *ID) Close() error {
	if id == nil {
		return nil
	}
	id.mu.Lock()
	if id.closed {
		id.mu.Unlock()
		return nil
	}
	id.closed = true
	qp, mcs, dev, queue := id.qp, id.mcs, id.dev, id.queue
	id.qp, id.mcs, id.dev, id.queue = nil, nil, nil, nil
	id.mu.Unlock()
	// Requests never handed out: refuse them (their IDs are destroyed).
	for _, ev := range queue {
		if ev.Type == EventConnectRequest && ev.ID != nil && ev.ID != id {
			ev.ID.Close()
		}
	}
	var errs []error
	for _, mc := range mcs {
		if err := mc.leave(qp); err != nil {
			errs = append(errs, err)
		}
	}
	if qp != nil {
		id.qpOp.Lock() // after an errQP that took the QP before it was cleared
		err := qp.Close()
		id.qpOp.Unlock()
		if err != nil && !errors.Is(err, uverbs.ErrDeviceRemoved) && !errors.Is(err, uverbs.ErrClosed) {
			errs = append(errs, err)
		}
	}
	req := &abi.UCMDestroyID{ID: id.handle}
	_, err := writeResp[abi.UCMDestroyID, abi.UCMDestroyIDResp](id.ch, abi.UCMCmdDestroyID, req, &req.Response)
	// The ID leaves the channel's table only now: an event the reader took
	// before DESTROY_ID returned finds the ID closed and is dropped.
	id.ch.unregister(id)
	id.wakeUp()
	if err != nil && !errors.Is(err, uverbs.ErrClosed) {
		errs = append(errs, cmdErr("destroy id", err))
	}
	if dev != nil {
		dev.release()
	}
	if id.sharedChan {
		releaseChannel(id.ch)
	}
	return errors.Join(errs...)
}

// push queues an event for the ID and wakes its waiters; an event for a
// closed ID is dropped (false).
func (id *ID) push(ev Event) bool {
	id.mu.Lock()
	if id.closed {
		id.mu.Unlock()
		return false
	}
	id.queue = append(id.queue, ev)
	id.mu.Unlock()
	id.wakeUp()
	return true
}

// unshift puts an event back at the head of the ID's queue.
func (id *ID) unshift(ev Event) {
	id.mu.Lock()
	if !id.closed {
		id.queue = append([]Event{ev}, id.queue...)
		if ev.Type == EventConnectRequest {
			id.requests++
		}
	}
	id.mu.Unlock()
	id.wakeUp()
}

// wakeUp wakes every goroutine waiting on the ID.
func (id *ID) wakeUp() {
	id.mu.Lock()
	// Nobody holds the channel when no goroutine waits: then there is
	// nobody to wake, and a new channel for each event was one of the
	// allocations of every connection.
	if id.waiters > 0 {
		close(id.notify)
		id.notify = make(chan struct{})
	}
	id.mu.Unlock()
}

// Event returns the ID's next event, waiting for one until ctx ends. The
// CONNECT_REQUESTs of a listener arrive here, each with its new ID.
func (id *ID) Event(ctx context.Context) (Event, error) {
	return id.next(ctx, "get event", nil)
}

// WaitFor waits for an event of type t and returns it. Events of other
// types stay queued for Event, except failures that end what the caller
// waits for: REJECTED, UNREACHABLE, CONNECT_ERROR, DISCONNECTED,
// ADDR_ERROR, ROUTE_ERROR, MULTICAST_ERROR, which are returned with their
// error, and DEVICE_REMOVAL, returned as uverbs.ErrDeviceRemoved and left
// queued.
func (id *ID) WaitFor(ctx context.Context, t EventType) (Event, error) {
	ev, err := id.waitFor(ctx, "wait for "+t.String(), t, EventRejected, EventUnreachable, EventConnectError,
		EventDisconnected, EventAddrError, EventRouteError, EventMulticastError)
	if err != nil {
		return ev, err
	}
	if ev.Type != t {
		return ev, ev.Err()
	}
	return ev, nil
}

// waitFor returns the first queued event of one of the types, or a
// DEVICE_REMOVAL as an error (left queued).
func (id *ID) waitFor(ctx context.Context, op string, types ...EventType) (Event, error) {
	return id.next(ctx, op, func(ev Event) bool {
		for _, w := range types {
			if ev.Type == w {
				return true
			}
		}
		return false
	})
}

func (id *ID) next(ctx context.Context, op string, match func(Event) bool) (Event, error) {
	if id == nil {
		return Event{}, fmt.Errorf("rdmacm: %s: nil ID: %w", op, unix.EINVAL)
	}
	if ctx == nil {
		return Event{}, fmt.Errorf("rdmacm: %s: nil context: %w", op, unix.EINVAL)
	}
	for {
		id.mu.Lock()
		if id.closed {
			id.mu.Unlock()
			return Event{}, errClosed(op)
		}
		for i, ev := range id.queue {
			if match == nil || match(ev) {
				// In place (the tail slot zeroed): a new slice for every
				// event taken was the largest allocation of setting up a
				// connection.
				id.queue = slices.Delete(id.queue, i, i+1)
				if ev.Type == EventConnectRequest {
					id.requests--
				}
				id.mu.Unlock()
				return ev, nil
			}
			if ev.Type == EventDeviceRemoval {
				id.mu.Unlock()
				return ev, fmt.Errorf("rdmacm: %s: %w", op, uverbs.ErrDeviceRemoved)
			}
		}
		wake := id.notify
		id.waiters++
		id.mu.Unlock()
		err := id.ch.stopped()
		if err == nil {
			select {
			case <-wake:
			case <-id.ch.done:
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
		id.mu.Lock()
		id.waiters--
		id.mu.Unlock()
		if err != nil {
			return Event{}, fmt.Errorf("rdmacm: %s: %w", op, err)
		}
	}
}

// Migrate moves the ID, its pending events and its multicast memberships
// to another channel (rdma_migrate_id): its events are read there from
// then on. No other method of the ID may run meanwhile; IDs of Dial and
// Listen cannot migrate.
func (id *ID) Migrate(to *EventChannel) error {
	const op = "migrate id"
	if err := id.use(op); err != nil {
		return err
	}
	if to == nil {
		return fmt.Errorf("rdmacm: %s: nil EventChannel: %w", op, unix.EINVAL)
	}
	if id.sharedChan {
		return fmt.Errorf("rdmacm: %s: the ID belongs to Dial or Listen: %w", op, unix.EINVAL)
	}
	from := id.ch
	if to == from {
		return nil
	}
	// Events find the ID by uid whichever reader has them (uids), so
	// moving it is a matter of which channel's Close destroys it: both
	// while the command runs (Close is idempotent), to once it succeeds.
	to.mu.Lock()
	if to.closed {
		to.mu.Unlock()
		return errClosed(op)
	}
	to.ids[id.uid] = id
	to.mu.Unlock()
	resp := onHeap[abi.UCMMigrateResp]()
	var werr error
	err := from.rc.Control(func(fd uintptr) {
		req := &abi.UCMMigrateID{Response: uint64(uintptr(unsafe.Pointer(resp))), ID: id.handle, FD: uint32(fd)}
		werr = write(to, abi.UCMCmdMigrateID, req, unsafe.Sizeof(*resp))
	})
	keepAlive(resp)
	if err != nil || werr != nil {
		to.disown(id)
		if err != nil {
			return errClosed(op)
		}
		return cmdErr(op, werr)
	}
	id.mu.Lock()
	id.ch = to
	id.mu.Unlock()
	from.disown(id)
	return nil
}

// disown drops id from the IDs the channel's Close destroys (Migrate).
func (ch *EventChannel) disown(id *ID) {
	ch.mu.Lock()
	delete(ch.ids, id.uid)
	ch.mu.Unlock()
}
