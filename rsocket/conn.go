package rsocket

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

// Config holds the sizes of a connection, the options rsockets have.
// Zero fields take librdmacm's defaults, except PollTime (300 µs, where
// librdmacm polls 10 µs).
type Config struct {
	// SendBuffer is the bytes of the send staging ring (default 131072;
	// rsocket's SO_SNDBUF v gives 2v). At least 4096.
	SendBuffer int
	// RecvBuffer is the bytes of the receive ring the peer writes into
	// (default 131072; SO_RCVBUF v gives 2v); even, at least 4096. The
	// peer is offered half of it at a time.
	RecvBuffer int
	// Inline is the largest write sent inline from the caller's buffer
	// (default 64; RDMA_INLINE). The device may grant more.
	Inline int
	// SQSize and RQSize are the QP's send and receive depths (default 384
	// each; RDMA_SQSIZE, RDMA_RQSIZE), 16..65534. RQSize is the number of
	// messages the peer may have in flight.
	SQSize, RQSize int
	// KeepAlive, when positive, makes the connection send a keepalive
	// after each KeepAlive with nothing sent (rsocket's SO_KEEPALIVE with
	// TCP_KEEPIDLE, which sends one every interval): a zero-length RDMA
	// WRITE, which the peer's device acknowledges without its CPU seeing
	// it. A peer that is gone without a word (its host down) then ends
	// the retries of the write where the device counts them, and the
	// connection fails: Read and Write return an error matching
	// unix.ECONNRESET. rxe does not: with rsockets' transport retry count
	// of 7 its keepalive to a peer QP that was destroyed behind the CM's
	// back neither completed nor failed in 20 s. 0 (the default) sends
	// none; at least a millisecond otherwise.
	KeepAlive time.Duration
	// PollTime is how long a Read or Write that cannot go on keeps
	// polling for completions before it arms the CQ and sleeps on its
	// completion channel (default 300 µs), counted from the moment the
	// call first had to wait, however many completions it processes
	// meanwhile that do not let it go on (librdmacm's rs_get_comp
	// counts its polling_time the same way). The first 10 µs poll back to
	// back, as librdmacm's polling_time does; after that the caller gives
	// the CPU up before each poll (sched_yield), so that the threads that
	// deliver the completion (on rxe in 6.12, a kernel workqueue's; 6.1
	// runs that work in softirq context) run meanwhile. A
	// completion found by polling costs no arming, no event read and no
	// wake-up through the Go scheduler, which is most of a small
	// message's round trip on rxe; a connection whose peer answers later
	// spends up to PollTime of CPU per wait before it sleeps, and the
	// goroutine keeps its P meanwhile. While data moves in messages of
	// 16 KiB or more a wait polls 10 µs only: the wait is then the data's
	// transfer, which polling would take CPU from. 10 µs polls as
	// librdmacm does; not negative.
	PollTime time.Duration
	// IOMapSize is how many mappings of the peer's (its MapIO, rsockets'
	// riomap) this side takes for WriteIO (rsockets' RDMA_IOMAPSIZE;
	// default 0, none). riostream sets 1. 0..128, or a multiple of 256 up
	// to 32512: what the one byte of the connection data carries.
	IOMapSize int
}

func (c Config) withDefaults() (Config, error) {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.SendBuffer, 131072)
	def(&c.RecvBuffer, 131072)
	def(&c.Inline, 64)
	def(&c.SQSize, 384)
	def(&c.RQSize, 384)
	if c.PollTime == 0 {
		c.PollTime = defaultPollTime
	}
	switch {
	case c.SendBuffer < 4096 || c.SendBuffer > 1<<30:
		return c, fmt.Errorf("rsocket: Config.SendBuffer %d is outside 4096..2^30: %w", c.SendBuffer, unix.EINVAL)
	case c.RecvBuffer < 4096 || c.RecvBuffer > 1<<30 || c.RecvBuffer%2 != 0:
		return c, fmt.Errorf("rsocket: Config.RecvBuffer %d is not an even number in 4096..2^30: %w", c.RecvBuffer, unix.EINVAL)
	case c.Inline < 0 || c.Inline > 1024:
		return c, fmt.Errorf("rsocket: Config.Inline %d is outside 0..1024: %w", c.Inline, unix.EINVAL)
	case c.SQSize < 16 || c.SQSize > 0xFFFE:
		return c, fmt.Errorf("rsocket: Config.SQSize %d is outside 16..65534: %w", c.SQSize, unix.EINVAL)
	case c.RQSize < 16 || c.RQSize > 0xFFFE:
		return c, fmt.Errorf("rsocket: Config.RQSize %d is outside 16..65534: %w", c.RQSize, unix.EINVAL)
	case c.KeepAlive < 0 || c.KeepAlive > 0 && c.KeepAlive < time.Millisecond:
		return c, fmt.Errorf("rsocket: Config.KeepAlive %v is neither 0 nor at least 1ms: %w", c.KeepAlive, unix.EINVAL)
	case c.PollTime < 0:
		return c, fmt.Errorf("rsocket: Config.PollTime %v is negative: %w", c.PollTime, unix.EINVAL)
	}
	if _, ok := scaleOf(c.IOMapSize); !ok {
		return c, fmt.Errorf("rsocket: Config.IOMapSize %d is neither 0..128 nor a multiple of 256 up to %d: %w",
			c.IOMapSize, maxIOMapSlots, unix.EINVAL)
	}
	return c, nil
}

// wr_id of our sends: kind in bits 63:56; for a signaled send, in bits
// 55:32 the DATA sends its completion retires (those posted unsignaled
// before it, and itself if it is one: their send queue slots) and in 31:0
// their bytes of sbuf. A signaled send's completion means every send
// before it completed: an RC send queue completes in order.
const (
	wrData = 1 << 56
	wrCtrl = 3 << 56
	wrDisc = 4 << 56
	wrRecv = 5 << 56
	wrKeep = 6 << 56

	wrCountShift = 32
	wrCountMask  = 1<<24 - 1
)

// sigEvery is how many DATA sends go without a completion of their own
// at most: one in sigEvery is signaled, and any after which the writer
// would wait for a slot or for sbuf (its completion frees them). Control
// messages are always signaled (their slots are few). librdmacm signals
// every send; a completion is work for the device (on rxe, kernel
// threads that need the same CPUs as the program) and a wake-up of a
// writer that waits for credits, which its own sends' completions did not
// bring (rstream, 64 B messages, 6.12: see docs/performance.md).
const sigEvery = 16

// rxHook and connDataHook see every received immediate and connection
// data block (tests record fuzz seeds with them).
var (
	rxHook       func(imm uint32)
	connDataHook func(b []byte)
)

// maxInline bounds the inline size used (the scratch area).
const maxInline = 1024

