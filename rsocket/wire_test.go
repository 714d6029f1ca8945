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

// TestCredits: credit limits as a peer sends them (its messages
// received plus its credits), for windows of every size up to 65534
// (Config.RQSize's range), and limits a hostile peer may send.
func TestCredits(t *testing.T) {
	for _, tc := range []struct {
		name                      string
		limit, cur, sent, credits uint16
		ok                        bool
	}{
		{"first update, nothing received", 384, 384, 0, 384, true},
		{"first update, all received", 384 + 10, 384, 10, 384, true},
		{"wrapping limit", 3, 0xFFF0, 0xFFF0, 384, true},
		{"unchanged", 500, 500, 200, 384, true},
		{"backwards", 10, 20, 5, 384, false},
		{"below sent", 10, 5, 12, 384, false},
		{"one past sent+credits", 200 + 385, 500, 200, 384, false},
		{"exactly sent+credits", 200 + 384, 500, 200, 384, true},
		{"exactly sent+credits, wrapping", (0xFFFF + 384) & 0xFFFF, 0xFFFF, 0xFFFF, 384, true},
		// Windows of 32768 and more: int16 differences would call the
		// first update (limit = credits) backwards or below sent.
		{"RQSize 32768, first update", 32768, 32768, 0, 32768, true},
		{"RQSize 40000, first update", 40000, 40000, 0, 40000, true},
		{"RQSize 40000, first update after 100", 40100, 40000, 100, 40000, true},
		{"RQSize 40000, all sent and received", (40000 + 40000) & 0xFFFF, 40000, 40000, 40000, true},
		{"RQSize 40000, past sent+credits", 40000 + 1, 40000, 0, 40000, false},
		{"RQSize 40000, backwards by one", 40000 - 1, 40000, 0, 40000, false},
		{"RQSize 40000, backwards to sent", 0, 40000, 0, 40000, false},
		{"RQSize 65534, first update", 65534, 65534, 0, 65534, true},
		{"RQSize 65534, all sent, full new window", (65534 + 65534) & 0xFFFF, 65534, 65534, 65534, true},
		{"RQSize 65534, backwards by one", 65533, 65534, 0, 65534, false},
		{"RQSize 65534, past sent+credits", 65535, 65534, 0, 65534, false},
		{"RQSize 65534, half sent, past sent+credits", (30000 + 65534 + 1) & 0xFFFF, 65534, 30000, 65534, false},
		{"RQSize 65534, half sent, up to sent+credits", (30000 + 65534) & 0xFFFF, 65534, 30000, 65534, true},
	} {
		err := checkCredits(tc.limit, tc.cur, tc.sent, tc.credits)
		if tc.ok && err != nil || !tc.ok && !errors.Is(err, errProtocol) {
			t.Errorf("%s: checkCredits(limit %d, cur %d, sent %d, credits %d) = %v, want ok %v",
				tc.name, tc.limit, tc.cur, tc.sent, tc.credits, err, tc.ok)
		}
	}
}

// FuzzCredits runs a sender and its peer with a window of any size,
// counting messages without wrapping: the sender sends while its limit
// allows, the peer receives and sends limits as librdmacm does (received
// + credits), which must all pass, and arbitrary limits, which must pass
// exactly when some count they stand for (modulo 2^16) lies from the
// current limit to sent + credits.
func FuzzCredits(f *testing.F) {
	f.Add(uint16(384), []byte{0x10, 0x50, 0x80, 0x10, 0xC3, 0x90, 0x80})
	f.Add(uint16(40000), []byte{0x00, 0x80, 0x3F, 0x7F, 0x80, 0xC0, 0x01, 0x02})
	f.Add(uint16(65534), []byte{0x3F, 0x3F, 0x7F, 0x7F, 0x80, 0x3F, 0xFF, 0xFE, 0x80})
	f.Add(uint16(16), []byte{0xC0, 0x00, 0x10, 0xC0, 0x00, 0x11, 0xFF, 0xFF, 0xFF})
	f.Fuzz(func(t *testing.T, credits uint16, ops []byte) { runCredits(t, credits, ops) })
}

// runCredits is FuzzCredits' run; it returns how many hostile limits
// passed and failed.
func runCredits(t testing.TB, credits uint16, ops []byte) (passed, failed int) {
	if credits == 0 {
		return // parseConnData refuses 0 credits
	}
	var sent, recvd uint64   // messages sent, and received by the peer
	limit := uint64(credits) // the limit in force
	for len(ops) > 0 {
		op := ops[0]
		ops = ops[1:]
		k := uint64(op&0x3F) << (op & 0x3F % 4 * 4) // up to ~2^18 messages a step
		switch op >> 6 {
		case 0: // the sender sends what its limit allows, up to k
			sent += min(k, limit-sent)
		case 1: // the peer receives up to k
			recvd += min(k, sent-recvd)
		case 2: // the peer grants credits as librdmacm does
			l := recvd + uint64(credits)
			if err := checkCredits(uint16(l), uint16(limit), uint16(sent), credits); err != nil {
				t.Fatalf("limit %d (received %d + credits %d), in force %d, sent %d: %v", l, recvd, credits, limit, sent, err)
			}
			limit = l
		case 3: // a hostile limit: the next two bytes
			if len(ops) < 2 {
				return
			}
			v := binary.BigEndian.Uint16(ops)
			ops = ops[2:]
			// the count from limit on that v stands for
			l := limit + uint64(v-uint16(limit))
			want := l <= sent+uint64(credits)
			err := checkCredits(v, uint16(limit), uint16(sent), credits)
			if want && err != nil || !want && !errors.Is(err, errProtocol) {
				t.Fatalf("limit %d (count %d), in force %d, sent %d, credits %d: %v, want ok %v", v, l, limit, sent, credits, err, want)
			}
			if want {
				passed++
				limit = l
				recvd = max(recvd, l-uint64(credits)) // what the peer claims to have received
			} else {
				failed++
			}
		}
	}
	return
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
