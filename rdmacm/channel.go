package rdmacm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/devnode"
	"github.com/goverbs/goverbs/internal/rdmanl"
	"github.com/goverbs/goverbs/internal/transport"
	"github.com/goverbs/goverbs/uverbs"
)

// DevicePath is the connection manager's character device.
const DevicePath = "/dev/infiniband/rdma_cm"

// devicePath is what NewEventChannel opens (tests point it elsewhere).
var devicePath = DevicePath

// sysfsABI and legacySysfsABI are where the kernel exports the ucma ABI
// version when netlink does not answer.
const (
	sysfsABI       = "/sys/class/misc/rdma_cm/abi_version"
	legacySysfsABI = "/sys/class/infiniband_ucma/abi_version"
)

// ErrNotLoaded reports that the kernel's connection manager (module
// rdma_ucm) is not loaded: /dev/infiniband/rdma_cm does not exist.
var ErrNotLoaded = errors.New("rdmacm: the kernel connection manager is not loaded (no " + DevicePath +
	"; run `modprobe rdma_ucm`, or install rdma-core, which loads it at boot)")

// ErrABIVersion reports a kernel whose ucma ABI this package does not speak.
var ErrABIVersion = errors.New("rdmacm: unsupported rdma_cm ABI version")

// EventChannel is an open /dev/infiniband/rdma_cm: the IDs created on it and
// the events the kernel reports for them (librdmacm's
// rdma_event_channel). A goroutine parked on the Go netpoller reads the
// events and hands each to the queue of its ID, so events are never left
// unacknowledged in the kernel and destroying an ID never waits for anyone.
//
// Closing the channel destroys every ID still on it. An EventChannel is
// safe for concurrent use.
type EventChannel struct {
	f   *os.File
	rc  interface{ Control(func(fd uintptr)) error }
	abi int

	mu      sync.Mutex
	ids     map[uint64]*ID // the IDs Close destroys, by uid
	closed  bool
	done    chan struct{} // closed when the reader goroutine ends
	readErr error         // why the reader ended, if not Close
}

// ABIVersion reads the kernel's ucma ABI version as librdmacm does: netlink
// (RDMA_NLDEV_CMD_GET_CHARDEV "rdma_cm", which also loads rdma_ucm), then
// sysfs; 4 if neither answers.
func ABIVersion() (int, error) {
	v, _, err := lookupABI()
	return v, err
}

// lookupABI is ABIVersion, with the device netlink names (nil when the
// version came from elsewhere).
func lookupABI() (int, *rdmanl.CharDev, error) {
	if cd, err := rdmanl.LookupGlobalCharDev(abi.UCMCharDev); err == nil {
		return int(cd.ABI), &cd, nil
	}
	for _, p := range []string{sysfsABI, legacySysfsABI} {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		v, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return 0, nil, fmt.Errorf("rdmacm: %s: %q is not a version: %w", p, strings.TrimSpace(string(b)), ErrABIVersion)
		}
		return v, nil, nil
	}
	return abi.UCMABIVersion, nil, nil
}

// NewEventChannel opens the connection manager. The errors say what to do:
// ErrNotLoaded when rdma_ucm is absent, a permission error naming the node's
// mode and owners, ErrABIVersion for a kernel too old or too new.
func NewEventChannel() (*EventChannel, error) {
	v, cd, err := lookupABI()
	if err != nil {
		return nil, err
	}
	if v < abi.UCMMinABIVersion || v > abi.UCMMaxABIVersion {
		return nil, fmt.Errorf("%w: the kernel speaks %d, this package %d..%d", ErrABIVersion, v,
			abi.UCMMinABIVersion, abi.UCMMaxABIVersion)
	}
	fd, err := unix.Open(devicePath, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		switch {
		case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENXIO):
			return nil, fmt.Errorf("%w (open %s: %w)", ErrNotLoaded, devicePath, err)
		case errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM):
			return nil, fmt.Errorf("rdmacm: open %s: %w: %s: %w", devicePath, fs.ErrPermission,
				devnode.AccessAdvice(devicePath, "rdma_cm"), err)
		}
		return nil, fmt.Errorf("rdmacm: open %s: %w", devicePath, err)
	}
	if err := checkCharDev(fd, cd); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("rdmacm: open %s: %w", devicePath, err)
	}
	f := os.NewFile(uintptr(fd), devicePath)
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("rdmacm: %s: %w", devicePath, err)
	}
	ch := &EventChannel{
		f: f, rc: rc, abi: v,
		ids:  make(map[uint64]*ID),
		done: make(chan struct{}),
	}
	go ch.readLoop(rc)
	return ch, nil
}

