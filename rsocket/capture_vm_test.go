package rsocket

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

// TestCaptureSeedsVM records what rdma-core's rstream sends a Go peer (its
// connection data, and the immediates of a custom test in each role) as
// fuzz seeds. It runs only with GOVERBS_RSOCKET_CAPTURE=1 and prints
// "SEED <target> <name> <hex>" lines, one file each under
// testdata/fuzz/<target>.
func TestCaptureSeedsVM(t *testing.T) {
	if os.Getenv("GOVERBS_RSOCKET_CAPTURE") == "" {
		t.Skip("set GOVERBS_RSOCKET_CAPTURE=1 to record fuzz seeds")
	}
	requireVM(t)
	var mu sync.Mutex
	var imms []byte
	rxHook = func(imm uint32) { mu.Lock(); imms = binary.BigEndian.AppendUint32(imms, imm); mu.Unlock() }
	connDataHook = func(b []byte) {
		fmt.Printf("SEED FuzzConnData %s-rstream-%d %s\n", vmenv.KernelName(), len(b), hex.EncodeToString(b))
	}
	defer func() { rxHook, connDataHook = nil, nil }()
	flush := func(name string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf("SEED FuzzReceiver %s-%s %s\n", vmenv.KernelName(), name, hex.EncodeToString(imms))
		imms = nil
	}
	ctx := testCtx(t, 120*time.Second)
	args := []string{"-S", "100000", "-C", "3", "-I", "1", "-T", "b", "-T", "v"}
	// rstream server, Go client.
	cmd, out := runRstream(t, ctx, append([]string{"-b", vmenv.AddrA, "-p", "7700"}, args...)...)
	c, err := dialRetry(ctx, vmenv.AddrA+":7700")
	if err != nil {
		t.Fatal(err)
	}
	var p rstreamPeer
	if err := p.run(c, true, 100000, 3, 1); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	io.Copy(io.Discard, c)
	c.Close()
	cmd.Wait()
	flush("rstream-server")
	t.Logf("rstream:\n%s", out)
	// rstream client, Go server.
	l, err := Listen(ctx, vmenv.AddrA+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cmd, _ = runRstream(t, context.Background(), append([]string{"-s", vmenv.AddrA, "-b", vmenv.AddrB, "-p", portOf(l)}, args...)...)
	s, err := l.AcceptRSocket()
	if err != nil {
		t.Fatal(err)
	}
	p = rstreamPeer{}
	if err := p.run(s, false, 100000, 3, 1); err != nil {
		t.Fatal(err)
	}
	s.SetReadDeadline(time.Now().Add(30 * time.Second))
	io.Copy(io.Discard, s)
	s.Close()
	cmd.Wait()
	flush("rstream-client")
}

func portOf(l *Listener) string { return strconv.Itoa(l.Addr().(*net.TCPAddr).Port) }
