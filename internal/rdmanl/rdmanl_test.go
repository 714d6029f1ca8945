package rdmanl

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// exchange is one line of a recorded transcript: a request we sent or a
// datagram the kernel sent back.
type exchange struct {
	sent bool
	data []byte
}

// loadTranscript reads a transcript written by sysfs/internal/record
// -netlink: "> hex" for requests, "< hex" for datagrams, "#" comments.
func loadTranscript(tb testing.TB, name string) []exchange {
	tb.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var out []exchange
	s := bufio.NewScanner(f)
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		line := s.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		dir, h, ok := strings.Cut(line, " ")
		b, err := hex.DecodeString(h)
		if !ok || err != nil || (dir != ">" && dir != "<") {
			tb.Fatalf("%s: bad line %q", name, line)
		}
		out = append(out, exchange{sent: dir == ">", data: b})
	}
	if err := s.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// replaySocket plays a transcript back: every request must be byte for byte
// the recorded one, and each receive returns the next recorded datagram.
type replaySocket struct {
	tb     testing.TB
	script []exchange
}

func (r *replaySocket) send(_ context.Context, b []byte) error {
	if len(r.script) == 0 || !r.script[0].sent {
		r.tb.Errorf("unexpected request %x", b)
		return io.ErrUnexpectedEOF
	}
	if want := r.script[0].data; !bytes.Equal(b, want) {
		r.tb.Errorf("request differs from the recording:\n got %x\nwant %x", b, want)
	}
	r.script = r.script[1:]
	return nil
}

func (r *replaySocket) recv(_ context.Context, b []byte, _ bool) (int, error) {
	if len(r.script) == 0 || r.script[0].sent {
		return 0, io.EOF
	}
	n := copy(b, r.script[0].data)
	r.script = r.script[1:]
	return n, nil
}

func (r *replaySocket) close() error { return nil }

// TestReplay runs rdma-core's queries against traffic recorded from the
// test VM's kernels (two rxe devices on veth netdevs va and vb).
func TestReplay(t *testing.T) {
	for _, tc := range []struct {
		file string
		devs []Device
	}{
		{"netlink-6.1.txt", []Device{
			{Index: 0, Name: "rxe0", NodeType: 1, NodeGUID: 0x982c93fffe583567, SysImageGUID: 0x982c93fffe583567, Ports: 1, Protocol: "roce"},
			{Index: 1, Name: "rxe1", NodeType: 1, NodeGUID: 0x206514fffe83d8ee, SysImageGUID: 0x206514fffe83d8ee, Ports: 1, Protocol: "roce"},
		}},
		{"netlink-6.12.txt", []Device{
			{Index: 0, Name: "rxe0", NodeType: 1, NodeGUID: 0xc4d26cfffe04fe3a, SysImageGUID: 0xc4d26cfffe04fe3a, Ports: 1, Protocol: "roce"},
			{Index: 1, Name: "rxe1", NodeType: 1, NodeGUID: 0xc41195fffe85ae14, SysImageGUID: 0xc41195fffe85ae14, Ports: 1, Protocol: "roce"},
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			sock := &replaySocket{tb: t, script: loadTranscript(t, tc.file)}
			c := newConn(sock)
			devs, err := c.Devices()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.devs, devs); diff != "" {
				t.Errorf("Devices (-want +got):\n%s", diff)
			}
			for i, d := range devs {
				cd, err := c.CharDev(d.Index, "uverbs")
				if err != nil {
					t.Fatal(err)
				}
				want := CharDev{Name: fmt.Sprintf("uverbs%d", i), Major: 231, Minor: 192 + uint32(i), ABI: 2, DriverID: 14}
				if diff := cmp.Diff(want, cd); diff != "" {
					t.Errorf("CharDev(%d) (-want +got):\n%s", d.Index, diff)
				}
			}
			_, err = c.CharDev(1<<20, "uverbs")
			var nlErr *Error
			if !errors.As(err, &nlErr) || !errors.Is(err, unix.EINVAL) || nlErr.Op != "get chardev uverbs" {
				t.Errorf("CharDev(1<<20): err = %v, want the kernel's EINVAL", err)
			}
			sys, err := c.Sys()
			if err != nil {
				t.Fatal(err)
			}
			if want := (Sys{NetnsShared: true, CopyOnFork: true, HaveCopyOnFork: true}); sys != want {
				t.Errorf("Sys() = %+v, want %+v", sys, want)
			}
			if len(sock.script) != 0 {
				t.Errorf("%d recorded exchanges left over", len(sock.script))
			}
		})
	}
}

