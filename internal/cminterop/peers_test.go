package cminterop

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/grh"
	"github.com/goverbs/goverbs/internal/testvm/vmenv"
	"github.com/goverbs/goverbs/internal/testvm/vmproc"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

// The librdmacm examples' fixed values (rdma-core 44).
const (
	ucmatosePort = 7471
	udaddyPort   = 7174 // udaddy's -p is the port space: the port is fixed
	cmQkey       = 0x01234567
	allQPN       = 0xFFFFFF // a multicast group's QPN
	runTimeout   = 120 * time.Second
)

func requireVM(t *testing.T) {
	t.Helper()
	if !vmenv.InVM() {
		t.Skip("not in the goverbs test VM: run go test -exec \"$PWD/bin/vmexec -kernel 6.1\" ./internal/cminterop/")
	}
	vmenv.RequireCM(t)
	t.Logf("kernel %s (%s), GOVERBS_TRANSPORT=%q", vmenv.KernelName(), vmenv.KernelRelease(), os.Getenv("GOVERBS_TRANSPORT"))
}

type result = vmproc.Result

// startC runs one of rdma-core's tools in the background.
func startC(ctx context.Context, t *testing.T, tool string, args ...string) <-chan result {
	t.Helper()
	return vmproc.Start(ctx, t, tool, args...)
}

