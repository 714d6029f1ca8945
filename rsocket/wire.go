package rsocket

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The rsocket wire format of librdmacm (rsocket.c, docs/rsocket), version 1.
const (
	connDataVersion = 1
	connDataBytes   = 40
	flagNet         = 0x01 // the sender is big-endian
	flagIOMap       = 0x02 // byte 7 (iomap slots) is valid
	sgeBytes        = 16   // struct rs_sge: addr u64, key u32, length u32
	iomapBytes      = 24   // struct rs_iomap: offset u64, then an rs_sge
	maxIOMapSlots   = 0x7F << 8
	sglEntries      = 2    // RS_SGL_SIZE
	ctrlSlots       = 4    // RS_QP_CTRL_SIZE: send slots kept for control messages
	ctrlSlotBytes   = 24   // what a control message carries at most: an SGE or an iomap entry
	olapStart       = 2048 // RS_OLAP_START_SIZE
	maxTransfer     = 65536
	sndLowat        = 2048 // RS_SNDLOWAT
	maxImmData      = 1<<29 - 1
)

// The operation in bits 31:29 of a message's immediate.
const (
	opData      = 0
	opDataMore  = 1 // reserved
	opWrite     = 2 // never on the wire
	opDRAMore   = 3 // reserved
	opSGL       = 4
	opReserved  = 5
	opIOMapSGL  = 6
	opCtrl      = 7
	ctrlDisconn = 0
	ctrlKeepAlv = 1
	ctrlShutdwn = 2
)

func mkImm(op, data uint32) uint32 { return op<<29 | data&maxImmData }

// errProtocol is wrapped by every error a peer's malformed message causes.
var errProtocol = errors.New("rsocket: protocol violation by the peer")

// sge is one entry of a target SGL: where the peer may write.
type sge struct {
	Addr   uint64
	Key    uint32
	Length uint32
}

// connData is struct rs_conn_data, the private data of the connection
// request and reply.
type connData struct {
	Version    uint8
	Flags      uint8
	Credits    uint16
	IOMapSize  uint8 // encoded as byte 7
	TargetSGL  sge   // Length = number of entries
	DataBuffer sge
}

func (d *connData) marshal(b []byte) {
	clear(b[:connDataBytes])
	b[0] = d.Version
	b[1] = d.Flags
	binary.BigEndian.PutUint16(b[2:], d.Credits)
	b[7] = d.IOMapSize
	binary.BigEndian.PutUint64(b[8:], d.TargetSGL.Addr)
	binary.BigEndian.PutUint32(b[16:], d.TargetSGL.Key)
	binary.BigEndian.PutUint32(b[20:], d.TargetSGL.Length)
	binary.BigEndian.PutUint64(b[24:], d.DataBuffer.Addr)
	binary.BigEndian.PutUint32(b[32:], d.DataBuffer.Key)
	binary.BigEndian.PutUint32(b[36:], d.DataBuffer.Length)
}

// parseConnData decodes and checks the peer's connection data (the CM
// delivers it zero-padded; only the first 40 bytes count).
func parseConnData(b []byte) (connData, error) {
	var d connData
	if len(b) < connDataBytes {
		return d, fmt.Errorf("%w: connection data is %d bytes, want %d", errProtocol, len(b), connDataBytes)
	}
	d.Version = b[0]
	d.Flags = b[1]
	d.Credits = binary.BigEndian.Uint16(b[2:])
	d.IOMapSize = b[7]
	d.TargetSGL = sge{binary.BigEndian.Uint64(b[8:]), binary.BigEndian.Uint32(b[16:]), binary.BigEndian.Uint32(b[20:])}
	d.DataBuffer = sge{binary.BigEndian.Uint64(b[24:]), binary.BigEndian.Uint32(b[32:]), binary.BigEndian.Uint32(b[36:])}
	switch {
	case d.Version != connDataVersion:
		return d, fmt.Errorf("%w: connection data version %d, want %d", errProtocol, d.Version, connDataVersion)
	case d.Credits == 0:
		return d, fmt.Errorf("%w: connection data grants 0 credits", errProtocol)
	case d.TargetSGL.Length < 2 || d.TargetSGL.Length > 1<<16:
		// With fewer than 2 entries our first SGL update (to entry 1) would
		// land outside the peer's array.
		return d, fmt.Errorf("%w: target SGL of %d entries, want 2..65536", errProtocol, d.TargetSGL.Length)
	case d.TargetSGL.Addr+uint64(d.TargetSGL.Length)*sgeBytes < d.TargetSGL.Addr:
		return d, fmt.Errorf("%w: target SGL at %#x wraps the address space", errProtocol, d.TargetSGL.Addr)
	case d.Flags&flagIOMap != 0 && d.TargetSGL.Addr+uint64(d.TargetSGL.Length)*sgeBytes+
		uint64(scaleValue(d.IOMapSize))*iomapBytes < d.TargetSGL.Addr:
		return d, fmt.Errorf("%w: iomap slots after the target SGL at %#x wrap the address space", errProtocol, d.TargetSGL.Addr)
	case d.DataBuffer.Length == 0:
		return d, fmt.Errorf("%w: data buffer of 0 bytes", errProtocol)
	case d.DataBuffer.Addr+uint64(d.DataBuffer.Length) < d.DataBuffer.Addr:
		return d, fmt.Errorf("%w: data buffer at %#x wraps the address space", errProtocol, d.DataBuffer.Addr)
	}
	return d, nil
}