// Conn is an rsocket stream connection. It implements net.Conn; one
// goroutine may Read while another Writes, and Close may come from any.
type Conn struct {
	cfg   Config
	id    *rdmacm.ID
	chRef *chanRef
	pd    *uverbs.PD
	cch   *uverbs.CompChannel
	cq    *uverbs.CQ
	qp    *uverbs.QP
	mem   *uverbs.Buffer // rbuf | sbuf | target SGL | iomap slots | control slots | scratch
	mr    *uverbs.MR
	rbuf  []byte
	sbuf  []byte
	sgl   []byte
	ioSl  []byte // the iomap slots the peer writes (Config.IOMapSize)
	ctrl  []byte
	// offsets in mem of the target SGL, the control slots and scratch
	sglOff, ctrlOff, scratchOff int
	// scratch stages inline data: the device copies it at PostSend.
	scratch []byte
	inline  int
	laddr   net.Addr
	raddr   net.Addr

	rmu, wmu sync.Mutex // one reader, one writer
	pollMu   sync.Mutex // polling the CQ and processing what it gave
	mu       sync.Mutex // the protocol state below
	rx       receiver
	// send side
	sqeAvail   int
	unsigSent  int // DATA sends posted unsignaled since the last signaled send
	unsigBytes int // their bytes of sbuf
	ctrlAvail  int
	ctrlSeq    uint32
	sbufHead   int
	sbufAvail  int
	// pendLen: Write's bytes staged in sbuf and not yet posted, the last
	// pendLen before sbufHead (while any wait, nothing else takes sbuf):
	// what Write took while no message could go, sent as few messages as
	// the peer's credits and ring allow once they can.
	pendLen    int
	inWrite    bool // a Write is in write
	wStaged    int  // what the Write under way staged, as far as still staged: the last of pendLen
	wDropped   int  // what of that a Close dropped: the Write does not count it as written
	flushArmed bool // flushTimer is set or its flush runs
	flushTimer *time.Timer
	sseqNo     uint16
	sseqComp   uint16
	credits    uint16 // the peer's credits (its connection data)
	tgt        sge    // current target SGE (rest of it)
	tgtIdx     int
	remoteSGL  sge
	remoteSge  uint32
	peerOrd    binary.ByteOrder
	// iomap: where the peer's slots are (Length: how many), this side's
	// mappings by the peer's slot they take, those not yet sent to it,
	// and the slot WriteIO found last
	peerIO     sge
	ioMaps     []*IOMap
	ioPending  []*IOMap
	ioLast     int
	rseqComp   uint32
	wrShut     bool  // CloseWrite done
	shutPend   bool  // CloseWrite's SHUTDOWN is not posted yet: it goes after the staged bytes
	peerGone   bool  // DISCONNECT or CM disconnect from the peer
	err        error // fatal error
	closing    bool  // Close began: nothing more is written
	closed     bool
	discPosted bool // the DISCONNECT is posted: nothing more is sent

	// Completions are polled by the goroutine that needs them, as
	// librdmacm's callers do: a Read or Write that cannot go on polls the
	// CQ, and one of them at a time (the waiter) arms it and sleeps on the
	// completion channel; the others sleep on their wake-up channel (rdy,
	// wrdy, cdy for Close), which the waiter signals when it stops
	// waiting. Under mu: waiting, armed.
	rdy, wrdy, cdy chan struct{}
	fdy            chan struct{}  // the background flush's (flushLater)
	waiting        bool           // a goroutine is in cch.Wait
	armed          bool           // the CQ is armed and its event not yet read
	waiters        sync.WaitGroup // the goroutine in cch.Wait; Close waits for it
	waitCtx        context.Context
	done           chan struct{} // closed by Close
	discDone       chan struct{}
	cmGone         chan struct{} // closed by watchCM: the CM reported the peer gone
	cancelCM       context.CancelFunc
	freed          bool // under pollMu: the CQ is destroyed
	closeOnce      sync.Once
	closeErr       error

	// keepalive: the timer, what was sent at its last tick, and the
	// keepalives sent and acknowledged by the peer
	kaTimer *time.Timer
	kaSeq   uint32
	kaSent  atomic.Uint64
	kaAcked atomic.Uint64

	// bulk: the last data message received or sent carried at least
	// bulkSize bytes (await then polls spinTime only)
	bulk         atomic.Bool
	rdl, wdl     atomic.Int64 // deadlines, unix nanos; 0 none
	rtimer       *time.Timer
	wtimer       *time.Timer
	wcs          [32]uverbs.WC
	recvWRs      []uverbs.RecvWR
	sendWR       [1]uverbs.SendWR
	sendSGE      [1]uverbs.SGE
	protoErrSeen atomic.Bool
}