func TestDecodeDev(t *testing.T) {
	// huge_encode_dev(MKDEV(ma, mi)) = (mi & 0xff) | (ma << 8) | ((mi & ~0xff) << 12)
	encode := func(ma, mi uint64) uint64 { return mi&0xff | ma<<8 | (mi&^0xff)<<12 }
	for _, tc := range []struct{ major, minor uint32 }{
		{231, 192}, {231, 193}, {231, 255}, {231, 256}, {10, 58}, {0, 0}, {4095, 0xfffff}, {1, 0x12345},
	} {
		ma, mi := DecodeDev(encode(uint64(tc.major), uint64(tc.minor)))
		if ma != tc.major || mi != tc.minor {
			t.Errorf("DecodeDev(encode(%d, %d)) = %d, %d", tc.major, tc.minor, ma, mi)
		}
	}
	// And the value the 6.1 kernel sent for uverbs0.
	if ma, mi := DecodeDev(0xe7c0); ma != 231 || mi != 192 {
		t.Errorf("DecodeDev(0xe7c0) = %d:%d, want 231:192", ma, mi)
	}
}

func TestEncode(t *testing.T) {
	attrs := AppendU32Attr(nil, RDMA_NLDEV_ATTR_DEV_INDEX, 7)
	attrs = AppendStringAttr(attrs, RDMA_NLDEV_ATTR_CHARDEV_TYPE, "uverbs")
	got := AppendRequest(nil, MsgType(RDMA_NLDEV_CMD_GET_CHARDEV), NLM_F_REQUEST|NLM_F_ACK, 9, attrs)
	want, _ := hex.DecodeString("24000000" + "0f14" + "0500" + "09000000" + "00000000" +
		"0800" + "0100" + "07000000" +
		"0b00" + "4500" + "7576657262730000") // "uverbs\0" padded to 8
	if !bytes.Equal(got, want) {
		t.Errorf("request:\n got %x\nwant %x", got, want)
	}
	if MsgType(RDMA_NLDEV_CMD_GET) != 0x1401 {
		t.Errorf("MsgType(GET) = %#x, want 0x1401", MsgType(RDMA_NLDEV_CMD_GET))
	}
	// Round trip through the parsers.
	msgs, err := ParseMessages(got)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("ParseMessages: %v, %d messages", err, len(msgs))
	}
	as, err := ParseAttrs(msgs[0].Payload)
	if err != nil {
		t.Fatal(err)
	}
	wantAttrs := []Attr{{Type: 1, Data: []byte{7, 0, 0, 0}}, {Type: 69, Data: []byte("uverbs\x00")}}
	if diff := cmp.Diff(wantAttrs, as); diff != "" {
		t.Errorf("attributes (-want +got):\n%s", diff)
	}
}

func TestParseMalformed(t *testing.T) {
	for _, tc := range []struct {
		name string
		hex  string
	}{
		{"short header", "10000000011401"},
		{"length below header", "0800000001140200010000006c000000"},
		{"length past buffer", "2000000001140200010000006c000000"},
		{"attr short header", "1300000001140200010000006c000000080001"},
		{"attr length below header", "1400000001140200010000006c00000002000100"},
		{"attr length past buffer", "1800000001140200010000006c0000000900010000000000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := hex.DecodeString(tc.hex)
			msgs, err := ParseMessages(b)
			if err == nil {
				for _, m := range msgs {
					if _, err = ParseAttrs(m.Payload); err != nil {
						break
					}
				}
			}
			var fe *FormatError
			if !errors.As(err, &fe) || !errors.Is(err, ErrMalformed) {
				t.Errorf("err = %v, want a FormatError", err)
			}
		})
	}
}

