package rsocket

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A connection data block as librdmacm 44 sends it on x86 (rsocket.md §2.7).
func librdmacmConnData() []byte {
	b := make([]byte, 56) // zero-padded, as the CM delivers a request's
	d := connData{Version: 1, Flags: flagIOMap, Credits: 384,
		TargetSGL:  sge{0x7f0000001000, 0x1234, 2},
		DataBuffer: sge{0x7f0000100000, 0x5678, 65536}}
	d.marshal(b)
	return b
}

func TestConnDataRoundTrip(t *testing.T) {
	b := librdmacmConnData()
	want := []byte{1, 2, 0x01, 0x80, 0, 0, 0, 0}
	if diff := cmp.Diff(want, b[:8]); diff != "" {
		t.Errorf("header bytes (-want +got):\n%s", diff)
	}
	d, err := parseConnData(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(connData{Version: 1, Flags: 2, Credits: 384, TargetSGL: sge{0x7f0000001000, 0x1234, 2},
		DataBuffer: sge{0x7f0000100000, 0x5678, 65536}}, d); diff != "" {
		t.Errorf("parsed (-want +got):\n%s", diff)
	}
}

func TestConnDataBad(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func([]byte) []byte
	}{
		{"short", func(b []byte) []byte { return b[:39] }},
		{"version 0", func(b []byte) []byte { b[0] = 0; return b }},
		{"version 2", func(b []byte) []byte { b[0] = 2; return b }},
		{"no credits", func(b []byte) []byte { b[2], b[3] = 0, 0; return b }},
		{"one SGL entry", func(b []byte) []byte { binary.BigEndian.PutUint32(b[20:], 1); return b }},
		{"SGL wraps", func(b []byte) []byte { binary.BigEndian.PutUint64(b[8:], ^uint64(0)-8); return b }},
		{"empty buffer", func(b []byte) []byte { binary.BigEndian.PutUint32(b[36:], 0); return b }},
		{"buffer wraps", func(b []byte) []byte { binary.BigEndian.PutUint64(b[24:], ^uint64(0)-8); return b }},
		{"iomap slots wrap", func(b []byte) []byte {
			binary.BigEndian.PutUint64(b[8:], ^uint64(0)-1000)
			b[7] = 0xFF // 32512 slots of 24 bytes after the SGL
			return b
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := parseConnData(tc.edit(librdmacmConnData())); !errors.Is(err, errProtocol) {
				t.Errorf("parseConnData = %v, want a protocol error", err)
			}
		})
	}
}

func TestReceiverBad(t *testing.T) {
	for _, tc := range []struct {
		name string
		imms []uint32
	}{
		{"zero-length data", []uint32{mkImm(opData, 0)}},
		{"data beyond the advertised half", []uint32{mkImm(opData, 2049)}},
		{"data beyond after filling", []uint32{mkImm(opData, 2048), mkImm(opData, 1)}},
		{"reserved op 1", []uint32{mkImm(opDataMore, 5)}},
		{"reserved op 3", []uint32{mkImm(opDRAMore, 5)}},
		{"reserved op 5", []uint32{mkImm(opReserved, 5)}},
		{"data after shutdown", []uint32{mkImm(opCtrl, ctrlShutdwn), mkImm(opData, 1)}},
		{"iomap update of a slot not offered", []uint32{mkImm(opIOMapSGL, 1)}},
		{"iomap update of a slot far beyond", []uint32{mkImm(opIOMapSGL, 1<<20)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReceiver(4096, 1)
			var err error
			for _, imm := range tc.imms {
				if _, err = r.onMessage(imm); err != nil {
					break
				}
			}
			if !errors.Is(err, errProtocol) {
				t.Errorf("onMessage = %v, want a protocol error", err)
			}
		})
	}
}

func TestCreditsBad(t *testing.T) {
	if err := checkCredits(10, 20, 5); !errors.Is(err, errProtocol) {
		t.Errorf("backwards: %v", err)
	}
	if err := checkCredits(10, 5, 12); !errors.Is(err, errProtocol) {
		t.Errorf("below sent: %v", err)
	}
	if err := checkCredits(3, 0xFFF0, 0xFFF0); err != nil {
		t.Errorf("wrapping limit: %v", err)
	}
}

// TestReceiverRing fills and drains the ring across its wraparound.
func TestReceiverRing(t *testing.T) {
	r := newReceiver(4096, 0)
	for i := 0; i < 10; i++ {
		if _, _, ok := r.advertise(); !ok {
			t.Fatalf("round %d: nothing to advertise", i)
		}
		for _, n := range []uint32{1000, 1000, 48} {
			if _, err := r.onMessage(mkImm(opData, n)); err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
		}
		r.consume(r.unread)
	}
	if r.readOff != r.next {
		t.Errorf("read offset %d, write offset %d", r.readOff, r.next)
	}
}

