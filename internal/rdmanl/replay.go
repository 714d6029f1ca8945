package rdmanl

import (
	"context"
	"io"
)

// Replay returns a Conn that answers each request with the next of the
// given datagrams, as recorded from a kernel (Conn.Record): every message
// of a datagram gets the request's sequence number, and when they run out
// a receive fails with io.EOF. It serves replay tests and fuzzing of the
// packages built on this one.
func Replay(datagrams [][]byte) *Conn {
	return newConn(&replaySock{data: datagrams})
}

type replaySock struct {
	data [][]byte
	seq  uint32
}

func (r *replaySock) send(_ context.Context, b []byte) error {
	if len(b) >= nlmsgHdrLen {
		r.seq = ne.Uint32(b[8:12])
	}
	return nil
}

func (r *replaySock) recv(_ context.Context, b []byte, _ bool) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(b, r.data[0])
	r.data = r.data[1:]
	// Patch each message's sequence number, walking the lengths as far as
	// they are sane; the parser judges the rest.
	for off := 0; off+nlmsgHdrLen <= n; {
		l := int(ne.Uint32(b[off:]))
		ne.PutUint32(b[off+8:], r.seq)
		if l < nlmsgHdrLen {
			break
		}
		off += align(l)
	}
	return n, nil
}

func (r *replaySock) close() error { return nil }
