package rsocket

import (
	"hash/crc32"
	"io"
	"math/rand"
	"os"
	"testing"
	"time"
)

// TestCopy1GiBVM copies 1 GiB with io.Copy, checksummed (CRC-32C) on both
// ends. It takes minutes under TCG, so it runs only with
// GOVERBS_RSOCKET_LONG=1.
func TestCopy1GiBVM(t *testing.T) {
	if os.Getenv("GOVERBS_RSOCKET_LONG") == "" {
		t.Skip("set GOVERBS_RSOCKET_LONG=1 to copy 1 GiB")
	}
	requireVM(t)
	client, server := pair(t, ListenConfig{}, fromB)
	const block, blocks = 1 << 20, 1024
	data := make([]byte, block)
	rand.New(rand.NewSource(3)).Read(data)
	tab := crc32.MakeTable(crc32.Castagnoli)
	type result struct {
		n   int64
		sum uint32
		err error
	}
	got := make(chan result, 1)
	go func() {
		h := crc32.New(tab)
		n, err := io.Copy(h, server)
		got <- result{n, h.Sum32(), err}
	}()
	start := time.Now()
	h := crc32.New(tab)
	src := io.TeeReader(io.LimitReader(repeat(data), block*blocks), h)
	n, err := io.Copy(client, src)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil || r.n != n || r.sum != h.Sum32() {
		t.Fatalf("received %d bytes, crc %08x (%v); sent %d, crc %08x", r.n, r.sum, r.err, n, h.Sum32())
	}
	t.Logf("%d bytes in %v, crc32c %08x on both ends", n, time.Since(start), r.sum)
}

type repeater struct {
	b   []byte
	off int
}

func repeat(b []byte) io.Reader { return &repeater{b: b} }

func (r *repeater) Read(p []byte) (int, error) {
	n := copy(p, r.b[r.off:])
	r.off = (r.off + n) % len(r.b)
	return n, nil
}