func notify(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// chanRef shares an event channel between a listener and its
// connections; the last one closes it.
type chanRef struct {
	mu   sync.Mutex
	ch   *rdmacm.EventChannel
	refs int
}

func (r *chanRef) hold() { r.mu.Lock(); r.refs++; r.mu.Unlock() }
func (r *chanRef) release() {
	r.mu.Lock()
	r.refs--
	last := r.refs == 0
	r.mu.Unlock()
	if last {
		r.ch.Close()
	}
}

// newConn makes the verbs objects of a connection on id (bound to a
// device): PD, completion channel, one CQ, the QP, one registered buffer,
// and posts the receives.
func newConn(id *rdmacm.ID, cfg Config) (c *Conn, err error) {
	c = &Conn{cfg: cfg, id: id,
		rdy: make(chan struct{}, 1), wrdy: make(chan struct{}, 1), cdy: make(chan struct{}, 1),
		fdy:  make(chan struct{}, 1),
		done: make(chan struct{}), discDone: make(chan struct{}), cmGone: make(chan struct{})}
	ctx, err := id.Context()
	if err != nil {
		return c, err
	}
	if c.pd, err = ctx.AllocPD(); err != nil {
		return c, err
	}
	if c.cch, err = ctx.NewCompChannel(); err != nil {
		return c, err
	}
	nrecv := cfg.RQSize + ctrlSlots
	if c.cq, err = ctx.CreateCQ(cfg.SQSize+nrecv, &uverbs.CQOptions{Channel: c.cch}); err != nil {
		return c, err
	}
	c.qp, err = id.CreateQP(c.pd, uverbs.QPInitAttr{SendCQ: c.cq, RecvCQ: c.cq,
		Cap: uverbs.QPCap{MaxSendWr: uint32(cfg.SQSize), MaxRecvWr: uint32(nrecv), MaxSendSGE: 1, MaxRecvSGE: 1,
			MaxInlineData: uint32(cfg.Inline)}})
	if err != nil {
		return c, err
	}
	c.inline = int(c.qp.Cap().MaxInlineData)
	c.inline = min(c.inline, maxInline)
	c.sglOff = cfg.RecvBuffer + cfg.SendBuffer
	ioOff := c.sglOff + sglEntries*sgeBytes // where librdmacm puts them: right after the SGL
	c.ctrlOff = ioOff + cfg.IOMapSize*iomapBytes
	c.scratchOff = c.ctrlOff + ctrlSlots*ctrlSlotBytes
	total := c.scratchOff + maxInline
	if c.mem, err = uverbs.AllocBuffer(total); err != nil {
		return c, err
	}
	if c.mr, err = c.pd.RegisterBuffer(c.mem, 0, total, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite); err != nil {
		return c, err
	}
	b := c.mem.Bytes()
	c.rbuf = b[:cfg.RecvBuffer:cfg.RecvBuffer]
	c.sbuf = b[cfg.RecvBuffer:c.sglOff:c.sglOff]
	c.sgl = b[c.sglOff:ioOff:ioOff]
	c.ioSl = b[ioOff:c.ctrlOff:c.ctrlOff]
	c.ctrl = b[c.ctrlOff:c.scratchOff:c.scratchOff]
	c.scratch = b[c.scratchOff:]
	c.rx = newReceiver(uint32(cfg.RecvBuffer), uint32(cfg.IOMapSize))
	c.sqeAvail = cfg.SQSize - ctrlSlots
	c.ctrlAvail = ctrlSlots
	c.sbufAvail = cfg.SendBuffer
	c.rseqComp = uint32(cfg.RQSize / 2)
	c.remoteSge = 1
	c.recvWRs = make([]uverbs.RecvWR, nrecv)
	for i := range c.recvWRs {
		c.recvWRs[i].ID = wrRecv
	}
	if err := c.qp.PostRecv(c.recvWRs); err != nil {
		return c, fmt.Errorf("rsocket: posting receives: %w", err)
	}
	c.rtimer = time.AfterFunc(time.Hour, func() { notify(c.rdy) })
	c.rtimer.Stop()
	c.wtimer = time.AfterFunc(time.Hour, func() { notify(c.wrdy) })
	c.wtimer.Stop()
	c.flushTimer = time.AfterFunc(time.Hour, c.flushLater)
	c.flushTimer.Stop()
	return c, nil
}

func (c *Conn) addr(off int) uint64 { return c.mr.Addr() + uint64(off) }

// localConnData is what this side sends in its request or reply.
func (c *Conn) localConnData() []byte {
	slots, _ := scaleOf(c.cfg.IOMapSize) // checked in withDefaults
	d := connData{Version: connDataVersion, Flags: hostFlags(), Credits: uint16(c.cfg.RQSize), IOMapSize: slots,
		TargetSGL:  sge{c.addr(c.sglOff), c.mr.Rkey(), sglEntries},
		DataBuffer: sge{c.addr(0), c.mr.Rkey(), uint32(c.cfg.RecvBuffer / 2)}}
	b := make([]byte, connDataBytes)
	d.marshal(b)
	return b
}

// start takes the peer's connection data and runs the connection.
func (c *Conn) start(peer connData) {
	c.remoteSGL = peer.TargetSGL
	c.peerOrd = peerOrder(peer.Flags)
	if peer.Flags&flagIOMap != 0 {
		c.peerIO = sge{Addr: peer.TargetSGL.Addr + uint64(peer.TargetSGL.Length)*sgeBytes, Key: peer.TargetSGL.Key,
			Length: uint32(scaleValue(peer.IOMapSize))}
	}
	c.sseqComp = peer.Credits
	c.credits = peer.Credits
	c.tgt = peer.DataBuffer
	ctx, cancel := context.WithCancel(context.Background())
	c.cancelCM = cancel
	c.waitCtx = ctx
	c.laddr = tcpAddr(c.id.LocalAddr())
	c.raddr = tcpAddr(c.id.RemoteAddr())
	c.chRef.hold()
	c.mu.Lock()
	c.sendCredits()
	if c.cfg.KeepAlive > 0 {
		c.kaSeq = c.sentSeq()
		c.kaTimer = time.AfterFunc(c.cfg.KeepAlive, c.keepAlive)
	}
	c.mu.Unlock()
	go c.watchCM(ctx)
}

// sentSeq counts the messages sent so far, data and control, modulo
// 2^32. Holds mu.
func (c *Conn) sentSeq() uint32 { return uint32(c.sseqNo) + c.ctrlSeq<<16 }

// keepAlive runs every Config.KeepAlive: when nothing was sent since its
// last run and a control slot is free, it posts a zero-length RDMA WRITE
// (rsocket's tcp_svc_send_keepalive). Its completion frees the slot; an
// error completion fails the connection.
func (c *Conn) keepAlive() {
	// Nobody may be reading or writing: the completions of the last
	// keepalives free their control slots here.
	if c.pollOrFail() < 0 {
		return
	}
	c.mu.Lock()
	if c.closing || c.sendErr() != nil {
		c.mu.Unlock()
		return
	}
	if seq := c.sentSeq(); seq == c.kaSeq && c.ctrlAvail > 0 {
		c.sendWR[0] = uverbs.SendWR{ID: c.signaledID(wrKeep, 0, 0), Flags: uverbs.SendSignaled, Opcode: uverbs.WRRDMAWrite}
		if err := c.qp.PostSend(c.sendWR[:]); err != nil {
			c.mu.Unlock()
			c.fail(fmt.Errorf("rsocket: sending a keepalive: %w", err)) // and wake Read and Write
			return
		}
		c.ctrlSeq++
		c.ctrlAvail--
		c.kaSent.Add(1)
	}
	c.kaSeq = c.sentSeq()
	c.kaTimer.Reset(c.cfg.KeepAlive)
	c.mu.Unlock()
}

// watchCM marks the connection gone when the CM reports a disconnect
// (the peer destroyed its ID without a DISCONNECT message).
func (c *Conn) watchCM(ctx context.Context) {
	// Any error but a cancelled ctx ends the connection: DISCONNECTED, a
	// device removal, the ID gone.
	c.id.WaitFor(ctx, rdmacm.EventDisconnected)
	if ctx.Err() != nil {
		return
	}
	// The peer's last data may still be in the CQ, not yet processed: a
	// peer's Close sends its DISCONNECT and waits for it to complete
	// before it disconnects, so what it wrote has completions here.
	for {
		if n, err := c.pollOnce(); err != nil || n == 0 {
			break
		}
	}
	c.mu.Lock()
	c.peerGone = true
	c.rx.eof = true
	c.kickLocked()
	c.mu.Unlock()
	close(c.cmGone)
	notify(c.rdy)
	notify(c.wrdy)
}

// pollOnce polls the CQ once and processes what it gave, under pollMu
// (Read, Write, Close, the keepalive and watchCM's last drain all poll).
func (c *Conn) pollOnce() (int, error) {
	c.pollMu.Lock()
	defer c.pollMu.Unlock()
	if c.freed {
		return 0, nil
	}
	n, err := c.cq.Poll(c.wcs[:])
	if err == nil && n > 0 {
		c.process(c.wcs[:n])
	}
	return n, err
}

// spinTime is how long await polls back to back before it yields the CPU
// between polls, librdmacm's polling_time; defaultPollTime is how long it
// polls in all before it sleeps (Config.PollTime), except while data moves
// in messages of bulkSize bytes or more, when it polls spinTime only.
//
// Measured in the test VM (rstream against rdma-core's, 2026-11-27, 6.12
// and 6.1): polling back to back beyond 10 µs was no better or worse, as
// the poller takes the CPU that rxe needs to deliver; sleeping after 10 µs
// made each small message pay arming the CQ, reading the event and the Go
// scheduler's wake-up (epoll and a thread switch), which left Go's 64 B
// latency at 1.2-1.4 times rdma-core's on 6.12, where rxe's work runs in
// kernel threads that need a CPU. Polling with sched_yield between polls
// up to 200 µs brought it below rdma-core's on both kernels (100 µs and
// 500 µs were no better, a runtime.Gosched every 50 µs worse); it cost 64
// KiB transfers about a tenth of their rate, where the wait is the
// kernel copying data and each poll takes CPU from it: so large messages
// wait as before. Those budgets were counted per call of await; counted
// per wait of the caller (2026-11-28, 6.12, one boot, 6 runs each), 200
// µs left the 64 B latency at 225 µs against 168 µs before (rdma-core 257
// µs): a round trip takes about 300 µs, and a sender's own completion in
// the middle of a wait used to restart its budget. 300 µs brought it back
// (163 µs).
const (
	spinTime        = 10 * time.Microsecond
	defaultPollTime = 300 * time.Microsecond
	bulkSize        = 16 << 10
)

// await returns when the caller (Read, Write, CloseWrite, Close) may be
// able to go on: completions were processed, the deadline dl (unix nanos,
// 0 none) passed, the connection failed or is closing, or another
// goroutine handed over. mine is the caller's wake-up channel. The caller
// rechecks its condition and calls again, with the same since: the time
// it first waited (zero before its first call, which sets it), from which
// the polling budget (spinTime, then up to poll: Config.PollTime, or
// spinTime for the background flush) is counted. Counted per call of
// await instead, a writer waiting for credits while its own sends
// complete one by one would poll without end and never sleep, taking
// the CPU that delivers its peer's credits (rstream, 64 B messages,
// 6.12: the Go pair took 5.37 s with it per await call and 5.11 s with it
// per wait, rdma-core's pair 4.53 s, one boot, 4 runs each).
func (c *Conn) await(mine chan struct{}, dl int64, since *time.Time, poll time.Duration) {
	// One reading of the wall clock, for the deadline; each poll below
	// reads the monotonic clock alone (time.Since), half what time.Now
	// reads, and a clock reading is a good part of a poll's cost.
	now := time.Now()
	if since.IsZero() {
		*since = now
	}
	start := *since
	left := time.Duration(math.MaxInt64) // from start until the deadline
	if dl != 0 {
		left = time.Duration(dl-now.UnixNano()) + now.Sub(start)
	}
	if c.bulk.Load() {
		poll = min(poll, spinTime)
	}
	for {
		if c.pollOrFail() != 0 {
			return
		}
		el := time.Since(start)
		if el >= left {
			return // the caller reports its deadline
		}
		if el >= poll {
			break
		}
		if el >= spinTime {
			// Raw: it returns at once, and a Syscall would wake the
			// runtime's monitor thread (internal/transport's quick
			// commands say more).
			unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		}
	}
	c.mu.Lock()
	// What wakes a waiter by kickLocked (a failure, Close, the peer gone)
	// is checked under mu here, so that it is seen before or kicks after.
	// A Write (wrdy) ends once Close or CloseWrite begins.
	if c.closed || c.err != nil || c.peerGone || (c.closing || c.wrShut) && mine == c.wrdy {
		c.mu.Unlock()
		return
	}
	if c.waiting {
		// Another goroutine sleeps on the channel; it wakes this one when
		// it stops, and what it processes for this one signals mine.
		// The caller's deadline timer signals mine too.
		c.mu.Unlock()
		select {
		case <-mine:
		case <-c.done:
		}
		return
	}
	c.waiting = true
	c.waiters.Add(1)
	arm := !c.armed
	c.armed = true
	var wdl time.Time
	if dl != 0 {
		wdl = time.Unix(0, dl)
	}
	err := c.cch.SetDeadline(wdl)
	c.mu.Unlock()
	defer c.stopWaiting(mine)
	if err != nil {
		c.fail(fmt.Errorf("rsocket: completion channel: %w", err))
		return
	}
	if arm {
		if err := c.cq.RequestNotify(false); err != nil {
			c.fail(fmt.Errorf("rsocket: arming the CQ: %w", err))
			return
		}
	}
	// A completion may have come before the CQ was armed: poll once more.
	// And another goroutine may have processed, in its own poll, what
	// this one waits for before the CQ was armed, so that no event will
	// come for it; its process signalled mine under pollMu, which this
	// poll takes, so the signal is visible below.
	if c.pollOrFail() != 0 {
		return
	}
	select {
	case <-mine:
		return
	default:
	}
	if _, err := c.cch.Wait(c.waitCtx); err != nil {
		return // a deadline, a kick, Close: the caller looks
	}
	c.cq.AckEvents(1)
	c.mu.Lock()
	c.armed = false
	c.mu.Unlock()
	c.pollOrFail()
}

// pollOrFail is pollOnce that fails the connection on an error: it
// returns the completions processed, or -1 after an error.
func (c *Conn) pollOrFail() int {
	n, err := c.pollOnce()
	if err != nil {
		c.fail(fmt.Errorf("rsocket: polling the CQ: %w", err))
		return -1
	}
	return n
}

// stopWaiting ends a goroutine's turn on the completion channel and wakes
// the other callers, so that one of them waits next if it still must.
func (c *Conn) stopWaiting(mine chan struct{}) {
	c.mu.Lock()
	c.waiting = false
	c.mu.Unlock()
	c.waiters.Done()
	for _, ch := range [...]chan struct{}{c.rdy, c.wrdy, c.cdy, c.fdy} {
		if ch != mine {
			notify(ch)
		}
	}
}

// kickLocked wakes the goroutine waiting on the completion channel, if
// any, to look at the connection's state again. Holds mu.
func (c *Conn) kickLocked() {
	if c.waiting {
		c.cch.SetDeadline(time.Unix(1, 0))
	}
}

// fail records a fatal error and wakes everyone.
func (c *Conn) fail(err error) {
	c.mu.Lock()
	if c.err == nil && !c.closed {
		c.err = err
	}
	c.kickLocked()
	c.mu.Unlock()
	notify(c.rdy)
	notify(c.wrdy)
}

func (c *Conn) process(wcs []uverbs.WC) {
	var reposts int
	var rd, wr bool
	var bulk, sized bool // the last data message's size class, if any
	c.mu.Lock()
	for i := range wcs {
		wc := &wcs[i]
		kind := wc.ID & (0xFF << 56)
		if wc.Status != uverbs.WCSuccess {
			if kind == wrRecv {
				// not reposted; flushed receives after close are expected
			}
			if !c.closed && !c.discPosted && c.err == nil && !c.peerGone {
				c.err = fmt.Errorf("rsocket: work completion %v (wr %#x): %w", wc.Status, wc.ID, unix.ECONNRESET)
			}
			if kind == wrDisc {
				closeOnce(c.discDone)
			}
			rd, wr = true, true
			continue
		}
		switch kind {
		case wrRecv:
			reposts++
			if wc.Flags&uverbs.WCWithImm == 0 {
				c.protocolError(fmt.Errorf("%w: a message without an immediate (opcode %v)", errProtocol, wc.Opcode))
				rd, wr = true, true
				continue
			}
			if c.err != nil {
				continue
			}
			if rxHook != nil {
				rxHook(wc.Imm)
			}
			ev, err := c.rx.onMessage(wc.Imm)
			if err != nil {
				c.protocolError(err)
				rd, wr = true, true
				continue
			}
			switch ev {
			case rxData:
				bulk, sized = wc.Imm&maxImmData >= bulkSize, true
				rd = true
			case rxCredits:
				limit := uint16(wc.Imm)
				if err := checkCredits(limit, c.sseqComp, c.sseqNo, c.credits); err != nil {
					c.protocolError(err)
					rd, wr = true, true
					continue
				}
				c.sseqComp = limit
				wr = true
			case rxShutdown:
				rd = true
			case rxDisconnect:
				c.peerGone = true
				rd, wr = true, true
			}
		case wrData:
			c.retire(wc.ID)
			wr = true
		case wrCtrl:
			c.ctrlAvail++
			c.retire(wc.ID)
			wr = true
		case wrKeep:
			c.ctrlAvail++
			c.retire(wc.ID)
			c.kaAcked.Add(1)
			wr = true
		case wrDisc:
			c.ctrlAvail++
			c.retire(wc.ID)
			closeOnce(c.discDone)
		}
	}
	if sized {
		c.bulk.Store(bulk) // once a batch: an atomic store is a full barrier
	}
	if reposts > 0 && !c.closed && c.err == nil {
		if err := c.qp.PostRecv(c.recvWRs[:reposts]); err != nil && c.err == nil {
			c.err = fmt.Errorf("rsocket: reposting receives: %w", err)
		}
	}
	if wr && (c.pendLen > 0 || c.shutPend) {
		c.flushPending()
	}
	c.sendCredits()
	if c.err != nil {
		c.kickLocked()
	}
	flushing := c.flushArmed
	c.mu.Unlock()
	if rd {
		notify(c.rdy)
	}
	if wr {
		notify(c.wrdy)
		if flushing {
			notify(c.fdy)
		}
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func closeOnce(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}

func (c *Conn) protocolError(err error) {
	c.protoErrSeen.Store(true)
	if c.err == nil {
		c.err = err
	}
}

// sendCredits sends an SGL update when half the ring is free to offer or
// half the credits are used (rsocket's rs_give_credits). Holds mu.
func (c *Conn) sendCredits() {
	if c.sendErr() != nil || c.ctrlAvail == 0 {
		return
	}
	half := c.rx.free >= c.rx.size/2 && c.rx.n < sglEntries
	if !half && int16(uint16(c.rx.seqNo-c.rseqComp)) < 0 {
		return
	}
	limit := c.rx.seqNo + uint32(c.cfg.RQSize)
	c.rseqComp = c.rx.seqNo + uint32(c.cfg.RQSize/2)
	wr := &c.sendWR[0]
	*wr = uverbs.SendWR{ID: c.signaledID(wrCtrl, 0, 0), Flags: uverbs.SendSignaled, Opcode: uverbs.WRRDMAWriteWithImm,
		Imm: mkImm(opSGL, limit)}
	if off, length, ok := c.rx.advertise(); ok {
		putSGE(c.ctrlSlot(sgeBytes), c.peerOrd, sge{c.addr(int(off)), c.mr.Rkey(), length})
		wr.SGL = c.sendSGE[:]
		wr.RemoteAddr = c.remoteSGL.Addr + uint64(c.remoteSge)*sgeBytes
		wr.Rkey = c.remoteSGL.Key
		c.remoteSge = (c.remoteSge + 1) % c.remoteSGL.Length
	}
	c.ctrlSeq++
	c.ctrlAvail--
	if err := c.qp.PostSend(c.sendWR[:]); err != nil {
		c.err = fmt.Errorf("rsocket: sending credits: %w", err)
	}
}

// ctrlSlot returns the control slot of the next control message
// (ctrlSeq), n bytes of it, and points sendSGE at them: a control slot
// is free when a control message is (ctrlAvail), since control messages
// complete in order and at most ctrlSlots are in flight. Holds mu.
func (c *Conn) ctrlSlot(n int) []byte {
	off := int(c.ctrlSeq%ctrlSlots) * ctrlSlotBytes
	c.sendSGE[0] = uverbs.SGE{Addr: c.addr(c.ctrlOff + off), Length: uint32(n), Lkey: c.mr.Lkey()}
	return c.ctrl[off : off+n]
}

// refreshTarget loads the next target SGE the peer wrote, once the
// current one is used up. Holds mu.
func (c *Conn) refreshTarget() {
	if c.tgt.Length != 0 {
		return
	}
	e := c.sgl[c.tgtIdx*sgeBytes:]
	// The peer RDMA-writes this entry; its completion was polled before.
	lp := (*uint32)(unsafe.Pointer(&e[12]))
	if atomic.LoadUint32(lp) == 0 {
		return
	}
	c.tgt = parseSGE(e)
	atomic.StoreUint32(lp, 0)
}

// Read reads from the stream. It returns io.EOF once the peer shut down
// or closed and every byte it sent was read.
func (c *Conn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	var since time.Time // when this Read began to wait (await)
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return 0, c.opErr("read", net.ErrClosed)
		}
		if c.rx.unread > 0 {
			n := c.copyOut(p)
			c.sendCredits()
			c.mu.Unlock()
			return n, nil
		}
		if len(p) == 0 {
			c.mu.Unlock()
			return 0, nil
		}
		if c.err != nil {
			err := c.err
			c.mu.Unlock()
			return 0, c.opErr("read", err)
		}
		if c.rx.eof || c.peerGone {
			c.mu.Unlock()
			return 0, io.EOF
		}
		c.mu.Unlock()
		d := c.rdl.Load()
		if d != 0 && time.Now().UnixNano() >= d {
			return 0, c.opErr("read", os.ErrDeadlineExceeded)
		}
		c.await(c.rdy, d, &since, c.cfg.PollTime)
	}
}

// copyOut copies unread bytes at the read pointer. Holds mu.
func (c *Conn) copyOut(p []byte) int {
	total := 0
	for len(p) > 0 && c.rx.unread > 0 {
		n := min(uint32(len(p)), c.rx.unread, c.rx.size-c.rx.readOff)
		copy(p, c.rbuf[c.rx.readOff:c.rx.readOff+n])
		c.rx.consume(n)
		p = p[n:]
		total += int(n)
	}
	return total
}

// Write writes p to the stream, in RDMA writes of up to 64 KiB into the
// peer's ring. When no message can go (the peer's credits or ring, or the
// send queue, are used up), Write copies what fits into the send buffer
// (Config.SendBuffer) and returns: those bytes go, with those of later
// Writes, in as few messages as the peer's ring allows once the
// connection can send again, as TCP coalesces what waits in its send
// buffer. Write waits only while the send buffer is full. Close and
// CloseWrite send what is staged before they end the stream.
func (c *Conn) Write(p []byte) (int, error) { return c.write(p, false, 0) }

// flushDelay is how long staged bytes wait, when no Write, Read or Close
// polls for the completions that let them go, before a background flush
// (flushLater) polls for them: the wait of a program that stops writing,
// and does not read, while the peer's ring is full.
const flushDelay = 200 * time.Microsecond

// write is Write, and WriteIO (direct, at stream offset offset): it posts
// p a message at a time while the send queue, the staging ring and, for
// stream data, the peer's credits and ring have room, stages stream data
// in sbuf while they have none, and waits otherwise. Mappings not yet
// sent (MapIO) go before anything else: the peer may use them once it
// reads what follows (riostream's sync message). Staged stream data goes
// before a direct write.
func (c *Conn) write(p []byte, direct bool, offset uint64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	done := 0
	olen := olapStart
	var since time.Time // when this call began to wait (await)
	for {
		c.mu.Lock()
		c.inWrite = true
		err := c.writeErr()
		if err == nil && len(c.ioPending) > 0 {
			c.sendIOMaps()
		}
		n := 0
		if err == nil && len(c.ioPending) == 0 {
			if direct {
				if err = c.flushPending(); err == nil && c.pendLen == 0 {
					n, err = c.postDirect(p[done:], offset+uint64(done), &olen)
				}
			} else {
				n, err = c.postStream(p[done:], &olen)
			}
		}
		done += n
		d := int64(0)
		if err == nil && done < len(p) && n == 0 {
			if d = c.wdl.Load(); d != 0 && time.Now().UnixNano() >= d {
				err = os.ErrDeadlineExceeded
			}
		}
		if err != nil || done == len(p) {
			done -= c.wDropped // staged bytes a Close dropped (err is net.ErrClosed)
			c.wDropped = 0
			c.leaveWrite()
			c.mu.Unlock()
			if err != nil {
				return done, c.opErr("write", err)
			}
			return done, nil
		}
		c.mu.Unlock()
		if n == 0 {
			c.await(c.wrdy, d, &since, c.cfg.PollTime)
		}
	}
}

// leaveWrite ends a write: staged bytes that wait for completions
// nobody may poll get a background flush. Holds mu.
func (c *Conn) leaveWrite() {
	c.inWrite = false
	c.wStaged = 0
	c.armFlush()
}

// armFlush starts the background flush (flushLater) when something waits
// to be posted (flushDue) and it is not armed already. Holds mu.
func (c *Conn) armFlush() {
	if c.flushDue() && !c.flushArmed {
		c.flushArmed = true
		c.flushTimer.Reset(flushDelay)
	}
}

// flushDue reports whether staged bytes, or CloseWrite's SHUTDOWN
// behind them, wait to be posted by whoever polls, and may be: Close,
// once it begins, posts them itself. Holds mu.
func (c *Conn) flushDue() bool {
	return (c.pendLen > 0 || c.shutPend) && !c.closing && c.sendErr() == nil
}

// flushLater polls for the completions that let staged bytes, and then a
// pending SHUTDOWN (CloseWrite), go, when no Write runs (a Write takes
// over: it flushes, and arms this again when it leaves bytes staged). It
// polls spinTime, then sleeps on the completion channel.
func (c *Conn) flushLater() {
	var since time.Time
	for {
		c.mu.Lock()
		if c.flushDue() && !c.inWrite {
			c.flushPending()
		}
		if !c.flushDue() || c.inWrite {
			c.flushArmed = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		c.await(c.fdy, 0, &since, spinTime)
	}
}

// postStream posts the first bytes of rest as one DATA message, or stages
// them in sbuf behind bytes staged before or when no message can go now,
// and returns how many; 0 when sbuf is full. Holds mu.
func (c *Conn) postStream(rest []byte, olen *int) (int, error) {
	if c.pendLen > 0 {
		if err := c.flushPending(); err != nil {
			return 0, err
		}
		if c.pendLen > 0 {
			return c.stage(rest), nil
		}
	}
	c.refreshTarget()
	if !c.sendRoom() || c.sseqNo == c.sseqComp || c.tgt.Length == 0 {
		n := c.stage(rest)
		return n, c.flushPending()
	}
	if *olen == olapStart && c.sqeAvail < c.cfg.SQSize-ctrlSlots {
		// Sends are in flight: the first message of this write reaches
		// the peer after them anyway, so it need not be small
		// (rs_send's overlap starts the wire early on an idle one).
		*olen = maxTransfer
	}
	n, inline := c.chunk(len(rest), olen, uint64(c.tgt.Length))
	if err := c.postData(rest[:n], inline); err != nil {
		c.err = err
		return 0, err
	}
	return n, nil
}

// stage copies the first bytes of rest that fit into sbuf's free room,
// behind the bytes staged before, and returns how many. Holds mu.
func (c *Conn) stage(rest []byte) int {
	n := min(len(rest), c.sbufAvail)
	c.take(rest[:n])
	c.pendLen += n
	c.wStaged += n
	return n
}

// take copies b into sbuf's free room at sbufHead, wrapping at its end,
// and returns where it begins. Holds mu.
func (c *Conn) take(b []byte) int {
	off := c.sbufHead
	k := copy(c.sbuf[off:], b)
	copy(c.sbuf, b[k:])
	c.sbufHead = (off + len(b)) % c.cfg.SendBuffer
	c.sbufAvail -= len(b)
	return off
}

// flushPending posts staged bytes as DATA messages of up to 64 KiB (and
// to the end of sbuf, and of the peer's current target) while the send
// queue and the peer's credits and ring have room; once none is left, it
// posts CloseWrite's SHUTDOWN if that waits for them and a control slot
// is free (as TCP sends its FIN after the queued data). Holds mu.
func (c *Conn) flushPending() error {
	for c.pendLen > 0 && c.sendErr() == nil {
		c.refreshTarget()
		if c.sqeAvail == 0 || c.sseqNo == c.sseqComp || c.tgt.Length == 0 {
			return nil
		}
		off := (c.sbufHead - c.pendLen + c.cfg.SendBuffer) % c.cfg.SendBuffer
		n := min(c.pendLen, c.cfg.SendBuffer-off, maxTransfer, int(c.tgt.Length))
		c.sendSGE[0] = uverbs.SGE{Addr: c.addr(c.cfg.RecvBuffer + off), Length: uint32(n), Lkey: c.mr.Lkey()}
		if err := c.postDataSGE(n, false, n); err != nil {
			c.err = err
			return err
		}
		c.pendLen -= n
		c.wStaged = min(c.wStaged, c.pendLen)
	}
	c.postShutdown() // returns at once when nothing is left to post (the pending shutdown may have failed)
	return nil
}

// postShutdown posts CloseWrite's SHUTDOWN when it waits, nothing is
// staged and a control slot is free. Holds mu.
func (c *Conn) postShutdown() {
	if c.shutPend && c.pendLen == 0 && c.sendErr() == nil && c.postCtrl(ctrlShutdwn, wrCtrl) {
		c.shutPend = false
	}
}

// chunk sizes the next message of a write with rest bytes left: olen,
// which doubles from 2 KiB to 64 KiB message by message (rsockets'
// rs_send's overlap), and limit bound it, and a message that is not
// inline fits in the staging ring's free room up to its end. Holds mu.
func (c *Conn) chunk(rest int, olen *int, limit uint64) (n int, inline bool) {
	n = rest
	if *olen < n {
		n = *olen
		*olen = min(*olen*2, maxTransfer)
	}
	n = int(min(uint64(n), limit))
	inline = n <= c.inline
	if !inline {
		n = min(n, c.sbufAvail, c.cfg.SendBuffer-c.sbufHead)
	}
	return n, inline
}

// writeErr is why nothing can be written now, if anything: Close began,
// CloseWrite, or sendErr. Holds mu.
func (c *Conn) writeErr() error {
	switch {
	case c.closing:
		return net.ErrClosed
	case c.err != nil:
		return c.err
	case c.wrShut:
		return unix.EPIPE
	}
	return c.sendErr()
}

// sendErr is why nothing more may be posted at all, if anything: the
// DISCONNECT is posted (or Close is done), the connection failed, or the
// peer is gone. What was written before Close or CloseWrite, and their
// SHUTDOWN, DISCONNECT and credit updates, go while it is nil. Holds mu.
func (c *Conn) sendErr() error {
	switch {
	case c.closed || c.discPosted:
		return net.ErrClosed
	case c.err != nil:
		return c.err
	case c.peerGone:
		return unix.ECONNRESET
	}
	return nil
}

// postData sends b as one DATA message, inline or staged in the send
// ring. Holds mu.
func (c *Conn) postData(b []byte, inline bool) error {
	return c.postDataSGE(len(b), inline, c.fill(b, inline))
}

// postDataSGE sends the n bytes sendSGE points at (staged of them sbuf's)
// as one DATA message to the peer's current target, and moves the target
// past them. Holds mu.
func (c *Conn) postDataSGE(n int, inline bool, staged int) error {
	if err := c.postSGE(n, inline, staged, uverbs.WRRDMAWriteWithImm, mkImm(opData, uint32(n)), c.tgt.Addr, c.tgt.Key); err != nil {
		return fmt.Errorf("rsocket: posting data: %w", err)
	}
	c.tgt.Addr += uint64(n)
	c.tgt.Length -= uint32(n)
	if c.tgt.Length == 0 {
		c.tgtIdx = (c.tgtIdx + 1) % sglEntries
	}
	c.sseqNo++
	return nil
}

// postWrite posts b, inline or staged in the send ring, as an RDMA write
// (op, with imm if it is one) to addr and rkey: a DATA message, or
// WriteIO's plain write. Holds mu.
func (c *Conn) postWrite(b []byte, inline bool, op uverbs.WROpcode, imm uint32, addr uint64, rkey uint32) error {
	return c.postSGE(len(b), inline, c.fill(b, inline), op, imm, addr, rkey)
}

// fill copies b where a send takes it from, scratch (inline) or sbuf,
// points sendSGE at it, and returns the bytes of sbuf it took. Holds mu.
func (c *Conn) fill(b []byte, inline bool) (staged int) {
	off := c.scratchOff
	if inline {
		copy(c.scratch, b)
	} else {
		off = c.cfg.RecvBuffer + c.take(b) // chunk keeps b short of sbuf's end
		staged = len(b)
	}
	c.sendSGE[0] = uverbs.SGE{Addr: c.addr(off), Length: uint32(len(b)), Lkey: c.mr.Lkey()}
	return staged
}

// postSGE posts the n bytes sendSGE points at (staged of them sbuf's,
// already taken from sbufAvail) as an RDMA write. Holds mu.
func (c *Conn) postSGE(n int, inline bool, staged int, op uverbs.WROpcode, imm uint32, addr uint64, rkey uint32) error {
	wr := &c.sendWR[0]
	*wr = uverbs.SendWR{Opcode: op, Imm: imm, RemoteAddr: addr, Rkey: rkey, SGL: c.sendSGE[:]}
	if inline {
		wr.Flags = uverbs.SendInline
	}
	c.sqeAvail--
	// Signaled: one in sigEvery; one after which Write would wait for a
	// slot or for sbuf, which only a completion gives back; and one that
	// brings the sbuf held by unsignaled sends to a quarter of it, so that
	// large messages' staging room comes back a message at a time and the
	// writer fills it while the rest is on the wire.
	if c.unsigSent+1 >= sigEvery || !c.sendRoom() || c.unsigBytes+staged >= c.cfg.SendBuffer/4 {
		wr.ID = c.signaledID(wrData, 1, staged)
		wr.Flags |= uverbs.SendSignaled
	} else {
		wr.ID = wrData
		c.unsigSent++
		c.unsigBytes += staged
	}
	if bulk := n >= bulkSize; bulk != c.bulk.Load() {
		c.bulk.Store(bulk) // an atomic store is a full barrier: only on a change
	}
	err := c.qp.PostSend(c.sendWR[:])
	wr.SGL = nil
	return err
}

// sendRoom reports whether a DATA message has a send queue slot and, if
// it is staged, room in sbuf: what only this side's completions give
// back. Holds mu.
func (c *Conn) sendRoom() bool {
	return c.sqeAvail > 0 && c.sbufAvail >= min(sndLowat, c.cfg.SendBuffer)
}

// signaledID returns the wr_id of a signaled send of kind: it retires the
// DATA sends posted unsignaled since the last signaled one and, for a DATA
// send (data 1), itself with its staged bytes of sbuf. Holds mu.
func (c *Conn) signaledID(kind uint64, data, staged int) uint64 {
	id := kind | uint64(c.unsigSent+data)<<wrCountShift | uint64(uint32(c.unsigBytes+staged))
	c.unsigSent, c.unsigBytes = 0, 0
	return id
}

// retire gives back the send queue slots and sbuf bytes of the DATA
// sends a signaled send's completion (wr_id id) retires. Holds mu.
func (c *Conn) retire(id uint64) {
	c.sqeAvail += int(id>>wrCountShift) & wrCountMask
	c.sbufAvail += int(uint32(id))
}

// postCtrl sends a control message (a zero-length write with immediate)
// when a control slot is free. Holds mu.
func (c *Conn) postCtrl(val uint32, id uint64) bool {
	if c.ctrlAvail == 0 || c.err != nil {
		return false
	}
	c.sendWR[0] = uverbs.SendWR{ID: c.signaledID(id, 0, 0), Flags: uverbs.SendSignaled,
		Opcode: uverbs.WRRDMAWriteWithImm, Imm: mkImm(opCtrl, val)}
	if err := c.qp.PostSend(c.sendWR[:]); err != nil {
		c.err = fmt.Errorf("rsocket: sending control message: %w", err)
		return false
	}
	c.ctrlAvail--
	return true
}

// CloseWrite shuts down the sending side (rshutdown SHUT_WR): the peer
// reads EOF after the bytes already written; this side can still read.
// It returns at once, as TCP's shutdown does: the SHUTDOWN message goes
// right after the last byte Write staged (at once when none is), sent by
// whoever polls next (a Read, Close) or by the background flush, as
// TCP's FIN waits behind its send queue. Writes fail with an error
// matching unix.EPIPE from then on, and so does a Write under way on
// another goroutine at its next step (what it wrote so far still goes
// before the SHUTDOWN). A Close that follows sends what is still staged,
// the SHUTDOWN if it has not gone, and its DISCONNECT. CloseWrite after
// Close returns net.ErrClosed; a second CloseWrite does nothing.
func (c *Conn) CloseWrite() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closing:
		return c.opErr("close", net.ErrClosed)
	case c.wrShut:
		return nil
	}
	c.wrShut = true
	if c.sendErr() != nil {
		return nil // nothing more goes anyway
	}
	c.shutPend = true
	c.flushPending() // what Write staged goes first
	c.armFlush()
	c.wakeWriter()
	return nil
}

