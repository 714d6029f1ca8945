package mlx5

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
)

// These tests check the encoders against the PRM's WQE layout, decoded
// independently of the encoder, over guarded buffers (a write outside a
// queue buffer, doorbell page or UAR page faults).

const sendTestQPN = 0x123

func newTestQP(t testing.TB, c *Context, init provider.QPInit) *QP {
	t.Helper()
	p, err := c.NewQP(init)
	if err != nil {
		t.Fatal(err)
	}
	q := p.(*QP)
	if err := q.Created(nil, 1, sendTestQPN, init); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Destroyed() })
	return q
}

func testAH(t testing.TB, c *Context) *AH {
	p, _ := c.NewAH()
	ah := p.(*AH)
	attr := abi.AHAttr{IsGlobal: 1, PortNum: 1, SL: 3}
	attr.GRH.FlowLabel, attr.GRH.SGIDIndex, attr.GRH.HopLimit = 0x12345, 1, 64
	copy(attr.GRH.DGID[:], "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\x0a\x63\x00\x02")
	if err := ah.SetAddress(provider.AHAddress{Attr: attr, Ethernet: true, RoCEv2: true}); err != nil {
		t.Fatal(err)
	}
	copy(ah.resp.DMAC[:], "\x0c\x42\xa1\x5e\x77\x01")
	if err := ah.Created(1); err != nil {
		t.Fatal(err)
	}
	return ah
}

// wqe is a send WQE as the HCA reads it.
type wqe struct {
	Opcode  uint8
	Index   uint16
	QPN     uint32
	DS      int
	FmCeSe  uint8
	Imm     uint32
	XRCSRQN uint32
	Raddr   uint64
	Rkey    uint32
	SwapAdd uint64
	Compare uint64
	AV      []byte
	EthHdr  []byte
	CsFlags uint8
	UMR     []byte
	Inline  []byte
	Data    []provider.SGE
}

// decodeWQE reads the WQE starting at block bb of the ring, following the
// wrap at the ring's end, by the PRM's layout for a QP type.
func decodeWQE(t *testing.T, ring []byte, bb int, typ provider.QPType, op provider.WROpcode, inline bool, ethInline int) wqe {
	t.Helper()
	be := binary.BigEndian
	var w wqe
	ctrl := ring[bb*wqeBB:]
	w.Opcode = uint8(be.Uint32(ctrl))
	w.Index = uint16(be.Uint32(ctrl) >> 8)
	w.QPN = be.Uint32(ctrl[4:]) >> 8
	w.DS = int(be.Uint32(ctrl[4:]) & 0x3f)
	w.FmCeSe = ctrl[11]
	w.Imm = be.Uint32(ctrl[12:])
	flat := make([]byte, w.DS*16)
	for i := range flat {
		flat[i] = ring[(bb*wqeBB+i)%len(ring)]
	}
	p := flat[16:]
	switch typ {
	case abi.QPTypeXRCIni, abi.QPTypeRC, abi.QPTypeUC:
		if typ == abi.QPTypeXRCIni && op != provider.WRLocalInv {
			w.XRCSRQN = be.Uint32(p)
			p = p[16:]
		}
		switch op {
		case provider.WRRDMARead, provider.WRRDMAWrite, provider.WRRDMAWriteWithImm:
			w.Raddr, w.Rkey = be.Uint64(p), be.Uint32(p[8:])
			p = p[16:]
		case provider.WRAtomicCmpAndSwp, provider.WRAtomicFetchAndAdd:
			w.Raddr, w.Rkey = be.Uint64(p), be.Uint32(p[8:])
			w.SwapAdd, w.Compare = be.Uint64(p[16:]), be.Uint64(p[24:])
			p = p[32:]
		case provider.WRLocalInv:
			w.UMR = p[:112]
			p = p[112:]
		}
	case abi.QPTypeUD:
		w.AV = p[:48]
		p = p[48:]
	case abi.QPTypeRawPacket:
		w.CsFlags = p[4]
		n := int(be.Uint16(p[12:]))
		w.EthHdr = p[14 : 14+n]
		// The segment is its 16 bytes and the headers past the 2 it
		// holds: libmlx5's offsetof(inline_hdr), 16, plus n, in whole
		// units.
		p = p[(16+n)&^15:]
	}
	if inline {
		if len(p) > 0 {
			bc := be.Uint32(p)
			if bc&abi.MLX5InlineSeg == 0 {
				t.Fatalf("inline segment byte count %#x without the inline bit", bc)
			}
			w.Inline = p[4 : 4+bc&^abi.MLX5InlineSeg]
		}
		return w
	}
	for ; len(p) >= 16; p = p[16:] {
		w.Data = append(w.Data, provider.SGE{Length: be.Uint32(p), Lkey: be.Uint32(p[4:]), Addr: be.Uint64(p[8:])})
	}
	return w
}

