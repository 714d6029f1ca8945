package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/goverbs/goverbs/uverbs"
)

// The out-of-band exchange of the C examples, over one TCP connection: the
// client sends its QP addresses, the server reads them, connects its QPs,
// sends its own, and waits for the client's "done". An address is the text
// "%04x:%06x:%06x:%s" (LID, QPN, PSN, GID as 32 hex digits, byte by byte)
// in a 52-byte NUL-terminated buffer, written whole. rc, uc and ud send one
// address each way; srq sends maxQP (256), zeros beyond its QPs.

// msgSize is sizeof "0000:000000:000000:00000000000000000000000000000000".
const msgSize = 52

// doneMsg is the client's last word: sizeof "done" bytes.
const doneMsg = "done\x00"

// exchangeTimeout bounds the exchange once the TCP connection is up: both
// sides write at once, so only a stuck peer takes longer.
const exchangeTimeout = 60 * time.Second

// ErrBadMessage is wrapped by the errors of addresses that cannot be read.
var ErrBadMessage = errors.New("malformed address message")

// dest is one QP's address: pingpong_dest.
type dest struct {
	LID uint16
	QPN uint32 // 24 bits
	PSN uint32 // 24 bits
	GID uverbs.GID
}

// encode formats d as the C examples do. QPN and PSN are 24-bit values;
// wider ones would overflow the C buffer and are masked.
func (d dest) encode() [msgSize]byte {
	var m [msgSize]byte
	copy(m[:], fmt.Sprintf("%04x:%06x:%06x:%s", d.LID, d.QPN&0xffffff, d.PSN&0xffffff, hex.EncodeToString(d.GID[:])))
	return m
}

// decodeDest parses an address message: the text up to the first NUL, as
// sscanf("%x:%x:%x:%s") reads what the examples write. It is stricter than
// sscanf: four fields, hexadecimal, in range, and a 32-digit GID.
func decodeDest(m []byte) (dest, error) {
	text := string(m)
	if k := strings.IndexByte(text, 0); k >= 0 {
		text = text[:k]
	}
	f := strings.Split(text, ":")
	if len(f) != 4 {
		return dest{}, fmt.Errorf("%w: %q: want LID:QPN:PSN:GID", ErrBadMessage, text)
	}
	var v [3]uint64
	for i, limit := range [3]int{16, 24, 24} {
		var err error
		if f[i] == "" || len(f[i]) > 8 {
			return dest{}, fmt.Errorf("%w: %q: field %d is not a hexadecimal number", ErrBadMessage, text, i+1)
		}
		if v[i], err = strconv.ParseUint(f[i], 16, limit); err != nil {
			return dest{}, fmt.Errorf("%w: %q: field %d: %v", ErrBadMessage, text, i+1, err)
		}
	}
	if len(f[3]) != 32 {
		return dest{}, fmt.Errorf("%w: %q: the GID has %d hex digits, want 32", ErrBadMessage, text, len(f[3]))
	}
	var d dest
	if _, err := hex.Decode(d.GID[:], []byte(f[3])); err != nil {
		return dest{}, fmt.Errorf("%w: %q: GID: %v", ErrBadMessage, text, err)
	}
	d.LID, d.QPN, d.PSN = uint16(v[0]), uint32(v[1]), uint32(v[2])
	return d, nil
}

// messagesPerSide is how many addresses each side sends.
func messagesPerSide(k kind) int {
	if k == kindSRQ {
		return maxQP
	}
	return 1
}

// encodeAll lays out n messages: the addresses, then zero addresses (srq
// zeroes its unused entries).
func encodeAll(local []dest, n int) []byte {
	b := make([]byte, 0, n*msgSize)
	for i := 0; i < n; i++ {
		var d dest
		if i < len(local) {
			d = local[i]
		}
		m := d.encode()
		b = append(b, m[:]...)
	}
	return b
}

// readAll reads n messages and decodes the first want of them (the rest
// are srq's zero entries, read and ignored as the C tool does).
func readAll(r io.Reader, n, want int) ([]dest, error) {
	buf := make([]byte, n*msgSize)
	if got, err := io.ReadFull(r, buf); err != nil {
		return nil, fmt.Errorf("read remote address: %d of %d bytes: %w", got, len(buf), err)
	}
	out := make([]dest, want)
	for i := range out {
		var err error
		if out[i], err = decodeDest(buf[i*msgSize : (i+1)*msgSize]); err != nil {
			return nil, fmt.Errorf("remote address %d: %w", i, err)
		}
	}
	return out, nil
}

// guard bounds conn's remaining I/O by the exchange timeout and ctx.
func guard(ctx context.Context, conn net.Conn) (release func()) {
	conn.SetDeadline(time.Now().Add(exchangeTimeout))
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	return func() { stop() }
}

// clientExchange is pp_client_exch_dest over conn: send, receive, "done".
func clientExchange(ctx context.Context, conn net.Conn, k kind, local []dest) ([]dest, error) {
	defer guard(ctx, conn)()
	n := messagesPerSide(k)
	if _, err := conn.Write(encodeAll(local, n)); err != nil {
		return nil, fmt.Errorf("send local address: %w", err)
	}
	remote, err := readAll(conn, n, len(local))
	if err != nil {
		return nil, err
	}
	if _, err := io.WriteString(conn, doneMsg); err != nil {
		return nil, fmt.Errorf("send done: %w", err)
	}
	return remote, nil
}

// serverExchange is pp_server_exch_dest over an accepted conn: receive,
// connect (the QPs must be ready before the client, which sends first once
// it has our address, learns it), send, wait for "done".
func serverExchange(ctx context.Context, conn net.Conn, k kind, local []dest, connect func([]dest) error) ([]dest, error) {
	defer guard(ctx, conn)()
	n := messagesPerSide(k)
	remote, err := readAll(conn, n, len(local))
	if err != nil {
		return nil, err
	}
	if err := connect(remote); err != nil {
		return nil, err
	}
	if _, err := conn.Write(encodeAll(local, n)); err != nil {
		return nil, fmt.Errorf("send local address: %w", err)
	}
	var done [len(doneMsg)]byte
	if got, err := io.ReadFull(conn, done[:]); err != nil {
		return nil, fmt.Errorf("read done: %d of %d bytes: %w", got, len(done), err)
	}
	if string(done[:]) != doneMsg {
		return nil, fmt.Errorf("%w: %q where %q was due", ErrBadMessage, done[:], doneMsg)
	}
	return remote, nil
}

// listenAccept waits for the one client, as the C server does: bind the
// port (on every address), accept once, stop listening. ready, if not nil,
// is called once the port is listening.
func listenAccept(ctx context.Context, port int, ready func(net.Addr)) (net.Conn, error) {
	var lc net.ListenConfig // Go sets SO_REUSEADDR, as the C server does
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort("", strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("listen to port %d: %w", port, err)
	}
	defer ln.Close()
	if ready != nil {
		ready(ln.Addr())
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	conn, err := ln.Accept()
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("accept on port %d: %w", port, context.Cause(ctx))
		}
		return nil, fmt.Errorf("accept on port %d: %w", port, err)
	}
	return conn, nil
}

// dialTimeout bounds connecting to the server.
const dialTimeout = 30 * time.Second

// dial connects to the server, trying its addresses in turn.
func dial(ctx context.Context, host string, port int) (net.Conn, error) {
	d := net.Dialer{Timeout: dialTimeout}
	return d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
}