// wakeWriter wakes a Write under way, if any, to look at the connection's
// state again (Close and CloseWrite end it). Holds mu.
func (c *Conn) wakeWriter() {
	if c.inWrite {
		c.kickLocked() // it may sleep on the completion channel
		notify(c.wrdy) // or on wrdy
	}
}

// closeWait bounds how long Close waits for its DISCONNECT message to
// complete before tearing the connection down anyway.
const closeWait = 5 * time.Second

// Close sends what Write staged (and CloseWrite's SHUTDOWN, if it has
// not gone yet) and then a DISCONNECT, waits for it to complete (at most
// 5 seconds in all: a peer that reads nothing more loses the staged
// bytes), and frees the connection. Once Close begins nothing more is
// written, and nothing at all is sent after the DISCONNECT. A Write
// under way on another goroutine returns net.ErrClosed at once: the
// bytes it staged and had not sent are dropped, not counted in its n,
// so that a Close that ends a Write blocked while the peer reads nothing
// need not wait for the peer; those of Writes that returned before
// Close began still go before the DISCONNECT. Blocked Reads and Writes
// return net.ErrClosed. Close is idempotent. Where the peer shut the
// connection down first (Read returned io.EOF after its DISCONNECT),
// Close sends none and waits instead, at most 5 seconds, for the peer to
// disconnect, so that what the peer still sends in its shutdown is
// acknowledged.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.close() })
	return c.closeErr
}