// waitListening waits until a C server's rdma_cm ID listens.
func waitListening(ctx context.Context, t *testing.T, ps string, port int, done <-chan result) {
	t.Helper()
	for !vmproc.CMListening(ps, port) {
		select {
		case r := <-done:
			t.Fatalf("server ended before listening: exit %d\nstdout:\n%s\nstderr:\n%s", r.Exit, r.Stdout, r.Stderr)
		case <-ctx.Done():
			t.Fatalf("server not listening on %s port %d: %v", ps, port, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// checkC fails the test unless the tool exited 0 and ended with its
// success lines.
func checkC(t *testing.T, name string, r result, lines ...string) {
	t.Helper()
	if r.Exit != 0 {
		t.Errorf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", name, r.Exit, r.Stdout, r.Stderr)
		return
	}
	for _, l := range lines {
		if !strings.Contains(r.Stdout, l+"\n") {
			t.Errorf("%s printed no %q:\n%s", name, l, r.Stdout)
		}
	}
}

// buffers is a connection's registered memory: count slots of slot bytes
// each (receives), and one send slot after them.
type buffers struct {
	mem        *uverbs.Buffer
	mr         *uverbs.MR
	slot       int
	count      int
	sendOffset int
}

func newBuffers(pd *uverbs.PD, count, slot int) (*buffers, error) {
	b := &buffers{slot: slot, count: count, sendOffset: count * slot}
	var err error
	if b.mem, err = uverbs.AllocBuffer((count + 1) * slot); err != nil {
		return nil, err
	}
	if b.mr, err = pd.RegisterBuffer(b.mem, 0, (count+1)*slot, uverbs.AccessLocalWrite); err != nil {
		b.mem.Close()
		return nil, err
	}
	return b, nil
}

func (b *buffers) close() {
	if b == nil {
		return
	}
	b.mr.Close()
	b.mem.Close()
}

// postRecvs posts one receive per slot.
func (b *buffers) postRecvs(qp *uverbs.QP) error {
	wrs := make([]uverbs.RecvWR, b.count)
	for i := range wrs {
		wrs[i] = uverbs.RecvWR{ID: uint64(i), SGL: []uverbs.SGE{{Addr: b.mr.Addr() + uint64(i*b.slot), Length: uint32(b.slot), Lkey: b.mr.Lkey()}}}
	}
	return qp.PostRecv(wrs)
}

// recvSlot is the memory of receive i.
func (b *buffers) recvSlot(i uint64) []byte {
	return b.mr.Bytes()[int(i)*b.slot : int(i+1)*b.slot]
}

// sendSGE is the send slot's first n bytes, filled with a pattern.
func (b *buffers) sendSGE(n int) uverbs.SGE {
	s := b.mr.Bytes()[b.sendOffset : b.sendOffset+n]
	for i := range s {
		s[i] = byte(i)
	}
	return uverbs.SGE{Addr: b.mr.Addr() + uint64(b.sendOffset), Length: uint32(n), Lkey: b.mr.Lkey()}
}

// poll waits for n successful completions of cq, handing each to check.
// The peers' CQs have no completion channel: poll, and sleep a little
// while there is nothing.
func poll(ctx context.Context, cq *uverbs.CQ, n int, check func(uverbs.WC) error) error {
	var wcs [8]uverbs.WC
	for got := 0; got < n; {
		k, err := cq.Poll(wcs[:min(len(wcs), n-got)])
		if err != nil {
			return err
		}
		for _, wc := range wcs[:k] {
			if wc.Status != uverbs.WCSuccess {
				return fmt.Errorf("completion %d of %d: status %v (%d)", got+1, n, wc.Status, int(wc.Status))
			}
			if check != nil {
				if err := check(wc); err != nil {
					return fmt.Errorf("completion %d of %d: %w", got+1, n, err)
				}
			}
			got++
		}
		if k == 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("%d of %d completions: %w", got, n, ctx.Err())
			case <-time.After(100 * time.Microsecond):
			}
		}
	}
	return nil
}

// setupBuffers is a WithSetup function: count receives of slot bytes on
// every connection the option is given to, posted before the connection
// request or reply goes out; the buffers are recorded for the caller.
type setupBuffers struct {
	mu          sync.Mutex
	count, slot int
	byConn      map[*rdmacm.Conn]*buffers
}

func newSetup(count, slot int) *setupBuffers {
	return &setupBuffers{count: count, slot: slot, byConn: map[*rdmacm.Conn]*buffers{}}
}

func (s *setupBuffers) option() rdmacm.Option {
	return rdmacm.WithSetup(func(c *rdmacm.Conn) error {
		b, err := newBuffers(c.PD(), s.count, s.slot)
		if err != nil {
			return err
		}
		if err := b.postRecvs(c.QP()); err != nil {
			b.close()
			return err
		}
		s.mu.Lock()
		s.byConn[c] = b
		s.mu.Unlock()
		return nil
	})
}

func (s *setupBuffers) of(c *rdmacm.Conn) *buffers {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byConn[c]
}

// close closes the connections, then their buffers (the MRs on their PDs).
func (s *setupBuffers) close(conns []*rdmacm.Conn) {
	for _, c := range conns {
		b := s.of(c)
		c.ID().Disconnect()
		c.QP().Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState)
		b.close()
		c.Close()
	}
}

// ucmatoseServer is cmatose's server with rdmacm: accept conns connections,
// then send count messages of size bytes on each, wait for their
// completions, receive count messages on each and disconnect.
func ucmatoseServer(ctx context.Context, l *rdmacm.Listener, setup *setupBuffers, conns, count, size int) error {
	var cs []*rdmacm.Conn
	defer func() { setup.close(cs) }()
	for i := 0; i < conns; i++ {
		c, err := l.Accept(ctx)
		if err != nil {
			return fmt.Errorf("accept %d: %w", i, err)
		}
		cs = append(cs, c)
	}
	if err := sendAll(ctx, cs, setup, count, size); err != nil {
		return err
	}
	if err := recvAll(ctx, cs, setup, count, size); err != nil {
		return err
	}
	for _, c := range cs {
		if err := c.ID().Disconnect(); err != nil {
			return err
		}
	}
	for i, c := range cs {
		if _, err := c.ID().WaitFor(ctx, rdmacm.EventDisconnected); err != nil {
			return fmt.Errorf("connection %d: the client's disconnect: %w", i, err)
		}
	}
	return nil
}

// sendAll sends count signaled messages of size bytes on each connection
// and waits for their completions.
func sendAll(ctx context.Context, cs []*rdmacm.Conn, setup *setupBuffers, count, size int) error {
	for i, c := range cs {
		sge := setup.of(c).sendSGE(size)
		for k := 0; k < count; k++ {
			if err := c.QP().PostSend([]uverbs.SendWR{{ID: uint64(k), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
				SGL: []uverbs.SGE{sge}}}); err != nil {
				return fmt.Errorf("connection %d: send %d: %w", i, k, err)
			}
		}
	}
	for i, c := range cs {
		if err := poll(ctx, c.SendCQ(), count, nil); err != nil {
			return fmt.Errorf("connection %d: sends: %w", i, err)
		}
	}
	return nil
}

// recvAll waits for count messages of size bytes on each connection.
func recvAll(ctx context.Context, cs []*rdmacm.Conn, setup *setupBuffers, count, size int) error {
	for i, c := range cs {
		err := poll(ctx, c.RecvCQ(), count, func(wc uverbs.WC) error {
			if wc.Opcode != uverbs.WCRecv || int(wc.ByteLen) != size {
				return fmt.Errorf("opcode %d, %d bytes; want a %d-byte receive", wc.Opcode, wc.ByteLen, size)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("connection %d: receives: %w", i, err)
		}
	}
	return nil
}

// ucmatoseClient is cmatose's client with rdmacm: dial conns connections
// (receives posted first: ucmatose's server gives up on an RNR at once),
// receive count messages on each, reply with count, and wait for the
// server's disconnect.
func ucmatoseClient(ctx context.Context, addr, src string, conns, count, size int) error {
	setup := newSetup(count, size)
	var cs []*rdmacm.Conn
	defer func() { setup.close(cs) }()
	for i := 0; i < conns; i++ {
		c, err := rdmacm.Dial(ctx, addr, rdmacm.WithSource(src), setup.option(),
			rdmacm.WithQPCap(uverbs.QPCap{MaxSendWr: uint32(count), MaxRecvWr: uint32(count), MaxSendSGE: 1, MaxRecvSGE: 1}),
			rdmacm.WithResponderResources(1), rdmacm.WithInitiatorDepth(1), rdmacm.WithRetryCount(5), rdmacm.WithRNRRetryCount(0))
		if err != nil {
			return fmt.Errorf("dial %d: %w", i, err)
		}
		cs = append(cs, c)
	}
	if err := recvAll(ctx, cs, setup, count, size); err != nil {
		return err
	}
	if err := sendAll(ctx, cs, setup, count, size); err != nil {
		return err
	}
	for i, c := range cs {
		if err := c.WaitDisconnect(ctx); err != nil {
			return fmt.Errorf("connection %d: the server's disconnect: %w", i, err)
		}
	}
	return nil
}

// udaddyServer is udaddy's server with rdmacm: accept conns UD requests,
// receive count datagrams on each, answer each sender (its QPN is the
// immediate; the address comes from the first datagram's header) with
// count signaled replies.
func udaddyServer(ctx context.Context, l *rdmacm.Listener, setup *setupBuffers, conns, count, size int) error {
	var cs []*rdmacm.Conn
	defer func() {
		for _, c := range cs {
			setup.of(c).close()
			c.Close()
		}
	}()
	for i := 0; i < conns; i++ {
		c, err := l.Accept(ctx)
		if err != nil {
			return fmt.Errorf("accept %d: %w", i, err)
		}
		cs = append(cs, c)
	}
	for i, c := range cs {
		b := setup.of(c)
		var first *uverbs.WC
		err := poll(ctx, c.RecvCQ(), count, func(wc uverbs.WC) error {
			if wc.Opcode != uverbs.WCRecv || int(wc.ByteLen) != size+grh.Size || wc.Flags&uverbs.WCWithImm == 0 {
				return fmt.Errorf("opcode %d, %d bytes, flags %#x; want a %d-byte receive with an immediate", wc.Opcode, wc.ByteLen, wc.Flags, size+grh.Size)
			}
			if first == nil {
				first = &wc
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("connection %d: receives: %w", i, err)
		}
		attr, err := grh.ReplyAH(c.Context(), attrPort(c), *first, b.recvSlot(first.ID)[:grh.Size])
		if err != nil {
			return fmt.Errorf("connection %d: reply address: %w", i, err)
		}
		ah, err := c.PD().CreateAH(attr)
		if err != nil {
			return fmt.Errorf("connection %d: reply AH: %w", i, err)
		}
		defer ah.Close()
		sge := b.sendSGE(size)
		for k := 0; k < count; k++ {
			if err := c.QP().PostSend([]uverbs.SendWR{{ID: uint64(k), Opcode: uverbs.WRSendWithImm, Flags: uverbs.SendSignaled,
				SGL: []uverbs.SGE{sge}, Imm: c.QP().QPN(), AH: ah, RemoteQPN: first.Imm, RemoteQkey: cmQkey}}); err != nil {
				return fmt.Errorf("connection %d: reply %d: %w", i, k, err)
			}
		}
		if err := poll(ctx, c.SendCQ(), count, nil); err != nil {
			return fmt.Errorf("connection %d: replies: %w", i, err)
		}
	}
	return nil
}

// attrPort is the port the connection's QP uses.
func attrPort(c *rdmacm.Conn) uint8 {
	a, err := c.QP().Query()
	if err != nil || a.Port == 0 {
		return 1
	}
	return a.Port
}

// udaddyClient is udaddy's client with rdmacm: resolve the server's QP by
// SIDR, send count datagrams of size bytes with our QPN as the immediate,
// and receive count replies from the server's QP.
func udaddyClient(ctx context.Context, addr, src string, conns, count, size int) error {
	setup := newSetup(count, size+grh.Size)
	var cs []*rdmacm.Conn
	defer func() {
		for _, c := range cs {
			setup.of(c).close()
			c.Close()
		}
	}()
	qpcap := uverbs.QPCap{MaxSendWr: uint32(count), MaxRecvWr: uint32(count), MaxSendSGE: 1, MaxRecvSGE: 1}
	for i := 0; i < conns; i++ {
		c, err := rdmacm.Dial(ctx, addr, rdmacm.WithUD(), rdmacm.WithSource(src), rdmacm.WithQPCap(qpcap), setup.option())
		if err != nil {
			return fmt.Errorf("dial %d: %w", i, err)
		}
		cs = append(cs, c)
		if r := c.Remote(); r.QKey != cmQkey {
			return fmt.Errorf("connection %d: the server's Q_Key is %#x, want udaddy's %#x", i, r.QKey, cmQkey)
		}
	}
	for i, c := range cs {
		sge := setup.of(c).sendSGE(size)
		for k := 0; k < count; k++ {
			if err := c.QP().PostSend([]uverbs.SendWR{{ID: uint64(k), Opcode: uverbs.WRSendWithImm, Flags: uverbs.SendSignaled,
				SGL: []uverbs.SGE{sge}, Imm: c.QP().QPN(), AH: c.AH(), RemoteQPN: c.Remote().QPNum, RemoteQkey: c.Remote().QKey}}); err != nil {
				return fmt.Errorf("connection %d: send %d: %w", i, k, err)
			}
		}
		if err := poll(ctx, c.SendCQ(), count, nil); err != nil {
			return fmt.Errorf("connection %d: sends: %w", i, err)
		}
	}
	for i, c := range cs {
		server := c.Remote().QPNum
		err := poll(ctx, c.RecvCQ(), count, func(wc uverbs.WC) error {
			if wc.Opcode != uverbs.WCRecv || int(wc.ByteLen) != size+grh.Size || wc.Flags&uverbs.WCWithImm == 0 || wc.Imm != server {
				return fmt.Errorf("opcode %d, %d bytes, flags %#x, immediate %#x; want %d bytes from QP %#x", wc.Opcode, wc.ByteLen, wc.Flags, wc.Imm, size+grh.Size, server)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("connection %d: replies: %w", i, err)
		}
	}
	return nil
}

// mcMember is one side of mckey with rdmacm: a UD ID bound to src,
// resolved towards the group, with a QP, joined.
type mcMember struct {
	ch  *rdmacm.EventChannel
	id  *rdmacm.ID
	pd  *uverbs.PD
	cq  *uverbs.CQ
	b   *buffers
	mc  *rdmacm.Multicast
	ah  *uverbs.AH
	qpn uint32
}

func (m *mcMember) close() {
	if m.mc != nil {
		m.mc.Leave()
	}
	if m.ah != nil {
		m.ah.Close()
	}
	if m.id != nil {
		m.id.Close() // and its QP
	}
	m.b.close()
	if m.cq != nil {
		m.cq.Close()
	}
	if m.pd != nil {
		m.pd.Close()
	}
	if m.ch != nil {
		m.ch.Close()
	}
}

// joinGroup is mckey up to the join: bind, resolve, QP, receives (a
// receiver), join (a full member, so a sender's QP is attached too, as
// mckey's).
func joinGroup(ctx context.Context, src, group netip.Addr, receiver bool, count, size int) (m *mcMember, err error) {
	m = &mcMember{}
	defer func() {
		if err != nil {
			m.close()
		}
	}()
	if m.ch, err = rdmacm.NewEventChannel(); err != nil {
		return m, err
	}
	if m.id, err = m.ch.CreateID(rdmacm.PortSpaceUDP, 0); err != nil {
		return m, err
	}
	if err = m.id.Bind(netip.AddrPortFrom(src, 0)); err != nil {
		return m, err
	}
	if err = m.id.ResolveAddr(ctx, netip.AddrPortFrom(src, 0), netip.AddrPortFrom(group, 0)); err != nil {
		return m, err
	}
	dev, err := m.id.Context()
	if err != nil {
		return m, err
	}
	if m.pd, err = dev.AllocPD(); err != nil {
		return m, err
	}
	if m.cq, err = dev.CreateCQ(2*count, nil); err != nil {
		return m, err
	}
	qp, err := m.id.CreateQP(m.pd, uverbs.QPInitAttr{SendCQ: m.cq, RecvCQ: m.cq,
		Cap: uverbs.QPCap{MaxSendWr: uint32(count), MaxRecvWr: uint32(count), MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return m, err
	}
	m.qpn = qp.QPN()
	if m.b, err = newBuffers(m.pd, count, size+grh.Size); err != nil {
		return m, err
	}
	if receiver {
		if err = m.b.postRecvs(qp); err != nil {
			return m, err
		}
	}
	if m.mc, err = m.id.JoinMulticast(ctx, group, false); err != nil {
		return m, err
	}
	ud := m.mc.UD()
	if ud.QPNum != allQPN {
		return m, fmt.Errorf("the group's QPN is %#x, want %#x", ud.QPNum, allQPN)
	}
	if m.ah, err = m.pd.CreateAH(ud.AH); err != nil {
		return m, err
	}
	return m, nil
}

// send posts count datagrams of size bytes to the group, our QPN as the
// immediate (mckey's), signaled here so that the sender knows they left.
func (m *mcMember) send(ctx context.Context, count, size int) error {
	sge := m.b.sendSGE(size)
	ud := m.mc.UD()
	for k := 0; k < count; k++ {
		if err := m.id.QP().PostSend([]uverbs.SendWR{{ID: uint64(k), Opcode: uverbs.WRSendWithImm, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{sge}, Imm: m.qpn, AH: m.ah, RemoteQPN: ud.QPNum, RemoteQkey: ud.QKey}}); err != nil {
			return fmt.Errorf("send %d: %w", k, err)
		}
	}
	return poll(ctx, m.cq, count, nil)
}

// receive waits for count datagrams of size bytes with the sender's QPN
// as the immediate (QPNs are per device: a sender on another device may
// have ours).
func (m *mcMember) receive(ctx context.Context, count, size int) error {
	return poll(ctx, m.cq, count, func(wc uverbs.WC) error {
		if wc.Opcode != uverbs.WCRecv || int(wc.ByteLen) != size+grh.Size || wc.Flags&uverbs.WCWithImm == 0 || wc.Imm != wc.SrcQP {
			return fmt.Errorf("opcode %d, %d bytes, flags %#x, immediate %#x from QP %#x; want %d bytes with the sender's QPN", wc.Opcode, wc.ByteLen, wc.Flags, wc.Imm, wc.SrcQP, size+grh.Size)
		}
		return nil
	})
}
