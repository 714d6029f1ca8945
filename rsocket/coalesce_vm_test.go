package rsocket

import (
	"bytes"
	"io"
	"sync"
	"testing"
	"time"
)

// countData counts the DATA messages this process receives, and their
// bytes, until the test ends.
func countData(t *testing.T) (msgs, bytes func() int) {
	var mu sync.Mutex
	var n, b int
	rxHook = func(imm uint32) {
		if imm>>29 == opData {
			mu.Lock()
			n++
			b += int(imm & maxImmData)
			mu.Unlock()
		}
	}
	t.Cleanup(func() { rxHook = nil })
	return func() int { mu.Lock(); defer mu.Unlock(); return n },
		func() int { mu.Lock(); defer mu.Unlock(); return b }
}

// TestCoalesceVM: small Writes that find the peer's ring full are staged
// and go in few large messages, in order, wrapping around sbuf; staged
// bytes go even when the writer then neither reads nor writes (the
// background flush); Close sends what is staged before its DISCONNECT.
func TestCoalesceVM(t *testing.T) {
	requireVM(t)
	msgs, got := countData(t) // before the connections' goroutines start
	cfg := Config{SendBuffer: 12288, RecvBuffer: 16384, SQSize: 16, RQSize: 16}
	client, server := pair(t, ListenConfig{Config: cfg}, Dialer{Config: cfg, LocalAddr: fromB.LocalAddr})

	// 3000 writes of 61 bytes (none a divisor of the rings), the server
	// reading only once the writer has had time to fill them.
	const n, size = 3000, 61
	data := make([]byte, n*size)
	for i := range data {
		data[i] = byte(i*7 + i/251)
	}
	wErr := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			if _, err := client.Write(data[i*size : (i+1)*size]); err != nil {
				wErr <- err
				return
			}
		}
		wErr <- nil
	}()
	time.Sleep(200 * time.Millisecond)
	server.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, len(data))
	if _, err := io.ReadFull(server, buf); err != nil {
		t.Fatalf("reading %d bytes: %v", len(buf), err)
	}
	if err := <-wErr; err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(buf, data); i >= 0 {
		t.Fatalf("byte %d differs: got %#x, want %#x", i, buf[i], data[i])
	}
	if got() != len(data) || msgs() > n/10 {
		t.Errorf("%d writes of %d bytes came in %d messages of %d bytes in all; want at most %d messages", n, size,
			msgs(), got(), n/10)
	}
	t.Logf("%d writes of %d bytes came in %d messages", n, size, msgs())

	// The writer stops with bytes staged and waits: the background flush
	// sends them as the server reads.
	before := msgs()
	for i := 0; i < 200; i++ {
		if _, err := client.Write(data[i*size : (i+1)*size]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := io.ReadFull(server, buf[:200*size]); err != nil {
		t.Fatalf("reading what a writer left staged: %v", err)
	}
	if i := firstDiff(buf[:200*size], data[:200*size]); i >= 0 {
		t.Fatalf("byte %d differs after the background flush", i)
	}
	t.Logf("200 more writes came in %d messages", msgs()-before)

	// Close sends what is staged, then the DISCONNECT: the server reads
	// every byte, then EOF. (150 writes fit in sbuf: they do not wait.)
	const last = 150
	for i := 0; i < last; i++ {
		if _, err := client.Write(data[i*size : (i+1)*size]); err != nil {
			t.Fatal(err)
		}
	}
	cErr := make(chan error, 1)
	go func() { cErr <- client.Close() }()
	all, err := io.ReadAll(server)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-cErr; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(all, data[:last*size]) {
		t.Fatalf("after Close the server read %d bytes (first difference at %d); want the %d written", len(all),
			firstDiff(all, data[:last*size]), last*size)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}