func (c *Conn) close() error {
	c.mu.Lock()
	c.closing = true // Write, WriteIO, MapIO and CloseWrite fail from here on
	if c.inWrite {
		// A Write under way fails with net.ErrClosed: what it staged and
		// not yet sent is not sent (a Close that ends a Write blocked
		// while the peer reads nothing does not wait for the peer), and
		// that Write does not count it as written. It is the last of the
		// staged bytes.
		drop := min(c.wStaged, c.pendLen)
		c.pendLen -= drop
		c.sbufHead = (c.sbufHead - drop + c.cfg.SendBuffer) % c.cfg.SendBuffer
		c.sbufAvail += drop
		c.wStaged -= drop
		c.wDropped += drop
		c.wakeWriter()
	}
	c.mu.Unlock()
	if c.cancelCM != nil { // connected
		c.sendDisconnect()
	}
	c.mu.Lock()
	c.closed = true
	c.kickLocked()
	c.mu.Unlock()
	close(c.done)
	c.rtimer.Stop()
	c.wtimer.Stop()
	c.flushTimer.Stop()
	if c.kaTimer != nil {
		c.kaTimer.Stop()
	}
	if c.cancelCM != nil {
		c.lingerForPeer()
		c.id.Disconnect() // QP to ERR, DREQ; refused when already gone
		c.cancelCM()      // also ends a wait on the completion channel
	}
	c.waiters.Wait()
	return c.free()
}

