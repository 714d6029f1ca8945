package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"
)

// infoSize is sizeof(struct rping_rdma_info): every SEND either way carries
// exactly this many bytes.
const infoSize = 16

// info is struct rping_rdma_info: a buffer the peer may read or write,
// every field big-endian.
type info struct {
	Addr uint64 // buf
	Rkey uint32
	Size uint32
}

func (i info) marshal(b []byte) {
	binary.BigEndian.PutUint64(b[0:], i.Addr)
	binary.BigEndian.PutUint32(b[8:], i.Rkey)
	binary.BigEndian.PutUint32(b[12:], i.Size)
}

// parseInfo reads an advertisement of n bytes (the completion's length):
// rping accepts nothing but 16.
func parseInfo(b []byte, n int) (info, error) {
	if n != infoSize || len(b) < infoSize {
		return info{}, fmt.Errorf("Received bogus data, size %d", n)
	}
	return info{
		Addr: binary.BigEndian.Uint64(b[0:]),
		Rkey: binary.BigEndian.Uint32(b[8:]),
		Size: binary.BigEndian.Uint32(b[12:]),
	}, nil
}

// The ping text: "rdma-ping-<n>: " then characters from 'A' to 'z'
// ('A'..'z' wraps back to 'A'), starting one later each ping, and a NUL in
// the last byte.
const (
	firstChar = 65  // 'A'
	lastChar  = 122 // 'z'
)

// fillPing writes ping n into buf as rping's client does (snprintf into
// the buffer, then the rotating characters).
func fillPing(buf []byte, n int) {
	// The longest prefix, "rdma-ping-2147483647: ", is shorter than the
	// smallest size (minSize), so snprintf never cuts it.
	cc := copy(buf, "rdma-ping-"+strconv.Itoa(n)+": ")
	c := firstChar + n%(lastChar-firstChar+1)
	for i := cc; i < len(buf); i++ {
		buf[i] = byte(c)
		if c++; c > lastChar {
			c = firstChar
		}
	}
	buf[len(buf)-1] = 0
}

// cString is the text of buf up to its first NUL, as printf's %s reads it.
func cString(buf []byte) []byte {
	if k := bytes.IndexByte(buf, 0); k >= 0 {
		return buf[:k]
	}
	return buf
}