// scaleOf encodes a number of iomap slots in rsockets' one byte
// (rs_value_to_scale with 8 bits): n up to 128 as itself, multiples of 256
// up to 32512 as 0x80 | n>>8. ok is false for any other n, which the byte
// cannot carry (librdmacm rounds it down).
func scaleOf(n int) (b uint8, ok bool) {
	switch {
	case n >= 0 && n <= 128:
		return uint8(n), true
	case n > 128 && n <= maxIOMapSlots && n%256 == 0:
		return uint8(0x80 | n>>8), true
	}
	return 0, false
}

// scaleValue decodes scaleOf's byte (rs_scale_to_value).
func scaleValue(b uint8) int {
	if b <= 128 {
		return int(b)
	}
	return int(b&0x7F) << 8
}

// ioMapEntry is struct rs_iomap: the peer may write Length bytes at Addr
// (with Key) for the stream offsets Offset onwards.
type ioMapEntry struct {
	Offset uint64
	Addr   uint64
	Key    uint32
	Length uint32
}

func putIOMapEntry(b []byte, o binary.ByteOrder, e ioMapEntry) {
	o.PutUint64(b, e.Offset)
	o.PutUint64(b[8:], e.Addr)
	o.PutUint32(b[16:], e.Key)
	o.PutUint32(b[20:], e.Length)
}

// parseIOMapEntry reads an iomap slot the peer wrote in our byte order.
func parseIOMapEntry(b []byte) ioMapEntry {
	o := binary.NativeEndian
	return ioMapEntry{o.Uint64(b), o.Uint64(b[8:]), o.Uint32(b[16:]), o.Uint32(b[20:])}
}

// covers reports whether the entry maps stream offset off.
func (e ioMapEntry) covers(off uint64) bool {
	return off >= e.Offset && off-e.Offset < uint64(e.Length)
}

// peerOrder is the byte order the peer's SGL entries are written in.
func peerOrder(flags uint8) binary.ByteOrder {
	if flags&flagNet != 0 {
		return binary.BigEndian
	}
	return binary.LittleEndian
}

// hostFlags is the flags byte this host sends.
func hostFlags() uint8 {
	var x [2]byte
	binary.NativeEndian.PutUint16(x[:], 1)
	if x[0] == 0 {
		return flagIOMap | flagNet
	}
	return flagIOMap
}

// rxEvent is what one received message means for the connection.
type rxEvent uint8

const (
	rxNone       rxEvent = iota
	rxData               // bytes arrived
	rxCredits            // the peer granted credits (and maybe a target SGE)
	rxShutdown           // the peer will send no more
	rxDisconnect         // the peer closed
)

// receiver is the receive half of the protocol state: which parts of the
// ring the peer may fill, and what arrived. It holds no device memory, so
// the fuzz target drives it directly.
type receiver struct {
	size    uint32 // ring bytes (even)
	readOff uint32 // next byte the application reads
	unread  uint32 // bytes arrived, not yet read
	// extents the peer may still fill, in ring order: ext[0] is being
	// filled. There are at most sglEntries.
	ext  [sglEntries]uint32
	next uint32 // ring offset of the next byte the peer writes
	n    int
	// free is the number of read bytes not yet advertised again (rsocket's
	// rbuf_bytes_avail); freeOff is where they start.
	free, freeOff uint32
	seqNo         uint32 // messages received that took a credit (DATA, IOMAP_SGL)
	eof           bool
	ioSlots       uint32 // iomap slots offered to the peer
}