// checkCharDev checks that fd is a character device and, when netlink
// names the connection manager's device number, that one (as rdma-core's
// open_cdev does).
func checkCharDev(fd int, cd *rdmanl.CharDev) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR {
		return fmt.Errorf("not a character device (mode %#o): %w", st.Mode, unix.ENODEV)
	}
	if cd != nil && (cd.Major != 0 || cd.Minor != 0) {
		if unix.Major(uint64(st.Rdev)) != cd.Major || unix.Minor(uint64(st.Rdev)) != cd.Minor {
			return fmt.Errorf("device %d:%d, but the kernel's rdma_cm is %d:%d: %w", unix.Major(uint64(st.Rdev)),
				unix.Minor(uint64(st.Rdev)), cd.Major, cd.Minor, unix.ENODEV)
		}
	}
	return nil
}

// FD returns the channel's file descriptor, for diagnostics. Reading events
// from it directly would steal them from the channel's IDs, and it must stay
// non-blocking (O_NONBLOCK): the channel's reader asks it for events with a
// system call that keeps its thread's P, counting on an answer at once.
func (ch *EventChannel) FD() int { return int(ch.f.Fd()) }

// Close destroys every ID and multicast membership still on the channel
// (the kernel does so when the file closes) and stops its reader. It is
// idempotent. QPs created through an ID are destroyed with it.
func (ch *EventChannel) Close() error {
	ch.mu.Lock()
	if ch.closed {
		ch.mu.Unlock()
		return nil
	}
	ch.closed = true // no new IDs; requests arriving now are refused
	ids := make([]*ID, 0, len(ch.ids))
	for _, id := range ch.ids {
		ids = append(ids, id)
	}
	ch.mu.Unlock()
	for _, id := range ids {
		id.Close()
	}
	err := ch.f.Close()
	<-ch.done
	return err
}

// errClosed is returned by every operation on a closed channel or ID.
func errClosed(what string) error { return fmt.Errorf("rdmacm: %s: %w", what, uverbs.ErrClosed) }

// write sends one ucma command: the header and the request struct in one
// write(2), as the kernel's ucma_write expects. out is the size of the
// response the request's Response field points to (0 for none); the caller
// keeps that buffer alive across the call.
func write[T any](ch *EventChannel, cmd uint32, req *T, out uintptr) error {
	c := cmdPool.Get().(*cmdBuf)
	defer cmdPool.Put(c)
	return c.send(ch, cmd, unsafe.Pointer(req), unsafe.Sizeof(*req), out)
}

// writeResp is write for a command whose response the kernel writes
// through the request's Response field (respField, inside req): pointed at
// pooled memory on the heap, which does not move, and copied out.
func writeResp[T, R any](ch *EventChannel, cmd uint32, req *T, respField *uint64) (R, error) {
	var r R
	size := unsafe.Sizeof(r)
	c := cmdPool.Get().(*cmdBuf)
	defer cmdPool.Put(c)
	if size > unsafe.Sizeof(c.resp) {
		return r, fmt.Errorf("rdmacm: command %d: a %d-byte response does not fit the %d-byte buffer: %w",
			cmd, size, unsafe.Sizeof(c.resp), unix.EINVAL)
	}
	p := unsafe.Pointer(&c.resp[0])
	clear(c.resp[:(size+7)/8])
	*respField = uint64(uintptr(p))
	err := c.send(ch, cmd, unsafe.Pointer(req), unsafe.Sizeof(*req), size)
	return *(*R)(p), err
}

// cmdBuf is a command in flight, pooled so that issuing one allocates
// nothing: the bytes written (header and request) and the memory a
// response is written to, 8-byte aligned.
type cmdBuf struct {
	buf  [512]byte
	resp [64]uint64
	n    int
	raw  bool // a quick command (quickCmd): RawSyscall
	werr error
	do   func(fd uintptr) // c.writeFD, bound once
}

// quickCmd reports whether ucma command cmd is answered in the caller's
// context without waiting, and is then written by RawSyscall, as
// internal/transport makes the quick uverbs commands: Syscall would let
// the runtime's monitor hand the thread's P to another thread for each
// command that outlasts its 20 µs tick, a wake-up and a context switch a C
// program does not pay. Every command but three only queues work or a MAD
// and returns (resolving, connecting, accepting, rejecting, disconnecting,
// options, queries, joins); DESTROY_ID waits for the ID's event handler and
// its references, LEAVE_MCAST for the membership's, MIGRATE_ID for both
// files' locks: those go by Syscall.
func quickCmd(cmd uint32) bool {
	switch cmd {
	case abi.UCMCmdDestroyID, abi.UCMCmdLeaveMcast, abi.UCMCmdMigrateID:
		return false
	}
	return true
}