func TestParseReplies(t *testing.T) {
	u32 := func(t uint16, v uint32) []byte { return AppendU32Attr(nil, t, v) }
	u8 := func(t uint16, v uint8) []byte { return AppendAttr(nil, t, []byte{v}) }
	u64 := func(t uint16, v uint64) []byte { return AppendAttr(nil, t, ne.AppendUint64(nil, v)) }
	str := func(t uint16, s string) []byte { return AppendStringAttr(nil, t, s) }
	join := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	full := [][]byte{u32(1, 3), str(2, "mlx5_0"), u8(14, 1), u64(6, 0xb8599f0300d4e6a2), u32(3, 2)}

	for _, tc := range []struct {
		name    string
		payload []byte
		want    Device
		wantErr error
	}{
		{"minimal", join(full...), Device{Index: 3, Name: "mlx5_0", NodeType: 1, NodeGUID: 0xb8599f0300d4e6a2, Ports: 2}, nil},
		{"optional", join(append(full, str(5, "16.35.2000"), u64(7, 42), str(67, "ib"))...),
			Device{Index: 3, Name: "mlx5_0", NodeType: 1, NodeGUID: 0xb8599f0300d4e6a2, SysImageGUID: 42, Ports: 2, FWVersion: "16.35.2000", Protocol: "ib"}, nil},
		{"name without NUL", join(u32(1, 3), AppendAttr(nil, 2, []byte("mlx5_0")), u8(14, 1), u64(6, 1), u32(3, 1)),
			Device{Index: 3, Name: "mlx5_0", NodeType: 1, NodeGUID: 1, Ports: 1}, nil},
		{"no index", join(full[1:]...), Device{}, ErrMalformed},
		{"no name", join(full[0], full[2], full[3], full[4]), Device{}, ErrMalformed},
		{"empty name", join(full[0], str(2, ""), full[2], full[3], full[4]), Device{}, ErrMalformed},
		{"short guid", join(full[0], full[1], full[2], u32(6, 1), full[4]), Device{}, ErrMalformed},
		{"short index", join(AppendAttr(nil, 1, []byte{1, 0}), full[1], full[2], full[3], full[4]), Device{}, ErrMalformed},
		{"empty node type", join(full[0], full[1], AppendAttr(nil, 14, nil), full[3], full[4]), Device{}, ErrMalformed},
		{"short sys image guid", join(append(full, u32(7, 1))...), Device{}, ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := ParseDevice(tc.payload)
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, d); diff != "" {
				t.Errorf("ParseDevice (-want +got):\n%s", diff)
			}
		})
	}

	cdFull := [][]byte{u64(72, 0xe7c1), u64(71, 2|7<<32), str(70, "uverbs1"), u32(73, 14)}
	for _, tc := range []struct {
		name    string
		payload []byte
		want    CharDev
		wantErr error
	}{
		{"full", join(cdFull...), CharDev{Name: "uverbs1", Major: 231, Minor: 193, ABI: 2, DriverID: 14}, nil},
		{"no driver id", join(cdFull[:3]...), CharDev{Name: "uverbs1", Major: 231, Minor: 193, ABI: 2}, nil},
		{"no dev", join(cdFull[1:]...), CharDev{}, ErrMalformed},
		{"no abi", join(cdFull[0], cdFull[2]), CharDev{}, ErrMalformed},
		{"no name", join(cdFull[0], cdFull[1]), CharDev{}, ErrMalformed},
		{"short driver id", join(append(cdFull[:3:3], u8(73, 1))...), CharDev{}, ErrMalformed},
	} {
		t.Run("chardev "+tc.name, func(t *testing.T) {
			cd, err := ParseCharDev(tc.payload)
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, cd); diff != "" {
				t.Errorf("ParseCharDev (-want +got):\n%s", diff)
			}
		})
	}

	for _, tc := range []struct {
		name    string
		payload []byte
		want    Sys
		wantErr error
	}{
		{"old kernel", u8(66, 1), Sys{NetnsShared: true}, nil},
		{"exclusive, copy on fork", join(u8(66, 0), u8(93, 1)), Sys{CopyOnFork: true, HaveCopyOnFork: true}, nil},
		{"empty", nil, Sys{}, nil},
		{"short", AppendAttr(nil, 93, nil), Sys{}, ErrMalformed},
	} {
		t.Run("sys "+tc.name, func(t *testing.T) {
			s, err := ParseSys(tc.payload)
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) || s != tc.want {
				t.Errorf("ParseSys = %+v, %v; want %+v, %v", s, err, tc.want, tc.wantErr)
			}
		})
	}
}