// lingerForPeer keeps the QP up, at most closeWait, after the peer's
// DISCONNECT message, until the CM reports the peer gone, when this side
// sent no DISCONNECT of its own. A librdmacm peer's rshutdown posts its
// DISCONNECT and then, while it waits for its sends to complete, may post
// credit updates: a QP moved to the error state or destroyed acknowledges
// none of them, and rxe retries a send forever where retry_count is 7,
// which librdmacm's rconnect sets (an rstream client that ended its test
// hung so, in its rshutdown). The peer destroys its ID once its sends are
// done, and the CM's DISCONNECTED follows. (Where the CM reported the
// peer gone first, cmGone is already closed.)
func (c *Conn) lingerForPeer() {
	c.mu.Lock()
	wait := c.peerGone && !c.discPosted
	c.mu.Unlock()
	if !wait {
		return
	}
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case <-c.cmGone:
	case <-t.C:
	}
}

// sendDisconnect sends the peer a DISCONNECT message and waits, at most
// closeWait, for it to complete. Completions are processed only when
// someone polls, so the control slots may all be taken by messages whose
// completions wait in the CQ: it polls, and waits for a slot if need be.
// The completions come through whoever polls: this goroutine, or a Read or
// Write waiting on the channel.
func (c *Conn) sendDisconnect() {
	dl := time.Now().Add(closeWait).UnixNano()
	var since time.Time
	t := time.AfterFunc(closeWait, func() { notify(c.cdy) })
	defer t.Stop()
	stop := func() bool { // holds mu
		return c.err != nil || c.peerGone || time.Now().UnixNano() >= dl
	}
	for {
		c.mu.Lock()
		if stop() {
			c.mu.Unlock()
			return
		}
		// What Writes staged before Close began goes first, then
		// CloseWrite's SHUTDOWN if it waits (flushPending posts both).
		if c.flushPending(); c.pendLen == 0 && !c.shutPend && c.postCtrl(ctrlDisconn, wrDisc) {
			c.discPosted = true
			c.mu.Unlock()
			break
		}
		c.mu.Unlock()
		c.await(c.cdy, dl, &since, c.cfg.PollTime)
	}
	for !isClosed(c.discDone) {
		c.await(c.cdy, dl, &since, c.cfg.PollTime)
		c.mu.Lock()
		done := stop()
		c.mu.Unlock()
		if done {
			return
		}
	}
}

