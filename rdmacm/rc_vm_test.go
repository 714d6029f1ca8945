package rdmacm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
	"github.com/goverbs/goverbs/uverbs"
)

// requireCM skips outside the VM and fails inside it when the connection
// manager is missing.
func requireCM(t testing.TB) {
	t.Helper()
	vmenv.RequireDevice(t, vmenv.RXE0)
	vmenv.RequireDevice(t, vmenv.RXE1)
}

// topologies are the two ways the tests place the ends: rxe1 to rxe0
// across the veth, and both on rxe0's address.
var topologies = []struct{ name, listen, from string }{
	{"veth", vmenv.AddrA, vmenv.AddrB},
	{"same-address", vmenv.AddrA, vmenv.AddrA},
}

// listenA listens on rxe0's address, on a port the kernel picks, until the
// test ends.
func listenA(t testing.TB, ctx context.Context, opts ...Option) *Listener {
	t.Helper()
	l, err := Listen(ctx, vmenv.AddrA+":0", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// newChannel opens an event channel closed when the test ends.
func newChannel(t testing.TB) *EventChannel {
	t.Helper()
	ch, err := NewEventChannel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	return ch
}

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// msgBuf is a registered buffer of a connection.
type msgBuf struct {
	buf *uverbs.Buffer
	mr  *uverbs.MR
}

func newMsgBuf(t testing.TB, c *Conn, n int) *msgBuf {
	t.Helper()
	b, err := uverbs.AllocBuffer(n)
	if err != nil {
		t.Fatal(err)
	}
	mr, err := c.PD().RegisterBuffer(b, 0, n, uverbs.AccessLocalWrite|uverbs.AccessRemoteRead|uverbs.AccessRemoteWrite)
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	m := &msgBuf{b, mr}
	t.Cleanup(m.close)
	return m
}

// close frees the buffer; the connection's PD can be freed only after.
func (m *msgBuf) close() { m.mr.Close(); m.buf.Close() }

func (m *msgBuf) sge(n int) []uverbs.SGE {
	return []uverbs.SGE{{Addr: uint64(m.buf.Addr()), Length: uint32(n), Lkey: m.mr.Lkey()}}
}

// pollOne waits (polling, with a deadline) for one completion on cq.
func pollOne(ctx context.Context, cq *uverbs.CQ) (uverbs.WC, error) {
	wc := make([]uverbs.WC, 1)
	for {
		n, err := cq.Poll(wc)
		if err != nil {
			return uverbs.WC{}, err
		}
		if n == 1 {
			return wc[0], nil
		}
		if ctx.Err() != nil {
			return uverbs.WC{}, ctx.Err()
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// exchange sends msg from a to b with SEND/RECV and checks it arrives.
func exchange(t testing.TB, ctx context.Context, a, b *Conn, ab, bb *msgBuf, msg string) {
	t.Helper()
	if err := b.QP().PostRecv([]uverbs.RecvWR{{ID: 1, SGL: bb.sge(len(bb.buf.Bytes()))}}); err != nil {
		t.Fatal(err)
	}
	copy(ab.buf.Bytes(), msg)
	if err := a.QP().PostSend([]uverbs.SendWR{{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: ab.sge(len(msg))}}); err != nil {
		t.Fatal(err)
	}
	wc, err := pollOne(ctx, b.RecvCQ())
	if err != nil || wc.Status != 0 {
		t.Fatalf("receive: %v %+v", err, wc)
	}
	if got := string(bb.buf.Bytes()[:wc.ByteLen]); got != msg {
		t.Fatalf("received %q, want %q", got, msg)
	}
	if wc, err := pollOne(ctx, a.SendCQ()); err != nil || wc.Status != 0 {
		t.Fatalf("send completion: %v %+v", err, wc)
	}
}

// pair dials from src to the listener and returns both ends.
func pair(t testing.TB, ctx context.Context, listen, dialFrom string, dialOpts, acceptOpts []Option) (*Conn, *Conn) {
	t.Helper()
	l, err := Listen(ctx, listen+":0", acceptOpts...)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	type res struct {
		c   *Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := l.Accept(ctx)
		ch <- res{c, err}
	}()
	addr := fmt.Sprintf("%s:%d", listen, l.Addr().Port())
	cli, err := Dial(ctx, addr, append([]Option{WithSource(dialFrom)}, dialOpts...)...)
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		cli.Close()
		t.Fatal(r.err)
	}
	t.Cleanup(func() { cli.Close(); r.c.Close() })
	return cli, r.c
}

func TestRCDialAcceptVM(t *testing.T) {
	requireCM(t)
	for _, tc := range topologies {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t, 60*time.Second)
			req := []byte("hello from the client")
			rep := []byte("hello from the server")
			cli, srv := pair(t, ctx, tc.listen, tc.from, []Option{WithPrivateData(req)}, []Option{WithPrivateData(rep)})
			if got := srv.PrivateData(); len(got) != MaxConnectPrivateDataRC || !bytes.HasPrefix(got, req) {
				t.Errorf("server saw private data %q (len %d), want %q zero-padded to %d", got, len(got), req, MaxConnectPrivateDataRC)
			}
			if got := cli.PrivateData(); len(got) != MaxAcceptPrivateDataRC || !bytes.HasPrefix(got, rep) {
				t.Errorf("client saw private data %q (len %d), want %q zero-padded to %d", got, len(got), rep, MaxAcceptPrivateDataRC)
			}
			if s := cli.QP().State(); s != uverbs.QPStateRTS {
				t.Errorf("client QP in %v", s)
			}
			cb, sb := newMsgBuf(t, cli, 64), newMsgBuf(t, srv, 64)
			exchange(t, ctx, cli, srv, cb, sb, "ping")
			exchange(t, ctx, srv, cli, sb, cb, "pong")
			cb.close()
			sb.close()
			if err := cli.Close(); err != nil {
				t.Fatal(err)
			}
			if err := srv.WaitDisconnect(ctx); err != nil {
				t.Fatal(err)
			}
			if err := cli.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
		})
	}
}

// TestPortSpaceIBVM connects RC over RDMA_PS_IB (ucmatose -P ib).
func TestPortSpaceIBVM(t *testing.T) {
	requireCM(t)
	ctx := testCtx(t, 60*time.Second)
	cli, srv := pair(t, ctx, vmenv.AddrA, vmenv.AddrB, []Option{WithPortSpace(PortSpaceIB)}, []Option{WithPortSpace(PortSpaceIB)})
	if cli.ID().PortSpace() != PortSpaceIB || cli.QP().Type() != uverbs.QPTypeRC {
		t.Fatalf("port space %v, QP %v", cli.ID().PortSpace(), cli.QP().Type())
	}
	cb, sb := newMsgBuf(t, cli, 16), newMsgBuf(t, srv, 16)
	exchange(t, ctx, cli, srv, cb, sb, "ps ib")
	cb.close()
	sb.close()
}

func TestConnRefusedVM(t *testing.T) {
	requireCM(t)
	ctx := testCtx(t, 60*time.Second)
	_, err := Dial(ctx, vmenv.AddrA+":7999", WithSource(vmenv.AddrB))
	var rej *RejectedError
	if !errors.Is(err, unix.ECONNREFUSED) || !errors.As(err, &rej) || !rej.NobodyListening() {
		t.Fatalf("Dial to a port nobody listens on: %v, want ECONNREFUSED with reason 8", err)
	}
	t.Log(err)
}

// TestSharedPDVM checks that Dial and Accept share one PD per device, as
// librdmacm does, and that WithPD puts a connection on the caller's PD,
// which Close leaves open.
func TestSharedPDVM(t *testing.T) {
	requireCM(t)
	ctx := testCtx(t, 60*time.Second)
	cli, srv := pair(t, ctx, vmenv.AddrA, vmenv.AddrA, nil, nil)
	if cli.PD() != srv.PD() {
		t.Fatalf("two connections on rxe0 have PDs %d and %d, want the device's shared one", cli.PD().Handle(), srv.PD().Handle())
	}
	pd, err := cli.Context().AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	own, _ := pair(t, ctx, vmenv.AddrA, vmenv.AddrA, []Option{WithPD(pd)}, nil)
	if own.PD() != pd {
		t.Fatalf("WithPD: the connection is on PD %d, want %d", own.PD().Handle(), pd.Handle())
	}
	b := newMsgBuf(t, own, 16)
	b.close()
	if err := own.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pd.Close(); err != nil {
		t.Fatalf("closing WithPD's PD after its connection: %v", err)
	}

	other, err := uverbs.Open(vmenv.RXE0)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	foreign, err := other.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer foreign.Close()
	l := listenA(t, ctx)
	c, err := Dial(ctx, fmt.Sprintf("%s:%d", vmenv.AddrA, l.Addr().Port()), WithSource(vmenv.AddrA), WithPD(foreign))
	if !errors.Is(err, unix.EINVAL) || c != nil {
		c.Close()
		t.Fatalf("Dial with a PD of another context: %v, want EINVAL", err)
	}
	t.Log(err)
}

// TestDisconnectedLeavesQPVM: the peer's disconnect does not move this
// side's QP (as in librdmacm): a send the peer acknowledged before it left
// must not complete flushed. The QP goes to the error state, and a posted
// receive completes flushed, when this side answers with Disconnect.
func TestDisconnectedLeavesQPVM(t *testing.T) {
	requireCM(t)
	ctx := testCtx(t, 60*time.Second)
	cli, srv := pair(t, ctx, vmenv.AddrA, vmenv.AddrB, nil, nil)
	sb := newMsgBuf(t, srv, 64)
	if err := srv.QP().PostRecv([]uverbs.RecvWR{{ID: 9, SGL: sb.sge(64)}}); err != nil {
		t.Fatal(err)
	}
	if err := cli.ID().Disconnect(); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.ID().WaitFor(ctx, EventDisconnected); err != nil {
		t.Fatal(err)
	}
	if attr, err := srv.QP().Query(); err != nil || attr.State != uverbs.QPStateRTS {
		t.Errorf("after DISCONNECTED the kernel has the QP in %v (%v), want RTS", attr.State, err)
	}
	wcs := make([]uverbs.WC, 1)
	if n, err := srv.RecvCQ().Poll(wcs); n != 0 || err != nil {
		t.Errorf("after DISCONNECTED the receive completed: %d %v %+v", n, err, wcs[0])
	}
	if err := srv.ID().Disconnect(); err != nil {
		t.Fatal(err)
	}
	if wc, err := pollOne(ctx, srv.RecvCQ()); err != nil || wc.ID != 9 || wc.Status != uverbs.WCWRFlushErr {
		t.Errorf("after Disconnect: %v %+v, want the receive flushed", err, wc)
	}
	sb.close()
}
