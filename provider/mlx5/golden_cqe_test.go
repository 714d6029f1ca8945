package mlx5

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/bits"
	"os"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
)

// TestGoldenCQE replays the completion side of testdata/libmlx5/golden.json:
// the CQs are created from the same responses (their driver data compared
// with libmlx5's), the QPs and SRQs of the "cqes" table get the same work
// requests, then each CQE libmlx5 polled is written at its index into the
// Go CQ's ring and polled: the work completion, poll's result, the CQ
// doorbell record (and, for scatter to CQE, the receive buffer) must be
// libmlx5's. The "arms" table then checks ibv_req_notify_cq's doorbell
// record and UAR write.
//
// Where goverbs differs from libmlx5 by design: a CQE libmlx5 refuses
// (poll_cq returns -2, the entry consumed) is an error from Poll naming
// it, the entry consumed likewise.
func TestGoldenCQE(t *testing.T) {
	g := loadGolden(t)
	var gc goldenCQEFile
	raw, err := os.ReadFile("testdata/libmlx5/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &gc); err != nil {
		t.Fatal(err)
	}
	if len(gc.CQEs) == 0 {
		t.Fatal("golden.json has no cqes table")
	}
	mapGoldenData(t, uint64(g.Context.DataBase))
	c, k := newTestContext(t, g.respFromHex(t))

	cqs := map[string]*CQ{}
	for _, gcq := range gc.CQs {
		p, err := c.NewCQ(gcq.CQE)
		if err != nil {
			t.Fatalf("cq %s: %v", gcq.Name, err)
		}
		cq := p.(*CQ)
		in, out := cq.CreateData()
		cmpMasked(t, "cq "+gcq.Name+": CREATE_CQ driver request", mustHex(t, gcq.ReqHex), in, [][2]int{{0, 16}})
		copy(out, mustHex(t, gcq.RespHex))
		if err := cq.Created(nil, 1, gcq.KernelCQE); err != nil {
			t.Fatalf("cq %s: %v", gcq.Name, err)
		}
		if cq.CQN() != uint32(gcq.CQN) || cq.Entries() != gcq.NCQE {
			t.Errorf("cq %s: CQN %#x, %d entries; libmlx5 %#x, %d", gcq.Name, cq.CQN(), cq.Entries(), uint32(gcq.CQN), gcq.NCQE)
		}
		t.Cleanup(func() { cq.Destroyed() })
		cqs[gcq.Name] = cq
	}

	// The queues whose work requests the CQEs complete, with the same
	// posts. AHs first: UD posts name them.
	ahs := map[string]*AH{}
	for _, a := range g.AHs {
		ahs[a.Name] = goldenAHCheck(t, c, a)
	}
	srqs := map[string]*SRQ{}
	for _, gs := range g.SRQs {
		srqs[gs.Name] = goldenReplaySRQ(t, c, gs)
	}
	cqOf := map[string]goldenCQEQP{}
	for _, q := range gc.QPs {
		cqOf[q.Name] = q
	}
	qps := map[string]*QP{}
	used := map[string]bool{}
	for _, e := range gc.CQEs {
		used[e.QP] = true
	}
	for _, gq := range g.QPs {
		if !used[gq.Name] {
			continue
		}
		qps[gq.Name] = goldenReplayQP(t, c, gq, cqs[cqOf[gq.Name].SendCQ], cqs[cqOf[gq.Name].RecvCQ], ahs, srqs)
	}
	// The XRC SRQ's completions name it by its user index (the CQE's
	// srqn_uidx); goverbs has no XRC SRQs of its own, so the test attaches
	// the plain SRQ that got the same posts.
	for _, e := range gc.CQEs {
		if e.QP != "" {
			continue
		}
		b := mustHex(t, e.CQEHex)
		n := binary.BigEndian.Uint32(b[cqeOffSRQNUIDX:]) & maxQPN
		if err := cqs[e.CQ].attachSRQ(n, srqs["xsrq"]); err != nil {
			t.Fatal(err)
		}
	}
	// libmlx5 validates receive checksums of its raw packet QP (it was
	// brought up on an Ethernet port of a device with RAW_IP_CSUM): so
	// does the QP's own receive queue, with no stand-in.
	for _, q := range qps {
		if q.typ == abi.QPTypeRawPacket && (q.recvCQ.qps[q.qpn].rxSum == nil || !q.recvCQ.qps[q.qpn].rxSum.rxCSumValid()) {
			t.Fatalf("raw packet QP %#x: its receive queue does not report checksums", q.qpn)
		}
	}

	for _, e := range gc.CQEs {
		cq := cqs[e.CQ]
		entry := cq.entry(uint32(e.Index))
		copy(entry[:], mustHex(t, e.CQEHex))
		if e.Scatter != nil {
			// The generator's receive buffer held zeroes before the poll
			// (what follows the copied bytes in its record).
			clear(userBytes(uint64(e.Scatter.Addr), uint32(len(e.Scatter.Hex)/2)))
		}
		wcs := make([]provider.WC, 2)
		n, err := cq.Poll(wcs[:1])
		switch e.Ret {
		case 1:
			if n != 1 || err != nil {
				t.Errorf("%s: Poll = %d, %v; libmlx5 polled 1", e.Name, n, err)
				break
			}
			if d := cmp.Diff(e.WC.goverbs(), wcs[0]); d != "" {
				t.Errorf("%s: work completion (-libmlx5 +goverbs):\n%s", e.Name, d)
			}
		case 0:
			if n != 0 || err != nil {
				t.Errorf("%s: Poll = %d, %v; libmlx5 found nothing", e.Name, n, err)
			}
			// As the generator: the entry goes back to what libmlx5
			// initialised, and the next case reuses the index.
			*entry = [cqeSize]byte{}
			entry[cqeOffOpOwn] = cqeInvalidOpOwn
		default:
			if n != 0 || err == nil {
				t.Errorf("%s: Poll = %d, %v; libmlx5 refused the entry (%d)", e.Name, n, err, e.Ret)
			} else {
				t.Logf("%s: %v (libmlx5: %d)", e.Name, err, e.Ret)
			}
		}
		if got := dbrecBytes(cq); !bytes.Equal(got, mustHex(t, e.CQDBRecHex)) {
			t.Errorf("%s: CQ doorbell record %x, libmlx5 %s", e.Name, got, e.CQDBRecHex)
		}
		if e.Scatter != nil {
			want := mustHex(t, e.Scatter.Hex)
			if got := userBytes(uint64(e.Scatter.Addr), uint32(len(want))); !bytes.Equal(got, want) {
				t.Errorf("%s: receive buffer after scatter to CQE\n goverbs %x\n libmlx5 %x", e.Name, got, want)
			}
		}
	}

	ncUAR, _, _ := c.CQUAR()
	for i, a := range gc.Arms {
		cq := cqs[a.CQ]
		if cq.cons&cqConsumerIdxMask != uint32(a.CI) {
			t.Errorf("arm %d: consumer index %d, libmlx5 %d", i, cq.cons, a.CI)
		}
		k.clearUARs()
		if err := cq.Arm(a.SolicitedOnly != 0); err != nil {
			t.Fatalf("arm %d: %v", i, err)
		}
		if got := dbrecBytes(cq); !bytes.Equal(got, mustHex(t, a.CQDBRecHex)) {
			t.Errorf("arm %d: CQ doorbell record %x, libmlx5 %s", i, got, a.CQDBRecHex)
		}
		page := unsafe.Slice((*byte)(ncUAR), 4096)
		var want [4096]byte
		for _, u := range a.UAR {
			copy(want[u.Offset:], mustHex(t, u.Hex))
		}
		if !bytes.Equal(want[:], page) {
			t.Errorf("arm %d: NC UAR page %x, libmlx5 %v", i, page[:64], a.UAR)
		}
	}
}

