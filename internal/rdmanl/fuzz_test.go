package rdmanl

import (
	"context"
	"errors"
	"io"
	"testing"
)

// FuzzParseMessages feeds arbitrary datagrams to every parser: none may
// panic or read out of bounds, and every failure must match ErrMalformed.
// Seeds (testdata/fuzz/FuzzParseMessages) are datagrams recorded from the
// 6.1 and 6.12 kernels.
func FuzzParseMessages(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, err := ParseMessages(b)
		checkMalformed(t, err)
		for _, m := range msgs {
			if len(m.Payload) > len(b) {
				t.Fatalf("payload of %d bytes from a %d-byte buffer", len(m.Payload), len(b))
			}
			attrs, err := ParseAttrs(m.Payload)
			checkMalformed(t, err)
			for _, a := range attrs {
				if len(a.Data) > len(m.Payload) || a.Type > nlaTypeMask {
					t.Fatalf("attribute %d of %d bytes from a %d-byte payload", a.Type, len(a.Data), len(m.Payload))
				}
			}
			_, err = ParseDevice(m.Payload)
			checkMalformed(t, err)
			_, err = ParseCharDev(m.Payload)
			checkMalformed(t, err)
			_, err = ParseSys(m.Payload)
			checkMalformed(t, err)
			if m.Type == NLMSG_ERROR {
				_, _, err = parseErrorMsg(m)
				checkMalformed(t, err)
			}
		}
	})
}

func checkMalformed(t *testing.T, err error) {
	t.Helper()
	if err != nil && !errors.Is(err, ErrMalformed) {
		t.Fatalf("error %v does not match ErrMalformed", err)
	}
}

// FuzzConn runs the request loop on an arbitrary reply: it must end, with
// an error or without, and never panic.
func FuzzConn(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, do := range []func(*Conn) error{
			func(c *Conn) error { _, err := c.Devices(); return err },
			func(c *Conn) error { _, err := c.CharDev(0, "uverbs"); return err },
			func(c *Conn) error { _, err := c.Sys(); return err },
		} {
			// The reply's sequence number is patched to match the request
			// so the fuzzer need not guess it.
			reply := append([]byte(nil), b...)
			if len(reply) >= 12 {
				ne.PutUint32(reply[8:12], 1)
			}
			c := newConn(&fuzzSocket{reply: reply})
			err := do(c)
			if err != nil && errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("sent more than one request: %v", err)
			}
		}
	})
}

// fuzzSocket accepts one request and answers with one datagram, then EOF.
type fuzzSocket struct {
	reply []byte
	sent  bool
	read  bool
}

func (s *fuzzSocket) send(context.Context, []byte) error {
	if s.sent {
		return io.ErrUnexpectedEOF
	}
	s.sent = true
	return nil
}

func (s *fuzzSocket) recv(_ context.Context, b []byte, _ bool) (int, error) {
	if s.read {
		return 0, io.EOF
	}
	s.read = true
	return copy(b, s.reply), nil
}

func (s *fuzzSocket) close() error { return nil }
