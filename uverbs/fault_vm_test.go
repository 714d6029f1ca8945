package uverbs

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/leakcheck"
	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

// Fault injection in the test VM: the faults a program meets in production,
// each followed to the library's answer. Five are covered:
//
//  1. TestFaultDeviceRemoved: `rdma link delete` of the device under
//     traffic.
//  2. TestFaultNetdevDownUp: the netdev under the device goes down and up.
//  3. TestFaultPeerKilled: the peer process dies mid-transfer.
//  4. TestMemlockLimit (memlock_vm_test.go): RLIMIT_MEMLOCK too small for a
//     registration: ENOMEM, explained.
//  5. TestCQOverrunEvent (async_vm_test.go): more completions than the CQ
//     holds: the CQ error event, naming the CQ.
//
// They change the VM's RDMA set-up (delete and re-add rxe0, take va down)
// and leave it as they found it: rxe0 and rxe1 ACTIVE with GID index 1.

// faultEndpoint is one side of an RC connection for the fault tests: its
// own context, a CQ, a QP and a registered buffer.
type faultEndpoint struct {
	c   *Context
	pd  *PD
	cq  *CQ
	qp  *QP
	buf *Buffer
	mr  *MR
	gid GIDEntry
}

// faultOpen opens dev with the transport GOVERBS_TRANSPORT names, so the
// suite's transport passes cover these tests too.
func faultOpen(t *testing.T, dev string) *Context {
	t.Helper()
	vmenv.RequireDevice(t, dev)
	c, err := Open(dev)
	if err != nil {
		t.Fatalf("Open(%s): %v", dev, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func faultNewEndpoint(t *testing.T, c *Context, ch *CompChannel) *faultEndpoint {
	t.Helper()
	e := &faultEndpoint{c: c}
	var err error
	if e.pd, err = c.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if e.cq, err = c.CreateCQ(256, &CQOptions{Channel: ch}); err != nil {
		t.Fatal(err)
	}
	if e.gid, err = c.RecommendedGID(1); err != nil {
		t.Fatal(err)
	}
	e.newQP(t)
	if e.buf, err = AllocBuffer(1 << 20); err != nil {
		t.Fatal(err)
	}
	if e.mr, err = e.pd.RegisterBuffer(e.buf, 0, e.buf.Len(), AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.mr.Close()
		e.buf.Close()
		e.qp.Close()
		e.cq.Close()
		e.pd.Close()
	})
	return e
}

func (e *faultEndpoint) newQP(t *testing.T) {
	t.Helper()
	qp, err := e.pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: e.cq, RecvCQ: e.cq,
		Cap: QPCap{MaxSendWr: 64, MaxRecvWr: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	e.qp = qp
}

func (e *faultEndpoint) endpoint() Endpoint {
	return Endpoint{QPN: e.qp.QPN(), PSN: 0x100, GID: e.gid.GID}
}

// faultConnect connects a to remote with short RC timers: 67 ms
// (timeout 14) and 2 retries, so a lost peer surfaces in well under a
// second.
func faultConnect(a *faultEndpoint, remote Endpoint) error {
	return a.qp.Connect(ConnectAttr{SGIDIndex: a.gid.Index, LocalPSN: 0x100, Timeout: 14, RetryCnt: 2, RNRRetry: 2,
		Access: AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead, Remote: remote})
}

// faultWriter streams signaled RDMA writes of a pattern from a into the
// peer's buffer, up to depth in flight, until stop closes or a post or
// completion fails. It counts what completed and keeps the first failure.
type faultWriter struct {
	ok       atomic.Int64
	posted   int64
	statuses []WCStatus // completions after the first error, in order
	postErr  error
	pollErr  error
}

func (w *faultWriter) run(a *faultEndpoint, raddr uint64, rkey uint32, stop <-chan struct{}, depth int) {
	const size = 4096
	wcs := make([]WC, 16)
	inflight := 0
	failed := false
	var idle time.Time
	for {
		select {
		case <-stop:
			if !failed {
				return
			}
		default:
		}
		for !failed && inflight < depth {
			off := uint64(w.posted%64) * size
			wr := SendWR{ID: uint64(w.posted), Opcode: WRRDMAWrite, Flags: SendSignaled,
				SGL:        []SGE{{Addr: a.mr.Addr() + off, Length: size, Lkey: a.mr.Lkey()}},
				RemoteAddr: raddr + off, Rkey: rkey}
			if err := a.qp.PostSend([]SendWR{wr}); err != nil {
				w.postErr = err
				return
			}
			w.posted++
			inflight++
		}
		n, err := a.cq.Poll(wcs)
		if err != nil {
			w.pollErr = err
			return
		}
		for _, wc := range wcs[:n] {
			inflight--
			if wc.Status == WCSuccess && !failed {
				w.ok.Add(1)
				continue
			}
			failed = true
			w.statuses = append(w.statuses, wc.Status)
		}
		if failed && inflight == 0 {
			return
		}
		if n == 0 {
			if idle.IsZero() {
				idle = time.Now()
			} else if failed && time.Since(idle) > 10*time.Second {
				w.pollErr = fmt.Errorf("%d requests never completed after the QP failed", inflight)
				return
			}
			time.Sleep(50 * time.Microsecond)
		} else {
			idle = time.Time{}
		}
	}
}

// waitFor waits until cond holds, up to d.
func waitFor(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

func runTool(t *testing.T, argv ...string) {
	t.Helper()
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(argv, " "), err, out)
	}
}

// readdRXE0 puts rxe0 back on va if it is missing, and waits until it is
// usable.
func readdRXE0(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/sys/class/infiniband/" + vmenv.RXE0); err != nil {
		runTool(t, "rdma", "link", "add", vmenv.RXE0, "type", "rxe", "netdev", vmenv.NetdevA)
	}
	waitActive(t, vmenv.RXE0)
}

// TestFaultDeviceRemoved deletes rxe0 (`rdma link delete`) while RDMA
// writes run on it, a goroutine waits for async events and another for
// completion events. rxe has no disassociate_ucontext, so the kernel sends
// no event and the delete waits for the process to let go of the device:
// the library notices the removal, releases every file and mapping
// (so the delete completes without the program's help), delivers
// EventDeviceFatal, and fails every later call with ErrDeviceRemoved.
// Once rxe0 is added back, the program opens it again and traffic flows.
func TestFaultDeviceRemoved(t *testing.T) {
	requireVM(t)
	t.Cleanup(func() { readdRXE0(t) })
	fds, maps := deviceFDs(), leakcheck.Take().Mappings
	c, err := Open(vmenv.RXE0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ch, err := c.NewCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	a, b := faultNewEndpoint(t, c, ch), faultNewEndpoint(t, c, nil)
	for _, x := range [][2]*faultEndpoint{{a, b}, {b, a}} {
		if err := faultConnect(x[0], x[1].endpoint()); err != nil {
			t.Fatal(err)
		}
	}
	bg, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	events := make(chan AsyncEvent, 16)
	var asyncErr, chanErr error
	wg.Add(2)
	go func() { // the program's async event loop
		defer wg.Done()
		defer close(events)
		for {
			ev, err := c.WaitAsyncEvent(bg)
			if err != nil {
				asyncErr = err
				return
			}
			events <- ev
		}
	}()
	go func() { // a completion-event waiter (b's CQ never gets one)
		defer wg.Done()
		if err := a.cq.RequestNotify(false); err != nil {
			chanErr = err
			return
		}
		for {
			cq, err := ch.Wait(bg)
			if err != nil {
				chanErr = err
				return
			}
			cq.AckEvents(1)
			if err := cq.RequestNotify(false); err != nil {
				chanErr = err
				return
			}
		}
	}()
	stop := make(chan struct{})
	var w faultWriter
	wg.Add(1)
	go func() { defer wg.Done(); w.run(a, b.mr.Addr(), b.mr.Rkey(), stop, 16) }()
	if !waitFor(20*time.Second, func() bool { return w.ok.Load() >= 200 }) {
		close(stop)
		wg.Wait()
		t.Fatalf("traffic did not start: %d writes completed, post %v, poll %v", w.ok.Load(), w.postErr, w.pollErr)
	}

	start := time.Now()
	del := exec.Command("rdma", "link", "delete", vmenv.RXE0)
	var delOut bytes.Buffer
	del.Stdout, del.Stderr = &delOut, &delOut
	if err := del.Start(); err != nil {
		t.Fatal(err)
	}
	delDone := make(chan error, 1)
	go func() { delDone <- del.Wait() }()
	var fatalAfter time.Duration
	select {
	case ev, ok := <-events:
		if !ok || ev.Type != EventDeviceFatal {
			t.Errorf("first async event after the delete: %v (open %v, err %v), want %v", ev.Type, ok, asyncErr, EventDeviceFatal)
		}
		fatalAfter = time.Since(start)
	case <-time.After(20 * time.Second):
		t.Errorf("no async event within 20s of the delete")
	}
	select {
	case err := <-delDone:
		if err != nil {
			t.Errorf("rdma link delete: %v: %s", err, delOut.Bytes())
		}
	case <-time.After(20 * time.Second):
		// Let the test end: closing everything must release the delete.
		c.Close()
		ch.Close()
		t.Fatalf("rdma link delete still blocked after 20s: the process holds the device")
	}
	deleted := time.Since(start)
	wg.Wait()
	t.Logf("%d writes completed before the removal; DEVICE_FATAL after %v, rdma link delete returned after %v",
		w.ok.Load(), fatalAfter.Round(time.Millisecond), deleted.Round(time.Millisecond))

	// Whatever the goroutines were doing ended in ErrDeviceRemoved.
	isRemoved := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrDeviceRemoved) || !errors.Is(err, unix.ENODEV) || !errors.Is(err, ErrClosed) {
			t.Errorf("%s: %v, want ErrDeviceRemoved (ENODEV)", what, err)
		}
	}
	isRemoved("async event loop", asyncErr)
	isRemoved("completion channel wait", chanErr)
	if w.postErr != nil {
		isRemoved("writer post", w.postErr)
	} else {
		isRemoved("writer poll", w.pollErr)
	}
	// The process let go of everything before the program closed a thing.
	if got := deviceFDs(); got != fds {
		t.Errorf("%d uverbs descriptors open after the removal, %d before the test", got, fds)
	}
	if got := leakcheck.Take().Mappings; got != maps {
		t.Errorf("%d uverbs mappings after the removal, %d before the test", got, maps)
	}
	// Every later call says so.
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"QueryDevice", func() error { _, err := c.QueryDevice(); return err }},
		{"QueryPort", func() error { _, err := c.QueryPort(1); return err }},
		{"QueryGID", func() error { _, err := c.QueryGID(1, 1); return err }},
		{"AllocPD", func() error { _, err := c.AllocPD(); return err }},
		{"CreateCQ", func() error { _, err := c.CreateCQ(8, nil); return err }},
		{"NewCompChannel", func() error { _, err := c.NewCompChannel(); return err }},
		{"WaitAsyncEvent", func() error { _, err := c.WaitAsyncEvent(context.Background()); return err }},
		{"CompChannel.Wait", func() error { _, err := ch.Wait(context.Background()); return err }},
		{"RegisterBuffer", func() error { _, err := a.pd.RegisterBuffer(a.buf, 0, 4096, AccessLocalWrite); return err }},
		{"CreateQP", func() error {
			_, err := a.pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: a.cq, RecvCQ: a.cq, Cap: QPCap{MaxSendWr: 1, MaxRecvWr: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
			return err
		}},
		{"QP.Query", func() error { _, err := a.qp.Query(); return err }},
		{"QP.Modify", func() error { return a.qp.Modify(&QPAttr{State: QPStateErr}, QPAttrState) }},
		{"PostSend", func() error {
			return a.qp.PostSend([]SendWR{{Opcode: WRRDMAWrite, SGL: []SGE{{Addr: a.mr.Addr(), Length: 8, Lkey: a.mr.Lkey()}}, RemoteAddr: b.mr.Addr(), Rkey: b.mr.Rkey()}})
		}},
		{"PostRecv", func() error {
			return b.qp.PostRecv([]RecvWR{{SGL: []SGE{{Addr: b.mr.Addr(), Length: 8, Lkey: b.mr.Lkey()}}}})
		}},
		{"Poll", func() error { _, err := a.cq.Poll(make([]WC, 1)); return err }},
		{"RequestNotify", func() error { return a.cq.RequestNotify(false) }},
	} {
		isRemoved(tc.name, tc.call())
	}
	// The program closes what it holds: nothing fails, nothing is left.
	for _, e := range []*faultEndpoint{a, b} {
		for name, err := range map[string]error{"MR": e.mr.Close(), "QP": e.qp.Close(), "CQ": e.cq.Close(), "PD": e.pd.Close()} {
			if err != nil {
				t.Errorf("%s.Close after the removal: %v", name, err)
			}
		}
	}
	if err := ch.Close(); err != nil {
		t.Errorf("CompChannel.Close after the removal: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Context.Close after the removal: %v", err)
	}
	if _, err := Open(vmenv.RXE0); err == nil {
		t.Errorf("Open(%s) succeeded while the device is deleted", vmenv.RXE0)
	} else {
		t.Logf("Open while deleted: %v", err)
	}

	// Back again: the program opens the device anew and traffic flows.
	readdRXE0(t)
	c2 := faultOpen(t, vmenv.RXE0)
	a2, b2 := faultNewEndpoint(t, c2, nil), faultNewEndpoint(t, c2, nil)
	for _, x := range [][2]*faultEndpoint{{a2, b2}, {b2, a2}} {
		if err := faultConnect(x[0], x[1].endpoint()); err != nil {
			t.Fatal(err)
		}
	}
	faultWriteVerify(t, a2, b2, 64)
}

