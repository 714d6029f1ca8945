package rsocket

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// syncMsg writes one byte from a and reads it at b: what a sent before
// (its mappings, its WriteIO data) has arrived at b.
func syncMsg(t *testing.T, a, b *Conn) {
	t.Helper()
	if _, err := a.Write([]byte{'s'}); err != nil {
		t.Fatal(err)
	}
	var x [1]byte
	if _, err := io.ReadFull(b, x[:]); err != nil {
		t.Fatal(err)
	}
}

// TestIOMapVM: the server maps memory, the client writes it with WriteIO
// (riomap and riowrite between two Go peers): the bytes land, a flag
// byte is seen by Load, a write past the mapping stops there with
// ErrNotMapped, slots run out and come back, and Conn.Close frees what
// is still mapped (TestMain's leak check).
func TestIOMapVM(t *testing.T) {
	requireVM(t)
	// Small staging rings, so that WriteIO's chunks wrap them.
	cfg := Config{IOMapSize: 2, SendBuffer: 8192, RecvBuffer: 8192, SQSize: 16, RQSize: 16}
	client, server := pair(t, ListenConfig{Config: cfg}, Dialer{Config: cfg, LocalAddr: fromB.LocalAddr})

	if _, err := server.WriteIO([]byte("x"), 0); !errors.Is(err, ErrNotMapped) {
		t.Errorf("WriteIO with no mapping of the peer's: %v, want ErrNotMapped", err)
	}
	const off, size = 1 << 40, 300000
	m, err := server.MapIO(size, off)
	if err != nil {
		t.Fatal(err)
	}
	if m.Offset() != off || m.Len() != size || len(m.Bytes()) != size {
		t.Fatalf("mapping at %d of %d bytes (%d), want %d, %d", m.Offset(), m.Len(), len(m.Bytes()), off, size)
	}
	last := size - 1
	m.Bytes()[last] = 0xFF
	syncMsg(t, server, client) // the mapping is in the client's slot now

	data := make([]byte, size)
	rand.New(rand.NewSource(1)).Read(data)
	data[last] = 7 // the flag the server waits for
	if n, err := client.WriteIO(data, off); n != size || err != nil {
		t.Fatalf("WriteIO = %d, %v", n, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for m.Load(last) != 7 {
		if time.Now().After(deadline) {
			t.Fatal("the flag byte never changed")
		}
	}
	if !bytes.Equal(m.Bytes(), data) {
		t.Error("the mapped memory differs from what was written")
	}

	// Past the end: the part inside is written, then ErrNotMapped.
	tail := bytes.Repeat([]byte{0xAB}, 100)
	n, err := client.WriteIO(tail, off+size-40)
	if n != 40 || !errors.Is(err, ErrNotMapped) {
		t.Errorf("WriteIO across the end = %d, %v; want 40, ErrNotMapped", n, err)
	}
	syncMsg(t, client, server)
	if !bytes.Equal(m.Bytes()[size-40:], tail[:40]) {
		t.Error("the last 40 bytes were not written")
	}

	// Two slots offered: a third mapping is refused until one closes.
	m2, err := server.MapIO(4096, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := server.MapIO(4096, 8192); !errors.Is(err, unix.ENOMEM) {
		t.Errorf("a third mapping: %v, want ENOMEM", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil || m.Bytes() != nil || m.Load(0) != 0 {
		t.Errorf("a second Close: %v; Bytes %d bytes, Load %d", err, len(m.Bytes()), m.Load(0))
	}
	m3, err := server.MapIO(4096, 8192)
	if err != nil {
		t.Fatalf("mapping after a Close: %v", err)
	}
	syncMsg(t, server, client)
	if n, err := client.WriteIO([]byte("lo"), 4095); n != 1 || !errors.Is(err, ErrNotMapped) {
		t.Errorf("WriteIO from the end of one mapping over a gap = %d, %v", n, err)
	}
	if n, err := client.WriteIO([]byte("hi"), 8192); n != 2 || err != nil {
		t.Errorf("WriteIO into the slot taken again = %d, %v", n, err)
	}
	syncMsg(t, client, server)
	if got := string(m3.Bytes()[:2]) + string(m2.Bytes()[4095:]); got != "hil" {
		t.Errorf("mapped bytes %q, want \"hil\"", got)
	}
	// m2 and m3 stay mapped: the connections' Close frees them.
}

// TestIOMapRefusedVM: a peer that takes no mappings (Config.IOMapSize 0,
// librdmacm's default) makes MapIO fail with ENOMEM; bad arguments fail
// with EINVAL.
func TestIOMapRefusedVM(t *testing.T) {
	requireVM(t)
	client, _ := pair(t, ListenConfig{}, fromB)
	if _, err := client.MapIO(4096, 0); !errors.Is(err, unix.ENOMEM) {
		t.Errorf("MapIO to a peer with no slots: %v, want ENOMEM", err)
	}
	for _, tc := range []struct {
		size int
		off  uint64
	}{{0, 0}, {-1, 0}, {1 << 33, 0}, {4096, ^uint64(0) - 100}} {
		if _, err := client.MapIO(tc.size, tc.off); !errors.Is(err, unix.EINVAL) {
			t.Errorf("MapIO(%d, %d): %v, want EINVAL", tc.size, tc.off, err)
		}
	}
	if _, err := client.WriteIO(make([]byte, 10), ^uint64(0)-5); !errors.Is(err, unix.EINVAL) {
		t.Errorf("WriteIO wrapping the offsets: %v, want EINVAL", err)
	}
	if _, err := client.WriteIO(make([]byte, 10), 0); !errors.Is(err, ErrNotMapped) || !strings.Contains(err.Error(), "Config.IOMapSize") {
		t.Errorf("WriteIO on a side that takes no mappings: %v, want ErrNotMapped naming Config.IOMapSize", err)
	}
	if err := client.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if _, err := client.MapIO(4096, 0); !errors.Is(err, unix.EPIPE) {
		t.Errorf("MapIO after CloseWrite: %v, want EPIPE", err)
	}
	client.Close()
	if _, err := client.MapIO(4096, 0); err == nil {
		t.Error("MapIO after Close succeeded")
	}
}

// TestIOMapCloseRaceVM: MapIO and IOMap.Close on one goroutine while
// Conn.Close runs on another: each MapIO returns a mapping or an error,
// nothing panics, and nothing is left behind (TestMain's leak check).
func TestIOMapCloseRaceVM(t *testing.T) {
	requireVM(t)
	cfg := Config{IOMapSize: 4}
	for round := 0; round < 10; round++ {
		client, server := pair(t, ListenConfig{Config: cfg}, Dialer{Config: cfg, LocalAddr: fromB.LocalAddr})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; i < 8; i++ {
				m, err := server.MapIO(4096*(i+1), uint64(i)<<20)
				if err != nil {
					continue
				}
				if i%2 == 0 {
					m.Close()
				}
			}
		}()
		if round%2 == 1 {
			time.Sleep(time.Duration(round) * time.Millisecond)
		}
		server.Close()
		<-done
		client.Close()
	}
}

// TestIOMapWriteAfterCloseVM: a WriteIO into a mapping the peer closed
// (riounmap does not tell the peer) fails the writer's connection: its
// device reports the peer's refusal, and the next Write or Read returns
// an error matching unix.ECONNRESET.
func TestIOMapWriteAfterCloseVM(t *testing.T) {
	requireVM(t)
	cfg := Config{IOMapSize: 1}
	client, server := pair(t, ListenConfig{Config: cfg}, Dialer{Config: cfg, LocalAddr: fromB.LocalAddr})
	m, err := server.MapIO(4096, 0)
	if err != nil {
		t.Fatal(err)
	}
	syncMsg(t, server, client)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := client.WriteIO(make([]byte, 100), 0); err != nil {
		t.Fatalf("WriteIO: %v (the failure is the device's, later)", err)
	}
	client.SetDeadline(time.Now().Add(30 * time.Second))
	var b [1]byte
	_, err = client.Read(b[:]) // waits for completions: the write's fails
	t.Logf("Read after the refused write: %v", err)
	if !errors.Is(err, unix.ECONNRESET) {
		t.Errorf("Read = %v, want ECONNRESET", err)
	}
	if _, err := client.Write([]byte("x")); !errors.Is(err, unix.ECONNRESET) {
		t.Errorf("Write = %v, want ECONNRESET", err)
	}
}
