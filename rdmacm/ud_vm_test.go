package rdmacm

import (
	"bytes"
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
	"github.com/goverbs/goverbs/uverbs"
)

const grhBytes = 40

// TestUDSIDRVM: a UD Dial resolves the listener's QPN and Q_Key by SIDR,
// sends datagrams with the AH it made, and the listener receives them from
// the dialer's QP; the listener answers to an AH built from the datagram's
// GRH.
func TestUDSIDRVM(t *testing.T) {
	requireCM(t)
	for _, tc := range topologies {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t, 60*time.Second)
			req := []byte("ud request")
			rep := []byte("ud reply")
			var sb *msgBuf
			cli, srv := pair(t, ctx, tc.listen, tc.from, []Option{WithUD(), WithPrivateData(req)},
				[]Option{WithUD(), WithPrivateData(rep), WithSetup(func(c *Conn) error {
					sb = newMsgBuf(t, c, 256)
					return c.QP().PostRecv([]uverbs.RecvWR{{ID: 1, SGL: sb.sge(256)}})
				})})
			if got := srv.PrivateData(); len(got) != MaxConnectPrivateDataUD || !bytes.HasPrefix(got, req) {
				t.Errorf("listener saw %q (%d bytes)", got, len(got))
			}
			if got := cli.PrivateData(); len(got) != MaxAcceptPrivateDataUD || !bytes.HasPrefix(got, rep) {
				t.Errorf("dialer saw %q (%d bytes)", got, len(got))
			}
			r := cli.Remote()
			if r.QPNum != srv.QP().QPN() || r.QKey != 0x01234567 || cli.AH() == nil {
				t.Fatalf("SIDR gave QPN %d Q_Key %#x (listener QP %d)", r.QPNum, r.QKey, srv.QP().QPN())
			}
			cb := newMsgBuf(t, cli, 256)
			copy(cb.buf.Bytes(), "datagram")
			if err := cli.QP().PostSend([]uverbs.SendWR{{ID: 2, Opcode: uverbs.WRSendWithImm, Flags: uverbs.SendSignaled,
				SGL: cb.sge(8), AH: cli.AH(), RemoteQPN: r.QPNum, RemoteQkey: r.QKey, Imm: cli.QP().QPN()}}); err != nil {
				t.Fatal(err)
			}
			wc, err := pollOne(ctx, srv.RecvCQ())
			if err != nil || wc.Status != 0 {
				t.Fatalf("listener receive: %v %+v", err, wc)
			}
			if got := string(sb.buf.Bytes()[grhBytes : grhBytes+8]); got != "datagram" || wc.SrcQP != cli.QP().QPN() || wc.Imm != cli.QP().QPN() {
				t.Errorf("listener got %q from QP %d imm %d; want %q from %d", got, wc.SrcQP, wc.Imm, "datagram", cli.QP().QPN())
			}
			if wc, err := pollOne(ctx, cli.SendCQ()); err != nil || wc.Status != 0 {
				t.Fatalf("dialer send: %v %+v", err, wc)
			}
			// Answer to the source GID of the GRH.
			info, err := srv.ID().Query()
			if err != nil {
				t.Fatal(err)
			}
			sgidIndex := gidIndex(t, srv.Context(), info.Port, info.SGID)
			// RoCE v2 over IPv4 puts the IPv4 header in the last 20
			// bytes of the GRH area: the source is at 32..36.
			grh := sb.buf.Bytes()[:grhBytes]
			if grh[20]>>4 != 4 {
				t.Fatalf("GRH area % x holds no IPv4 header", grh)
			}
			dgid := uverbs.GID(netip.AddrFrom4([4]byte(grh[32:36])).As16())
			ah, err := srv.PD().CreateAH(uverbs.AHAttr{IsGlobal: true, PortNum: info.Port,
				GRH: uverbs.GlobalRoute{DGID: dgid, SGIDIndex: sgidIndex, HopLimit: 64}})
			if err != nil {
				t.Fatal(err)
			}
			defer ah.Close()
			if err := cli.QP().PostRecv([]uverbs.RecvWR{{ID: 3, SGL: cb.sge(256)}}); err != nil {
				t.Fatal(err)
			}
			copy(sb.buf.Bytes()[128:], "answer")
			if err := srv.QP().PostSend([]uverbs.SendWR{{ID: 4, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
				SGL: []uverbs.SGE{{Addr: uint64(sb.buf.Addr()) + 128, Length: 6, Lkey: sb.mr.Lkey()}},
				AH:  ah, RemoteQPN: wc.SrcQP, RemoteQkey: 0x01234567}}); err != nil {
				t.Fatal(err)
			}
			if wc, err := pollOne(ctx, cli.RecvCQ()); err != nil || wc.Status != 0 || string(cb.buf.Bytes()[grhBytes:grhBytes+6]) != "answer" {
				t.Fatalf("dialer receive: %v %+v %q", err, wc, cb.buf.Bytes()[grhBytes:grhBytes+6])
			}
			pollOne(ctx, srv.SendCQ())
			ah.Close()
			cb.close()
			sb.close()
		})
	}
}

// gidIndex finds gid in the port's GID table.
func gidIndex(t testing.TB, c *uverbs.Context, port uint8, gid uverbs.GID) uint8 {
	t.Helper()
	tab, err := c.QueryGIDTable()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range tab {
		if e.GID == gid && e.Port == uint32(port) {
			return uint8(e.Index)
		}
	}
	t.Fatalf("GID %v not in the table of port %d", gid, port)
	return 0
}

