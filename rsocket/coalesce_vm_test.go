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

// TestCoalesceVM: small Writes that find no credits are staged and go in
// few large messages, in order, wrapping around sbuf; staged bytes go
// even when the writer then neither reads nor writes (the background
// flush); Close sends what is staged before its DISCONNECT.
func TestCoalesceVM(t *testing.T) {
	requireVM(t)
	msgs, got := countData(t) // before the connections' goroutines start
	cfg := Config{SendBuffer: 12288, RecvBuffer: 16384, SQSize: 16, RQSize: 16}
	client, server := pair(t, ListenConfig{Config: cfg}, Dialer{Config: cfg, LocalAddr: fromB.LocalAddr})

	const size = 61 // a divisor of no ring
	data := make([]byte, 3000*size)
	for i := range data {
		data[i] = byte(i*7 + i/251)
	}
	buf := make([]byte, len(data))
	server.SetReadDeadline(time.Now().Add(30 * time.Second))

	// 200 writes to a server that reads nothing yet, so that nothing
	// polls its CQ and no credits come back: the first 12 go at once (the
	// send queue's 16 slots less the 4 kept for control messages; the
	// server gave 16 credits), the other 188 (11468 bytes) fit in sbuf
	// and wait there, and Write never waits. Then the writer neither reads nor
	// writes, and the server reads: the background flush sends the staged
	// bytes as credits come back, in as many messages as the server's
	// ring halves (8192 bytes), its credits and its SGL updates cut them
	// into: a few (14-18 in six runs, three a kernel, under -race).
	const first = 200
	for i := 0; i < first; i++ {
		if _, err := client.Write(data[i*size : (i+1)*size]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := io.ReadFull(server, buf[:first*size]); err != nil {
		t.Fatalf("reading what a writer left staged: %v", err)
	}
	if i := firstDiff(buf[:first*size], data[:first*size]); i >= 0 {
		t.Fatalf("byte %d differs: got %#x, want %#x", i, buf[i], data[i])
	}
	if msgs() > first/5 || got() != first*size {
		t.Errorf("%d writes of %d bytes came in %d messages of %d bytes in all; want 12 and a few more (at most %d)",
			first, size, msgs(), got(), first/5)
	}
	t.Logf("%d writes of %d bytes came in %d messages", first, size, msgs())

	// 3000 writes while the server reads: the writer waits whenever sbuf
	// is full, and staged bytes wrap around it.
	before := msgs()
	wErr := make(chan error, 1)
	go func() {
		for i := 0; i < 3000; i++ {
			if _, err := client.Write(data[i*size : (i+1)*size]); err != nil {
				wErr <- err
				return
			}
		}
		wErr <- nil
	}()
	if _, err := io.ReadFull(server, buf); err != nil {
		t.Fatalf("reading %d bytes: %v", len(buf), err)
	}
	if err := <-wErr; err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(buf, data); i >= 0 {
		t.Fatalf("byte %d differs: got %#x, want %#x", i, buf[i], data[i])
	}
	t.Logf("3000 writes of %d bytes with the server reading came in %d messages", size, msgs()-before)

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
