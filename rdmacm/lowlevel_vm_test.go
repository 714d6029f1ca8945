package rdmacm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
	"github.com/goverbs/goverbs/internal/testvm/vmproc"
	"github.com/goverbs/goverbs/uverbs"
)

// TestOwnQPVM drives the low-level API with QPs the caller creates and
// moves itself (InitQPAttr, then Establish), as rping -q and perftest -R
// do, with options set on the IDs; Query and QueryRoute report the
// addresses, GIDs and path. On 6.12 the INIT access flags carry FLUSH.
func TestOwnQPVM(t *testing.T) {
	requireCM(t)
	ctx := testCtx(t, 60*time.Second)
	ch := newChannel(t)
	lid, err := ch.CreateID(PortSpaceTCP, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lid.Close()
	if err := lid.SetReuseAddr(true); err != nil {
		t.Fatal(err)
	}
	if err := lid.Bind(netip.MustParseAddrPort(vmenv.AddrA + ":0")); err != nil {
		t.Fatal(err)
	}
	if err := lid.Listen(4); err != nil {
		t.Fatal(err)
	}
	port := lid.LocalAddr().Port()
	if port == 0 {
		t.Fatal("ephemeral port not reported")
	}
	cid, err := ch.CreateID(PortSpaceTCP, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer cid.Close()
	if err := cid.SetTOS(32); err != nil {
		t.Fatal(err)
	}
	dst := netip.AddrPortFrom(netip.MustParseAddr(vmenv.AddrA), port)
	if err := cid.ResolveAddr(ctx, netip.MustParseAddrPort(vmenv.AddrB+":0"), dst); err != nil {
		t.Fatal(err)
	}
	if err := cid.ResolveRoute(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cid.SetAckTimeout(14); err != nil {
		t.Fatal(err)
	}
	paths, err := cid.QueryRoute()
	if err != nil || len(paths) == 0 {
		t.Fatalf("QueryRoute: %v %v", paths, err)
	}
	t.Logf("path: %+v", paths[0])
	info, err := cid.Query()
	if err != nil {
		t.Fatal(err)
	}
	if info.Src.Addr().String() != vmenv.AddrB || info.Dst != dst || info.SGID.Addr().Unmap().String() != vmenv.AddrB ||
		info.DGID.Addr().Unmap().String() != vmenv.AddrA || info.Port != 1 {
		t.Errorf("Query: %+v", info)
	}
	if name, err := cid.DeviceName(); err != nil || name != vmenv.RXE1 {
		t.Errorf("dialer's device %q %v, want %s", name, err, vmenv.RXE1)
	}
	own := func(id *ID) *uverbs.QP {
		c, err := id.Context()
		if err != nil {
			t.Fatal(err)
		}
		pd, err := c.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		cq, err := c.CreateCQ(8, nil)
		if err != nil {
			t.Fatal(err)
		}
		qp, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
			Cap: uverbs.QPCap{MaxSendWr: 4, MaxRecvWr: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { qp.Close(); cq.Close(); pd.Close() })
		return qp
	}
	move := func(id *ID, qp *uverbs.QP, states ...uverbs.QPState) {
		for _, s := range states {
			attr, mask, err := id.InitQPAttr(s)
			if err != nil {
				t.Fatal(err)
			}
			if s == uverbs.QPStateInit && qp.State() == uverbs.QPStateInit {
				t.Logf("INIT→INIT access flags %v", attr.AccessFlags)
				if vmenv.KernelName() == "6.12" && attr.AccessFlags&0x300 != 0x300 {
					t.Errorf("6.12 gave no FLUSH access bits: %v", attr.AccessFlags)
				}
			}
			if err := qp.Modify(&attr, mask); err != nil {
				t.Fatalf("%v: %v", s, err)
			}
		}
	}
	cqp := own(cid)
	move(cid, cqp, uverbs.QPStateInit)
	type res struct {
		ev  Event
		err error
	}
	got := make(chan res, 1)
	go func() {
		ev, err := cid.Connect(ctx, &ConnParam{QPNum: cqp.QPN(), ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7,
			PrivateData: []byte("own qp")})
		got <- res{ev, err}
	}()
	ev, err := lid.WaitFor(ctx, EventConnectRequest)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Listener != lid || ev.Param.ResponderResources != 1 || !strings.HasPrefix(string(ev.Param.PrivateData), "own qp") {
		t.Errorf("CONNECT_REQUEST %+v", ev)
	}
	child := ev.ID
	defer child.Close()
	sqp := own(child)
	move(child, sqp, uverbs.QPStateInit, uverbs.QPStateInit, uverbs.QPStateRTR, uverbs.QPStateRTS)
	if err := child.Accept(&ConnParam{QPNum: sqp.QPN(), ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil || r.ev.Type != EventConnectResponse {
		t.Fatalf("Connect with the caller's QP: %v %v", r.ev.Type, r.err)
	}
	move(cid, cqp, uverbs.QPStateInit, uverbs.QPStateRTR, uverbs.QPStateRTS)
	if err := cid.Establish(); err != nil {
		t.Fatal(err)
	}
	if _, err := child.WaitFor(ctx, EventEstablished); err != nil {
		t.Fatal(err)
	}
	if a, err := sqp.Query(); err != nil || a.DestQPN != cqp.QPN() || a.State != uverbs.QPStateRTS {
		t.Errorf("listener QP: %+v %v", a, err)
	}
	cqp.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState)
	if err := cid.Disconnect(); err != nil {
		t.Fatal(err)
	}
	if _, err := child.WaitFor(ctx, EventDisconnected); err != nil {
		t.Fatal(err)
	}
	if err := child.Disconnect(); err != nil { // answers the DREQ
		t.Fatal(err)
	}
	// The IB CM's timewait ends with TIMEWAIT_EXIT while the ID lives.
	if _, err := child.WaitFor(ctx, EventTimewaitExit); err != nil {
		t.Fatal(err)
	}
	// The dialer has unread events (DISCONNECTED, and TIMEWAIT_EXIT soon):
	// destroying it does not wait for anyone to read them, and nothing
	// is delivered after.
	if err := cid.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := cid.Event(ctx); !errors.Is(err, uverbs.ErrClosed) {
		t.Fatalf("Event after Close: %v", err)
	}
}

// TestRDMAReadVM: the listener RDMA-READs the dialer's memory, which needs
// the dialer to offer responder resources (rping's server does this); it
// waits for the completion on its completion channel.
func TestRDMAReadVM(t *testing.T) {
	requireCM(t)
	ctx := testCtx(t, 60*time.Second)
	cli, srv := pair(t, ctx, vmenv.AddrA, vmenv.AddrB, []Option{WithResponderResources(1), WithInitiatorDepth(1)},
		[]Option{WithCompChannel()})
	if err := srv.SendCQ().RequestNotify(false); err != nil {
		t.Fatal(err)
	}
	cb, sb := newMsgBuf(t, cli, 64), newMsgBuf(t, srv, 64)
	copy(cb.buf.Bytes(), "read me")
	if err := srv.QP().PostSend([]uverbs.SendWR{{ID: 1, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled,
		SGL: sb.sge(7), RemoteAddr: uint64(cb.buf.Addr()), Rkey: cb.mr.Rkey()}}); err != nil {
		t.Fatal(err)
	}
	cq, err := srv.CompChannel().Wait(ctx)
	if err != nil || cq != srv.SendCQ() {
		t.Fatalf("completion channel: %v %v", cq, err)
	}
	cq.AckEvents(1)
	if wc, err := pollOne(ctx, srv.SendCQ()); err != nil || wc.Status != 0 || string(sb.buf.Bytes()[:7]) != "read me" {
		t.Fatalf("RDMA READ: %v %+v %q", err, wc, sb.buf.Bytes()[:7])
	}
	cb.close()
	sb.close()
}

// TestInteropRdmaClientVM runs rdma-core's rdma_client against a Go
// server and a Go client against rdma_server (librdmacm's synchronous
// examples: 16 bytes each way).
func TestInteropRdmaClientVM(t *testing.T) {
	requireCM(t)
	if _, err := exec.LookPath("rdma_client"); err != nil {
		t.Skip("rdma_client not installed")
	}
	t.Run("go-server", func(t *testing.T) {
		ctx := testCtx(t, 20*time.Second)
		l, err := Listen(ctx, vmenv.AddrA+":0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		wait := startTool(ctx, t, "rdma_client", "-s", vmenv.AddrA, "-p", fmt.Sprint(l.Addr().Port()))
		var rb *msgBuf
		c, err := l.Accept(ctx, WithSetup(func(c *Conn) error {
			rb = newMsgBuf(t, c, 16)
			return c.QP().PostRecv([]uverbs.RecvWR{{ID: 1, SGL: rb.sge(16)}})
		}))
		if err != nil {
			t.Fatal(err)
		}
		if wc, err := pollOne(ctx, c.RecvCQ()); err != nil || wc.Status != 0 || wc.ByteLen != 16 {
			t.Fatalf("receive from rdma_client: %v %+v", err, wc)
		}
		if err := c.QP().PostSend([]uverbs.SendWR{{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: rb.sge(16)}}); err != nil {
			t.Fatal(err)
		}
		if wc, err := pollOne(ctx, c.SendCQ()); err != nil || wc.Status != 0 {
			t.Fatalf("send to rdma_client: %v %+v", err, wc)
		}
		// rdma_client disconnects and waits for this side's answer (DREP),
		// which Close sends.
		if err := c.WaitDisconnect(ctx); err != nil {
			t.Fatal(err)
		}
		rb.close()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if r := wait(); r.Exit != 0 {
			t.Fatalf("rdma_client: exit %d: %s%s", r.Exit, r.Stdout, r.Stderr)
		} else {
			t.Logf("rdma_client: %s", strings.TrimSpace(r.Stdout+r.Stderr))
		}
	})
	t.Run("go-client", func(t *testing.T) {
		ctx := testCtx(t, 20*time.Second)
		port := 7400 + time.Now().Nanosecond()%500
		wait := startTool(ctx, t, "rdma_server", "-p", fmt.Sprint(port))
		var c *Conn
		var rb *msgBuf
		var err error
		for c == nil {
			c, err = Dial(ctx, fmt.Sprintf("%s:%d", vmenv.AddrA, port), WithSource(vmenv.AddrB), WithSetup(func(c *Conn) error {
				rb = newMsgBuf(t, c, 16)
				return c.QP().PostRecv([]uverbs.RecvWR{{ID: 1, SGL: rb.sge(16)}})
			}))
			if err != nil && rb != nil {
				rb.close() // registered by the setup of a Dial that failed
				rb = nil
			}
			if err != nil && ctx.Err() == nil {
				time.Sleep(100 * time.Millisecond) // rdma_server is not listening yet
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		sb := newMsgBuf(t, c, 16)
		if err := c.QP().PostSend([]uverbs.SendWR{{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: sb.sge(16)}}); err != nil {
			t.Fatal(err)
		}
		if wc, err := pollOne(ctx, c.SendCQ()); err != nil || wc.Status != 0 {
			t.Fatalf("send to rdma_server: %v %+v", err, wc)
		}
		if wc, err := pollOne(ctx, c.RecvCQ()); err != nil || wc.Status != 0 || wc.ByteLen != 16 {
			t.Fatalf("receive from rdma_server: %v %+v", err, wc)
		}
		rb.close()
		sb.close()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if r := wait(); r.Exit != 0 {
			t.Fatalf("rdma_server: exit %d: %s%s", r.Exit, r.Stdout, r.Stderr)
		} else {
			t.Logf("rdma_server: %s", strings.TrimSpace(r.Stdout+r.Stderr))
		}
	})
}

// TestIPv6VM listens on the IPv6 unspecified address (which also takes
// IPv4 requests) and dials it over IPv4, then dials va's IPv6 link-local
// address with its zone from vb.
func TestIPv6VM(t *testing.T) {
	requireCM(t)
	ctx := testCtx(t, 60*time.Second)
	l, err := Listen(ctx, "[::]:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().Port()
	if !l.Addr().Addr().Is6() || port == 0 {
		t.Fatalf("listener address %v", l.Addr())
	}
	ll := linkLocal(t, vmenv.NetdevA)
	for _, tc := range []struct{ dst, src string }{
		{fmt.Sprintf("%s:%d", vmenv.AddrA, port), vmenv.AddrB},
		{fmt.Sprintf("[%s%%%s]:%d", ll, vmenv.NetdevB, port), ""},
	} {
		got := make(chan *Conn, 1)
		go func() {
			c, err := l.Accept(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- c
		}()
		var opts []Option
		if tc.src != "" {
			opts = append(opts, WithSource(tc.src))
		}
		c, err := Dial(ctx, tc.dst, opts...)
		if err != nil {
			t.Fatalf("Dial %s: %v", tc.dst, err)
		}
		s := <-got
		if s == nil {
			t.FailNow()
		}
		t.Logf("dialed %s: local %v remote %v; accepted remote %v", tc.dst, c.LocalAddr(), c.RemoteAddr(), s.RemoteAddr())
		cb, sb := newMsgBuf(t, c, 16), newMsgBuf(t, s, 16)
		exchange(t, ctx, c, s, cb, sb, "v6")
		cb.close()
		sb.close()
		c.Close()
		s.Close()
	}
}

// linkLocal returns the IPv6 link-local address of a netdev.
func linkLocal(t *testing.T, ifname string) netip.Addr {
	t.Helper()
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		t.Fatal(err)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is6() && p.Addr().IsLinkLocalUnicast() {
			return p.Addr()
		}
	}
	t.Skipf("%s has no IPv6 link-local address: %v", ifname, addrs)
	return netip.Addr{}
}

// TestMigrateVM moves an accepted ID to another channel (ucmatose -m):
// closing the first channel leaves it alive, and its disconnect arrives on
// the second.
func TestMigrateVM(t *testing.T) {
	requireCM(t)
	ctx := testCtx(t, 60*time.Second)
	ch1, ch2 := newChannel(t), newChannel(t)
	lid, err := ch1.CreateID(PortSpaceTCP, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := lid.Bind(netip.MustParseAddrPort(vmenv.AddrA + ":0")); err != nil {
		t.Fatal(err)
	}
	if err := lid.Listen(1); err != nil {
		t.Fatal(err)
	}
	dialed := make(chan *Conn, 1)
	go func() {
		c, err := Dial(ctx, lid.LocalAddr().String(), WithSource(vmenv.AddrB))
		if err != nil {
			t.Error(err)
		}
		dialed <- c
	}()
	ev, err := lid.WaitFor(ctx, EventConnectRequest)
	if err != nil {
		t.Fatal(err)
	}
	child := ev.ID
	c, err := child.Context()
	if err != nil {
		t.Fatal(err)
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	cq, err := c.CreateCQ(4, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Close()
	if _, err := child.CreateQP(pd, uverbs.QPInitAttr{SendCQ: cq, RecvCQ: cq,
		Cap: uverbs.QPCap{MaxSendWr: 2, MaxRecvWr: 2, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		t.Fatal(err)
	}
	defer child.Close()
	if err := child.Accept(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := child.WaitFor(ctx, EventEstablished); err != nil {
		t.Fatal(err)
	}
	if err := child.Migrate(ch2); err != nil {
		t.Fatal(err)
	}
	if child.Channel() != ch2 {
		t.Fatal("the ID still names its old channel")
	}
	if err := ch1.Close(); err != nil { // destroys the listener, not the migrated ID
		t.Fatal(err)
	}
	cli := <-dialed
	if cli == nil {
		t.FailNow()
	}
	if err := cli.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := child.WaitFor(ctx, EventDisconnected); err != nil {
		t.Fatalf("migrated ID: %v", err)
	}
	if err := child.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestListenAnyIPv4VM listens on 0.0.0.0 (every RDMA device, as rping's
// server does) and takes a connection on each device's address.
func TestListenAnyIPv4VM(t *testing.T) {
	requireCM(t)
	ctx := testCtx(t, 60*time.Second)
	l, err := Listen(ctx, ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if !l.Addr().Addr().IsUnspecified() || !l.Addr().Addr().Is4() {
		t.Errorf("listener address %v", l.Addr())
	}
	for _, dst := range []string{vmenv.AddrA, vmenv.AddrB} {
		got := make(chan *Conn, 1)
		go func() {
			c, err := l.Accept(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- c
		}()
		c, err := Dial(ctx, fmt.Sprintf("%s:%d", dst, l.Addr().Port()))
		if err != nil {
			t.Fatalf("Dial %s: %v", dst, err)
		}
		s := <-got
		if s == nil {
			t.FailNow()
		}
		name, _ := s.ID().DeviceName()
		t.Logf("%s: accepted on %s", dst, name)
		c.Close()
		s.Close()
	}
}

// startTool runs one of rdma-core's tools beside the Go peer
// (vmproc.Start) and returns the wait for its result. Should the test
// fail, the tool gets a few seconds to end on its own (its last words
// often say why) before it is killed, and what it printed goes to the
// test's log.
func startTool(ctx context.Context, t *testing.T, tool string, args ...string) func() vmproc.Result {
	t.Helper()
	tctx, cancel := context.WithCancel(ctx)
	done := vmproc.Start(tctx, t, tool, args...)
	var r *vmproc.Result
	wait := func() vmproc.Result {
		if r == nil {
			v := <-done
			r = &v
		}
		return *r
	}
	t.Cleanup(func() {
		if t.Failed() && r == nil {
			select {
			case v := <-done:
				r = &v
			case <-time.After(3 * time.Second):
			}
		}
		cancel()
		if t.Failed() {
			res := wait()
			t.Logf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", tool, res.Exit, res.Stdout, res.Stderr)
		}
	})
	return wait
}