// free destroys the verbs objects and the ID, children first.
func (c *Conn) free() error {
	c.pollMu.Lock()
	c.freed = true
	c.pollMu.Unlock()
	var errs []error
	keep := func(err error) {
		if err != nil && !errors.Is(err, uverbs.ErrClosed) && !errors.Is(err, uverbs.ErrDeviceRemoved) {
			errs = append(errs, err)
		}
	}
	if c.qp != nil {
		keep(c.id.DestroyQP())
	}
	c.mu.Lock()
	maps := c.ioMaps
	c.ioMaps, c.ioPending = nil, nil
	c.mu.Unlock()
	for _, m := range maps {
		if m != nil {
			keep(m.release())
		}
	}
	if c.mr != nil {
		keep(c.mr.Close())
	}
	if c.mem != nil {
		keep(c.mem.Close())
	}
	if c.cq != nil {
		keep(c.cq.Close())
	}
	if c.cch != nil {
		keep(c.cch.Close())
	}
	if c.pd != nil {
		keep(c.pd.Close())
	}
	keep(c.id.Close())
	if c.cancelCM != nil {
		c.chRef.release()
	}
	return errors.Join(errs...)
}

func (c *Conn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "rdma", Source: c.laddr, Addr: c.raddr, Err: err}
}

// LocalAddr returns the local address (a *net.TCPAddr: rsockets use the
// RDMA CM's TCP port space).
func (c *Conn) LocalAddr() net.Addr { return c.laddr }

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.raddr }

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	c.SetReadDeadline(t)
	return c.SetWriteDeadline(t)
}

// SetReadDeadline makes a blocked or future Read fail with an error
// matching os.ErrDeadlineExceeded once t passes; the zero time clears it.
// The connection stays usable.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.setDeadline(&c.rdl, c.rtimer, c.rdy, t)
	return nil
}

// SetWriteDeadline is SetReadDeadline for Write.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.setDeadline(&c.wdl, c.wtimer, c.wrdy, t)
	return nil
}

func (c *Conn) setDeadline(dl *atomic.Int64, tm *time.Timer, ch chan struct{}, t time.Time) {
	tm.Stop()
	if t.IsZero() {
		dl.Store(0)
	} else {
		dl.Store(t.UnixNano())
		if d := time.Until(t); d > 0 {
			tm.Reset(d)
		} else {
			notify(ch)
		}
	}
	// A goroutine waiting on the completion channel took the old
	// deadline with it: wake it to take the new one.
	c.mu.Lock()
	c.kickLocked()
	c.mu.Unlock()
}
