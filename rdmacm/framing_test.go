package rdmacm

import (
	"context"
	"encoding/binary"
	"net/netip"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// pipeChannel is an EventChannel whose commands go into a pipe, so the
// bytes each method writes can be checked against the kernel's layouts
// (offsets from <rdma/rdma_user_cm.h>, checked against BTF in
// internal/abi).
func pipeChannel(t *testing.T) (*EventChannel, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := w.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return &EventChannel{f: w, rc: rc, ids: map[uint64]*ID{}}, r
}

// frame is one command read back from the pipe.
type frame struct {
	cmd     uint32
	in, out uint16
	body    []byte
}

func readFrame(t *testing.T, r *os.File) frame {
	t.Helper()
	hdr := make([]byte, 8)
	if _, err := r.Read(hdr); err != nil {
		t.Fatal(err)
	}
	f := frame{cmd: binary.LittleEndian.Uint32(hdr), in: binary.LittleEndian.Uint16(hdr[4:]), out: binary.LittleEndian.Uint16(hdr[6:])}
	f.body = make([]byte, f.in)
	if n, err := r.Read(f.body); err != nil || n != int(f.in) {
		t.Fatalf("body: %d of %d bytes, %v", n, f.in, err)
	}
	return f
}

func TestCommandFraming(t *testing.T) {
	ch, r := pipeChannel(t)
	le, be := binary.LittleEndian, binary.BigEndian
	id := &ID{ch: ch, handle: 5, uid: 9, ps: PortSpaceTCP, qpType: 2, notify: make(chan struct{})}

	if err := id.Bind(netip.MustParseAddrPort("10.99.0.1:7471")); err != nil {
		t.Fatal(err)
	}
	f := readFrame(t, r)
	if d := cmp.Diff(frame{cmd: 20, in: 136, out: 0}, frame{cmd: f.cmd, in: f.in, out: f.out}, cmp.AllowUnexported(frame{})); d != "" {
		t.Errorf("BIND header (-want +got):\n%s", d)
	}
	// id@0, addr_size@4 = 16, sockaddr_in at 8: family 2 (host order),
	// port big endian, address.
	if le.Uint32(f.body) != 5 || le.Uint16(f.body[4:]) != 16 || le.Uint16(f.body[8:]) != 2 || be.Uint16(f.body[10:]) != 7471 ||
		netip.AddrFrom4([4]byte(f.body[12:16])).String() != "10.99.0.1" {
		t.Errorf("BIND body % x", f.body[:24])
	}

	if err := id.Bind(netip.MustParseAddrPort("[2001:db8::7]:18515")); err != nil {
		t.Fatal(err)
	}
	f = readFrame(t, r)
	if le.Uint16(f.body[4:]) != 28 || le.Uint16(f.body[8:]) != 10 || be.Uint16(f.body[10:]) != 18515 ||
		netip.AddrFrom16([16]byte(f.body[16:32])).String() != "2001:db8::7" {
		t.Errorf("BIND IPv6 body % x", f.body[:40])
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	id.ResolveAddr(ctx, netip.MustParseAddrPort("10.99.0.2:0"), netip.MustParseAddrPort("10.99.0.1:7471"))
	f = readFrame(t, r)
	// id@0, timeout_ms@4, src_size@8, dst_size@10, src@16, dst@144.
	if f.cmd != 21 || f.in != 272 || le.Uint32(f.body) != 5 || le.Uint32(f.body[4:]) == 0 || le.Uint16(f.body[8:]) != 16 ||
		le.Uint16(f.body[10:]) != 16 || le.Uint16(f.body[16:]) != 2 || be.Uint16(f.body[144+2:]) != 7471 {
		t.Errorf("RESOLVE_ADDR %d/%d body % x", f.cmd, f.in, f.body[:24])
	}

	p := &ConnParam{PrivateData: []byte("pd"), ResponderResources: 1, InitiatorDepth: 2, FlowControl: 1, RetryCount: 7,
		RNRRetryCount: 6, QPNum: 0x123456}
	id.Connect(ctx, p)
	f = readFrame(t, r)
	if f.cmd == 19 { // QUERY: the ID looks up its device for the resource limits
		f = readFrame(t, r)
	}
	// conn_param@0 (qp_num@0, private_data@8, len@264, srq@265,
	// responder_resources@266, initiator_depth@267, flow_control@268,
	// retry_count@269, rnr_retry_count@270, valid@271), id@272.
	want := []byte{1, 2, 1, 7, 6, 1}
	if f.cmd != 6 || f.in != 288 || le.Uint32(f.body) != 0x123456 || string(f.body[8:10]) != "pd" || f.body[264] != 2 ||
		!cmp.Equal(f.body[266:272], want) || le.Uint32(f.body[272:]) != 5 {
		t.Errorf("CONNECT %d/%d: qp %#x data %q len %d params %v id %d", f.cmd, f.in, le.Uint32(f.body), f.body[8:10], f.body[264],
			f.body[266:272], le.Uint32(f.body[272:]))
	}

	child := &ID{ch: ch, handle: 6, uid: 11, ps: PortSpaceUDP, qpType: 4, listener: id, notify: make(chan struct{})}
	if err := child.Accept(&ConnParam{QPNum: 77}); err != nil {
		t.Fatal(err)
	}
	f = readFrame(t, r)
	// uid@0, conn_param@8 (qp_num@8, qkey@12, valid@279), id@280.
	if f.cmd != 8 || f.in != 296 || le.Uint64(f.body) != 11 || le.Uint32(f.body[8:]) != 77 || le.Uint32(f.body[12:]) != 0x01234567 ||
		f.body[279] != 1 || le.Uint32(f.body[280:]) != 6 {
		t.Errorf("ACCEPT %d/%d body uid %d qp %d qkey %#x valid %d id %d", f.cmd, f.in, le.Uint64(f.body), le.Uint32(f.body[8:]),
			le.Uint32(f.body[12:]), f.body[279], le.Uint32(f.body[280:]))
	}

	if err := child.Reject([]byte("no")); err != nil {
		t.Fatal(err)
	}
	f = readFrame(t, r)
	// id@0, private_data_len@4, reason@5 (28), private_data@8.
	if f.cmd != 9 || f.in != 264 || le.Uint32(f.body) != 6 || f.body[4] != 2 || f.body[5] != 28 || string(f.body[8:10]) != "no" {
		t.Errorf("REJECT %d/%d body % x", f.cmd, f.in, f.body[:12])
	}

	if err := id.SetTOS(32); err != nil {
		t.Fatal(err)
	}
	f = readFrame(t, r)
	// optval@0 (a pointer), id@8, level@12, optname@16, optlen@20.
	if f.cmd != 14 || f.in != 24 || le.Uint64(f.body) == 0 || le.Uint32(f.body[8:]) != 5 || le.Uint32(f.body[12:]) != 0 ||
		le.Uint32(f.body[16:]) != 0 || le.Uint32(f.body[20:]) != 1 {
		t.Errorf("SET_OPTION %d/%d body % x", f.cmd, f.in, f.body)
	}
	if err := id.SetReuseAddr(true); err != nil {
		t.Fatal(err)
	}
	if f = readFrame(t, r); le.Uint32(f.body[16:]) != 1 || le.Uint32(f.body[20:]) != 4 {
		t.Errorf("SET_OPTION REUSEADDR body % x", f.body)
	}

	if err := id.Listen(3); err != nil {
		t.Fatal(err)
	}
	if f = readFrame(t, r); f.cmd != 7 || f.in != 8 || le.Uint32(f.body) != 5 || le.Uint32(f.body[4:]) != 3 {
		t.Errorf("LISTEN %d/%d body % x", f.cmd, f.in, f.body)
	}

	id.InitQPAttr(3)
	// response@0, id@8, qp_state@12; out = sizeof(ib_uverbs_qp_attr).
	if f = readFrame(t, r); f.cmd != 11 || f.in != 16 || f.out != 144 || le.Uint64(f.body) == 0 || le.Uint32(f.body[8:]) != 5 ||
		le.Uint32(f.body[12:]) != 3 {
		t.Errorf("INIT_QP_ATTR %d/%d/%d body % x", f.cmd, f.in, f.out, f.body)
	}
}
