package rsocket

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
	"github.com/goverbs/goverbs/internal/testvm/vmproc"
)

func requireVM(t testing.TB) {
	t.Helper()
	vmenv.RequireDevice(t, vmenv.RXE0)
	vmenv.RequireDevice(t, vmenv.RXE1)
}

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

var fromB = Dialer{LocalAddr: netip.MustParseAddrPort(vmenv.AddrB + ":0")}

// pair makes a connection rxe1 → rxe0 across the veth.
func pair(t testing.TB, lc ListenConfig, d Dialer) (client, server *Conn) {
	t.Helper()
	ctx := testCtx(t, 60*time.Second)
	l, err := lc.Listen(ctx, vmenv.AddrA+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	type res struct {
		c   *Conn
		err error
	}
	ch := make(chan res, 1)
	go func() { c, err := l.AcceptRSocket(); ch <- res{c, err} }()
	client, err = d.Dial(ctx, l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		client.Close()
		t.Fatal(r.err)
	}
	t.Cleanup(func() { client.Close(); r.c.Close() })
	return client, r.c
}

// TestCopyVM sends a few MiB each way with io.Copy through small rings
// (many wraparounds and SGL updates), half-closes, and compares checksums.
func TestCopyVM(t *testing.T) {
	requireVM(t)
	cfg := Config{SendBuffer: 8192, RecvBuffer: 16384, SQSize: 16, RQSize: 16}
	client, server := pair(t, ListenConfig{Config: cfg}, Dialer{Config: cfg, LocalAddr: fromB.LocalAddr})
	if got, want := client.RemoteAddr().String(), server.LocalAddr().String(); got != want {
		t.Errorf("client's remote %s, server's local %s", got, want)
	}
	if got, want := server.RemoteAddr().String(), client.LocalAddr().String(); got != want {
		t.Errorf("server's remote %s, client's local %s", got, want)
	}
	const size = 4<<20 + 12345
	data := make([]byte, size)
	rand.New(rand.NewSource(1)).Read(data)
	want := sha256.Sum256(data)
	// The server echoes everything, then half-closes.
	srvErr := make(chan error, 1)
	go func() {
		_, err := io.Copy(server, server)
		if err == nil {
			err = server.CloseWrite()
		}
		srvErr <- err
	}()
	wErr := make(chan error, 1)
	go func() {
		_, err := io.Copy(client, bytes.NewReader(data))
		if err == nil {
			err = client.CloseWrite()
		}
		wErr <- err
	}()
	h := sha256.New()
	n, err := io.Copy(h, client)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-wErr; err != nil {
		t.Fatal(err)
	}
	if err := <-srvErr; err != nil {
		t.Fatal(err)
	}
	if n != size || !bytes.Equal(h.Sum(nil), want[:]) {
		t.Fatalf("echoed %d bytes, sha256 %x; want %d bytes, %x", n, h.Sum(nil), size, want)
	}
}

// TestDeadlineVM: a read deadline expires with os.ErrDeadlineExceeded and
// the connection still works; Close from another goroutine unblocks Read
// and Write.
func TestDeadlineVM(t *testing.T) {
	requireVM(t)
	client, server := pair(t, ListenConfig{}, fromB)
	client.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	var buf [10]byte
	_, err := client.Read(buf[:])
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Read after the deadline = %v, want os.ErrDeadlineExceeded", err)
	}
	client.SetReadDeadline(time.Time{})
	if _, err := server.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(client, buf[:5]); err != nil || string(buf[:5]) != "hello" {
		t.Fatalf("Read after a deadline = %q, %v", buf[:5], err)
	}
	// Write blocks once the peer's ring is full (nobody reads on the server).
	done := make(chan error, 2)
	wrote := make(chan int, 1)
	go func() {
		_, err := client.Read(buf[:])
		done <- err
	}()
	go func() {
		n, err := client.Write(make([]byte, 4<<20))
		wrote <- n
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	t0 := time.Now()
	client.Close()
	t.Logf("Close with a Write blocked took %v", time.Since(t0))
	for i := 0; i < 2; i++ {
		select {
		case err := <-done:
			if !errors.Is(err, net.ErrClosed) {
				t.Errorf("blocked call after Close = %v, want net.ErrClosed", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Close did not unblock Read and Write")
		}
	}
	// The server sees the disconnect: EOF after the bytes that arrived,
	// which are those the Write counted (what it staged was dropped).
	server.SetReadDeadline(time.Now().Add(30 * time.Second))
	n, err := io.Copy(io.Discard, server)
	if err != nil {
		t.Errorf("server's read after the client's Close = %v, want EOF", err)
	}
	if w := <-wrote; n != int64(w) {
		t.Errorf("the Write ended by Close counted %d bytes; the server read %d", w, n)
	}
}

// TestCloseWriteExchangeVM: both peers Write 200 KiB (more than the
// peer's ring takes: the rest waits staged), CloseWrite, then read to
// EOF, as works on TCP: CloseWrite returns at once, and its SHUTDOWN
// follows the staged bytes once the peer reads. Default Config. Then a
// Close right after a CloseWrite that left bytes staged: the peer reads
// them all, then EOF (SHUTDOWN, then DISCONNECT), with no protocol error.
func TestCloseWriteExchangeVM(t *testing.T) {
	requireVM(t)
	client, server := pair(t, ListenConfig{}, fromB)
	const size = 200 << 10
	data := func(seed int64) []byte {
		b := make([]byte, size)
		rand.New(rand.NewSource(seed)).Read(b)
		return b
	}
	type result struct {
		got []byte
		err error
	}
	run := func(c *Conn, out []byte, res chan<- result) {
		c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := c.Write(out); err != nil {
			res <- result{nil, fmt.Errorf("Write: %w", err)}
			return
		}
		t0 := time.Now()
		if err := c.CloseWrite(); err != nil {
			res <- result{nil, fmt.Errorf("CloseWrite: %w", err)}
			return
		}
		if d := time.Since(t0); d > time.Second {
			t.Errorf("CloseWrite took %v with bytes staged; want it to return at once", d)
		}
		if _, err := c.Write([]byte("x")); !errors.Is(err, unix.EPIPE) {
			t.Errorf("Write after CloseWrite = %v, want EPIPE", err)
		}
		got, err := io.ReadAll(c)
		res <- result{got, err}
	}
	cData, sData := data(1), data(2)
	cRes, sRes := make(chan result, 1), make(chan result, 1)
	go run(client, cData, cRes)
	go run(server, sData, sRes)
	for _, r := range []struct {
		name string
		res  chan result
		want []byte
	}{{"client", cRes, sData}, {"server", sRes, cData}} {
		res := <-r.res
		if res.err != nil {
			t.Fatalf("%s: %v", r.name, res.err)
		}
		if !bytes.Equal(res.got, r.want) {
			t.Fatalf("%s read %d bytes (first difference at %d), want the peer's %d", r.name, len(res.got),
				firstDiff(res.got, r.want), len(r.want))
		}
	}

	// Close right after CloseWrite, with bytes staged: nobody reads on
	// the server until both returned.
	c2, s2 := pair(t, ListenConfig{}, fromB)
	c2.SetDeadline(time.Now().Add(30 * time.Second))
	if n, err := c2.Write(cData); err != nil || n != size {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if err := c2.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	cErr := make(chan error, 1)
	go func() { cErr <- c2.Close() }()
	s2.SetReadDeadline(time.Now().Add(30 * time.Second))
	got, err := io.ReadAll(s2)
	if err != nil {
		t.Fatalf("reading after the peer's CloseWrite and Close: %v", err)
	}
	if err := <-cErr; err != nil {
		t.Fatalf("Close after CloseWrite: %v", err)
	}
	if !bytes.Equal(got, cData) {
		t.Fatalf("read %d bytes (first difference at %d) after the peer's CloseWrite and Close; want %d",
			len(got), firstDiff(got, cData), size)
	}
	if s2.protoErrSeen.Load() {
		t.Error("the peer of CloseWrite and Close saw a protocol error")
	}
}

// TestWriteCloseRaceVM: Close while another goroutine Writes, the server
// reading all along. The Write returns net.ErrClosed; the server reads
// exactly the bytes the Writes counted, then EOF, and no message after
// the DISCONNECT (a DATA message after it is a protocol error there).
func TestWriteCloseRaceVM(t *testing.T) {
	requireVM(t)
	for _, chunk := range []int{100, 4096, 100 << 10, 3 << 20} {
		t.Run(strconv.Itoa(chunk), func(t *testing.T) {
			client, server := pair(t, ListenConfig{}, fromB)
			type result struct {
				n   int64
				err error
			}
			sRes := make(chan result, 1)
			go func() {
				server.SetReadDeadline(time.Now().Add(30 * time.Second))
				n, err := io.Copy(io.Discard, server)
				sRes <- result{n, err}
			}()
			wRes := make(chan result, 1)
			go func() {
				p := make([]byte, chunk)
				var total int64
				for {
					n, err := client.Write(p)
					total += int64(n)
					if err != nil {
						wRes <- result{total, err}
						return
					}
				}
			}()
			time.Sleep(100 * time.Millisecond)
			if err := client.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			w := <-wRes
			if !errors.Is(w.err, net.ErrClosed) {
				t.Errorf("Write racing with Close = %v, want net.ErrClosed", w.err)
			}
			s := <-sRes
			if s.err != nil {
				t.Fatalf("server's read = %v after %d bytes, want EOF", s.err, s.n)
			}
			// Anything the client sent after its DISCONNECT arrives
			// meanwhile; the server processes it when it polls.
			time.Sleep(200 * time.Millisecond)
			for {
				if n, err := server.pollOnce(); err != nil || n == 0 {
					break
				}
			}
			if server.protoErrSeen.Load() {
				server.mu.Lock()
				err := server.err
				server.mu.Unlock()
				t.Errorf("the server saw a protocol error: %v (a message after the DISCONNECT)", err)
			}
			if s.n != w.n {
				t.Errorf("the Writes counted %d bytes, the server read %d", w.n, s.n)
			}
			t.Logf("%d bytes in Writes of %d", w.n, chunk)
		})
	}
}

// rstreamPeer plays rstream's custom test (rsocket.md §5.2, §5.4) with
// verification counters kept for the whole process, as rstream does.
type rstreamPeer struct {
	tx, rx uint8
	buf    []byte
}

func (p *rstreamPeer) send(c net.Conn, n int) error {
	b := p.buf[:n]
	for i := range b {
		b[i] = p.tx
		p.tx++
	}
	_, err := c.Write(b)
	return err
}

func (p *rstreamPeer) recv(c net.Conn, n int, got int) error {
	b := p.buf[:n]
	if _, err := io.ReadFull(c, b); err != nil {
		return err
	}
	for i := range b {
		if b[i] != p.rx {
			return fmt.Errorf("data verification failed byte %d", got+i)
		}
		p.rx++
	}
	return nil
}

func (p *rstreamPeer) run(c net.Conn, client bool, size, count, iters int) error {
	p.buf = make([]byte, max(size, 16))
	if client {
		if err := p.send(c, 16); err != nil {
			return err
		}
		if err := p.recv(c, 16, 0); err != nil {
			return err
		}
	} else {
		if err := p.recv(c, 16, 0); err != nil {
			return err
		}
		if err := p.send(c, 16); err != nil {
			return err
		}
	}
	for i := 0; i < iters; i++ {
		for phase := 0; phase < 2; phase++ {
			for j := 0; j < count; j++ {
				var err error
				if (phase == 0) == client {
					err = p.send(c, size)
				} else {
					err = p.recv(c, size, j*size)
				}
				if err != nil {
					return fmt.Errorf("iteration %d, transfer %d: %w", i, j, err)
				}
			}
		}
	}
	return nil
}

// rstreamRuns are the sizes run against rstream in blocking mode (-T b),
// and two in its default non-blocking mode (-T n), which spins.
var rstreamRuns = []struct {
	size int
	mode string
}{{1, "b"}, {64, "b"}, {1000, "b"}, {4096, "b"}, {65537, "b"}, {1 << 20, "b"}, {64, "n"}, {65537, "n"}}

func rstreamArgs(size int, mode string) []string {
	return []string{"-S", strconv.Itoa(size), "-C", "3", "-I", "2", "-T", mode, "-T", "v"}
}

func runRstream(t *testing.T, ctx context.Context, args ...string) (*exec.Cmd, *vmproc.Buffer) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "rstream", args...)
	out := new(vmproc.Buffer)
	cmd.Stdout, cmd.Stderr = out, out
	// An rstream still running when the test's context ends is killed;
	// where its threads waited in the kernel goes into its output first.
	cmd.Cancel = func() error {
		fmt.Fprintf(out, "\n[test: killed at the end of its context; its threads' kernel stacks:%s]\n", vmproc.KernelStacks(cmd.Process.Pid))
		return cmd.Process.Kill()
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, out
}

// dialRetry dials from rxe1 until a listener (an rstream starting up)
// answers.
func dialRetry(ctx context.Context, addr string) (*Conn, error) {
	for {
		c, err := fromB.Dial(ctx, addr)
		if !errors.Is(err, unix.ECONNREFUSED) || ctx.Err() != nil {
			return c, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// killRstream stops a running rstream and fails the test with its output.
func killRstream(t *testing.T, cmd *exec.Cmd, out *vmproc.Buffer, err error) {
	t.Helper()
	cmd.Process.Kill()
	cmd.Wait()
	t.Fatalf("%v\nrstream:\n%s", err, out)
}

func checkRstream(t *testing.T, cmd *exec.Cmd, out *vmproc.Buffer) {
	t.Helper()
	err := cmd.Wait()
	t.Logf("rstream:\n%s", out)
	if err != nil {
		t.Fatalf("rstream: %v", err)
	}
	if o := out.String(); strings.Contains(o, "verification failed") || !strings.Contains(o, "custom") {
		t.Fatalf("rstream did not pass")
	}
}

// TestRstreamServerVM: Go client ↔ rdma-core's rstream server.
func TestRstreamServerVM(t *testing.T) {
	requireVM(t)
	for i, run := range rstreamRuns {
		size := run.size
		t.Run(fmt.Sprintf("%d-%s", size, run.mode), func(t *testing.T) {
			ctx := testCtx(t, 120*time.Second)
			port := 7500 + i
			cmd, out := runRstream(t, ctx, append([]string{"-b", vmenv.AddrA, "-p", strconv.Itoa(port)}, rstreamArgs(size, run.mode)...)...)
			c, err := dialRetry(ctx, fmt.Sprintf("%s:%d", vmenv.AddrA, port))
			if err != nil {
				killRstream(t, cmd, out, err)
			}
			var p rstreamPeer
			err = p.run(c, true, size, 3, 2)
			c.Close()
			if err != nil {
				killRstream(t, cmd, out, err)
			}
			checkRstream(t, cmd, out)
		})
	}
}

// TestRstreamClientVM: rdma-core's rstream client ↔ Go server.
func TestRstreamClientVM(t *testing.T) {
	requireVM(t)
	for _, run := range rstreamRuns {
		size := run.size
		t.Run(fmt.Sprintf("%d-%s", size, run.mode), func(t *testing.T) {
			ctx := testCtx(t, 120*time.Second)
			l, err := Listen(ctx, vmenv.AddrA+":0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			port := l.Addr().(*net.TCPAddr).Port
			cmd, out := runRstream(t, ctx, append([]string{"-s", vmenv.AddrA, "-b", vmenv.AddrB, "-p", strconv.Itoa(port)}, rstreamArgs(size, run.mode)...)...)
			c, err := l.AcceptRSocket()
			if err != nil {
				killRstream(t, cmd, out, err)
			}
			var p rstreamPeer
			err = p.run(c, false, size, 3, 2)
			if err == nil {
				// rstream shuts down after its test: we read EOF.
				c.SetReadDeadline(time.Now().Add(60 * time.Second))
				_, err = io.Copy(io.Discard, c)
			}
			c.Close()
			if err != nil {
				killRstream(t, cmd, out, err)
			}
			checkRstream(t, cmd, out)
		})
	}
}

// TestPeerKilledVM: rstream killed mid-stream; Read returns (an error or
// EOF), Write fails, nothing is left behind (TestMain's leak check).
func TestPeerKilledVM(t *testing.T) {
	requireVM(t)
	ctx := testCtx(t, 120*time.Second)
	cmd, out := runRstream(t, ctx, "-b", vmenv.AddrA, "-p", "7650", "-S", "1000000", "-C", "1000", "-I", "1", "-T", "b")
	c, err := dialRetry(ctx, vmenv.AddrA+":7650")
	if err != nil {
		killRstream(t, cmd, out, err)
	}
	defer c.Close()
	var p rstreamPeer
	p.buf = make([]byte, 1000000)
	if err := p.send(c, 16); err != nil {
		t.Fatal(err)
	}
	io.ReadFull(c, p.buf[:16])
	cmd.Process.Kill()
	cmd.Wait()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	var werr error
	for i := 0; i < 100 && werr == nil; i++ {
		_, werr = c.Write(p.buf)
	}
	if werr == nil || errors.Is(werr, os.ErrDeadlineExceeded) {
		t.Errorf("Write to a killed peer = %v, want a connection error", werr)
	}
	t.Logf("Write: %v", werr)
	_, rerr := c.Read(p.buf)
	if rerr == nil || errors.Is(rerr, os.ErrDeadlineExceeded) {
		t.Errorf("Read from a killed peer = %v, want EOF or a connection error", rerr)
	}
	t.Logf("Read: %v", rerr)
}