// expectWQE is what the PRM says a work request becomes.
func expectWQE(wr provider.SendWR, typ provider.QPType, index uint16, ah *AH, data []byte, ethInline int) wqe {
	w := wqe{Opcode: mlx5Opcode[wr.Opcode], Index: index, QPN: sendTestQPN}
	if wr.Flags&provider.SendFence != 0 {
		w.FmCeSe |= abi.MLX5WQECtrlFence
	}
	if wr.Flags&provider.SendSignaled != 0 {
		w.FmCeSe |= abi.MLX5WQECtrlCQUpdate
	}
	if wr.Flags&provider.SendSolicited != 0 {
		w.FmCeSe |= abi.MLX5WQECtrlSolicited
	}
	switch wr.Opcode {
	case provider.WRSendWithImm, provider.WRRDMAWriteWithImm:
		w.Imm = wr.Imm
	case provider.WRSendWithInv, provider.WRLocalInv:
		w.Imm = wr.InvalidateRkey
	}
	ds := 1
	if typ == abi.QPTypeXRCIni && wr.Opcode != provider.WRLocalInv {
		w.XRCSRQN = wr.XRCRemoteSRQN
		ds++
	}
	switch wr.Opcode {
	case provider.WRRDMARead, provider.WRRDMAWrite, provider.WRRDMAWriteWithImm:
		w.Raddr, w.Rkey = wr.RemoteAddr, wr.Rkey
		ds++
	case provider.WRAtomicCmpAndSwp:
		w.Raddr, w.Rkey, w.SwapAdd, w.Compare = wr.RemoteAddr, wr.Rkey, wr.Swap, wr.CompareAdd
		ds += 2
	case provider.WRAtomicFetchAndAdd:
		w.Raddr, w.Rkey, w.SwapAdd = wr.RemoteAddr, wr.Rkey, wr.CompareAdd
		ds += 2
	case provider.WRLocalInv:
		umr := make([]byte, 112)
		umr[0] = 0x98                                          // inline, translation offset, check QPN
		binary.BigEndian.PutUint64(umr[8:], 1<<29|1<<13|1<<14) // free, mkey, QPN
		umr[48] = 0x40                                         // mkey context: free
		binary.BigEndian.PutUint32(umr[52:], 0xffffff00)
		w.UMR = umr
		ds += 7
	}
	skip := 0
	switch typ {
	case abi.QPTypeUD:
		av := ah.AV()
		binary.BigEndian.PutUint32(av[0:], wr.RemoteQkey)
		binary.BigEndian.PutUint32(av[8:], wr.RemoteQPN|abi.MLX5ExtendedUDAV)
		w.AV = av[:]
		ds += 3
	case abi.QPTypeRawPacket:
		w.EthHdr = data[:ethInline]
		skip = ethInline
		if wr.Flags&provider.SendIPCsum != 0 {
			w.CsFlags = 0xc0
		}
		ds += (16 + ethInline) >> 4 // offsetof(inline_hdr) and the headers
	}
	if wr.Flags&provider.SendInline != 0 && len(wr.SGL) > 0 {
		w.Inline = data[skip:]
		if len(w.Inline) > 0 {
			ds += (len(w.Inline) + 4 + 15) / 16
		}
	} else {
		for _, s := range wr.SGL {
			n := uint32(min(skip, int(s.Length)))
			skip -= int(n)
			if s.Length == 0 || n == s.Length {
				continue
			}
			if wr.Opcode == provider.WRAtomicCmpAndSwp || wr.Opcode == provider.WRAtomicFetchAndAdd {
				w.Data = append(w.Data, provider.SGE{Addr: s.Addr, Length: 8, Lkey: s.Lkey})
			} else {
				w.Data = append(w.Data, provider.SGE{Addr: s.Addr + uint64(n), Length: s.Length - n, Lkey: s.Lkey})
			}
			ds++
		}
	}
	w.DS = ds
	return w
}

// payload is memory SGEs point into: len(sizes) spans with distinct bytes.
func payload(t testing.TB, lkey uint32, sizes ...int) ([]provider.SGE, []byte) {
	total := 0
	for _, s := range sizes {
		total += s
	}
	mem := guardedPages(t, max(total, 1))
	var sgl []provider.SGE
	var all []byte
	off := 0
	for i, s := range sizes {
		b := mem[off : off+s]
		for j := range b {
			b[j] = byte(i*31 + j*7 + 1)
		}
		all = append(all, b...)
		sgl = append(sgl, provider.SGE{Addr: uint64(uintptr(unsafe.Pointer(&mem[off]))), Length: uint32(s), Lkey: lkey + uint32(i)})
		off += s
	}
	return sgl, all
}

var allOpcodes = []provider.WROpcode{provider.WRRDMAWrite, provider.WRRDMAWriteWithImm, provider.WRSend, provider.WRSendWithImm,
	provider.WRRDMARead, provider.WRAtomicCmpAndSwp, provider.WRAtomicFetchAndAdd, provider.WRLocalInv, provider.WRBindMW, provider.WRSendWithInv}

var qpTypes = []struct {
	name string
	typ  provider.QPType
}{{"RC", abi.QPTypeRC}, {"UC", abi.QPTypeUC}, {"UD", abi.QPTypeUD}, {"RAW_PACKET", abi.QPTypeRawPacket}, {"XRC_SEND", abi.QPTypeXRCIni}}