func newReceiver(size, ioSlots uint32) receiver {
	h := size / 2
	return receiver{size: size, ext: [sglEntries]uint32{h}, n: 1, free: h, freeOff: h, ioSlots: ioSlots}
}

// onMessage applies one received immediate. A message the peer had no
// right to send returns an error wrapping errProtocol and changes nothing.
func (r *receiver) onMessage(imm uint32) (rxEvent, error) {
	op, data := imm>>29, imm&maxImmData
	switch op {
	case opData:
		if r.eof {
			return rxNone, fmt.Errorf("%w: data after shutdown", errProtocol)
		}
		if data == 0 {
			return rxNone, fmt.Errorf("%w: data message of 0 bytes", errProtocol)
		}
		if r.n == 0 || data > r.ext[0] {
			return rxNone, fmt.Errorf("%w: data message of %d bytes, the peer was given room for %d", errProtocol, data, r.room())
		}
		r.ext[0] -= data
		if r.ext[0] == 0 {
			copy(r.ext[:], r.ext[1:r.n])
			r.n--
		}
		r.next = (r.next + data) % r.size
		r.unread += data
		r.seqNo++
		return rxData, nil
	case opSGL:
		return rxCredits, nil
	case opCtrl:
		switch data {
		case ctrlDisconn:
			r.eof = true
			return rxDisconnect, nil
		case ctrlShutdwn:
			r.eof = true
			return rxShutdown, nil
		}
		return rxNone, nil // keepalive and unknown values: ignored, as librdmacm
	case opIOMapSGL:
		// The peer wrote one of our iomap slots (data is its index); the
		// slot is read when a WriteIO needs it. The message took a credit
		// from the peer and a receive, which is posted again: count it,
		// so that the credit comes back (librdmacm's receiver does not,
		// and its peer loses a credit per mapping).
		if data >= r.ioSlots {
			return rxNone, fmt.Errorf("%w: iomap update of slot %d, %d offered", errProtocol, data, r.ioSlots)
		}
		r.seqNo++
		return rxNone, nil
	case opWrite:
		return rxNone, nil // never on the wire; librdmacm ignores it
	}
	return rxNone, fmt.Errorf("%w: reserved operation %d in immediate %#08x", errProtocol, op, imm)
}

func (r *receiver) room() uint32 {
	var t uint32
	for _, e := range r.ext[:r.n] {
		t += e
	}
	return t
}

// consume marks n bytes read.
func (r *receiver) consume(n uint32) {
	r.readOff = (r.readOff + n) % r.size
	r.unread -= n
	r.free += n
}

// advertise reports whether half the ring is free to offer the peer, and
// if so where; it records the new extent.
func (r *receiver) advertise() (off, length uint32, ok bool) {
	h := r.size / 2
	if r.free < h || r.n == sglEntries {
		return 0, 0, false
	}
	off = r.freeOff
	r.free -= h
	r.freeOff = (r.freeOff + h) % r.size
	r.ext[r.n] = h
	r.n++
	return off, h, true
}

// checkCredits validates a credit limit from an SGL message against the
// one in force (cur), the messages already sent and the credits the peer
// offered in its connection data. The peer's limit is the messages it
// received plus its credits (librdmacm's rseq_no + rq_size), so a valid
// limit lies, counted without wrapping, from cur (limits never move back)
// to sent + credits (it cannot have received more than was sent), where
// sent is at most cur and at least cur - credits. That range is shorter
// than 2^16, so the one value in it that the 16-bit limit can stand for
// decides, for any number of credits up to 65535: the limit lies
// uint16(limit-cur) past cur, and must not lie past sent + credits.
func checkCredits(limit, cur, sent, credits uint16) error {
	ahead := int(limit - cur) // how far the limit moves forward
	unused := int(cur - sent) // messages cur still allows
	if ahead+unused > int(credits) {
		return fmt.Errorf("%w: credit limit %d after %d with %d messages sent: beyond the %d credits the peer offered, or moved back",
			errProtocol, limit, cur, sent, credits)
	}
	return nil
}

// parseSGE reads a target SGL entry the peer wrote in our byte order.
func parseSGE(b []byte) sge {
	o := binary.NativeEndian
	return sge{o.Uint64(b), o.Uint32(b[8:]), o.Uint32(b[12:])}
}

func putSGE(b []byte, o binary.ByteOrder, s sge) {
	o.PutUint64(b, s.Addr)
	o.PutUint32(b[8:], s.Key)
	o.PutUint32(b[12:], s.Length)
}
