package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/uverbs"
)

var roceGID = uverbs.GID{10: 0xff, 11: 0xff, 12: 10, 13: 99, 14: 0, 15: 1}

// TestEncode pins the bytes: these are what rc_pingpong.c's sprintf and
// gid_to_wire_gid produce for the same address (checked with gcc).
func TestEncode(t *testing.T) {
	got := dest{LID: 0, QPN: 0x11, PSN: 0xabcdef, GID: roceGID}.encode()
	want := "0000:000011:abcdef:00000000000000000000ffff0a630001\x00"
	if diff := cmp.Diff(want, string(got[:])); diff != "" {
		t.Errorf("encode (-want +got):\n%s", diff)
	}
	if len(want) != msgSize {
		t.Fatalf("message size %d, want %d", len(want), msgSize)
	}
	ib := dest{LID: 0xbeef, QPN: 0xffffff, PSN: 1, GID: uverbs.GID{0: 0xfe, 1: 0x80, 15: 0x42}}.encode()
	if diff := cmp.Diff("beef:ffffff:000001:fe800000000000000000000000000042\x00", string(ib[:])); diff != "" {
		t.Errorf("encode (-want +got):\n%s", diff)
	}
}

func TestDecode(t *testing.T) {
	for _, d := range []dest{
		{},
		{LID: 1, QPN: 0x11, PSN: 0xabcdef, GID: roceGID},
		{LID: 0xffff, QPN: 0xffffff, PSN: 0xffffff, GID: uverbs.GID{0: 0xfe, 1: 0x80, 15: 0xff}},
	} {
		m := d.encode()
		got, err := decodeDest(m[:])
		if err != nil {
			t.Fatalf("decode %q: %v", m, err)
		}
		if diff := cmp.Diff(d, got); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
	}
	// Upper-case hex and short fields, as sscanf("%x") takes them; the
	// text ends at the first NUL, whatever follows.
	got, err := decodeDest([]byte("1:AB:0:00000000000000000000FFFF0A630001\x00garbage"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(dest{LID: 1, QPN: 0xab, GID: roceGID}, got); diff != "" {
		t.Errorf("decode (-want +got):\n%s", diff)
	}
}

func TestDecodeBadInput(t *testing.T) {
	gid := "00000000000000000000ffff0a630001"
	for _, tc := range []struct{ name, msg string }{
		{"empty", ""},
		{"all NUL", string(make([]byte, msgSize))},
		{"three fields", "0000:000011:abcdef"},
		{"five fields", "0000:000011:abcdef:" + gid + ":00"},
		{"LID not hex", "00g0:000011:abcdef:" + gid},
		{"LID over 16 bits", "10000:000011:abcdef:" + gid},
		{"QPN over 24 bits", "0000:1000000:abcdef:" + gid},
		{"PSN over 24 bits", "0000:000011:1abcdef:" + gid},
		{"negative PSN", "0000:000011:-1:" + gid},
		{"empty QPN", "0000::abcdef:" + gid},
		{"long field", "000000000:000011:abcdef:" + gid},
		{"short GID", "0000:000011:abcdef:" + gid[:30]},
		{"long GID", "0000:000011:abcdef:" + gid + "00"},
		{"GID not hex", "0000:000011:abcdef:" + gid[:31] + "x"},
		{"spaces", "0000: 00011:abcdef:" + gid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d, err := decodeDest([]byte(tc.msg)); !errors.Is(err, ErrBadMessage) {
				t.Errorf("decode %q = %+v, %v; want ErrBadMessage", tc.msg, d, err)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte("0000:000011:abcdef:00000000000000000000ffff0a630001\x00"))
	f.Add([]byte("1:2:3:4"))
	f.Fuzz(func(t *testing.T, m []byte) {
		d, err := decodeDest(m)
		if err != nil {
			return
		}
		e := d.encode()
		again, err := decodeDest(e[:])
		if err != nil || again != d {
			t.Fatalf("%q decodes to %+v, whose encoding %q decodes to %+v, %v", m, d, e, again, err)
		}
	})
}

// cPeer is the C examples' side of the TCP exchange, byte for byte as
// pp_client_exch_dest and pp_server_exch_dest do it (n addresses each way,
// zero-filled ones after the QPs, for srq).
type cPeer struct {
	n      int
	local  []dest
	remote []dest
	extra  int // bytes the Go side sent after the exchange (want 0)
}

func (c *cPeer) send(conn net.Conn) error {
	_, err := conn.Write(encodeAll(c.local, c.n))
	return err
}

func (c *cPeer) receive(conn net.Conn) error {
	buf := make([]byte, c.n*msgSize)
	if _, err := io.ReadFull(conn, buf); err != nil {
		return err
	}
	for i := 0; i < c.n; i++ {
		d, err := decodeDest(buf[i*msgSize : (i+1)*msgSize])
		if err != nil {
			return err
		}
		c.remote = append(c.remote, d)
	}
	return nil
}

// server: read, write, read "done" (sizeof "done" bytes), close.
func (c *cPeer) server(conn net.Conn) error {
	defer conn.Close()
	if err := c.receive(conn); err != nil {
		return err
	}
	if err := c.send(conn); err != nil {
		return err
	}
	done := make([]byte, 5)
	if _, err := io.ReadFull(conn, done); err != nil || string(done) != "done\x00" {
		return fmt.Errorf("done: %q, %v", done, err)
	}
	rest, _ := io.ReadAll(conn)
	c.extra = len(rest)
	return nil
}

// client: write, read, write "done", close.
func (c *cPeer) client(conn net.Conn) error {
	defer conn.Close()
	if err := c.send(conn); err != nil {
		return err
	}
	if err := c.receive(conn); err != nil {
		return err
	}
	_, err := conn.Write([]byte("done\x00"))
	return err
}

func addrs(n int, psn uint32) []dest {
	var ds []dest
	for i := 0; i < n; i++ {
		ds = append(ds, dest{QPN: 0x100 + uint32(i), PSN: psn + uint32(i), GID: roceGID})
	}
	return ds
}

// TestExchangeWithC runs the Go client against the C server's protocol and
// the Go server against the C client's, over TCP on the loopback, for one
// address (rc, uc, ud) and srq's 256.
func TestExchangeWithC(t *testing.T) {
	for _, tc := range []struct {
		k   kind
		nqp int
	}{{kindRC, 1}, {kindUD, 1}, {kindSRQ, 16}, {kindSRQ, 1}} {
		n := messagesPerSide(tc.k)
		zeros := make([]dest, n-tc.nqp)
		t.Run(fmt.Sprintf("%v/%dQP/go-client", tc.k, tc.nqp), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			peer := &cPeer{n: n, local: addrs(tc.nqp, 0x500)}
			errc := make(chan error, 1)
			go func() {
				conn, err := ln.Accept()
				if err != nil {
					errc <- err
					return
				}
				errc <- peer.server(conn)
			}()
			conn, err := dial(ctx, "127.0.0.1", ln.Addr().(*net.TCPAddr).Port)
			if err != nil {
				t.Fatal(err)
			}
			local := addrs(tc.nqp, 0x900)
			remote, err := clientExchange(ctx, conn, tc.k, local)
			conn.Close()
			if err != nil {
				t.Fatal(err)
			}
			if err := <-errc; err != nil {
				t.Fatalf("C server: %v", err)
			}
			if diff := cmp.Diff(addrs(tc.nqp, 0x500), remote); diff != "" {
				t.Errorf("client got (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(append(local, zeros...), peer.remote); diff != "" {
				t.Errorf("C server got (-want +got):\n%s", diff)
			}
			if peer.extra != 0 {
				t.Errorf("%d bytes after done", peer.extra)
			}
		})
		t.Run(fmt.Sprintf("%v/%dQP/go-server", tc.k, tc.nqp), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			peer := &cPeer{n: n, local: addrs(tc.nqp, 0x500)}
			errc := make(chan error, 1)
			ready := func(a net.Addr) {
				go func() {
					conn, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(a.(*net.TCPAddr).Port)))
					if err != nil {
						errc <- err
						return
					}
					errc <- peer.client(conn)
				}()
			}
			conn, err := listenAccept(ctx, 0, ready)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			local := addrs(tc.nqp, 0x900)
			var connectedTo []dest
			remote, err := serverExchange(ctx, conn, tc.k, local, func(r []dest) error {
				connectedTo = r
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := <-errc; err != nil {
				t.Fatalf("C client: %v", err)
			}
			if diff := cmp.Diff(addrs(tc.nqp, 0x500), remote); diff != "" {
				t.Errorf("server got (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(remote, connectedTo); diff != "" {
				t.Errorf("connected to (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(append(local, zeros...), peer.remote); diff != "" {
				t.Errorf("C client got (-want +got):\n%s", diff)
			}
		})
	}
}

// TestServerConnectsBeforeReplying: the server's QPs must be ready before
// the client learns the server's address (it sends at once).
func TestServerConnectsBeforeReplying(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	ctx := context.Background()
	go func() {
		(&cPeer{n: 1, local: addrs(1, 1)}).send(b)
	}()
	errConnect := errors.New("modify QP failed")
	_, err := serverExchange(ctx, a, kindRC, addrs(1, 2), func([]dest) error { return errConnect })
	if !errors.Is(err, errConnect) {
		t.Errorf("err = %v, want the connect error", err)
	}
}

// TestExchangeBounded: a silent peer, a bad peer and a cancelled run all
// end the exchange, with an error and no hang.
func TestExchangeBounded(t *testing.T) {
	t.Run("cancelled accept", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		if _, err := listenAccept(ctx, 0, nil); !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	})
	t.Run("silent client", func(t *testing.T) {
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := serverExchange(ctx, a, kindRC, addrs(1, 2), func([]dest) error { return nil })
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("err = %v, want os.ErrDeadlineExceeded", err)
		}
	})
	t.Run("silent server", func(t *testing.T) {
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		go io.Copy(io.Discard, b)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := clientExchange(ctx, a, kindRC, addrs(1, 2))
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("err = %v, want os.ErrDeadlineExceeded", err)
		}
	})
	t.Run("short message", func(t *testing.T) {
		a, b := net.Pipe()
		defer a.Close()
		go func() {
			b.Write([]byte("0000:000011"))
			b.Close()
		}()
		_, err := serverExchange(context.Background(), a, kindRC, addrs(1, 2), func([]dest) error { return nil })
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("err = %v, want io.ErrUnexpectedEOF", err)
		}
	})
	t.Run("garbage", func(t *testing.T) {
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		go b.Write(bytes.Repeat([]byte{'z'}, msgSize))
		_, err := serverExchange(context.Background(), a, kindRC, addrs(1, 2), func([]dest) error { return nil })
		if !errors.Is(err, ErrBadMessage) {
			t.Errorf("err = %v, want ErrBadMessage", err)
		}
	})
	t.Run("not done", func(t *testing.T) {
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		go func() {
			p := &cPeer{n: 1, local: addrs(1, 1)}
			p.send(b)
			p.receive(b)
			b.Write([]byte("nope\x00"))
		}()
		_, err := serverExchange(context.Background(), a, kindRC, addrs(1, 2), func([]dest) error { return nil })
		if !errors.Is(err, ErrBadMessage) {
			t.Errorf("err = %v, want ErrBadMessage", err)
		}
	})
}