// TestEncodeEveryOpcode posts every opcode with every flag combination on
// every QP type: valid ones must decode to what the PRM says, the others
// (an opcode the type does not post, SendInline on a READ or an atomic)
// must be refused with ErrBadWR and write nothing.
func TestEncodeEveryOpcode(t *testing.T) {
	c, k := newTestContext(t, testResp())
	ah := testAH(t, c)
	flagSets := []provider.SendFlags{0, provider.SendFence, provider.SendSignaled, provider.SendSolicited,
		provider.SendFence | provider.SendSignaled | provider.SendSolicited, provider.SendInline, provider.SendInline | provider.SendSignaled}
	for _, qt := range qpTypes {
		q := newTestQP(t, c, provider.QPInit{Type: qt.typ, MaxSendWr: 64, MaxSendSGE: 3, MaxInlineData: 64, MaxRecvWr: 4, MaxRecvSGE: 1})
		for _, op := range allOpcodes {
			for _, fl := range flagSets {
				if qt.typ == abi.QPTypeRawPacket && fl&provider.SendSolicited == 0 {
					fl |= provider.SendIPCsum // also cover checksum offload
				}
				name := fmt.Sprintf("%s/%v/%#x", qt.name, op, fl)
				sizes := []int{40, 0, 24}
				if op == provider.WRAtomicCmpAndSwp || op == provider.WRAtomicFetchAndAdd {
					sizes = []int{8}
				}
				if op == provider.WRLocalInv {
					sizes = nil
				}
				sgl, data := payload(t, 0x500, sizes...)
				wr := provider.SendWR{ID: 77, Opcode: op, Flags: fl, SGL: sgl, Imm: 0x11223344, InvalidateRkey: 0xabcd12,
					RemoteAddr: 0x7f0012345000, Rkey: 0x5566, CompareAdd: 0x0102030405060708, Swap: 0x1112131415161718,
					AH: &provider.AHRef{AH: ah}, RemoteQPN: 0x4321, RemoteQkey: 0x11111111, XRCRemoteSRQN: 0x42}
				ring := q.sqRing()
				before := bytes.Clone(ring)
				bb := int(q.sq.curPost & (q.sq.wqeCnt - 1))
				q.sq.fmCache = 0 // each case on its own: no fence owed by an earlier LOCAL_INV
				err := q.PostSend([]provider.SendWR{wr})
				// A READ's or an atomic's SGEs receive: nothing to send inline.
				inlineRecv := fl&provider.SendInline != 0 && (op == provider.WRRDMARead || op == provider.WRAtomicCmpAndSwp || op == provider.WRAtomicFetchAndAdd)
				if !opcodeAllowed(qt.typ, op) || inlineRecv {
					if !errors.Is(err, provider.ErrBadWR) || !bytes.Equal(before, ring) {
						t.Errorf("%s: err %v (want ErrBadWR), ring changed %v", name, err, !bytes.Equal(before, ring))
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				got := decodeWQE(t, ring, bb, qt.typ, op, fl&provider.SendInline != 0, c.ethMinInline)
				want := expectWQE(wr, qt.typ, uint16(bb), ah, data, c.ethMinInline)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s (-PRM +encoded):\n%s", name, diff)
				}
				// Retire it so the queue never fills.
				if _, _, _, ok := q.sq.completeSend(uint16(bb), nil); !ok {
					t.Fatalf("%s: completeSend(%d) found no WQE", name, bb)
				}
				k.clearUARs()
			}
		}
	}
}

// TestEncodeRawPacketEthSeg checks raw packet WQEs byte for byte against
// the layout libmlx5's _mlx5_post_send writes, with the Ethernet headers
// the device wants inline (eth_min_inline 18) and with none
// (MLX5_USER_INLINE_MODE_NONE, ConnectX-5 and later on Ethernet): the
// Ethernet segment takes (offsetof(inline_hdr) + header bytes) / 16
// units, so with no header inline it is still its 16 bytes, one unit.
func TestEncodeRawPacketEthSeg(t *testing.T) {
	be := binary.BigEndian
	// The segments as the PRM lays them out, written out independently
	// of the encoder's arithmetic.
	ethSeg := func(csum bool, hdr []byte) []byte {
		b := make([]byte, 16+max(len(hdr)-2, 0))
		if csum {
			b[4] = 0xc0 // L3 and L4 checksum
		}
		be.PutUint16(b[12:], uint16(len(hdr)))
		copy(b[14:], hdr) // inline_hdr_start, then inline_hdr
		return b
	}
	dataSeg := func(n, lkey uint32, addr uint64) []byte {
		b := make([]byte, 16)
		be.PutUint32(b, n)
		be.PutUint32(b[4:], lkey)
		be.PutUint64(b[8:], addr)
		return b
	}
	inlineSeg := func(data []byte) []byte {
		b := make([]byte, alignUp(4+len(data), 16))
		be.PutUint32(b, uint32(len(data))|abi.MLX5InlineSeg)
		copy(b[4:], data)
		return b
	}
	none, l2 := uint8(abi.MLX5UserInlineModeNone), testResp().EthMinInline // 0 and 18 header bytes
	for _, tc := range []struct {
		name  string
		mode  uint8 // GET_CONTEXT's eth_min_inline
		sizes []int
		flags provider.SendFlags
		// segs are the segments after the control segment.
		segs func(sgl []provider.SGE, data []byte) [][]byte
	}{
		{"none/one SGE", none, []int{64}, provider.SendIPCsum, func(sgl []provider.SGE, _ []byte) [][]byte {
			return [][]byte{ethSeg(true, nil), dataSeg(64, sgl[0].Lkey, sgl[0].Addr)}
		}},
		{"none/two SGEs", none, []int{10, 30}, 0, func(sgl []provider.SGE, _ []byte) [][]byte {
			return [][]byte{ethSeg(false, nil), dataSeg(10, sgl[0].Lkey, sgl[0].Addr), dataSeg(30, sgl[1].Lkey, sgl[1].Addr)}
		}},
		{"none/inline", none, []int{40}, provider.SendInline | provider.SendIPCsum, func(_ []provider.SGE, data []byte) [][]byte {
			return [][]byte{ethSeg(true, nil), inlineSeg(data)}
		}},
		{"18 bytes/one SGE", l2, []int{64}, provider.SendIPCsum, func(sgl []provider.SGE, data []byte) [][]byte {
			return [][]byte{ethSeg(true, data[:18]), dataSeg(46, sgl[0].Lkey, sgl[0].Addr+18)}
		}},
		{"18 bytes/headers over two SGEs", l2, []int{10, 30}, 0, func(sgl []provider.SGE, data []byte) [][]byte {
			return [][]byte{ethSeg(false, data[:18]), dataSeg(22, sgl[1].Lkey, sgl[1].Addr+8)}
		}},
		{"18 bytes/inline", l2, []int{40}, provider.SendInline, func(_ []provider.SGE, data []byte) [][]byte {
			return [][]byte{ethSeg(false, data[:18]), inlineSeg(data[18:])}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := testResp()
			r.EthMinInline = tc.mode
			c, _ := newTestContext(t, r)
			q := newTestQP(t, c, provider.QPInit{Type: abi.QPTypeRawPacket, MaxSendWr: 8, MaxSendSGE: 2, MaxInlineData: 64})
			sgl, data := payload(t, 0x500, tc.sizes...)
			wr := provider.SendWR{ID: 1, Opcode: provider.WRSend, Flags: tc.flags | provider.SendSignaled, SGL: sgl}
			if err := q.PostSend([]provider.SendWR{wr}); err != nil {
				t.Fatal(err)
			}
			segs := bytes.Join(tc.segs(sgl, data), nil)
			ds := 1 + len(segs)/16
			want := make([]byte, 16, ds*16)
			be.PutUint32(want, abi.MLX5OpcodeSend) // WQE counter 0
			be.PutUint32(want[4:], sendTestQPN<<8|uint32(ds))
			want[11] = abi.MLX5WQECtrlCQUpdate
			want = append(want, segs...)
			if diff := cmp.Diff(hex.Dump(want), hex.Dump(q.sqRing()[:len(want)])); diff != "" {
				t.Fatalf("WQE (-libmlx5 +encoded):\n%s", diff) // not one to decode
			}
			// The tests' PRM decoder reads it back as the work request.
			got := decodeWQE(t, q.sqRing(), 0, abi.QPTypeRawPacket, wr.Opcode, tc.flags&provider.SendInline != 0, c.ethMinInline)
			if diff := cmp.Diff(expectWQE(wr, abi.QPTypeRawPacket, 0, nil, data, c.ethMinInline), got); diff != "" {
				t.Errorf("decoded (-PRM +encoded):\n%s", diff)
			}
		})
	}
}

// TestEncodeSGECountsAndInlineLimits posts 0..max SGEs and inline data at
// and around the queue's limit (one SGE and several), on RC, UD and raw
// packet QPs; one past each limit is refused with its typed error and
// writes nothing.
func TestEncodeSGECountsAndInlineLimits(t *testing.T) {
	c, _ := newTestContext(t, testResp())
	ah := testAH(t, c)
	for _, qt := range qpTypes {
		if qt.typ == abi.QPTypeUC {
			continue // as RC
		}
		q := newTestQP(t, c, provider.QPInit{Type: qt.typ, MaxSendWr: 32, MaxSendSGE: 4, MaxInlineData: 100})
		maxInl := q.sq.maxInline
		type tc struct {
			name    string
			sizes   []int
			flags   provider.SendFlags
			wantErr error
		}
		var cases []tc
		for n := 0; n <= q.sq.maxGS+1; n++ {
			sizes := make([]int, n)
			for i := range sizes {
				sizes[i] = 20 + i
			}
			var want error
			if n > q.sq.maxGS {
				want = provider.ErrTooManySGE
			}
			if qt.typ == abi.QPTypeRawPacket && n == 0 {
				want = provider.ErrBadWR // a packet needs its headers
			}
			cases = append(cases, tc{fmt.Sprintf("%d SGEs", n), sizes, 0, want})
		}
		hdr := 0
		if qt.typ == abi.QPTypeRawPacket {
			hdr = c.ethMinInline // inline data is what follows the inline headers
		}
		for _, n := range []int{1, 15, 16, maxInl - 1, maxInl, maxInl + 1} {
			var want error
			if n > maxInl {
				want = provider.ErrInlineTooLarge
			}
			cases = append(cases,
				tc{fmt.Sprintf("inline %d in one SGE", n), []int{n + hdr}, provider.SendInline, want},
				tc{fmt.Sprintf("inline %d in three SGEs", n), []int{hdr + n/3, n / 3, n - 2*(n/3)}, provider.SendInline, want})
		}
		for _, tc := range cases {
			name := qt.name + "/" + tc.name
			sgl, data := payload(t, 0x900, tc.sizes...)
			wr := provider.SendWR{ID: 5, Opcode: provider.WRSend, Flags: tc.flags | provider.SendSignaled, SGL: sgl,
				AH: &provider.AHRef{AH: ah}, RemoteQPN: 9, RemoteQkey: 0x1111, XRCRemoteSRQN: 3}
			ring := q.sqRing()
			before, db := bytes.Clone(ring), bytes.Clone(q.dbrecBytes())
			bb := int(q.sq.curPost & (q.sq.wqeCnt - 1))
			err := q.PostSend([]provider.SendWR{wr})
			if tc.wantErr != nil {
				var pe *provider.PostError
				if !errors.Is(err, tc.wantErr) || !errors.As(err, &pe) || pe.Index != 0 {
					t.Errorf("%s: err %v, want a PostError for WR 0 wrapping %v", name, err, tc.wantErr)
				}
				if !bytes.Equal(before, ring) || !bytes.Equal(db, q.dbrecBytes()) {
					t.Errorf("%s: a refused post wrote to the queue", name)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			got := decodeWQE(t, ring, bb, qt.typ, wr.Opcode, tc.flags&provider.SendInline != 0, c.ethMinInline)
			want := expectWQE(wr, qt.typ, uint16(bb), ah, data, c.ethMinInline)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s (-PRM +encoded):\n%s", name, diff)
			}
			if got.DS*16 > q.sq.maxPostBytes() {
				t.Errorf("%s: a WQE of %d bytes, beyond the %d the queue was sized for", name, got.DS*16, q.sq.maxPostBytes())
			}
			q.sq.completeSend(uint16(bb), nil)
		}
	}
}

// maxPostBytes is the largest WQE the ring was sized for.
func (sq *sendQueue) maxPostBytes() int { return int(sq.wqeCnt) * wqeBB / int(sq.maxPost) }

// TestEncodeWraparound walks WQEs of every size class around the ring
// several times on a ring that ends at a guard page: every WQE decodes
// whole across the wrap, the counters in the control segments and the
// doorbell record run on past the ring size.
func TestEncodeWraparound(t *testing.T) {
	c, _ := newTestContext(t, testResp())
	ah := testAH(t, c)
	for _, qt := range qpTypes {
		// No RQ: the send ring is the whole buffer, so its end is a guard page.
		q := newTestQP(t, c, provider.QPInit{Type: qt.typ, MaxSendWr: 16, MaxSendSGE: 4, MaxInlineData: 150})
		if len(q.sqRing())%4096 != 0 {
			t.Fatalf("%s: a ring of %d bytes does not end at the guard page", qt.name, len(q.sqRing()))
		}
		shapes := []struct {
			sizes []int
			flags provider.SendFlags
		}{{[]int{30}, 0}, {[]int{30, 40, 50, 60}, 0}, {[]int{90}, provider.SendInline}, {[]int{60, 30, 40}, provider.SendInline}, {[]int{0}, 0}, {[]int{20}, provider.SendInline}}
		posted, straddles := 0, 0
		for round := 0; q.sq.curPost < 3*q.sq.wqeCnt; round++ {
			s := shapes[round%len(shapes)]
			if qt.typ == abi.QPTypeRawPacket && s.sizes[0] < 18 {
				continue
			}
			sgl, data := payload(t, 0x700, s.sizes...)
			wr := provider.SendWR{ID: uint64(round), Opcode: provider.WRSend, Flags: s.flags, SGL: sgl, AH: &provider.AHRef{AH: ah}, RemoteQPN: 7, RemoteQkey: 1}
			bb := int(q.sq.curPost & (q.sq.wqeCnt - 1))
			idx := uint16(q.sq.curPost)
			if err := q.PostSend([]provider.SendWR{wr}); err != nil {
				t.Fatalf("%s round %d: %v", qt.name, round, err)
			}
			got := decodeWQE(t, q.sqRing(), bb, qt.typ, wr.Opcode, s.flags&provider.SendInline != 0, c.ethMinInline)
			want := expectWQE(wr, qt.typ, idx, ah, data, c.ethMinInline)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("%s round %d at block %d (-PRM +encoded):\n%s", qt.name, round, bb, diff)
			}
			if got := binary.BigEndian.Uint32(q.dbrecBytes()[4:]); got != q.sq.curPost&0xffff {
				t.Fatalf("%s round %d: doorbell record %d, posted %d blocks", qt.name, round, got, q.sq.curPost)
			}
			if bb+(got.DS*16+wqeBB-1)/wqeBB > int(q.sq.wqeCnt) {
				straddles++
			}
			if _, _, _, ok := q.sq.completeSend(idx, nil); !ok {
				t.Fatalf("%s round %d: no WQE at counter %d", qt.name, round, idx)
			}
			posted++
		}
		if posted < int(q.sq.wqeCnt) || straddles == 0 {
			t.Errorf("%s: %d posts, %d across the ring's end", qt.name, posted, straddles)
		}
	}
}

// postGuarded posts on a ring that ends at a guard page: a write past
// the ring faults, which it reports as a failure of the test rather than
// a crash of the test binary.
func postGuarded(t *testing.T, q *QP, wrs []provider.SendWR) error {
	t.Helper()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			q.sq.mu.Unlock() // post faulted holding it
			t.Fatalf("the post wrote outside the ring: %v", r)
		}
	}()
	return q.PostSend(wrs)
}

