package rdmacm

import (
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/uverbs"
)

// fakeCM is an EventChannel without a kernel: its commands go into a pipe
// (read back with frames), no goroutine reads events (tests hand them to
// ch.deliver, as the reader does), and a test can hold a command before it
// is written (hold) or act right after one is (afterNext), where the
// kernel would have done its part.
type fakeCM struct {
	ch  *EventChannel
	r   *os.File
	raw syscall.RawConn

	mu    sync.Mutex
	gates []*cmdGate // the next commands to hold, in order
	after func()     // run once after the next command
}

// cmdGate holds one command: entered closes when it arrives, and it goes
// on when release is closed.
type cmdGate struct{ entered, release chan struct{} }

func newFakeCM(t *testing.T) *fakeCM {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := w.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(); r.Close() })
	f := &fakeCM{r: r, raw: raw}
	f.ch = &EventChannel{f: w, rc: f, ids: map[uint64]*ID{}, done: make(chan struct{})}
	return f
}

func (f *fakeCM) Control(fn func(fd uintptr)) error {
	f.mu.Lock()
	var g *cmdGate
	if len(f.gates) > 0 {
		g, f.gates = f.gates[0], f.gates[1:]
	}
	after := f.after
	f.after = nil
	f.mu.Unlock()
	if g != nil {
		close(g.entered)
		<-g.release
	}
	err := f.raw.Control(fn)
	if after != nil {
		after()
	}
	return err
}

// hold holds the next command not held yet.
func (f *fakeCM) hold() *cmdGate {
	g := &cmdGate{entered: make(chan struct{}), release: make(chan struct{})}
	f.mu.Lock()
	f.gates = append(f.gates, g)
	f.mu.Unlock()
	return g
}

// afterNext runs fn once the next command has been written.
func (f *fakeCM) afterNext(fn func()) {
	f.mu.Lock()
	f.after = fn
	f.mu.Unlock()
}

// frames returns the commands written since the last call: each command's
// number and its handle field where it has one (DESTROY_ID, LEAVE_MCAST:
// id@8; REJECT, LISTEN: id@0).
func (f *fakeCM) frames(t *testing.T) []frame {
	t.Helper()
	var out []frame
	for {
		f.r.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		hdr := make([]byte, 8)
		if _, err := f.r.Read(hdr); err != nil {
			return out // drained (timeout), or the channel closed (EOF)
		}
		fr := frame{cmd: binary.LittleEndian.Uint32(hdr), in: binary.LittleEndian.Uint16(hdr[4:]),
			out: binary.LittleEndian.Uint16(hdr[6:])}
		fr.body = make([]byte, fr.in)
		if n, err := f.r.Read(fr.body); err != nil || n != int(fr.in) {
			t.Fatalf("command %d body: %d of %d bytes, %v", fr.cmd, n, fr.in, err)
		}
		out = append(out, fr)
	}
}

// destroyed returns the handles of the DESTROY_ID commands among frames.
func destroyed(frames []frame) []uint32 {
	var h []uint32
	for _, f := range frames {
		if f.cmd == abi.UCMCmdDestroyID {
			h = append(h, binary.LittleEndian.Uint32(f.body[8:]))
		}
	}
	return h
}

// useShared makes ch the shared channel of Dial and Listen, with no
// reference yet, for the test.
func useShared(t *testing.T, ch *EventChannel) {
	t.Helper()
	shared.Lock()
	defer shared.Unlock()
	if shared.ch != nil {
		t.Fatal("the shared channel is in use")
	}
	shared.ch = ch
	t.Cleanup(func() {
		shared.Lock()
		if shared.ch == ch {
			shared.ch, shared.refs, shared.devs = nil, 0, nil
		}
		shared.Unlock()
	})
}

// TestRefusedRequestLeavesChannelToCloser: a CONNECT_REQUEST the reader
// takes while its Listen listener closes is refused; the listener's
// release is the shared channel's last, and the channel closes on the
// goroutine that closed the listener, never on the reader (whose Close
// would wait for the reader to end).
func TestRefusedRequestLeavesChannelToCloser(t *testing.T) {
	f := newFakeCM(t)
	ch := f.ch
	useShared(t, ch)
	l, err := ch.CreateID(PortSpaceTCP, 0)
	if err != nil {
		t.Fatal(err)
	}
	shared.Lock()
	shared.refs++ // the listener's, as newSharedID takes it
	shared.Unlock()
	l.sharedChan = true
	f.frames(t)

	destroyListener := f.hold()
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	<-destroyListener.entered // Close has begun: the listener refuses requests

	destroyChild := f.hold()
	go func() { // the reader, with a request it read just before
		defer close(ch.done)
		ch.deliver(rawEvent{typ: EventConnectRequest, uid: l.uid, handle: 8})
	}()
	<-destroyChild.entered // the reader refuses it: DESTROY_ID of its ID
	refs := func() int {
		shared.Lock()
		defer shared.Unlock()
		if shared.ch != ch {
			return 0
		}
		return shared.refs
	}
	before := refs()
	close(destroyListener.release)
	// The listener's reference goes first, so that whatever reference the
	// reader holds would be the last.
	for deadline := time.Now().Add(5 * time.Second); refs() == before; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the listener's Close never released its reference")
		}
	}
	close(destroyChild.release)

	select {
	case <-ch.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the event reader never returned: it is closing the channel, which waits for the reader")
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("listener Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the listener's Close never returned")
	}
	shared.Lock()
	left, nrefs := shared.ch, shared.refs
	shared.Unlock()
	ch.mu.Lock()
	chClosed, ids := ch.closed, len(ch.ids)
	ch.mu.Unlock()
	if left != nil || nrefs != 0 || !chClosed || ids != 0 {
		t.Errorf("after the last release: shared channel %p with %d references, channel closed %v with %d IDs; want none, 0, true, 0",
			left, nrefs, chClosed, ids)
	}
}