var cmdPool = sync.Pool{New: func() any {
	c := new(cmdBuf)
	c.do = c.writeFD
	return c
}}

func (c *cmdBuf) writeFD(fd uintptr) {
	for {
		c.werr = transport.WriteCommand(int(fd), c.buf[:c.n], c.raw)
		if c.werr != unix.EINTR {
			return
		}
	}
}

// send writes command cmd with the size bytes of the request at req.
// Every request fits the buffer (TestCmdBufFits); one that did not would
// be refused, never cut short.
func (c *cmdBuf) send(ch *EventChannel, cmd uint32, req unsafe.Pointer, size, out uintptr) error {
	if 8+size > uintptr(len(c.buf)) {
		return fmt.Errorf("rdmacm: command %d: a %d-byte request does not fit the %d-byte buffer: %w",
			cmd, size, len(c.buf)-8, unix.EINVAL)
	}
	*(*abi.UCMCmdHdr)(unsafe.Pointer(&c.buf[0])) = abi.UCMCmdHdr{Cmd: cmd, In: uint16(size), Out: uint16(out)}
	copy(c.buf[8:], unsafe.Slice((*byte)(req), size))
	c.n = int(8 + size)
	c.raw = quickCmd(cmd)
	err := ch.rc.Control(c.do)
	werr := c.werr
	c.werr = nil
	if err != nil {
		return uverbs.ErrClosed
	}
	if tracing {
		fmt.Fprintf(os.Stderr, "rdmacm: cmd %d (%d bytes in, %d out): %v\n", cmd, size, out, werr)
	}
	return werr
}

// nextUID numbers IDs and memberships across every channel of the process
// (never 0: the kernel drops the events of a uid-0 ID), so that an ID
// keeps its uid when it migrates to another channel.
var nextUID atomic.Uint64

// uids finds the ID or membership an event is for, by uid, whichever
// channel's reader has the event: after MIGRATE_ID the new channel's
// reader delivers the ID's events at once (before Migrate has returned),
// and the old one's may still deliver an event it read before the command.
// Each channel's ids only lists what its Close destroys.
var uids = struct {
	sync.Mutex
	ids map[uint64]*ID
	mcs map[uint64]*Multicast
}{ids: make(map[uint64]*ID), mcs: make(map[uint64]*Multicast)}

func lookupID(uid uint64) *ID {
	uids.Lock()
	defer uids.Unlock()
	return uids.ids[uid]
}

// eventHook, if set (by tests), sees every raw GET_EVENT response.
var eventHook func([]byte)

// tracing logs every command and event to stderr (GOVERBS_TRACE=1).
var tracing = os.Getenv("GOVERBS_TRACE") == "1"

// readLoop reads every event of the channel, parked on the netpoller while
// the kernel has none, and delivers each to its ID until the file closes.
func (ch *EventChannel) readLoop(rc interface {
	Read(func(fd uintptr) bool) error
}) {
	defer close(ch.done)
	resp := onHeap[[abi.UCMMaxEventResp]byte]()
	req := &abi.UCMGetEvent{Response: uint64(uintptr(unsafe.Pointer(resp)))}
	size := unsafe.Sizeof(*req)
	buf := make([]byte, 8+size)
	*(*abi.UCMCmdHdr)(unsafe.Pointer(&buf[0])) = abi.UCMCmdHdr{Cmd: abi.UCMCmdGetEvent, In: uint16(size), Out: abi.UCMMaxEventResp}
	copy(buf[8:], unsafe.Slice((*byte)(unsafe.Pointer(req)), size))
	// One closure for the loop: made per event, it and werr were an
	// allocation each.
	var werr error
	read := func(fd uintptr) bool {
		// The file is non-blocking: GET_EVENT answers at once, with an
		// event or EAGAIN, and the wait is the netpoller's.
		werr = transport.WriteCommand(int(fd), buf, true)
		return werr != unix.EAGAIN && werr != unix.EINTR
	}
	for {
		werr = nil
		err := rc.Read(read)
		if err != nil {
			return // closed
		}
		if werr != nil {
			ch.mu.Lock()
			ch.readErr = werr
			ch.mu.Unlock()
			return
		}
		if eventHook != nil {
			eventHook(resp[:])
		}
		ev, err := parseEvent(resp[:])
		if err != nil {
			continue // not reachable with a 336-byte buffer
		}
		if tracing {
			fmt.Fprintf(os.Stderr, "rdmacm: event %v status %d uid %d handle %d\n", ev.typ, ev.status, ev.uid, ev.handle)
		}
		ch.deliver(ev)
	}
}

