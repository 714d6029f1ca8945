package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/uverbs"
)

// perftest's out-of-band exchange (perftest_communication.c), over one TCP
// connection. Every exchange is symmetric: the client writes its half and
// then reads the server's; the server reads, then writes. In order:
//
//  1. versions: 16 bytes, the NUL-padded version text ("6.06");
//  2. (peer >= 5.32) the cycle buffer and the cache line size, each a
//     4-byte big-endian int; both sides use the larger;
//  3. (peer >= 5.1) the MTU: the enum ibv_mtu as decimal text, 2 bytes
//     ("3\0") from 5.31 on;
//  4. handshakes: each side's QP address as the text KEY_PRINT_FMT_GID,
//     "%04x:%04x:%06x:%06x:%08x:%016llx:" + 16 "%02x:" GID bytes +
//     "%08x:" (LID, outstanding reads, QPN, PSN, rkey, buffer address, GID,
//     SRQ number) in a 108-byte buffer, or without the GID in 59 bytes when
//     no GID index is in use. The same message is exchanged several times
//     as a barrier; the tests differ in how many (see protocol);
//  5. bandwidth tests: the client's report, five 8-byte big-endian values
//     (size, iterations, and the peak, average and message rate as IEEE
//     doubles), the server's (zeros) the other way;
//  6. closing: a last handshake, then each side writes "done\0" and
//     closes.

const (
	keyMsgSize    = 59  // KEY_MSG_SIZE
	keyMsgSizeGID = 108 // KEY_MSG_SIZE_GID
	versionSize   = 16  // MAX_VERSION
	doneMsg       = "done\x00"
	// exchangeTimeout bounds every exchange once connected: a bandwidth
	// server waits through the whole run for the client's next message.
	exchangeTimeout = 10 * time.Minute
)

// ErrBadMessage is wrapped by the errors of messages that cannot be read.
var ErrBadMessage = errors.New("malformed perftest message")

// dest is one QP's address: struct pingpong_dest.
type dest struct {
	LID      uint16
	OutReads int
	QPN      uint32
	PSN      uint32
	Rkey     uint32
	VAddr    uint64
	GID      uverbs.GID
	SRQN     uint32
	// GIDIndex travels only in the binary (rdma_cm) form.
	GIDIndex int
}

// marshal formats d as ethernet_write_keys does, with the GID when
// withGID (the sender has a GID index), into the C buffer's size.
func (d dest) marshal(withGID bool) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "%04x:%04x:%06x:%06x:%08x:%016x", d.LID, d.OutReads, d.QPN, d.PSN, d.Rkey, d.VAddr)
	size := keyMsgSize
	if withGID {
		size = keyMsgSizeGID
		for _, g := range d.GID {
			fmt.Fprintf(&b, ":%02x", g)
		}
		fmt.Fprintf(&b, ":%08x:", d.SRQN)
	} else {
		fmt.Fprintf(&b, ":%08x", d.SRQN)
	}
	m := make([]byte, size)
	// sprintf into a char[size]: a longer text (fields wider than their
	// widths) would overflow in C; it is cut here.
	copy(m[:size-1], b.String())
	return m
}

