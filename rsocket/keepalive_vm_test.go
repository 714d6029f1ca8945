package rsocket

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

// waitKeepAlives waits until c's peer acknowledged at least n keepalives.
func waitKeepAlives(t *testing.T, c *Conn, n uint64) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); c.kaAcked.Load() < n; {
		if time.Now().After(end) {
			t.Fatalf("%d keepalives sent, %d acknowledged, want %d acknowledged", c.kaSent.Load(), c.kaAcked.Load(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestKeepAliveVM: an idle connection with KeepAlive on both ends sends
// keepalives that the peer's device acknowledges, none while it sends
// data, and stays usable.
func TestKeepAliveVM(t *testing.T) {
	requireVM(t)
	const every = 50 * time.Millisecond
	d := fromB
	d.KeepAlive = every
	c, s := pair(t, ListenConfig{Config: Config{KeepAlive: every}}, d)
	waitKeepAlives(t, c, 5)
	waitKeepAlives(t, s, 5)
	for name, x := range map[string]*Conn{"client": c, "server": s} {
		if sent, acked := x.kaSent.Load(), x.kaAcked.Load(); sent-acked > ctrlSlots {
			t.Errorf("%s: %d keepalives sent, %d acknowledged", name, sent, acked)
		}
	}
	// Busy: a write every 10 ms; the writer sends no keepalive.
	go io.Copy(io.Discard, s)
	before := c.kaSent.Load()
	for i := 0; i < 50; i++ {
		if _, err := c.Write([]byte("busy")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(every / 5)
	}
	if n := c.kaSent.Load() - before; n > 1 {
		t.Errorf("%d keepalives sent while writing every %v", n, every/5)
	}
	t.Logf("client: %d keepalives sent, %d acknowledged; server: %d, %d", c.kaSent.Load(), c.kaAcked.Load(),
		s.kaSent.Load(), s.kaAcked.Load())
	// Still a stream: the server echoes 64 KiB back... after the copier,
	// so check the other direction.
	msg := bytes.Repeat([]byte("keepalive"), 7282)
	go s.Write(msg)
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("read after keepalives: %v, equal %v", err, bytes.Equal(got, msg))
	}
}

// TestKeepAliveRstreamVM: this package's keepalives reach rdma-core's
// rstream -k 1 (a server that sends its own each second), which then
// runs its test.
func TestKeepAliveRstreamVM(t *testing.T) {
	requireVM(t)
	ctx := testCtx(t, 120*time.Second)
	port := 7600
	cmd, out := runRstream(t, ctx, append([]string{"-b", vmenv.AddrA, "-p", strconv.Itoa(port), "-k", "1"},
		rstreamArgs(4096, "b")...)...)
	d := fromB
	d.KeepAlive = 50 * time.Millisecond
	var c *Conn
	var err error
	for {
		if c, err = d.Dial(ctx, fmt.Sprintf("%s:%d", vmenv.AddrA, port)); !errors.Is(err, unix.ECONNREFUSED) || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		killRstream(t, cmd, out, err)
	}
	// Idle for 2.5 s: rstream's keepalives (every second) arrive too.
	waitKeepAlives(t, c, 10)
	time.Sleep(2500 * time.Millisecond)
	var p rstreamPeer
	err = p.run(c, true, 4096, 3, 2)
	t.Logf("%d keepalives sent, %d acknowledged", c.kaSent.Load(), c.kaAcked.Load())
	c.Close()
	if err != nil {
		killRstream(t, cmd, out, err)
	}
	checkRstream(t, cmd, out)
	if !strings.Contains(out.String(), "Keepalive: ON\n  time: 1\n") {
		t.Error("rstream did not set keepalive")
	}
}
