package rdmacm

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
	"github.com/goverbs/goverbs/uverbs"
)

const peerEnv = "RDMACM_FAULT_PEER"

// TestFaultPeerKilledVM: the dialer is a child process killed with SIGKILL
// while connected. The kernel closes its connection manager file, which
// disconnects: the listener's side gets DISCONNECTED, its QP is in the
// error state (a posted receive completes flushed), and Close frees
// everything.
func TestFaultPeerKilledVM(t *testing.T) {
	if addr := os.Getenv(peerEnv); addr != "" {
		c, err := Dial(testCtx(t, 30*time.Second), addr, WithSource(vmenv.AddrB))
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		fmt.Println("CONNECTED", c.QP().QPN())
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	requireCM(t)
	ctx := testCtx(t, 60*time.Second)
	l := listenA(t, ctx)
	child := exec.Command(os.Args[0], "-test.run=^TestFaultPeerKilledVM$")
	child.Env = append(os.Environ(), peerEnv+"="+l.Addr().String())
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Wait()
	defer child.Process.Kill()
	c, err := l.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lines := bufio.NewScanner(out)
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), "CONNECTED") {
		t.Fatalf("child said %q", lines.Text())
	}
	b := newMsgBuf(t, c, 64)
	if err := c.QP().PostRecv([]uverbs.RecvWR{{ID: 7, SGL: b.sge(64)}}); err != nil {
		t.Fatal(err)
	}
	if err := child.Process.Signal(unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitDisconnect(ctx); err != nil {
		t.Fatalf("after the peer was killed: %v", err)
	}
	wc, err := pollOne(ctx, c.RecvCQ())
	if err != nil || wc.ID != 7 || wc.Status == 0 {
		t.Fatalf("posted receive after the disconnect: %v %+v, want a flush error", err, wc)
	}
	if s := c.QP().State(); s != uverbs.QPStateErr {
		t.Errorf("QP in %v after DISCONNECTED", s)
	}
	t.Logf("receive completed with %v; QP %v", wc.Status, c.QP().State())
	b.close()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFaultListenerClosedVM closes a listener while connection requests
// wait in its queue: each requester is refused (reject reason 28) and
// nothing stays behind.
func TestFaultListenerClosedVM(t *testing.T) {
	requireCM(t)
	ctx := testCtx(t, 60*time.Second)
	l, err := Listen(ctx, vmenv.AddrA+":0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	const n = 3
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			_, err := Dial(ctx, addr, WithSource(vmenv.AddrB))
			errs <- err
		}()
	}
	// Wait until the requests are queued on the listener.
	for !waitQueued(l.ID(), n) {
		if ctx.Err() != nil {
			t.Fatal("requests never arrived")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		err := <-errs
		var rej *RejectedError
		if !errors.As(err, &rej) || !errors.Is(err, unix.ECONNREFUSED) {
			t.Errorf("pending dial after the listener closed: %v", err)
		}
	}
	if _, err := l.Accept(ctx); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("Accept on a closed listener: %v", err)
	}
}

func waitQueued(id *ID, n int) bool {
	id.mu.Lock()
	defer id.mu.Unlock()
	return len(id.queue) >= n
}

// TestFaultDeviceRemovedVM deletes rxe0 under a connected ID: the ID gets
// DEVICE_REMOVAL, its commands fail with ErrDeviceRemoved, Close frees
// everything (so the removal completes), and once rxe0 is back a new
// connection works.
func TestFaultDeviceRemovedVM(t *testing.T) {
	requireCM(t)
	defer readdRXE0(t)
	ctx := testCtx(t, 120*time.Second)
	cli, srv := pair(t, ctx, vmenv.AddrA, vmenv.AddrB, nil, nil)
	del := exec.Command("rdma", "link", "delete", vmenv.RXE0)
	var delOut strings.Builder
	del.Stdout, del.Stderr = &delOut, &delOut
	if err := del.Start(); err != nil {
		t.Fatal(err)
	}
	ev, err := srv.ID().Event(ctx)
	if err != nil || ev.Type != EventDeviceRemoval {
		t.Fatalf("event after rdma link delete: %v %v", ev.Type, err)
	}
	if !errors.Is(ev.Err(), uverbs.ErrDeviceRemoved) {
		t.Errorf("DEVICE_REMOVAL's Err: %v", ev.Err())
	}
	if err := srv.ID().Disconnect(); !errors.Is(err, uverbs.ErrDeviceRemoved) {
		t.Errorf("Disconnect after removal: %v", err)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("Close after removal: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- del.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("rdma link delete: %v: %s", err, delOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("rdma link delete still blocked after 30s: the process holds the device")
	}
	// The dialer on rxe1 loses its peer: its QP errors out or it gets
	// DISCONNECTED in time; it must close cleanly either way.
	if err := cli.Close(); err != nil {
		t.Errorf("dialer Close: %v", err)
	}
	readdRXE0(t)
	c2, s2 := pair(t, ctx, vmenv.AddrA, vmenv.AddrB, nil, nil)
	c2.Close()
	s2.Close()
}

// readdRXE0 puts rxe0 back on va if it is missing and waits until its
// port is active with the IPv4 GID.
func readdRXE0(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/sys/class/infiniband/" + vmenv.RXE0); err != nil {
		if out, err := exec.Command("rdma", "link", "add", vmenv.RXE0, "type", "rxe", "netdev", vmenv.NetdevA).CombinedOutput(); err != nil {
			t.Fatalf("rdma link add: %v: %s", err, out)
		}
	}
	for i := 0; i < 400; i++ {
		st, _ := os.ReadFile("/sys/class/infiniband/" + vmenv.RXE0 + "/ports/1/state")
		gid, _ := os.ReadFile(fmt.Sprintf("/sys/class/infiniband/%s/ports/1/gids/%d", vmenv.RXE0, vmenv.GIDIndex))
		if strings.Contains(string(st), "ACTIVE") && len(gid) > 0 && !strings.HasPrefix(string(gid), "0000:0000:0000:0000:0000:0000:0000:0000") {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s not active again after 20s", vmenv.RXE0)
}

// TestConcurrentDialVM runs 200 Dial/Accept pairs at once (run it with
// -race); every connection moves a message, and the package's leak check
// finds no file or mapping left.
func TestConcurrentDialVM(t *testing.T) {
	requireCM(t)
	ctx := testCtx(t, 300*time.Second)
	l, err := Listen(ctx, vmenv.AddrA+":0", WithBacklog(256))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const n = 200
	var wg sync.WaitGroup
	accepted := make(chan *Conn, n)
	errs := make(chan error, 2*n)
	for i := 0; i < n; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			c, err := l.Accept(ctx)
			if err != nil {
				errs <- fmt.Errorf("accept: %w", err)
				return
			}
			accepted <- c
		}()
		go func(i int) {
			defer wg.Done()
			from := vmenv.AddrB
			if i%2 == 1 {
				from = vmenv.AddrA
			}
			c, err := Dial(ctx, l.Addr().String(), WithSource(from), WithPrivateData([]byte(fmt.Sprint(i))))
			if err != nil {
				errs <- fmt.Errorf("dial %d: %w", i, err)
				return
			}
			if err := c.Close(); err != nil {
				errs <- fmt.Errorf("close dialer %d: %w", i, err)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	close(accepted)
	seen := make(map[string]bool)
	for c := range accepted {
		seen[strings.TrimRight(string(c.PrivateData()), "\x00")] = true
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}
	if len(seen) != n {
		t.Errorf("accepted %d distinct connections, want %d", len(seen), n)
	}
}