// parseDest reads a peer's address message. It is stricter than perftest's
// sscanf/strtol reading: every field must be a hexadecimal number.
func parseDest(m []byte, withGID bool) (dest, error) {
	text := string(m)
	if k := strings.IndexByte(text, 0); k >= 0 {
		text = text[:k]
	}
	f := strings.Split(text, ":")
	want := 7
	if withGID {
		want = 6 + 16 + 1
		if len(f) == want+1 && f[want] == "" { // the trailing ':'
			f = f[:want]
		}
	}
	if len(f) != want {
		return dest{}, fmt.Errorf("%w: %q: %d fields, want %d", ErrBadMessage, text, len(f), want)
	}
	num := func(i, bits int) (uint64, error) {
		v, err := strconv.ParseUint(f[i], 16, bits)
		if err != nil {
			return 0, fmt.Errorf("%w: %q: field %d: %v", ErrBadMessage, text, i+1, err)
		}
		return v, nil
	}
	var d dest
	var err error
	var v uint64
	for i, p := range []struct {
		bits int
		set  func(uint64)
	}{
		{16, func(v uint64) { d.LID = uint16(v) }},
		{31, func(v uint64) { d.OutReads = int(v) }},
		{24, func(v uint64) { d.QPN = uint32(v) }},
		{24, func(v uint64) { d.PSN = uint32(v) }},
		{32, func(v uint64) { d.Rkey = uint32(v) }},
		{64, func(v uint64) { d.VAddr = v }},
	} {
		if v, err = num(i, p.bits); err != nil {
			return dest{}, err
		}
		p.set(v)
	}
	next := 6
	if withGID {
		for i := range d.GID {
			if v, err = num(6+i, 8); err != nil {
				return dest{}, err
			}
			d.GID[i] = byte(v)
		}
		next = 22
	}
	if v, err = num(next, 32); err != nil {
		return dest{}, err
	}
	d.SRQN = uint32(v)
	return d, nil
}

// destBinarySize is sizeof(struct pingpong_dest) in perftest 4.5: what
// rdma_write_keys sends over an rdma_cm control connection.
const destBinarySize = 56

// marshalBinary is rdma_write_keys' message: struct pingpong_dest with
// every field big-endian (lid@0, out_reads@4, qpn@8, psn@12, rkey@16,
// padding, vaddr@24, gid@32, srqn@48, gid_index@52). gid_index is the
// sender's, -1 without a GID.
func (d dest) marshalBinary(withGID bool) []byte {
	m := make([]byte, destBinarySize)
	be := binary.BigEndian
	be.PutUint32(m[0:], uint32(d.LID))
	be.PutUint32(m[4:], uint32(int32(d.OutReads)))
	be.PutUint32(m[8:], d.QPN)
	be.PutUint32(m[12:], d.PSN)
	be.PutUint32(m[16:], d.Rkey)
	be.PutUint64(m[24:], d.VAddr)
	copy(m[32:48], d.GID[:])
	be.PutUint32(m[48:], d.SRQN)
	gidIndex := int32(-1)
	if withGID {
		gidIndex = int32(d.GIDIndex)
	}
	be.PutUint32(m[52:], uint32(gidIndex))
	return m
}

// parseDestBinary reads rdma_read_keys' message. perftest reads the LID,
// outstanding reads, QPN, PSN, rkey, address and GID (not the SRQ number
// or the GID index); values out of their fields' ranges are refused.
func parseDestBinary(m []byte) (dest, error) {
	if len(m) != destBinarySize {
		return dest{}, fmt.Errorf("%w: %d-byte address, want %d", ErrBadMessage, len(m), destBinarySize)
	}
	be := binary.BigEndian
	lid, outReads, qpn, psn := be.Uint32(m[0:]), int32(be.Uint32(m[4:])), be.Uint32(m[8:]), be.Uint32(m[12:])
	switch {
	case lid > 0xffff:
		return dest{}, fmt.Errorf("%w: LID %#x", ErrBadMessage, lid)
	case outReads < 0:
		return dest{}, fmt.Errorf("%w: outstanding reads %d", ErrBadMessage, outReads)
	case qpn > 0xffffff:
		return dest{}, fmt.Errorf("%w: QPN %#x", ErrBadMessage, qpn)
	case psn > 0xffffff:
		return dest{}, fmt.Errorf("%w: PSN %#x", ErrBadMessage, psn)
	}
	d := dest{LID: uint16(lid), OutReads: int(outReads), QPN: qpn, PSN: psn, Rkey: be.Uint32(m[16:]),
		VAddr: be.Uint64(m[24:]), SRQN: be.Uint32(m[48:]), GIDIndex: int(int32(be.Uint32(m[52:])))}
	copy(d.GID[:], m[32:48])
	return d, nil
}

// bwReport is struct bw_report_data, the part that travels.
type bwReport struct {
	Size    uint64
	Iters   uint64
	Peak    float64
	Avg     float64
	MsgRate float64
}