// faultWriteVerify writes n distinct 4 KiB patterns from a into b and
// checks every byte arrived.
func faultWriteVerify(t *testing.T, a, b *faultEndpoint, n int) {
	t.Helper()
	const size = 4096
	src, dst := a.buf.Bytes(), b.buf.Bytes()
	for i := 0; i < n*size; i++ {
		src[i] = byte(i*131 + i/size)
		dst[i] = 0
	}
	for i := 0; i < n; i++ {
		off := uint64(i * size)
		if err := a.qp.PostSend([]SendWR{{ID: uint64(i), Opcode: WRRDMAWrite, Flags: SendSignaled,
			SGL:        []SGE{{Addr: a.mr.Addr() + off, Length: size, Lkey: a.mr.Lkey()}},
			RemoteAddr: b.mr.Addr() + off, Rkey: b.mr.Rkey()}}); err != nil {
			t.Fatal(err)
		}
		if wc := pollOne(t, a.cq); wc.Status != WCSuccess || wc.ID != uint64(i) {
			t.Fatalf("write %d: %+v (%v)", i, wc, wc.Status)
		}
	}
	if !bytes.Equal(src[:n*size], dst[:n*size]) {
		t.Fatalf("the %d writes after recovery did not land intact", n)
	}
}

// TestFaultNetdevDownUp takes va (under rxe0) down while RDMA writes run
// from rxe0 to rxe1 over the veth pair: both ports report PORT_ERR (rxe0
// for its netdev, rxe1 for the lost carrier), the writes in flight end in
// error completions and the rest are flushed, with none lost; after va
// comes back up, PORT_ACTIVE, and a re-created QP pair carries traffic.
func TestFaultNetdevDownUp(t *testing.T) {
	requireVM(t)
	t.Cleanup(func() {
		exec.Command("ip", "link", "set", vmenv.NetdevA, "up").Run()
		waitActive(t, vmenv.RXE0)
		waitActive(t, vmenv.RXE1)
	})
	ca, cb := faultOpen(t, vmenv.RXE0), faultOpen(t, vmenv.RXE1)
	a, b := faultNewEndpoint(t, ca, nil), faultNewEndpoint(t, cb, nil)
	connect := func() {
		t.Helper()
		for _, x := range [][2]*faultEndpoint{{a, b}, {b, a}} {
			if err := faultConnect(x[0], x[1].endpoint()); err != nil {
				t.Fatal(err)
			}
		}
	}
	connect()
	bg, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// next waits on c for an event of type want, logging the others.
	next := func(c *Context, want AsyncEventType) time.Time {
		t.Helper()
		for {
			ev, err := c.WaitAsyncEvent(bg)
			if err != nil {
				t.Fatalf("%s: waiting for %v: %v", c.Name(), want, err)
			}
			if ev.Type == want {
				if ev.Port != 1 {
					t.Errorf("%s: %v on port %d", c.Name(), ev.Type, ev.Port)
				}
				return time.Now()
			}
			t.Logf("%s: event %v", c.Name(), ev.Type)
		}
	}
	stop := make(chan struct{})
	var w faultWriter
	done := make(chan struct{})
	go func() { defer close(done); w.run(a, b.mr.Addr(), b.mr.Rkey(), stop, 16) }()
	if !waitFor(20*time.Second, func() bool { return w.ok.Load() >= 100 }) {
		close(stop)
		<-done
		t.Fatalf("traffic did not start: %d writes, post %v, poll %v", w.ok.Load(), w.postErr, w.pollErr)
	}
	start := time.Now()
	runTool(t, "ip", "link", "set", vmenv.NetdevA, "down")
	next(ca, EventPortErr)
	next(cb, EventPortErr)
	// rxe on 6.12 fails the requests in flight by itself. 6.1 sometimes
	// does (a local QP operation error when the send finds the link down)
	// and sometimes leaves them outstanding with the QP in RTS: observed,
	// one retry (completer_retry_err) and then neither another retry nor
	// a completion for 30 s, although the retry count was 2. A program
	// recovers as it would from any stuck QP after a port error: it moves
	// the QP to ERR, which flushes every request.
	byKernel := true
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		byKernel = false
		qa, _ := a.qp.Query()
		t.Logf("5s after the port error: %d writes completed of %d posted, QP in %v; rxe0 counters: %s; moving the QP to ERR",
			w.ok.Load(), w.posted, qa.State, itCounters(vmenv.RXE0))
		if err := a.qp.Modify(&QPAttr{State: QPStateErr}, QPAttrState); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			close(stop)
			<-done
			t.Fatalf("the QP in ERR did not flush its requests within 10s: %d completed of %d posted", w.ok.Load(), w.posted)
		}
	}
	close(stop)
	if w.postErr != nil || w.pollErr != nil {
		t.Fatalf("writer: post %v, poll %v", w.postErr, w.pollErr)
	}
	t.Logf("link down: %d writes completed, then %d error completions after %v (failed by the kernel: %v): %v",
		w.ok.Load(), len(w.statuses), time.Since(start).Round(time.Millisecond), byKernel, w.statuses[:min(len(w.statuses), 2)])
	// Every posted request completed exactly once: the first failed, the
	// ones behind it were flushed.
	if got := w.ok.Load() + int64(len(w.statuses)); got != w.posted {
		t.Errorf("%d completions for %d posted requests", got, w.posted)
	}
	switch w.statuses[0] {
	case WCRetryExcErr, WCLocQPOpErr, WCWRFlushErr:
	default:
		t.Errorf("first error completion %v, want retry exceeded, local QP operation error or flush", w.statuses[0])
	}
	for i, s := range w.statuses[1:] {
		if s != WCWRFlushErr {
			t.Errorf("completion %d after the first error: %v, want flushed", i+1, s)
		}
	}
	if qa, err := a.qp.Query(); err != nil || qa.State != QPStateErr {
		t.Errorf("requester QP after the failure: %v (%v), want ERR", qa.State, err)
	}

	runTool(t, "ip", "link", "set", vmenv.NetdevA, "up")
	next(ca, EventPortActive)
	next(cb, EventPortActive)
	waitActive(t, vmenv.RXE0)
	waitActive(t, vmenv.RXE1)
	// Recovery: a new QP on each side (the responder's may be fine, but the
	// pair's PSNs are out of step), connected afresh.
	for _, e := range []*faultEndpoint{a, b} {
		if err := e.qp.Close(); err != nil {
			t.Fatal(err)
		}
		e.newQP(t)
	}
	connect()
	faultWriteVerify(t, a, b, 64)
}