// TestPostInlineAtRingEnd posts inline work requests whose segments
// before the inline data end at the ring's end, on rings that end at a
// guard page. A READ or an atomic with SendInline is refused (their SGEs
// receive; an XRC atomic in the last block would have had its inline data
// written past the ring), naming the flag, and writes nothing; a
// LOCAL_INV of two blocks from the second to last continues its inline
// data at the ring's start.
func TestPostInlineAtRingEnd(t *testing.T) {
	c, _ := newTestContext(t, testResp())
	sgl, data := payload(t, 0x500, 8)
	for _, tc := range []struct {
		name    string
		typ     provider.QPType
		fromEnd uint32 // the WQE starts this many blocks before the ring's end
		wr      provider.SendWR
		wantErr bool
	}{
		{"XRC_SEND FETCH_ADD in the last block", abi.QPTypeXRCIni, 1,
			provider.SendWR{Opcode: provider.WRAtomicFetchAndAdd, XRCRemoteSRQN: 7, RemoteAddr: 0x1000, Rkey: 5, CompareAdd: 1}, true},
		{"XRC_SEND CMP_SWP in the last block", abi.QPTypeXRCIni, 1,
			provider.SendWR{Opcode: provider.WRAtomicCmpAndSwp, XRCRemoteSRQN: 7, RemoteAddr: 0x1000, Rkey: 5}, true},
		{"RC FETCH_ADD", abi.QPTypeRC, 4, provider.SendWR{Opcode: provider.WRAtomicFetchAndAdd, RemoteAddr: 0x1000, Rkey: 5}, true},
		{"RC RDMA_READ in the last block", abi.QPTypeRC, 1, provider.SendWR{Opcode: provider.WRRDMARead, RemoteAddr: 0x1000, Rkey: 5}, true},
		{"RC LOCAL_INV from the second to last block", abi.QPTypeRC, 2, provider.SendWR{Opcode: provider.WRLocalInv, InvalidateRkey: 0x1234}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newTestQP(t, c, provider.QPInit{Type: tc.typ, MaxSendWr: 16, MaxSendSGE: 1})
			ring := q.sqRing()
			if len(ring)%4096 != 0 || q.rq.start != nil {
				t.Fatalf("a ring of %d bytes (RQ %v) does not end at the guard page", len(ring), q.rq.start != nil)
			}
			// One-block RDMA WRITEs, each completed, up to the block.
			write := provider.SendWR{Opcode: provider.WRRDMAWrite, SGL: sgl, XRCRemoteSRQN: 7}
			for q.sq.curPost&(q.sq.wqeCnt-1) != q.sq.wqeCnt-tc.fromEnd {
				bb := uint16(q.sq.curPost)
				if err := q.PostSend([]provider.SendWR{write}); err != nil {
					t.Fatal(err)
				}
				if _, _, _, ok := q.sq.completeSend(bb, nil); !ok {
					t.Fatalf("completeSend(%d) found no WQE", bb)
				}
			}
			wr := tc.wr
			wr.ID, wr.Flags, wr.SGL = 9, provider.SendInline|provider.SendSignaled, sgl
			bb, idx := int(q.sq.curPost&(q.sq.wqeCnt-1)), uint16(q.sq.curPost)
			before, state := bytes.Clone(ring), q.sqState()
			err := postGuarded(t, q, []provider.SendWR{wr})
			if tc.wantErr {
				var pe *provider.PostError
				if !errors.As(err, &pe) || pe.Index != 0 || !errors.Is(err, provider.ErrBadWR) || !strings.Contains(err.Error(), "SendInline") {
					t.Fatalf("err %v, want a PostError for WR 0 wrapping ErrBadWR that names SendInline", err)
				}
				if !bytes.Equal(before, ring) || q.sqState() != state {
					t.Error("a refused post wrote to the queue")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := decodeWQE(t, ring, bb, tc.typ, wr.Opcode, true, 0)
			if diff := cmp.Diff(expectWQE(wr, tc.typ, idx, nil, data, 0), got); diff != "" {
				t.Errorf("(-PRM +encoded):\n%s", diff)
			}
			if bc := binary.BigEndian.Uint32(ring); bc != 8|abi.MLX5InlineSeg {
				t.Errorf("the ring's start holds byte count %#x, want the inline segment's %#x", bc, 8|abi.MLX5InlineSeg)
			}
		})
	}
}

// TestDoorbellOrBlueFlame checks the UAR writes: a lone WQE of more than
// 16 bytes is copied whole by BlueFlame (wrapping with the ring), a list
// or a 16-byte WQE rings the 8-byte doorbell with the last WQE's control
// segment, and each write goes to the other half of the register.
func TestDoorbellOrBlueFlame(t *testing.T) {
	c, k := newTestContext(t, testResp())
	q := newTestQP(t, c, provider.QPInit{Type: abi.QPTypeRC, MaxSendWr: 4, MaxSendSGE: 4, MaxInlineData: 200})
	uar := k.uarPage(q.bf.pageID)
	sgl, _ := payload(t, 1, 64, 64, 64, 64)
	one := provider.SendWR{Opcode: provider.WRRDMAWrite, SGL: sgl[:1], RemoteAddr: 0x1000, Rkey: 2}
	four := provider.SendWR{Opcode: provider.WRRDMAWrite, SGL: sgl, RemoteAddr: 0x1000, Rkey: 2}
	big := provider.SendWR{Opcode: provider.WRSend, Flags: provider.SendInline, SGL: sgl[:3]} // 196 bytes: 4 blocks
	empty := provider.SendWR{Opcode: provider.WRSend}                                         // 16 bytes: doorbell only
	half := q.bf.bufSize
	for i, tc := range []struct {
		wrs      []provider.SendWR
		blueFlam bool
	}{
		{[]provider.SendWR{one}, true},
		{[]provider.SendWR{four}, true},
		{[]provider.SendWR{one, one}, false},
		{[]provider.SendWR{empty}, false},
		{[]provider.SendWR{big}, true},
		{[]provider.SendWR{big}, true}, // moved to two blocks before the end: the copy wraps
		{[]provider.SendWR{four, one, empty}, false},
	} {
		if i == 5 {
			for q.sq.curPost&(q.sq.wqeCnt-1) != q.sq.wqeCnt-2 {
				if err := q.PostSend([]provider.SendWR{empty, empty}); err != nil {
					t.Fatal(err)
				}
				q.sq.completeSend(uint16(q.sq.curPost-1), nil)
			}
			if q.bf.offset != 0 {
				if err := q.PostSend([]provider.SendWR{empty}); err != nil {
					t.Fatal(err)
				}
				q.sq.completeSend(uint16(q.sq.curPost-1), nil)
			}
		}
		k.clearUARs()
		off := q.bf.regOff + q.bf.offset
		if i < 5 {
			if want := q.bf.regOff + (i%2)*half; off != want {
				t.Fatalf("case %d: register half at %#x, want %#x", i, off, want)
			}
		}
		start := q.sq.curPost
		if err := q.PostSend(tc.wrs); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		// The last WQE's blocks, in ring order from its control segment.
		last := start
		for p := start; p != q.sq.curPost; p++ {
			if q.sq.slots[p&(q.sq.wqeCnt-1)].blocks != 0 {
				last = p
			}
		}
		ring := q.sqRing()
		var wqeBytes []byte
		for p := last; p != q.sq.curPost; p++ {
			b := int(p & (q.sq.wqeCnt - 1))
			wqeBytes = append(wqeBytes, ring[b*wqeBB:(b+1)*wqeBB]...)
		}
		want := wqeBytes[:8]
		if tc.blueFlam {
			want = wqeBytes
		}
		if i == 5 && (last&(q.sq.wqeCnt-1))+uint32(len(wqeBytes)/wqeBB) <= q.sq.wqeCnt {
			t.Fatalf("case %d: the WQE at block %d does not cross the ring's end", i, last&(q.sq.wqeCnt-1))
		}
		if next := q.bf.regOff + q.bf.offset; next == off {
			t.Errorf("case %d: the register half did not alternate", i)
		}
		if got := uar[off : off+len(want)]; !bytes.Equal(got, want) {
			t.Errorf("case %d: UAR at %#x\n got %x\nwant %x", i, off, got, want)
		}
		rest := bytes.Clone(uar)
		clear(rest[off : off+len(want)])
		if !allZero(rest) {
			t.Errorf("case %d: more UAR bytes written than the %d expected", i, len(want))
		}
		for p := start; p != q.sq.curPost; p++ {
			if b := p & (q.sq.wqeCnt - 1); q.sq.slots[b].blocks != 0 {
				q.sq.completeSend(uint16(q.sq.slots[b].start), nil)
			}
		}
	}
}

// TestWritePlainIsEncode: the WQEs writePlain writes for the plain work
// requests (in one list, across the ring's wrap, after a LOCAL_INV that
// owes a fence) are encode's, byte for byte, with the same slots.
func TestWritePlainIsEncode(t *testing.T) {
	c, _ := newTestContext(t, testResp())
	sgl, _ := payload(t, 1, 64, 0, 32, 16)
	var list []provider.SendWR
	for i, op := range []provider.WROpcode{provider.WRRDMAWrite, provider.WRRDMAWriteWithImm, provider.WRRDMARead,
		provider.WRSend, provider.WRSendWithImm, provider.WRSendWithInv} {
		for j, flags := range []provider.SendFlags{0, provider.SendSignaled | provider.SendSolicited, provider.SendFence} {
			list = append(list, provider.SendWR{ID: uint64(i*10 + j), Opcode: op, Flags: flags, SGL: sgl[:1+(i+j)%4],
				RemoteAddr: 0x1000 + uint64(i), Rkey: 0x77, Imm: 0xabcd0000 + uint32(i), InvalidateRkey: 0x5500 + uint32(j)})
		}
	}
	for _, tc := range []struct {
		name string
		init provider.QPInit
	}{
		{"RC", provider.QPInit{Type: abi.QPTypeRC, MaxSendWr: 32, MaxSendSGE: 4}},
		{"RC, sq_sig_all", provider.QPInit{Type: abi.QPTypeRC, MaxSendWr: 32, MaxSendSGE: 4, SQSigAll: true}},
		{"UC", provider.QPInit{Type: abi.QPTypeUC, MaxSendWr: 32, MaxSendSGE: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plain, encoded := newTestQP(t, c, tc.init), newTestQP(t, c, tc.init)
			var wrs []provider.SendWR
			for _, wr := range list {
				if plain.sq.plain(&wr) {
					wrs = append(wrs, wr)
				}
			}
			if len(wrs) < 15 || len(wrs) > int(plain.sq.maxPost)-1 {
				t.Fatalf("%d plain work requests of %d, room for %d", len(wrs), len(list), plain.sq.maxPost-1)
			}
			// Both queues: the next WQE a few blocks before the ring's
			// end, a LOCAL_INV's fence owed.
			for _, q := range []*QP{plain, encoded} {
				for q.sq.curPost < q.sq.wqeCnt-8 {
					if err := q.PostSend([]provider.SendWR{list[0]}); err != nil {
						t.Fatal(err)
					}
					if _, _, _, ok := q.sq.completeSend(uint16(q.sq.curPost-1), nil); !ok {
						t.Fatal("completeSend")
					}
				}
				if tc.init.Type == abi.QPTypeRC {
					if err := q.PostSend([]provider.SendWR{{Opcode: provider.WRLocalInv, InvalidateRkey: 9}}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := plain.PostSend(wrs); err != nil {
				t.Fatal(err)
			}
			sq := &encoded.sq
			for i := range wrs {
				sq.encode(&wrs[i], uint32(i))
			}
			sq.head += uint32(len(wrs))
			sq.posted = sq.curPost
			if diff := cmp.Diff(encoded.sqState(), plain.sqState()); diff != "" {
				t.Errorf("queue state (-encode +writePlain):\n%s", diff)
			}
			if diff := cmp.Diff(encoded.sqOutstanding(t), plain.sqOutstanding(t)); diff != "" {
				t.Errorf("WQEs (-encode +writePlain):\n%s", diff)
			}
			if diff := cmp.Diff(encoded.sq.slots, plain.sq.slots, cmp.AllowUnexported(sqSlot{})); diff != "" {
				t.Errorf("slots (-encode +writePlain):\n%s", diff)
			}
		})
	}
}

// TestWriteQuickIsEncode: what writeQuick writes (inline SENDs and RDMA
// WRITEs on RC and UC, SENDs on UD) is encode's WQE, slot and queue state,
// byte for byte: inline data of 0 to maxInline bytes in one to four SGEs,
// across the ring's wrap, after a LOCAL_INV's owed fence, with
// sq_sig_all. What it must leave to check and encode it refuses, writing
// nothing.
func TestWriteQuickIsEncode(t *testing.T) {
	c, _ := newTestContext(t, testResp())
	ah := testAH(t, c)
	sgl, _ := payload(t, 1, 1, 15, 16, 17, 40, 64, 0, 100, 32, 33)
	for _, tc := range []struct {
		name string
		init provider.QPInit
		ops  []provider.WROpcode
	}{
		{"RC", provider.QPInit{Type: abi.QPTypeRC, MaxSendWr: 32, MaxSendSGE: 4, MaxInlineData: 128},
			[]provider.WROpcode{provider.WRSend, provider.WRSendWithImm, provider.WRSendWithInv, provider.WRRDMAWrite, provider.WRRDMAWriteWithImm}},
		{"RC, sq_sig_all", provider.QPInit{Type: abi.QPTypeRC, MaxSendWr: 32, MaxSendSGE: 4, MaxInlineData: 128, SQSigAll: true},
			[]provider.WROpcode{provider.WRSend, provider.WRRDMAWrite}},
		{"UC", provider.QPInit{Type: abi.QPTypeUC, MaxSendWr: 32, MaxSendSGE: 4, MaxInlineData: 128},
			[]provider.WROpcode{provider.WRSend, provider.WRSendWithImm, provider.WRRDMAWrite, provider.WRRDMAWriteWithImm}},
		{"UD", provider.QPInit{Type: abi.QPTypeUD, MaxSendWr: 32, MaxSendSGE: 4, MaxInlineData: 128},
			[]provider.WROpcode{provider.WRSend, provider.WRSendWithImm}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ud := tc.init.Type == abi.QPTypeUD
			var wrs []provider.SendWR
			for i := 0; len(wrs) < 24; i++ {
				op := tc.ops[i%len(tc.ops)]
				first, n := i%len(sgl), 1+i%4
				if first+n > len(sgl) {
					first = len(sgl) - n
				}
				if i < 6 {
					// One SGE of 64, 100, 17, 16, 33 and 32 bytes first
					// (the copy's cases): from the ring's last blocks
					// their data reaches its end.
					first, n = []int{5, 7, 3, 2, 9, 8}[i], 1
				}
				wr := provider.SendWR{ID: uint64(100 + i), Opcode: op, Flags: []provider.SendFlags{provider.SendInline,
					provider.SendInline | provider.SendSignaled | provider.SendSolicited, provider.SendInline | provider.SendFence}[i%3],
					SGL: sgl[first : first+n], RemoteAddr: 0x1000 + uint64(i), Rkey: 0x77, Imm: 0xabcd0000 + uint32(i),
					InvalidateRkey: 0x5500 + uint32(i)}
				if ud {
					wr.AH, wr.RemoteQPN, wr.RemoteQkey = &provider.AHRef{AH: ah}, 0x100+uint32(i), 0x11111111
					if i%2 == 1 {
						wr.Flags &^= provider.SendInline
					}
				}
				total := 0
				for _, s := range wr.SGL {
					total += int(s.Length)
				}
				if wr.Flags&provider.SendInline != 0 && total > 128 {
					continue
				}
				wrs = append(wrs, wr)
			}
			// The list is written from each of the last four blocks of
			// the ring (a WQE at the last one wraps right after its
			// control or datagram segment), on both queues, with a
			// LOCAL_INV's fence owed where the QP type has it.
			pad := provider.SendWR{Opcode: provider.WRSend, AH: wrs[0].AH}
			for back := uint32(1); back <= 4; back++ {
				quick, encoded := newTestQP(t, c, tc.init), newTestQP(t, c, tc.init)
				for _, q := range []*QP{quick, encoded} {
					target := q.sq.wqeCnt - back
					var inv []provider.SendWR
					if tc.init.Type == abi.QPTypeRC {
						inv = []provider.SendWR{{Opcode: provider.WRLocalInv, InvalidateRkey: 9}}
						target -= 2 // a LOCAL_INV takes two blocks
					}
					for q.sq.curPost < q.sq.wqeCnt || q.sq.curPost%q.sq.wqeCnt != target {
						start := q.sq.curPost
						if err := q.PostSend([]provider.SendWR{pad}); err != nil {
							t.Fatal(err)
						}
						if _, _, _, ok := q.sq.completeSend(uint16(start), nil); !ok {
							t.Fatal("completeSend")
						}
					}
					if inv != nil {
						if err := q.PostSend(inv); err != nil {
							t.Fatal(err)
						}
					}
				}
				for i := range wrs {
					if _, _, _, ok := quick.sq.writeQuick(&wrs[i], uint32(i)); !ok {
						t.Fatalf("writeQuick refused work request %d: %+v", i, wrs[i])
					}
					encoded.sq.encode(&wrs[i], uint32(i))
				}
				for _, q := range []*QP{quick, encoded} {
					q.sq.head += uint32(len(wrs))
					q.sq.posted = q.sq.curPost
				}
				if diff := cmp.Diff(encoded.sqState(), quick.sqState()); diff != "" {
					t.Errorf("%d blocks before the end: queue state (-encode +writeQuick):\n%s", back, diff)
				}
				if diff := cmp.Diff(encoded.sqOutstanding(t), quick.sqOutstanding(t)); diff != "" {
					t.Errorf("%d blocks before the end: WQEs (-encode +writeQuick):\n%s", back, diff)
				}
				if diff := cmp.Diff(encoded.sq.slots, quick.sq.slots, cmp.AllowUnexported(sqSlot{})); diff != "" {
					t.Errorf("%d blocks before the end: slots (-encode +writeQuick):\n%s", back, diff)
				}
			}
		})
	}

	t.Run("refused", func(t *testing.T) {
		rc := newTestQP(t, c, provider.QPInit{Type: abi.QPTypeRC, MaxSendWr: 32, MaxSendSGE: 2, MaxInlineData: 64})
		ud := newTestQP(t, c, provider.QPInit{Type: abi.QPTypeUD, MaxSendWr: 32, MaxSendSGE: 2, MaxInlineData: 64})
		gone := testAH(t, c)
		gone.destroyed.Store(true)
		other, _ := newTestContext(t, testResp())
		foreign := testAH(t, other)
		big := provider.SGE{Addr: sgl[0].Addr, Length: uint32(rc.sq.maxInline) + 1, Lkey: 1}
		for _, tr := range []struct {
			name string
			qp   *QP
			wr   provider.SendWR
		}{
			{"RC plain send", rc, provider.SendWR{Opcode: provider.WRSend, SGL: sgl[:1]}},
			{"RC inline RDMA READ", rc, provider.SendWR{Opcode: provider.WRRDMARead, Flags: provider.SendInline, SGL: sgl[:1]}},
			{"RC inline atomic", rc, provider.SendWR{Opcode: provider.WRAtomicFetchAndAdd, Flags: provider.SendInline, SGL: sgl[:1]}},
			{"RC inline over maxInline", rc, provider.SendWR{Opcode: provider.WRSend, Flags: provider.SendInline, SGL: []provider.SGE{big}}},
			{"RC too many SGEs", rc, provider.SendWR{Opcode: provider.WRSend, Flags: provider.SendInline, SGL: sgl[:3]}},
			{"RC opcode beyond 31", rc, provider.SendWR{Opcode: 40, Flags: provider.SendInline, SGL: sgl[:1]}},
			{"UD no AH", ud, provider.SendWR{Opcode: provider.WRSend, SGL: sgl[:1]}},
			{"UD destroyed AH", ud, provider.SendWR{Opcode: provider.WRSend, SGL: sgl[:1], AH: &provider.AHRef{AH: gone}}},
			{"UD AH of another context", ud, provider.SendWR{Opcode: provider.WRSend, SGL: sgl[:1], AH: &provider.AHRef{AH: foreign}}},
			{"UD RDMA WRITE", ud, provider.SendWR{Opcode: provider.WRRDMAWrite, SGL: sgl[:1], AH: &provider.AHRef{AH: ah}}},
			{"UD inline over maxInline", ud, provider.SendWR{Opcode: provider.WRSend, Flags: provider.SendInline, SGL: []provider.SGE{big}, AH: &provider.AHRef{AH: ah}}},
		} {
			before := tr.qp.sqState()
			if _, _, _, ok := tr.qp.sq.writeQuick(&tr.wr, 0); ok {
				t.Errorf("%s: writeQuick took it", tr.name)
			}
			if diff := cmp.Diff(before, tr.qp.sqState()); diff != "" {
				t.Errorf("%s: queue state changed:\n%s", tr.name, diff)
			}
		}
	})
}