// comm is the out-of-band channel to the peer: a TCP connection, or with
// -R the rdma_cm control connection (cmChannel).
type comm struct {
	ch      msgChannel
	client  bool
	withGID bool
	// binaryDest: addresses travel as the binary struct pingpong_dest
	// (rdma_cm), not as text (TCP).
	binaryDest bool
	peerVer    float64
}

// msgChannel carries the exchange's messages. Both kinds deliver each
// message whole: TCP as a byte stream read to the expected length, rdma_cm
// as one SEND per message.
type msgChannel interface {
	// write sends one message.
	write(b []byte) error
	// read receives the next message into b, which it fills.
	read(b []byte) error
	// close ends the channel (once the closing handshake is done: TCP
	// says "done" first).
	close(done bool) error
}

// tcpChannel is perftest's TCP exchange.
type tcpChannel struct{ conn net.Conn }

func (t tcpChannel) write(b []byte) error {
	t.conn.SetDeadline(time.Now().Add(exchangeTimeout))
	if _, err := t.conn.Write(b); err != nil {
		return fmt.Errorf("write to the peer: %w", err)
	}
	return nil
}

func (t tcpChannel) read(b []byte) error {
	t.conn.SetDeadline(time.Now().Add(exchangeTimeout))
	if _, err := io.ReadFull(t.conn, b); err != nil {
		return fmt.Errorf("read from the peer: %w", err)
	}
	return nil
}

func (t tcpChannel) close(done bool) error {
	var err error
	if done {
		if _, err = t.conn.Write([]byte(doneMsg)); err != nil {
			err = fmt.Errorf("write to the peer: %w", err)
		}
	}
	t.conn.Close()
	return err
}

// xchg is ctx_xchg_data: the client writes mine and reads len(theirs); the
// server reads, then writes.
func (c *comm) xchg(mine, theirs []byte) error {
	if c.client {
		if err := c.ch.write(mine); err != nil {
			return err
		}
	}
	if err := c.ch.read(theirs); err != nil {
		return err
	}
	if !c.client {
		if err := c.ch.write(mine); err != nil {
			return err
		}
	}
	return nil
}

// handshake is ctx_hand_shake: addresses both ways.
func (c *comm) handshake(mine dest) (dest, error) {
	if c.binaryDest {
		var theirs [destBinarySize]byte
		if err := c.xchg(mine.marshalBinary(c.withGID), theirs[:]); err != nil {
			return dest{}, err
		}
		return parseDestBinary(theirs[:])
	}
	size := keyMsgSize
	if c.withGID {
		size = keyMsgSizeGID
	}
	theirs := make([]byte, size)
	if err := c.xchg(mine.marshal(c.withGID), theirs); err != nil {
		return dest{}, err
	}
	return parseDest(theirs, c.withGID)
}

// prologue is exchange_versions, check_version_compatibility,
// check_sys_data and the MTU half of check_mtu: it returns the cycle
// buffer and cache line size both sides use and the peer's MTU enum (0
// when it sent none).
func (c *comm) prologue(cycleBuffer, cacheLine, mtu int) (int, int, int, error) {
	var mine, theirs [versionSize]byte
	copy(mine[:], perftestVersion)
	if err := c.xchg(mine[:], theirs[:]); err != nil {
		return 0, 0, 0, err
	}
	text := string(theirs[:])
	if k := strings.IndexByte(text, 0); k >= 0 {
		text = text[:k]
	}
	c.peerVer = atof(text)
	if c.peerVer < oldestPeerVersion {
		return 0, 0, 0, fmt.Errorf("%w: peer version %q: not compatible with versions older than 5.70", ErrBadMessage, text)
	}
	xchgInt := func(v int) (int, error) {
		var m, t [4]byte
		binary.BigEndian.PutUint32(m[:], uint32(int32(v)))
		if err := c.xchg(m[:], t[:]); err != nil {
			return 0, err
		}
		return int(int32(binary.BigEndian.Uint32(t[:]))), nil
	}
	if c.peerVer >= 5.32 {
		rc, err := xchgInt(cycleBuffer)
		if err != nil {
			return 0, 0, 0, err
		}
		rl, err := xchgInt(cacheLine)
		if err != nil {
			return 0, 0, 0, err
		}
		cycleBuffer, cacheLine = max(cycleBuffer, rc), max(cacheLine, rl)
	}
	peerMTU := 0
	if c.peerVer >= 5.1 {
		n := 4
		if c.peerVer >= 5.31 {
			n = 2
		}
		m := make([]byte, n)
		copy(m, strconv.Itoa(mtu))
		t := make([]byte, n)
		if err := c.xchg(m, t); err != nil {
			return 0, 0, 0, err
		}
		if k := bytes.IndexByte(t, 0); k >= 0 {
			t = t[:k]
		}
		peerMTU, _ = strconv.Atoi(string(t))
	}
	return cycleBuffer, cacheLine, peerMTU, nil
}