func dbrecBytes(cq *CQ) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(cq.dbrec)), 8) }

// goldenReplaySRQ creates an SRQ as the file's and gives it the same
// posts (an XRC SRQ as a plain one: the layout is the same).
func goldenReplaySRQ(t *testing.T, c *Context, gs goldenSRQRec) *SRQ {
	t.Helper()
	if gs.XRC != 0 {
		// libmlx5's XRC SRQ took a user index; keep the numbering.
		if _, err := c.allocUIdx(); err != nil {
			t.Fatal(err)
		}
	}
	p, err := c.NewSRQ(uint32(gs.Attr.MaxWr), uint32(gs.Attr.MaxSGE))
	if err != nil {
		t.Fatalf("srq %s: %v", gs.Name, err)
	}
	s := p.(*SRQ)
	_, out := s.CreateData()
	copy(out, mustHex(t, gs.RespHex))
	if err := s.Created(nil, 1, uint32(gs.Attr.MaxWr), uint32(gs.Attr.MaxSGE)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Destroyed() })
	for i, gp := range gs.Posts {
		switch gp.Kind {
		case "drain":
			if wrID, _, ok := s.completeRecv(gp.WQECounter, nil); !ok || wrID != uint64(gp.WrID) {
				t.Fatalf("srq %s post %d: completeRecv(%d) = %#x, %v; libmlx5 %#x", gs.Name, i, gp.WQECounter, wrID, ok, uint64(gp.WrID))
			}
		case "recv":
			wrs := goldenRecvWRs(gp.WRs)
			if gp.Ret != 0 {
				wrs = wrs[:max(gp.BadWR, 0)]
			}
			if err := s.PostRecv(wrs); err != nil {
				t.Fatalf("srq %s post %d: %v", gs.Name, i, err)
			}
		default:
			t.Fatalf("srq %s post %d: kind %q", gs.Name, i, gp.Kind)
		}
	}
	return s
}

