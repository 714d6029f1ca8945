package rsocket

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/uverbs"
)

// rawImm makes peer send a zero-length RDMA WRITE WITH IMM carrying imm,
// bypassing the protocol: a peer that misbehaves.
func rawImm(t *testing.T, peer *Conn, imm uint32) {
	t.Helper()
	peer.mu.Lock()
	defer peer.mu.Unlock()
	wr := []uverbs.SendWR{{ID: wrCtrl, Flags: uverbs.SendSignaled, Opcode: uverbs.WRRDMAWriteWithImm, Imm: imm}}
	peer.ctrlAvail--
	if err := peer.qp.PostSend(wr); err != nil {
		t.Fatal(err)
	}
}

// TestMalformedPeerVM: each malformed message gives an error on that
// connection (a protocol violation) to a blocked Read and to Write, and
// Close still frees everything.
func TestMalformedPeerVM(t *testing.T) {
	requireVM(t)
	for _, tc := range []struct {
		name string
		imm  uint32
	}{
		{"reserved op 1", mkImm(opDataMore, 10)},
		{"reserved op 5", mkImm(opReserved, 0)},
		{"zero-length data", mkImm(opData, 0)},
		{"data beyond the ring", mkImm(opData, maxImmData)},
		{"credits moved back", mkImm(opSGL, 1)},
		{"iomap update of a slot not offered", mkImm(opIOMapSGL, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, server := pair(t, ListenConfig{}, fromB)
			// Let the first SGL updates pass, so the credit case is a step back.
			if _, err := server.Write([]byte("x")); err != nil {
				t.Fatal(err)
			}
			var b [1]byte
			if _, err := io.ReadFull(client, b[:]); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := client.Read(b[:])
				done <- err
			}()
			rawImm(t, server, tc.imm)
			select {
			case err := <-done:
				if !errors.Is(err, errProtocol) {
					t.Fatalf("Read = %v, want a protocol violation", err)
				}
				t.Logf("Read: %v", err)
			case <-time.After(60 * time.Second):
				t.Fatal("Read did not return")
			}
			if _, err := client.Write([]byte("y")); !errors.Is(err, errProtocol) {
				t.Errorf("Write = %v, want a protocol violation", err)
			}
			if err := client.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
}

// TestManyConnsVM runs connections at once, each echoing a checksummed
// stream (under -race in the VM runs).
func TestManyConnsVM(t *testing.T) {
	requireVM(t)
	const n = 100
	ctx := testCtx(t, 120*time.Second)
	l, err := Listen(ctx, "10.99.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Every connection is closed, on both sides, before the test ends
	// (TestMain's leak check follows).
	var servers sync.WaitGroup
	defer servers.Wait()
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			servers.Add(1)
			go func() { io.Copy(c, c); c.Close(); servers.Done() }()
		}
	}()
	errs := make(chan error, n)
	cfg := Dialer{Config: Config{SendBuffer: 8192, RecvBuffer: 8192, SQSize: 16, RQSize: 16}, LocalAddr: fromB.LocalAddr}
	for i := 0; i < n; i++ {
		go func(i int) {
			c, err := cfg.Dial(ctx, l.Addr().String())
			if err != nil {
				errs <- err
				return
			}
			err = echo(c, i)
			if cerr := c.Close(); err == nil {
				err = cerr
			}
			errs <- err
		}(i)
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// echo writes a stream of 50000+i bytes on c and checks that the peer
// echoes it.
func echo(c net.Conn, i int) error {
	msg := make([]byte, 50000+i)
	for j := range msg {
		msg[j] = byte(i + j)
	}
	werr := make(chan error, 1)
	go func() { _, err := c.Write(msg); werr <- err }()
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if err := <-werr; err != nil {
		return err
	}
	for j := range got {
		if got[j] != msg[j] {
			return fmt.Errorf("conn %d: byte %d differs", i, j)
		}
	}
	return nil
}

// BenchmarkReadWriteVM measures Writes of 64 B (coalesced while the
// peer's ring is full) and 4 KiB to a peer that reads them (allocations
// counted over both sides and the completion goroutines).
func BenchmarkReadWriteVM(b *testing.B) {
	requireVM(b)
	for _, size := range []int{64, 4096} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			client, server := pair(b, ListenConfig{}, fromB)
			buf := make([]byte, size)
			rbuf := make([]byte, size)
			go func() {
				for {
					if _, err := io.ReadFull(server, rbuf); err != nil {
						return
					}
				}
			}()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := client.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPingPongVM measures 64 B round trips: the client writes, the
// server echoes, the client reads (a blocked Read on each side per trip,
// rstream's latency test).
func BenchmarkPingPongVM(b *testing.B) {
	requireVM(b)
	client, server := pair(b, ListenConfig{}, fromB)
	go func() {
		buf := make([]byte, 64)
		for {
			if _, err := io.ReadFull(server, buf); err != nil {
				return
			}
			if _, err := server.Write(buf); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 64)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := client.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(client, buf); err != nil {
			b.Fatal(err)
		}
	}
}

// TestListenerClosedVM: a dial pending on a listener nobody accepts from
// is refused when the listener closes, and a blocked Accept returns
// net.ErrClosed.
func TestListenerClosedVM(t *testing.T) {
	requireVM(t)
	ctx := testCtx(t, 60*time.Second)
	l, err := Listen(ctx, "10.99.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dialed := make(chan error, 1)
	go func() {
		c, err := fromB.Dial(ctx, l.Addr().String())
		if err == nil {
			c.Close()
		}
		dialed <- err
	}()
	time.Sleep(500 * time.Millisecond) // the request reaches the listener
	l.Close()
	if err := <-dialed; err == nil {
		t.Error("Dial to a listener closed before accepting succeeded")
	} else {
		t.Logf("Dial: %v", err)
	}
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close = %v, want net.ErrClosed", err)
	}
	// A blocked Accept is woken by Close.
	l2, err := Listen(ctx, "10.99.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	acc := make(chan error, 1)
	go func() { _, err := l2.Accept(); acc <- err }()
	time.Sleep(100 * time.Millisecond)
	l2.Close()
	if err := <-acc; !errors.Is(err, net.ErrClosed) {
		t.Errorf("blocked Accept after Close = %v, want net.ErrClosed", err)
	}
}

// TestPeerSendsAfterDisconnectVM: a librdmacm peer's rshutdown may post
// credit updates after its DISCONNECT, while it waits for its sends to
// complete. Close, answering the DISCONNECT, keeps the QP up until the
// CM reports the peer gone, so those sends are acknowledged: here the
// peer's zero-length RDMA WRITE, posted once Close is under way, must
// complete successfully (a QP moved to the error state acknowledges
// nothing, and rxe retries such a send forever where retry_count is 7).
func TestPeerSendsAfterDisconnectVM(t *testing.T) {
	requireVM(t)
	client, server := pair(t, ListenConfig{}, fromB)
	rawImm(t, server, mkImm(opCtrl, ctrlDisconn))
	var b [1]byte
	if _, err := client.Read(b[:]); err != io.EOF {
		t.Fatalf("Read after the peer's DISCONNECT = %v, want EOF", err)
	}
	closed := make(chan error, 1)
	start := time.Now()
	go func() { closed <- client.Close() }()
	time.Sleep(200 * time.Millisecond) // Close is lingering by now

	server.mu.Lock()
	server.sendWR[0] = uverbs.SendWR{ID: wrKeep, Flags: uverbs.SendSignaled, Opcode: uverbs.WRRDMAWrite}
	err := server.qp.PostSend(server.sendWR[:])
	server.ctrlAvail--
	server.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); server.kaAcked.Load() == 0; {
		if _, err := server.pollOnce(); err != nil {
			t.Fatal(err)
		}
		server.mu.Lock()
		err := server.err
		server.mu.Unlock()
		if err != nil {
			t.Fatalf("the peer's send after its DISCONNECT failed: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the peer's send after its DISCONNECT did not complete")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) before the peer disconnected", err)
	default:
	}
	if err := server.Close(); err != nil {
		t.Errorf("peer's Close: %v", err)
	}
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
	if d := time.Since(start); d >= closeWait {
		t.Errorf("Close took %v: it waited out closeWait, not for the peer", d)
	}
}