// reports is xchg_bw_reports without the per-port values.
func (c *comm) reports(mine bwReport) (bwReport, error) {
	var theirs bwReport
	for _, f := range []struct {
		mine   uint64
		theirs func(uint64)
	}{
		{mine.Size, func(v uint64) { theirs.Size = v }},
		{mine.Iters, func(v uint64) { theirs.Iters = v }},
		{math.Float64bits(mine.Peak), func(v uint64) { theirs.Peak = math.Float64frombits(v) }},
		{math.Float64bits(mine.Avg), func(v uint64) { theirs.Avg = math.Float64frombits(v) }},
		{math.Float64bits(mine.MsgRate), func(v uint64) { theirs.MsgRate = math.Float64frombits(v) }},
	} {
		// unsigned long and uint64_t iterations (peers from 5.33 on; older
		// ones are refused above).
		var m, t [8]byte
		binary.BigEndian.PutUint64(m[:], f.mine)
		if err := c.xchg(m[:], t[:]); err != nil {
			return bwReport{}, err
		}
		f.theirs(binary.BigEndian.Uint64(t[:]))
	}
	return theirs, nil
}

// close is ctx_close_connection: a last handshake, "done" (TCP only),
// and the connection closed.
func (c *comm) close(mine dest) error {
	if _, err := c.handshake(mine); err != nil && !flushedLastSend(err) && !errors.Is(err, errPeerLeft) {
		return err
	}
	return c.ch.close(true)
}

// atof is C's atof for the version text: the leading decimal number, 0 if
// none.
func atof(s string) float64 {
	s = strings.TrimLeft(s, " \t\n")
	end := 0
	dot := false
	for end < len(s) && (s[end] >= '0' && s[end] <= '9' || s[end] == '.' && !dot) {
		dot = dot || s[end] == '.'
		end++
	}
	v, err := strconv.ParseFloat(s[:end], 64)
	if err != nil {
		return 0
	}
	return v
}

// dialRetry is how long a client retries while nothing listens yet (a
// client started together with its server); perftest gives up at once.
const dialRetry = 5 * time.Second

// dial connects to the server.
func dial(ctx context.Context, host string, port int) (net.Conn, error) {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	var d net.Dialer
	deadline := time.Now().Add(dialRetry)
	for {
		conn, err := d.DialContext(ctx, "tcp4", addr)
		if err == nil {
			return conn, nil
		}
		if ctx.Err() != nil || !errors.Is(err, syscall.ECONNREFUSED) || time.Now().After(deadline) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// listenAccept accepts one client on port, as the C server does (IPv4,
// SO_REUSEADDR), and closes the listener.
func listenAccept(ctx context.Context, port int, ready func(net.Addr)) (net.Conn, error) {
	lc := net.ListenConfig{}
	ln, err := lc.Listen(ctx, "tcp4", ":"+strconv.Itoa(port))
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	if ready != nil {
		ready(ln.Addr())
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	conn, err := ln.Accept()
	if err != nil && ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	return conn, err
}