// goldenReplayQP creates a QP as the file's on the given CQs and gives it
// the same posts (lists libmlx5 refused: the part before the bad WR).
func goldenReplayQP(t *testing.T, c *Context, gq goldenQPRec, scq, rcq *CQ, ahs map[string]*AH, srqs map[string]*SRQ) *QP {
	t.Helper()
	init := provider.QPInit{Type: goldenQPTypes[gq.QPType], MaxSendWr: uint32(gq.Cap.MaxSendWr), MaxRecvWr: uint32(gq.Cap.MaxRecvWr),
		MaxSendSGE: uint32(gq.Cap.MaxSendSGE), MaxRecvSGE: uint32(gq.Cap.MaxRecvSGE), MaxInlineData: uint32(gq.Cap.MaxInlineData),
		HasSRQ: gq.SRQ != "", SQSigAll: gq.SQSigAll != 0, SendCQ: scq, RecvCQ: rcq}
	if gq.SRQ != "" {
		init.SRQ = srqs[gq.SRQ]
	}
	p, err := c.NewQP(init)
	if err != nil {
		t.Fatalf("qp %s: %v", gq.Name, err)
	}
	q := p.(*QP)
	_, out := q.CreateData()
	copy(out, mustHex(t, gq.RespHex))
	if err := q.Created(nil, 1, uint32(gq.QPN), init); err != nil {
		t.Fatalf("qp %s: %v", gq.Name, err)
	}
	t.Cleanup(func() { q.Destroyed() })
	goldenBringUp(q)
	for i, gp := range gq.Posts {
		name := fmt.Sprintf("qp %s post %d (%s)", gq.Name, i, gp.Kind)
		switch gp.Kind {
		case "send":
			wrs := goldenSendWRs(t, gp.WRs, ahs)
			if gp.Ret != 0 {
				wrs = wrs[:max(gp.BadWR, 0)]
			}
			if err := q.PostSend(wrs); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		case "recv":
			wrs := goldenRecvWRs(gp.WRs)
			if gp.Ret != 0 {
				wrs = wrs[:max(gp.BadWR, 0)]
			}
			if err := q.PostRecv(wrs); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		case "drain":
			if wrID, _, _, ok := q.sq.completeSend(gp.WQECounter, nil); !ok || wrID != uint64(gp.WrID) {
				t.Fatalf("%s: completeSend(%d) = %#x, %v; libmlx5 %#x", name, gp.WQECounter, wrID, ok, uint64(gp.WrID))
			}
		case "drain_recv":
			for range gp.WrIDs {
				q.rq.completeRecv(0, nil)
			}
		default:
			t.Fatalf("%s: unknown kind", name)
		}
	}
	return q
}

