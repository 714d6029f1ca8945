package mlx5

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/transport"
)

func newXRCTestContext(t *testing.T) *Context {
	t.Helper()
	g := loadGolden(t)
	c, _ := newTestContext(t, g.respFromHex(t))
	if c.cqeVersion == 0 {
		t.Fatal("the golden context is not CQE version 1")
	}
	return c
}

func newXRCTestCQ(t *testing.T, c *Context) *CQ {
	t.Helper()
	p, err := c.NewCQ(16)
	if err != nil {
		t.Fatal(err)
	}
	cq := p.(*CQ)
	t.Cleanup(func() { cq.Destroyed() })
	return cq
}

// TestXRCSRQLifecycle: an XRC SRQ takes a user index, is attached to its
// CQ under it once created (its completions name it so), and gives both
// back when destroyed.
func TestXRCSRQLifecycle(t *testing.T) {
	c := newXRCTestContext(t)
	cq := newXRCTestCQ(t, c)
	p, err := c.NewTypedSRQ(provider.SRQInit{Type: abi.SRQTypeXRC, MaxWr: 8, MaxSGE: 1, CQ: cq})
	if err != nil {
		t.Fatal(err)
	}
	s := p.(*SRQ)
	if !s.hasUIdx || s.req.UIdx != s.uidx {
		t.Fatalf("user index %d (taken %v), request carries %d", s.uidx, s.hasUIdx, s.req.UIdx)
	}
	s.resp.SRQN = 0x42
	if err := s.Created(nil, 1, 8, 1); err != nil {
		t.Fatal(err)
	}
	if s.SRQN() != 0x42 || cq.srqs[s.uidx] != recvCompleter(s) {
		t.Errorf("srqn %#x, attached under %d: %v", s.SRQN(), s.uidx, cq.srqs[s.uidx] != nil)
	}
	uidx := s.uidx
	if err := s.Destroyed(); err != nil {
		t.Fatal(err)
	}
	if _, ok := cq.srqs[uidx]; ok {
		t.Error("still attached to the CQ after Destroyed")
	}
	if n, err := c.allocUIdx(); err != nil || n != uidx {
		t.Errorf("user index after Destroyed: next allocUIdx = %d, %v; want %d again", n, err, uidx)
	}
}

func TestXRCSRQRefusals(t *testing.T) {
	c := newXRCTestContext(t)
	if _, err := c.NewTypedSRQ(provider.SRQInit{Type: abi.SRQTypeXRC, MaxWr: 8, MaxSGE: 1}); !errors.Is(err, errInvalid) {
		t.Errorf("XRC SRQ without a CQ: %v, want errInvalid", err)
	}
	if _, err := c.NewTypedSRQ(provider.SRQInit{Type: abi.SRQTypeTM, MaxWr: 8, MaxSGE: 1}); !errors.Is(err, transport.ErrNotSupported) {
		t.Errorf("tag-matching SRQ: %v, want ErrNotSupported", err)
	}
	p, err := c.NewTypedSRQ(provider.SRQInit{Type: abi.SRQTypeBasic, MaxWr: 8, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	if s := p.(*SRQ); s.hasUIdx || s.req.UIdx != 0 || s.xrcCQ != nil {
		t.Errorf("basic SRQ: user index %d (taken %v), XRC CQ %v", s.req.UIdx, s.hasUIdx, s.xrcCQ)
	}
	p.Destroyed()
}

// TestXRCRecvQP: an XRC receive QP has no queues and, as libmlx5's, no
// user index (uidx 0 in the request); work requests on it are refused.
func TestXRCRecvQP(t *testing.T) {
	c := newXRCTestContext(t)
	init := provider.QPInit{Type: abi.QPTypeXRCTgt}
	p, err := c.NewQP(init)
	if err != nil {
		t.Fatal(err)
	}
	q := p.(*QP)
	got := q.req
	got.DBAddr, got.BfregIndex, got.Flags, got.ECEOptions = 0, 0, 0, 0
	if diff := cmp.Diff(abi.MLX5CreateQP{}, got); diff != "" {
		t.Errorf("XRC_RECV driver request beyond the doorbell record and UAR (-want +got):\n%s", diff)
	}
	if q.hasUIdx || len(q.buf.mem) != 0 {
		t.Errorf("user index taken %v, buffer of %d bytes", q.hasUIdx, len(q.buf.mem))
	}
	if err := q.Created(nil, 1, 0x1200, init); err != nil {
		t.Fatal(err)
	}
	if err := q.PostSend([]provider.SendWR{{Opcode: provider.WRSend}}); err == nil {
		t.Error("PostSend on an XRC_RECV QP accepted")
	}
	if err := q.PostRecv([]provider.RecvWR{{ID: 1}}); err == nil {
		t.Error("PostRecv on an XRC_RECV QP accepted")
	}
	if err := q.Destroyed(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.NewQP(provider.QPInit{Type: abi.QPTypeXRCTgt, MaxSendWr: 1, MaxSendSGE: 1}); !errors.Is(err, errInvalid) {
		t.Errorf("XRC_RECV with a send queue: %v, want errInvalid", err)
	}
}

// TestXRCSendQPWithoutRecvCQ: what uverbs creates for XRC_SEND, a send
// CQ and nothing to receive, links the QP to its send CQ only.
func TestXRCSendQPWithoutRecvCQ(t *testing.T) {
	c := newXRCTestContext(t)
	cq := newXRCTestCQ(t, c)
	init := provider.QPInit{Type: abi.QPTypeXRCIni, MaxSendWr: 4, MaxSendSGE: 1, SendCQ: cq}
	p, err := c.NewQP(init)
	if err != nil {
		t.Fatal(err)
	}
	q := p.(*QP)
	if q.rq.wqeCnt != 0 || q.req.RQWqeCount != 0 || !q.hasUIdx {
		t.Errorf("receive queue of %d, request %d; user index taken %v", q.rq.wqeCnt, q.req.RQWqeCount, q.hasUIdx)
	}
	if err := q.Created(nil, 1, 0x1201, init); err != nil {
		t.Fatal(err)
	}
	if _, ok := cq.qps[0x1201]; !ok {
		t.Error("not attached to its send CQ")
	}
	if err := q.Destroyed(); err != nil {
		t.Fatal(err)
	}
	if _, ok := cq.qps[0x1201]; ok {
		t.Error("still attached after Destroyed")
	}
}