// faultPeerEnv makes the test binary, re-executed, play the peer of
// TestFaultPeerKilled.
const faultPeerEnv = "GOVERBS_FAULT_PEER"

// TestFaultPeerKilled runs the peer in a child process (this binary again)
// on rxe1, streams RDMA writes into its memory from rxe0, and kills it with
// SIGKILL mid-transfer. The kernel destroys the peer's QP with the process,
// rxe drops the packets for the vanished QP without a reply, and the writer's QP gives
// up after its retries: RETRY_EXC_ERR, then flushes, within the time the
// QP's timeout and retry count allow (here 67 ms × 3), and nothing hangs.
func TestFaultPeerKilled(t *testing.T) {
	if os.Getenv(faultPeerEnv) != "" {
		faultPeer()
		return
	}
	requireVM(t)
	c := faultOpen(t, vmenv.RXE0)
	a := faultNewEndpoint(t, c, nil)
	child := exec.Command(os.Args[0], "-test.run=^TestFaultPeerKilled$")
	child.Env = append(os.Environ(), faultPeerEnv+"=1")
	child.Stderr = os.Stderr
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			child.Process.Kill()
		}
		child.Wait()
	}()
	lines := bufio.NewScanner(stdout)
	var peer Endpoint
	var raddr uint64
	var rkey uint32
	if err := readPeerLine(lines, "PEER", func(f []string) error {
		gid, err := hex.DecodeString(f[1])
		if err != nil || len(gid) != 16 {
			return fmt.Errorf("gid %q", f[1])
		}
		copy(peer.GID[:], gid)
		peer.PSN = 0x100
		_, err = fmt.Sscan(f[0]+" "+f[2]+" "+f[3], &peer.QPN, &raddr, &rkey)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := faultConnect(a, peer); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(stdin, "%d %x\n", a.qp.QPN(), a.gid.GID[:]); err != nil {
		t.Fatal(err)
	}
	if err := readPeerLine(lines, "READY", func([]string) error { return nil }); err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, stdout)
	stop := make(chan struct{})
	var w faultWriter
	done := make(chan struct{})
	go func() { defer close(done); w.run(a, raddr, rkey, stop, 16) }()
	if !waitFor(20*time.Second, func() bool { return w.ok.Load() >= 200 }) {
		close(stop)
		<-done
		t.Fatalf("traffic to the peer did not start: %d writes, post %v, poll %v", w.ok.Load(), w.postErr, w.pollErr)
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed = true
	start := time.Now()
	// The bound: the QP's own retries (about 0.2 s) with a wide margin
	// for the emulated machine.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	select {
	case <-done:
	case <-ctx.Done():
		close(stop)
		<-done
		t.Fatalf("no error completion within 15s of the peer's death (%d writes completed)", w.ok.Load())
	}
	close(stop)
	if w.postErr != nil || w.pollErr != nil {
		t.Fatalf("writer: post %v, poll %v", w.postErr, w.pollErr)
	}
	t.Logf("peer killed after %d writes completed: %v after %v, then %d flushed", w.ok.Load(),
		w.statuses[0], time.Since(start).Round(time.Millisecond), len(w.statuses)-1)
	if w.statuses[0] != WCRetryExcErr {
		t.Errorf("first error completion %v, want %v", w.statuses[0], WCRetryExcErr)
	}
	for i, s := range w.statuses[1:] {
		if s != WCWRFlushErr {
			t.Errorf("completion %d after the first error: %v, want flushed", i+1, s)
		}
	}
	if got := w.ok.Load() + int64(len(w.statuses)); got != w.posted {
		t.Errorf("%d completions for %d posted requests", got, w.posted)
	}
}