// register lists id, whose kernel ID exists (its handle is set), on the
// channel and for its events; a closed channel, which has already
// destroyed the IDs it listed, refuses it.
func (ch *EventChannel) register(id *ID) error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.closed {
		return errClosed("create id")
	}
	ch.ids[id.uid] = id
	uids.Lock()
	uids.ids[id.uid] = id
	uids.Unlock()
	return nil
}

// unregister drops id from the channel and from event delivery.
func (ch *EventChannel) unregister(id *ID) {
	ch.mu.Lock()
	delete(ch.ids, id.uid)
	ch.mu.Unlock()
	uids.Lock()
	if uids.ids[id.uid] == id {
		delete(uids.ids, id.uid)
	}
	uids.Unlock()
}

// deliver hands a kernel event to the queue of its ID. A CONNECT_REQUEST
// makes the new connection's ID (on this channel, where the kernel made
// it); one that its listener does not queue (gone, closing, or its backlog
// full) is destroyed, which refuses the peer.
//
// deliver runs on the channel's reader, so nothing it calls may close the
// channel (EventChannel.Close waits for the reader): it never runs
// ID.Close, whose release of the shared channel can be the last.
func (ch *EventChannel) deliver(r rawEvent) {
	ev := Event{Type: r.typ, Status: int(r.status), ECE: r.ece}
	if r.typ == EventConnectRequest {
		ch.mu.Lock()
		l := lookupID(r.uid)
		if l == nil || ch.closed {
			ch.mu.Unlock()
			ch.destroyHandle(r.handle)
			return
		}
		child := ch.newChild(l, r.handle)
		ch.mu.Unlock()
		ev.ID, ev.Listener = child, l
		child.fillParams(&ev, &r)
		child.reqResp, child.reqInit = r.conn.ResponderResources, r.conn.InitiatorDepth
		if !l.pushRequest(ev) {
			child.refuse()
		}
		return
	}
	uids.Lock()
	mc, id := uids.mcs[r.uid], uids.ids[r.uid]
	uids.Unlock()
	if mc != nil {
		ev.ID, ev.Multicast = mc.id, mc
		ud := r.ud
		ev.UD = &ud
		ev.Param.PrivateData = r.udPriv
		mc.id.push(ev)
		return
	}
	if id == nil {
		return // destroyed meanwhile
	}
	ev.ID = id
	if r.typ == EventAddrResolved && id.chainRoute(&ev) {
		return // ROUTE_RESOLVED or ROUTE_ERROR follows
	}
	id.fillParams(&ev, &r)
	// DISCONNECTED leaves the QP alone, as librdmacm does: the peer's
	// acknowledgements of this side's last sends may have arrived and not
	// yet completed them, and moving the QP to the error state now would
	// report that delivered data as flushed. The QP goes to the error
	// state when this side answers with Disconnect (WaitDisconnect and
	// Close do).
	if r.typ == EventDeviceRemoval {
		id.mu.Lock()
		id.removed = true
		dev := id.dev
		id.mu.Unlock()
		id.errQP()
		if dev != nil {
			dev.markRemoved()
		}
	}
	id.push(ev)
}

// fillParams copies the view of the event's parameter union that fits the
// ID's QP type.
func (id *ID) fillParams(ev *Event, r *rawEvent) {
	if id.qpType == uverbs.QPTypeUD {
		ev.Param.PrivateData = r.udPriv
		if r.typ == EventEstablished {
			ud := r.ud
			ev.UD = &ud
			ev.Param.QPNum, ev.Param.QKey = ud.QPNum, ud.QKey
		}
		return
	}
	ev.Param = r.conn
}

// destroyHandle destroys a kernel ID the channel has no ID for.
func (ch *EventChannel) destroyHandle(handle uint32) {
	req := &abi.UCMDestroyID{ID: handle}
	writeResp[abi.UCMDestroyID, abi.UCMDestroyIDResp](ch, abi.UCMCmdDestroyID, req, &req.Response)
}

// stopped returns why the channel's reader ended, or nil while it runs.
func (ch *EventChannel) stopped() error {
	select {
	case <-ch.done:
		ch.mu.Lock()
		defer ch.mu.Unlock()
		if ch.readErr != nil {
			return fmt.Errorf("rdmacm: get event: %w", ch.readErr)
		}
		return errClosed("get event")
	default:
		return nil
	}
}