// The file's completion side.

type goldenCQEFile struct {
	CQs []struct {
		Name      string `json:"name"`
		CQE       int    `json:"cqe"`
		KernelCQE int    `json:"kernel_cqe"`
		ReqHex    string `json:"req_hex"`
		RespHex   string `json:"resp_hex"`
		CQN       ju64   `json:"cqn"`
		NCQE      int    `json:"ncqe"`
	} `json:"cqs"`
	QPs  []goldenCQEQP `json:"qps"`
	CQEs []struct {
		Name       string   `json:"name"`
		CQ         string   `json:"cq"`
		QP         string   `json:"qp"`
		Index      int      `json:"index"`
		CQEHex     string   `json:"cqe_hex"`
		Ret        int      `json:"ret"`
		WC         goldenWC `json:"wc"`
		CQDBRecHex string   `json:"cq_dbrec_hex"`
		Scatter    *struct {
			Addr ju64   `json:"addr"`
			Hex  string `json:"hex"`
		} `json:"scatter"`
	} `json:"cqes"`
	Arms []struct {
		CQ            string `json:"cq"`
		SolicitedOnly int    `json:"solicited_only"`
		CI            int    `json:"ci"`
		CQDBRecHex    string `json:"cq_dbrec_hex"`
		UAR           []struct {
			Offset int    `json:"offset"`
			Hex    string `json:"hex"`
		} `json:"uar"`
	} `json:"arms"`
}

type goldenCQEQP struct {
	Name   string `json:"name"`
	SendCQ string `json:"send_cq"`
	RecvCQ string `json:"recv_cq"`
}

// goldenWC is struct ibv_wc as the generator printed it.
type goldenWC struct {
	WrID         ju64   `json:"wr_id"`
	Status       uint32 `json:"status"`
	Opcode       uint32 `json:"opcode"`
	VendorErr    uint32 `json:"vendor_err"`
	ByteLen      uint32 `json:"byte_len"`
	ImmData      uint32 `json:"imm_data"`
	QPNum        uint32 `json:"qp_num"`
	SrcQP        uint32 `json:"src_qp"`
	WCFlags      uint32 `json:"wc_flags"`
	PkeyIndex    uint16 `json:"pkey_index"`
	SLID         uint16 `json:"slid"`
	SL           uint8  `json:"sl"`
	DLIDPathBits uint8  `json:"dlid_path_bits"`
}

// goverbs is the completion as goverbs reports it: the same fields, the
// immediate in host order (ibv_wc's imm_data holds the big-endian word;
// an invalidated rkey is already in host order).
func (w goldenWC) goverbs() provider.WC {
	imm := w.ImmData
	if w.WCFlags&uint32(provider.WCWithImm) != 0 {
		imm = bits.ReverseBytes32(imm)
	}
	return provider.WC{ID: uint64(w.WrID), Status: provider.WCStatus(w.Status), Opcode: provider.WCOpcode(w.Opcode),
		VendorErr: w.VendorErr, ByteLen: w.ByteLen, Imm: imm, QPNum: w.QPNum, SrcQP: w.SrcQP, Flags: provider.WCFlags(w.WCFlags),
		PkeyIndex: w.PkeyIndex, SLID: w.SLID, SL: w.SL, DLIDPathBits: w.DLIDPathBits}
}