// FuzzReceiver feeds a sequence of immediates and reads to the receive
// state: it must never panic, accept data beyond what was advertised, or
// let the peer write past unread bytes.
func FuzzReceiver(f *testing.F) {
	// Seeds: immediates as librdmacm sends them (data of 2048, 4096, an
	// SGL update with limit 384, shutdown, disconnect, keepalive).
	f.Add([]byte{0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x01, 0x80, 0xE0, 0x00, 0x00, 0x02})
	f.Add([]byte{0xE0, 0x00, 0x00, 0x00, 0xE0, 0x00, 0x00, 0x01})
	// iomap updates of slots 0, 1 and 2 (2 offered)
	f.Add([]byte{0xC0, 0x00, 0x00, 0x00, 0xC0, 0x00, 0x00, 0x01, 0xC0, 0x00, 0x00, 0x02})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := newReceiver(131072, 2)
		for len(b) >= 4 {
			imm := binary.BigEndian.Uint32(b)
			b = b[4:]
			if imm == 0xFFFFFFFF { // read everything and advertise
				r.consume(r.unread)
				r.advertise()
				continue
			}
			before := r
			if _, err := r.onMessage(imm); err != nil {
				if r != before {
					t.Fatalf("a rejected message changed the state")
				}
				continue
			}
			if r.unread+r.room()+r.free > r.size {
				t.Fatalf("unread %d + room %d + free %d > ring %d", r.unread, r.room(), r.free, r.size)
			}
		}
	})
}

// FuzzConnData parses connection data blocks: never a panic, and what it
// accepts encodes back to the same 40 bytes.
func FuzzConnData(f *testing.F) {
	f.Add(librdmacmConnData())
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := parseConnData(b)
		if err != nil {
			return
		}
		out := make([]byte, connDataBytes)
		d.marshal(out)
		// bytes 4..6 are reserved: not kept
		in := append([]byte(nil), b[:connDataBytes]...)
		in[4], in[5], in[6] = 0, 0, 0
		if diff := cmp.Diff(in, out); diff != "" {
			t.Fatalf("round trip (-in +out):\n%s", diff)
		}
	})
}

// TestIOMapScale: the slot counts rsockets' one byte carries, both ways,
// and the ones it cannot.
func TestIOMapScale(t *testing.T) {
	for n, want := range map[int]uint8{0: 0, 1: 1, 128: 128, 256: 0x81, 512: 0x82, 32512: 0xFF} {
		b, ok := scaleOf(n)
		if !ok || b != want || scaleValue(b) != n {
			t.Errorf("scaleOf(%d) = %#x, %v; want %#x (decoded %d)", n, b, ok, want, scaleValue(b))
		}
	}
	for _, n := range []int{-1, 129, 255, 257, 32513, 32768} {
		if b, ok := scaleOf(n); ok {
			t.Errorf("scaleOf(%d) = %#x, want refused", n, b)
		}
	}
	// Every byte decodes to what encodes back to it (0x80 is 128 either way).
	for b := 0; b < 256; b++ {
		if e, ok := scaleOf(scaleValue(uint8(b))); !ok || (e != uint8(b) && b != 0x80) {
			t.Errorf("byte %#x decodes to %d, which encodes to %#x, %v", b, scaleValue(uint8(b)), e, ok)
		}
	}
}

// TestIOMapEntry: an entry as librdmacm's rs_send_iomaps lays it out
// (struct rs_iomap: offset, then addr, key, length), in both orders.
func TestIOMapEntry(t *testing.T) {
	e := ioMapEntry{Offset: 0x1122334455667788, Addr: 0x7f0000001000, Key: 0xabcdef01, Length: 4096}
	b := make([]byte, iomapBytes)
	putIOMapEntry(b, binary.LittleEndian, e)
	want := []byte{0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x00, 0x10, 0x00, 0x00, 0x00, 0x7f, 0x00, 0x00,
		0x01, 0xef, 0xcd, 0xab, 0x00, 0x10, 0x00, 0x00}
	if diff := cmp.Diff(want, b); diff != "" {
		t.Errorf("little-endian entry (-want +got):\n%s", diff)
	}
	putIOMapEntry(b, binary.NativeEndian, e)
	if got := parseIOMapEntry(b); got != e {
		t.Errorf("parse = %+v, want %+v", got, e)
	}
	for off, want := range map[uint64]bool{e.Offset - 1: false, e.Offset: true, e.Offset + 4095: true, e.Offset + 4096: false} {
		if got := e.covers(off); got != want {
			t.Errorf("covers(%#x) = %v, want %v", off, got, want)
		}
	}
	if (ioMapEntry{Offset: 0, Length: 0}).covers(0) {
		t.Error("an empty slot covers offset 0")
	}
}

// TestIOMapCredits: an iomap update takes a credit, as a DATA message
// does, and so is counted for the credits given back.
func TestIOMapCredits(t *testing.T) {
	r := newReceiver(4096, 1)
	for i := 0; i < 3; i++ {
		if ev, err := r.onMessage(mkImm(opIOMapSGL, 0)); err != nil || ev != rxNone {
			t.Fatalf("update %d: %v, %v", i, ev, err)
		}
	}
	if r.seqNo != 3 || r.unread != 0 {
		t.Errorf("after 3 updates: seqNo %d, unread %d; want 3, 0", r.seqNo, r.unread)
	}
}