// TestListenBacklog: a listener holds at most backlog requests not yet
// taken; the reader refuses the next one by destroying its kernel ID (the
// requester sees a reject, as from a kernel whose backlog is full), and
// taking one makes room. Backlog 0 is the kernel's max_backlog.
func TestListenBacklog(t *testing.T) {
	queued := func(l *ID) int {
		l.mu.Lock()
		defer l.mu.Unlock()
		n := 0
		for _, ev := range l.queue {
			if ev.Type == EventConnectRequest {
				n++
			}
		}
		return n
	}
	t.Run("explicit", func(t *testing.T) {
		f := newFakeCM(t)
		l, err := f.ch.CreateID(PortSpaceTCP, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if err := l.Listen(2); err != nil {
			t.Fatal(err)
		}
		f.frames(t)
		for h := uint32(11); h <= 13; h++ {
			f.ch.deliver(rawEvent{typ: EventConnectRequest, uid: l.uid, handle: h})
		}
		if n, d := queued(l), destroyed(f.frames(t)); n != 2 || len(d) != 1 || d[0] != 13 {
			t.Fatalf("3 requests on backlog 2: %d queued, DESTROY_ID of %v; want 2 and [13]", n, d)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ev, err := l.Event(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer ev.ID.Close()
		if ev.ID.Handle() != 11 {
			t.Errorf("first request's handle %d, want 11", ev.ID.Handle())
		}
		f.ch.deliver(rawEvent{typ: EventConnectRequest, uid: l.uid, handle: 14})
		if n, d := queued(l), destroyed(f.frames(t)); n != 2 || len(d) != 0 {
			t.Errorf("a request after one was taken: %d queued, DESTROY_ID of %v; want 2 and none", n, d)
		}
	})
	t.Run("kernel default", func(t *testing.T) {
		max := 1024 // the kernel's default, when rdma_ucm does not say
		if b, err := os.ReadFile("/proc/sys/net/rdma_ucm/max_backlog"); err == nil {
			if v, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && v > 0 {
				max = v
			}
		}
		f := newFakeCM(t)
		l, err := f.ch.CreateID(PortSpaceTCP, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if err := l.Listen(0); err != nil {
			t.Fatal(err)
		}
		f.frames(t)
		for h := 1; h <= max+1; h++ {
			f.ch.deliver(rawEvent{typ: EventConnectRequest, uid: l.uid, handle: uint32(h)})
		}
		if n, d := queued(l), destroyed(f.frames(t)); n != max || len(d) != 1 || d[0] != uint32(max+1) {
			t.Fatalf("%d requests on backlog 0: %d queued, DESTROY_ID of %v; want %d and [%d]", max+1, n, d, max, max+1)
		}
	})
}

// TestMigrateDeliversEvents: after MIGRATE_ID the ID's events come from
// both readers for a while, the new channel's (right after the command,
// before Migrate returns) and the old one's (read before the command), and
// none is lost.
func TestMigrateDeliversEvents(t *testing.T) {
	from, to := newFakeCM(t), newFakeCM(t)
	id, err := from.ch.CreateID(PortSpaceTCP, 0)
	if err != nil {
		t.Fatal(err)
	}
	to.afterNext(func() { // the kernel moved the ID: the new reader gets its events
		to.ch.deliver(rawEvent{typ: EventDisconnected, uid: id.uid, handle: id.handle})
	})
	if err := id.Migrate(to.ch); err != nil {
		t.Fatal(err)
	}
	// The old reader delivers the event it read just before MIGRATE_ID.
	from.ch.deliver(rawEvent{typ: EventTimewaitExit, uid: id.uid, handle: id.handle})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	for _, want := range []EventType{EventDisconnected, EventTimewaitExit} {
		if ev, err := id.Event(ctx); err != nil || ev.Type != want {
			t.Errorf("%v delivered around MIGRATE_ID: got %v, %v", want, ev.Type, err)
		}
	}
	if id.Channel() != to.ch {
		t.Errorf("the ID is on %p, want the new channel %p", id.Channel(), to.ch)
	}
	// The old channel no longer owns the ID; the new one does.
	close(from.ch.done) // no reader to wait for
	from.ch.Close()
	if err := id.use("test"); err != nil {
		t.Errorf("closing the old channel: %v", err)
	}
	close(to.ch.done)
	to.ch.Close()
	if err := id.use("test"); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("closing the new channel: the ID is %v, want closed", err)
	}
}

// TestMigrateRefusedKeepsID: a refused MIGRATE_ID leaves the ID on its
// channel, and the destination does not own it.
func TestMigrateRefusedKeepsID(t *testing.T) {
	from, to := newFakeCM(t), newFakeCM(t)
	close(from.ch.done)
	close(to.ch.done)
	id, err := from.ch.CreateID(PortSpaceTCP, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer id.Close()
	to.ch.f.Close() // the command fails
	if err := id.Migrate(to.ch); err == nil {
		t.Fatal("Migrate to a channel whose file is closed succeeded")
	}
	to.ch.Close()
	if err := id.use("test"); err != nil || id.Channel() != from.ch {
		t.Errorf("after a refused Migrate: %v, on %p; want open on %p", err, id.Channel(), from.ch)
	}
}

// TestLeaveRacesClose: Multicast.Leave and ID.Close at once send one
// LEAVE_MCAST (run with -race).
func TestLeaveRacesClose(t *testing.T) {
	f := newFakeCM(t)
	var mcs []*Multicast
	for i := range 50 {
		id, err := f.ch.CreateID(PortSpaceUDP, 0)
		if err != nil {
			t.Fatal(err)
		}
		mc := &Multicast{id: id, uid: nextUID.Add(1), handle: uint32(100 + i), group: netip.MustParseAddr("239.1.1.1")}
		id.mcs = []*Multicast{mc}
		mcs = append(mcs, mc)
		var wg sync.WaitGroup
		wg.Go(func() { mc.Leave() })
		wg.Go(func() { id.Close() })
		wg.Wait()
	}
	left := make(map[uint32]int)
	for _, fr := range f.frames(t) {
		if fr.cmd == abi.UCMCmdLeaveMcast {
			left[binary.LittleEndian.Uint32(fr.body[8:])]++
		}
	}
	for _, mc := range mcs {
		if left[mc.handle] != 1 {
			t.Errorf("membership %d: %d LEAVE_MCAST, want 1", mc.handle, left[mc.handle])
		}
	}
}

// TestCreateIDDuringChannelClose: an ID whose CREATE_ID is in flight when
// its channel closes is not the channel's to destroy (it has no handle
// yet): CreateID fails with ErrClosed, and no DESTROY_ID goes out. Then
// the two at once, for -race.
func TestCreateIDDuringChannelClose(t *testing.T) {
	t.Run("ordered", func(t *testing.T) {
		f := newFakeCM(t)
		close(f.ch.done)
		create := f.hold()
		res := make(chan error, 1)
		go func() {
			id, err := f.ch.CreateID(PortSpaceTCP, 0)
			if err == nil {
				id.Close()
			}
			res <- err
		}()
		<-create.entered
		f.ch.Close()
		close(create.release)
		if err := <-res; !errors.Is(err, uverbs.ErrClosed) {
			t.Errorf("CreateID on a channel closed meanwhile: %v, want ErrClosed", err)
		}
		if d := destroyed(f.frames(t)); len(d) != 0 {
			t.Errorf("DESTROY_ID of %v for an ID whose CREATE_ID had not been written", d)
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		for range 20 {
			f := newFakeCM(t)
			close(f.ch.done)
			var id *ID
			var err error
			var wg sync.WaitGroup
			wg.Go(func() { id, err = f.ch.CreateID(PortSpaceTCP, 0) })
			wg.Go(func() { f.ch.Close() })
			wg.Wait()
			if err == nil {
				if uerr := id.use("test"); !errors.Is(uerr, uverbs.ErrClosed) {
					t.Errorf("an ID created before its channel closed is still open: %v", uerr)
				}
			} else if !errors.Is(err, uverbs.ErrClosed) {
				t.Errorf("CreateID racing Close: %v, want ErrClosed", err)
			}
		}
	})
}

// TestJoinRacesClose: a Close that runs while JOIN_MCAST is in flight
// leaves the group with its DESTROY_ID; JoinMulticast then fails with
// ErrClosed and sends no LEAVE_MCAST of its own (its handle may be
// another membership's by then).
func TestJoinRacesClose(t *testing.T) {
	f := newFakeCM(t)
	id, err := f.ch.CreateID(PortSpaceUDP, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.frames(t)
	f.afterNext(func() { id.Close() }) // right after JOIN_MCAST is written
	mc, err := id.JoinMulticast(context.Background(), netip.MustParseAddr("239.1.1.1"), false)
	if !errors.Is(err, uverbs.ErrClosed) || mc != nil {
		t.Fatalf("JoinMulticast with Close during JOIN_MCAST: %v, %v; want ErrClosed", mc, err)
	}
	for _, fr := range f.frames(t) {
		if fr.cmd == abi.UCMCmdLeaveMcast {
			t.Errorf("LEAVE_MCAST sent after Close had destroyed the ID")
		}
	}
	id.mu.Lock()
	n := len(id.mcs)
	id.mu.Unlock()
	if n != 0 {
		t.Errorf("the closed ID lists %d memberships", n)
	}
}