// readPeerLine reads the child's output up to the line starting with tag
// and hands the fields after it to parse.
func readPeerLine(lines *bufio.Scanner, tag string, parse func([]string) error) error {
	for lines.Scan() {
		f := strings.Fields(lines.Text())
		if len(f) > 0 && f[0] == tag {
			if err := parse(f[1:]); err != nil {
				return fmt.Errorf("peer's %s line %q: %v", tag, lines.Text(), err)
			}
			return nil
		}
	}
	return fmt.Errorf("the peer ended before its %s line: %v", tag, lines.Err())
}

// faultPeer is the child's side: an RC QP on rxe1 whose memory the parent
// writes into, until the parent kills it.
func faultPeer() {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "fault peer:", err)
		os.Exit(2)
	}
	c, err := Open(vmenv.RXE1)
	if err != nil {
		fail(err)
	}
	e := &faultEndpoint{c: c}
	if e.pd, err = c.AllocPD(); err != nil {
		fail(err)
	}
	if e.cq, err = c.CreateCQ(64, nil); err != nil {
		fail(err)
	}
	if e.gid, err = c.RecommendedGID(1); err != nil {
		fail(err)
	}
	if e.buf, err = AllocBuffer(1 << 20); err != nil {
		fail(err)
	}
	if e.mr, err = e.pd.RegisterBuffer(e.buf, 0, e.buf.Len(), AccessLocalWrite|AccessRemoteWrite); err != nil {
		fail(err)
	}
	// The kernel tears a dead process's objects down newest first: the QP
	// goes before the MR, as when a peer's QP disappears. (The other way
	// round, the requests that land between the two fail with a remote
	// access error instead.)
	if e.qp, err = e.pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: e.cq, RecvCQ: e.cq,
		Cap: QPCap{MaxSendWr: 4, MaxRecvWr: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		fail(err)
	}
	fmt.Printf("PEER %d %x %d %d\n", e.qp.QPN(), e.gid.GID[:], e.mr.Addr(), e.mr.Rkey())
	var remote Endpoint
	var gid string
	if _, err := fmt.Scan(&remote.QPN, &gid); err != nil {
		fail(err)
	}
	g, err := hex.DecodeString(gid)
	if err != nil || len(g) != 16 {
		fail(fmt.Errorf("parent's GID %q", gid))
	}
	copy(remote.GID[:], g)
	remote.PSN = 0x100
	if err := faultConnect(e, remote); err != nil {
		fail(err)
	}
	fmt.Println("READY")
	// The parent's writes need nothing from this side; it waits for the
	// signal (bounded, should the parent die first).
	time.Sleep(2 * time.Minute)
	os.Exit(3)
}

// TestRemovalWatchForgottenContext: the process's device-event socket,
// open while a context is, closes when the last context is collected
// without Close, as the context's own files do.
func TestRemovalWatchForgottenContext(t *testing.T) {
	vmenv.RequireRXE(t)
	before := leakcheck.Take()
	func() {
		if _, err := Open(vmenv.RXE0); err != nil {
			t.Fatal(err)
		}
	}()
	for i := 0; i < 5; i++ {
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
	}
	if d := before.Diff(leakcheck.Take()); d != "" {
		t.Errorf("a forgotten context, once collected, left: %s", d)
	}
}