// TestConnErrors drives the request loop with hand-made replies.
func TestConnErrors(t *testing.T) {
	msg := func(typ, flags uint16, seq uint32, payload []byte) []byte {
		b := AppendRequest(nil, typ, flags, seq, payload)
		return b
	}
	errPayload := func(code int32, ext string) []byte {
		b := ne.AppendUint32(nil, uint32(code))
		b = append(b, make([]byte, nlmsgHdrLen)...) // the echoed request header
		ne.PutUint32(b[4:], nlmsgHdrLen)
		if ext != "" {
			b = AppendStringAttr(b, NLMSGERR_ATTR_MSG, ext)
		}
		return b
	}
	done := func(seq uint32, code int32) []byte {
		return msg(NLMSG_DONE, NLM_F_MULTI, seq, ne.AppendUint32(nil, uint32(code)))
	}
	dev := msg(MsgType(RDMA_NLDEV_CMD_GET), NLM_F_MULTI, 1, bytes.Join([][]byte{
		AppendU32Attr(nil, 1, 0), AppendStringAttr(nil, 2, "rxe0"), AppendAttr(nil, 14, []byte{1}),
		AppendAttr(nil, 6, make([]byte, 8)), AppendU32Attr(nil, 3, 1)}, nil))

	for _, tc := range []struct {
		name    string
		replies [][]byte
		wantN   int
		wantErr error
	}{
		{"one device", [][]byte{dev, done(1, 0)}, 1, nil},
		{"one datagram", [][]byte{append(append([]byte{}, dev...), done(1, 0)...)}, 1, nil},
		{"stale reply skipped", [][]byte{msg(MsgType(RDMA_NLDEV_CMD_GET), NLM_F_MULTI, 99, nil), dev, done(1, 0)}, 1, nil},
		{"interrupted", [][]byte{dev, msg(NLMSG_DONE, NLM_F_MULTI|NLM_F_DUMP_INTR, 1, ne.AppendUint32(nil, 0))}, 1, ErrDumpInterrupted},
		{"done with error", [][]byte{done(1, -int32(unix.EPERM))}, 0, unix.EPERM},
		{"error", [][]byte{msg(NLMSG_ERROR, 0, 1, errPayload(-int32(unix.EOPNOTSUPP), ""))}, 0, unix.EOPNOTSUPP},
		{"error with message", [][]byte{msg(NLMSG_ERROR, NLM_F_CAPPED|NLM_F_ACK_TLVS, 1, errPayload(-int32(unix.EINVAL), "bad index"))}, 0, unix.EINVAL},
		{"bad device", [][]byte{msg(MsgType(RDMA_NLDEV_CMD_GET), NLM_F_MULTI, 1, nil), done(1, 0)}, 0, ErrMalformed},
		{"truncated datagram", [][]byte{dev[:20]}, 0, ErrMalformed},
		{"overrun", [][]byte{msg(NLMSG_OVERRUN, 0, 1, nil)}, 0, ErrMalformed},
		{"no end", [][]byte{dev}, 1, io.EOF},
		{"positive error code", [][]byte{msg(NLMSG_ERROR, 0, 1, ne.AppendUint32(nil, 5))}, 0, ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var script []exchange
			script = append(script, exchange{sent: true, data: AppendRequest(nil, MsgType(RDMA_NLDEV_CMD_GET), NLM_F_REQUEST|NLM_F_DUMP, 1, nil)})
			for _, r := range tc.replies {
				script = append(script, exchange{data: r})
			}
			c := newConn(&replaySocket{tb: t, script: script})
			devs, err := c.Devices()
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.name != "no end" && len(devs) != tc.wantN {
				t.Errorf("%d devices, want %d", len(devs), tc.wantN)
			}
			if tc.name == "error with message" && !strings.Contains(err.Error(), "bad index") {
				t.Errorf("error %q lacks the kernel's message", err)
			}
		})
	}
}

// TestDrainAfterBadDatagram: a dump that failed on a bad datagram leaves
// the rest of its answer to be read before the next request is sent, so
// that the kernel, whose dump is still open, does not refuse the next one
// (EBUSY).
func TestDrainAfterBadDatagram(t *testing.T) {
	msg := func(typ, flags uint16, seq uint32, payload []byte) []byte {
		return AppendRequest(nil, typ, flags, seq, payload)
	}
	dev := func(seq uint32) []byte {
		return msg(MsgType(RDMA_NLDEV_CMD_GET), NLM_F_MULTI, seq, bytes.Join([][]byte{
			AppendU32Attr(nil, 1, 0), AppendStringAttr(nil, 2, "rxe0"), AppendAttr(nil, 14, []byte{1}),
			AppendAttr(nil, 6, make([]byte, 8)), AppendU32Attr(nil, 3, 1)}, nil))
	}
	done := func(seq uint32) []byte { return msg(NLMSG_DONE, NLM_F_MULTI, seq, make([]byte, 4)) }
	req := func(seq uint32) exchange {
		return exchange{sent: true, data: AppendRequest(nil, MsgType(RDMA_NLDEV_CMD_GET), NLM_F_REQUEST|NLM_F_DUMP, seq, nil)}
	}
	c := newConn(&replaySocket{tb: t, script: []exchange{
		req(1), {data: dev(1)[:20]}, {data: dev(1)}, {data: done(1)},
		req(2), {data: dev(2)}, {data: done(2)},
	}})
	if _, err := c.Devices(); !errors.Is(err, ErrMalformed) {
		t.Fatalf("first dump: %v, want ErrMalformed", err)
	}
	devs, err := c.Devices()
	if err != nil || len(devs) != 1 {
		t.Fatalf("second dump: %d devices, %v; want 1, nil", len(devs), err)
	}
}

func TestDriverName(t *testing.T) {
	for id, want := range map[uint32]string{14: "rxe", 1: "mlx5", 9: "irdma", 18: "siw", 0: "", 999: ""} {
		if got := DriverName(id); got != want {
			t.Errorf("DriverName(%d) = %q, want %q", id, got, want)
		}
	}
}