// udEnd is a low-level UD ID with its verbs objects.
type udEnd struct {
	id  *ID
	pd  *uverbs.PD
	cq  *uverbs.CQ
	qp  *uverbs.QP
	buf *msgBuf
}

func newUDEnd(t *testing.T, ctx context.Context, ch *EventChannel, src, group string) *udEnd {
	t.Helper()
	id, err := ch.CreateID(PortSpaceUDP, 0)
	if err != nil {
		t.Fatal(err)
	}
	e := &udEnd{id: id}
	t.Cleanup(func() { e.close() })
	if err := id.ResolveAddr(ctx, netip.MustParseAddrPort(src+":0"), netip.MustParseAddrPort(group+":0")); err != nil {
		t.Fatal(err)
	}
	c, err := id.Context()
	if err != nil {
		t.Fatal(err)
	}
	if e.pd, err = c.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if e.cq, err = c.CreateCQ(16, nil); err != nil {
		t.Fatal(err)
	}
	if e.qp, err = id.CreateQP(e.pd, uverbs.QPInitAttr{SendCQ: e.cq, RecvCQ: e.cq,
		Cap: uverbs.QPCap{MaxSendWr: 8, MaxRecvWr: 8, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		t.Fatal(err)
	}
	b, err := uverbs.AllocBuffer(512)
	if err != nil {
		t.Fatal(err)
	}
	mr, err := e.pd.RegisterBuffer(b, 0, 512, uverbs.AccessLocalWrite)
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	e.buf = &msgBuf{b, mr}
	return e
}

func (e *udEnd) close() {
	e.id.DestroyQP()
	if e.buf != nil {
		e.buf.close()
		e.buf = nil
	}
	if e.cq != nil {
		e.cq.Close()
	}
	if e.pd != nil {
		e.pd.Close()
	}
	e.id.Close()
}

// TestMulticastVM: a receiver on rxe1 joins an IPv4 group (its QP
// attached), a sender on rxe0 joins send-only and sends to the group's
// AH; the receiver gets the datagrams. After Leave the receiver's QP is
// detached.
func TestMulticastVM(t *testing.T) {
	requireCM(t)
	ctx := testCtx(t, 60*time.Second)
	ch := newChannel(t)
	const group = "239.1.2.3"
	recv := newUDEnd(t, ctx, ch, vmenv.AddrB, group)
	send := newUDEnd(t, ctx, ch, vmenv.AddrA, group)
	rmc, err := recv.id.JoinMulticast(ctx, netip.MustParseAddr(group), false)
	if err != nil {
		t.Fatal(err)
	}
	smc, err := send.id.JoinMulticast(ctx, netip.MustParseAddr(group), true)
	if err != nil {
		t.Fatal(err)
	}
	if rmc.MGID() != smc.MGID() || smc.UD().QPNum != 0xFFFFFF || smc.UD().QKey != 0x01234567 {
		t.Fatalf("joins: receiver MGID %v, sender MGID %v QPN %#x Q_Key %#x", rmc.MGID(), smc.MGID(), smc.UD().QPNum, smc.UD().QKey)
	}
	t.Logf("joined %v: MGID %v", rmc.Group(), rmc.MGID())
	ah, err := send.pd.CreateAH(smc.UD().AH)
	if err != nil {
		t.Fatal(err)
	}
	defer ah.Close()
	const n = 5
	for i := 0; i < n; i++ {
		if err := recv.qp.PostRecv([]uverbs.RecvWR{{ID: uint64(i), SGL: []uverbs.SGE{{Addr: uint64(recv.buf.buf.Addr()) + uint64(i)*100, Length: 100, Lkey: recv.buf.mr.Lkey()}}}}); err != nil {
			t.Fatal(err)
		}
	}
	// The kernel's IGMP join may take a moment to reach the bridge-less
	// veth; send until every datagram arrives.
	got := 0
	for i := 0; got < n && ctx.Err() == nil; i++ {
		copy(send.buf.buf.Bytes(), "mcast")
		if err := send.qp.PostSend([]uverbs.SendWR{{ID: 9, Opcode: uverbs.WRSendWithImm, Flags: uverbs.SendSignaled,
			SGL: send.buf.sge(5), AH: ah, RemoteQPN: smc.UD().QPNum, RemoteQkey: smc.UD().QKey, Imm: uint32(i)}}); err != nil {
			t.Fatal(err)
		}
		if wc, err := pollOne(ctx, send.cq); err != nil || wc.Status != 0 {
			t.Fatalf("send: %v %+v", err, wc)
		}
		wcs := make([]uverbs.WC, 4)
		deadline := time.Now().Add(100 * time.Millisecond)
		for time.Now().Before(deadline) && got < n {
			k, err := recv.cq.Poll(wcs)
			if err != nil {
				t.Fatal(err)
			}
			for _, wc := range wcs[:k] {
				if wc.Status != 0 {
					t.Fatalf("receive: %+v", wc)
				}
				off := int(wc.ID)*100 + grhBytes
				if s := string(recv.buf.buf.Bytes()[off : off+5]); s != "mcast" || wc.SrcQP != send.qp.QPN() {
					t.Fatalf("received %q from QP %d", s, wc.SrcQP)
				}
				got++
			}
			time.Sleep(time.Millisecond)
		}
	}
	if got < n {
		t.Fatalf("received %d of %d datagrams: %v", got, n, ctx.Err())
	}
	if err := rmc.Leave(); err != nil {
		t.Fatal(err)
	}
	if err := rmc.Leave(); err != nil {
		t.Fatalf("second Leave: %v", err)
	}
	if err := smc.Leave(); err != nil {
		t.Fatal(err)
	}
}
