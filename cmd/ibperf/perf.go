package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"runtime"

	"github.com/goverbs/goverbs/sysfs"
	"github.com/goverbs/goverbs/uverbs"
)

// failure is an error already reported on stderr in perftest's words; run
// only turns it into exit status 1.
type failure struct{ err error }

func (f failure) Error() string { return f.err.Error() }
func (f failure) Unwrap() error { return f.err }

// perf is one side of a test: perftest's pingpong_context and the parts of
// perftest_parameters that are decided at run time.
type perf struct {
	cfg    *config
	stdout io.Writer
	stderr io.Writer
	ready  func(net.Addr) // tests: called once a server listens

	dev    *uverbs.Context
	port   uverbs.PortAttr
	pd     *uverbs.PD
	buf    *uverbs.Buffer
	mr     *uverbs.MR
	sendCQ *uverbs.CQ
	recvCQ *uverbs.CQ // the send CQ unless the test sends
	// -e: the completion channel of both CQs, and the loops' waits on it.
	channel *uverbs.CompChannel
	events  eventWait
	qps     []*uverbs.QP
	ahs     []*uverbs.AH
	comm    *comm
	cm      *cmTest // -R: the test connections

	gidIdx      int
	gid         uverbs.GID
	mtu         int // enum ibv_mtu in use
	cycleBuffer int
	cacheLine   int
	buffSize    int // BUFF_SIZE: one QP's half of the buffer
	inline      int
	outReads    int
	local       []dest
	remote      []dest
	mhz         float64 // cycles per microsecond

	postList, cqMod int
	// Busy-wait loops yield every yieldCycles (see relax).
	lastYield, yieldCycles uint64
	// Timestamps in cycles: lat tests use tposted per iteration; bw tests
	// per message posted and per message completed.
	tposted    []uint64
	tcompleted []uint64
}

func (p *perf) isClient() bool { return p.cfg.server != "" }

// fail reports on stderr (perftest's message, then the cause when there is
// one) and returns the failure.
func (p *perf) fail(err error, format string, a ...any) error {
	fmt.Fprintf(p.stderr, format+"\n", a...)
	if err == nil {
		return failure{fmt.Errorf(format, a...)}
	}
	fmt.Fprintf(p.stderr, "%s: %v\n", p.cfg.prog, err)
	return failure{fmt.Errorf(format+": %w", append(a, err)...)}
}

// openDevice opens -d or, without it, the first device rdma-core would
// list (ctx_find_dev).
func (p *perf) openDevice() error {
	name := p.cfg.ibDev
	if name == "" {
		devs, err := sysfs.New("/").Devices()
		if err != nil {
			return p.fail(err, " Unable to find the Infiniband/RoCE device")
		}
		for _, d := range devs {
			if uverbs.CheckProvider(d) == nil {
				name = d.Name
				break
			}
		}
		if name == "" {
			return p.fail(nil, " No IB devices found")
		}
		p.cfg.ibDev = name
	}
	dev, err := uverbs.Open(name)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return p.fail(err, "IB device %s not found\n Unable to find the Infiniband/RoCE device", name)
		}
		return p.fail(err, " Couldn't get context for the device")
	}
	p.dev = dev
	return nil
}

// bestGID is get_best_gid_index: an IPv4-mapped GID over an IPv6 one, then
// RoCE v2 over v1; the lowest index among equals.
func (p *perf) bestGID() (int, error) {
	best := -1
	var bestEntry uverbs.GIDEntry
	for i := 0; i < int(p.port.GIDTblLen); i++ {
		e, err := p.dev.QueryGID(p.cfg.ibPort, i)
		if errors.Is(err, uverbs.ErrNoGID) {
			continue
		}
		if err != nil {
			return -1, err
		}
		if best < 0 {
			best, bestEntry = i, e
			continue
		}
		v4, bestV4 := isV4Mapped(e.GID), isV4Mapped(bestEntry.GID)
		switch {
		case v4 && !bestV4:
			best, bestEntry = i, e
		case v4 == bestV4 && e.Type == uverbs.GIDTypeRoCEv2 && bestEntry.Type != uverbs.GIDTypeRoCEv2:
			best, bestEntry = i, e
		}
	}
	if best < 0 {
		return 0, nil
	}
	return best, nil
}

// portStateName spells a port state as perftest's check_link prints it
// (its portStates table: "Down", "Init", ...; ACTIVE, never printed, is
// empty there too).
func portStateName(s uverbs.PortState) string {
	names := [...]string{"Nop", "Down", "Init", "Armed", "", "Active Defer"}
	if int(s) < len(names) {
		return names[s]
	}
	return fmt.Sprintf("PortState(%d)", uint8(s))
}

func isV4Mapped(g uverbs.GID) bool {
	return [12]byte(g[:12]) == [12]byte{10: 0xff, 11: 0xff}
}

// setupDevice is check_link and the device half of check_mtu.
func (p *perf) setupDevice() error {
	c := p.cfg
	if err := p.openDevice(); err != nil {
		return err
	}
	var err error
	if p.port, err = p.dev.QueryPort(c.ibPort); err != nil {
		return p.fail(err, " Unable to query port %d attributes", c.ibPort)
	}
	if p.port.State != uverbs.PortActive {
		return p.fail(nil, " Port number %d state is %s", c.ibPort, portStateName(p.port.State))
	}
	p.gidIdx = c.gidIdx
	if p.port.LinkLayer == uverbs.LinkLayerEthernet && p.gidIdx == -1 {
		if p.gidIdx, err = p.bestGID(); err != nil {
			return p.fail(err, " Unable to find a GID")
		}
	}
	if p.gidIdx >= 0 {
		e, err := p.dev.QueryGID(c.ibPort, p.gidIdx)
		if err != nil && !errors.Is(err, uverbs.ErrNoGID) {
			return p.fail(err, " Unable to query GID %d", p.gidIdx)
		}
		p.gid = e.GID
	}
	// set_mtu: the port's active MTU, or -m when the port allows it.
	p.mtu = int(p.port.ActiveMTU)
	if c.mtu != 0 {
		if e := mtuEnum(c.mtu); e > p.mtu {
			fmt.Fprintf(p.stdout, "Requested mtu is higher than active mtu \nChanging to active mtu - %d\n", p.mtu)
		} else {
			p.mtu = e
		}
	}
	p.outReads = 1
	if c.test.verb == verbRead || c.test.verb == verbAtomic {
		attr, err := p.dev.QueryDevice()
		if err != nil {
			return p.fail(err, " Couldn't query the device")
		}
		p.outReads = int(attr.MaxQPRdAtom)
		if c.outReads > 0 && c.outReads < p.outReads {
			p.outReads = c.outReads
		}
		if p.outReads > 255 {
			p.outReads = 255
		}
	}
	p.inline = p.defaultInline()
	return nil
}

// defaultInline is the inline size: -I, else ibperf's own default. perftest
// asks for no inline data on devices it does not recognize (rxe among
// them); ibperf inlines small writes and sends, which saves the device a
// read of the message from registered memory.
func (p *perf) defaultInline() int {
	c := p.cfg
	if c.test.verb == verbRead || c.test.verb == verbAtomic {
		return 0
	}
	if c.reqInline {
		return c.inline
	}
	return defaultInlineGoSize
}

// connectTCP sets up the connection to the peer and runs the prologue.
func (p *perf) connectTCP(ctx context.Context) error {
	c := p.cfg
	var conn net.Conn
	var err error
	if p.isClient() {
		if conn, err = dial(ctx, c.server, c.tcpPort); err != nil {
			fmt.Fprintf(p.stderr, "Couldn't connect to %s:%d\n", c.server, c.tcpPort)
			return p.fail(err, "Unable to open file descriptor for socket connection Unable to init the socket connection")
		}
	} else {
		fmt.Fprintf(p.stdout, "\n************************************\n* Waiting for client to connect... *\n************************************\n")
		if conn, err = listenAccept(ctx, c.tcpPort, p.ready); err != nil {
			fmt.Fprintf(p.stderr, "Couldn't listen to port %d\n", c.tcpPort)
			return p.fail(err, "Unable to open file descriptor for socket connection Unable to init the socket connection")
		}
	}
	p.comm = &comm{ch: tcpChannel{conn}, client: p.isClient(), withGID: p.gidIdx != -1}
	// Abort a blocked exchange when the run is cancelled.
	context.AfterFunc(ctx, func() { conn.Close() })
	return p.prologueDone()
}

// prologueDone runs the prologue on the connected channel: versions, the
// cycle buffer and cache line, the MTU, and what they decide.
func (p *perf) prologueDone() error {
	c := p.cfg
	cycle, line, peerMTU, err := p.comm.prologue(defPageSize, defCacheLine, p.mtu)
	if err != nil {
		return p.fail(err, " Failed to exchange data between server and clients")
	}
	p.cycleBuffer, p.cacheLine = cycle, line
	if peerMTU >= 1 && peerMTU <= 5 && peerMTU < p.mtu {
		p.mtu = peerMTU
	}
	if c.conn == connUD && c.size > mtuBytes(p.mtu) {
		if c.all || !c.reqSize {
			fmt.Fprintf(p.stderr, " Max msg size in UD is MTU %d\n Changing to this MTU\n", mtuBytes(p.mtu))
			c.size = mtuBytes(p.mtu)
			if c.cqMod > c.txDepth {
				c.cqMod = c.txDepth
			}
		} else {
			return p.fail(nil, " Max message size in UD cannot be greater than MTU ")
		}
	}
	return nil
}

// createResources is ctx_init: buffer, MR, CQs, QPs in INIT, and the local
// addresses (set_up_connection).
func (p *perf) createResources() error {
	c := p.cfg
	if err := p.createBase(); err != nil {
		return err
	}
	access := uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteAtomic
	for i := 0; i < c.numQPs; i++ {
		attr := p.qpInitAttr()
		qp, err := p.pd.CreateQP(attr)
		if err != nil && p.inline > 0 && !c.reqInline {
			// A device that takes less inline data: go without.
			p.inline = 0
			qp, err = p.pd.CreateQP(p.qpInitAttr())
		}
		if err != nil {
			return p.fail(err, " Unable to create QP.")
		}
		p.qps = append(p.qps, qp)
		init := uverbs.QPAttr{State: uverbs.QPStateInit, PkeyIndex: 0, Port: c.ibPort}
		mask := uverbs.QPAttrState | uverbs.QPAttrPkeyIndex | uverbs.QPAttrPort
		if c.conn == connUD {
			init.Qkey = defQkey
			mask |= uverbs.QPAttrQkey
		} else {
			init.AccessFlags = access
			mask |= uverbs.QPAttrAccessFlags
		}
		if err := qp.Modify(&init, mask); err != nil {
			return p.fail(err, "Failed to modify QP to INIT")
		}
	}
	p.localDests()
	return nil
}

// createBase is the part of ctx_init before the QPs: PD, buffer, MR, CQs.
func (p *perf) createBase() error {
	c := p.cfg
	var err error
	size := c.size
	if c.all {
		size = maxSize
		if c.conn == connUD {
			size = mtuBytes(p.mtu)
		}
	}
	p.buffSize = max(size, p.cycleBuffer)
	if c.conn == connUD {
		p.buffSize = max(size+p.cacheLine, p.cycleBuffer)
	}
	if p.pd, err = p.dev.AllocPD(); err != nil {
		return p.fail(err, " Couldn't allocate PD")
	}
	// UD receives start a cache line in and carry 40 more bytes: the last
	// QP's last slot of the cycle buffer ends past its half.
	total := 2*c.numQPs*p.buffSize + p.cycleBuffer
	if p.buf, err = uverbs.AllocBuffer(total); err != nil {
		return p.fail(err, "Couldn't allocate work buf.")
	}
	access := uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteAtomic
	if p.mr, err = p.pd.RegisterBuffer(p.buf, 0, total, access); err != nil {
		return p.fail(err, " Couldn't allocate MR")
	}
	var cqOpts *uverbs.CQOptions
	if c.events {
		if p.channel, err = p.dev.NewCompChannel(); err != nil {
			return p.fail(err, "Couldn't create completion channel")
		}
		cqOpts = &uverbs.CQOptions{Channel: p.channel}
	}
	if p.sendCQ, err = p.dev.CreateCQ(c.txDepth*c.numQPs, cqOpts); err != nil {
		return p.fail(err, "Couldn't create CQ")
	}
	p.recvCQ = p.sendCQ
	if c.test.verb == verbSend {
		if p.recvCQ, err = p.dev.CreateCQ(c.rxDepth*c.numQPs, cqOpts); err != nil {
			return p.fail(err, "Couldn't create a receiving CQ")
		}
	}
	return nil
}

// qpInitAttr is a test QP: the transport, the queues' depths, the inline
// size.
func (p *perf) qpInitAttr() uverbs.QPInitAttr {
	c := p.cfg
	qpType := map[connType]uverbs.QPType{connRC: uverbs.QPTypeRC, connUC: uverbs.QPTypeUC, connUD: uverbs.QPTypeUD}[c.conn]
	recvWR := 1
	if c.test.verb == verbSend {
		recvWR = c.rxDepth
	}
	return uverbs.QPInitAttr{Type: qpType, SendCQ: p.sendCQ, RecvCQ: p.recvCQ,
		Cap: uverbs.QPCap{MaxSendWr: uint32(c.txDepth), MaxRecvWr: uint32(recvWR), MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: uint32(p.inline)}}
}

// localDests is set_up_connection: each QP's address for the peer.
func (p *perf) localDests() {
	c := p.cfg
	for i, qp := range p.qps {
		p.local = append(p.local, dest{
			LID: p.port.LID, OutReads: p.outReads, QPN: qp.QPN(), PSN: rand.Uint32() & 0xffffff,
			Rkey: p.mr.Rkey(), VAddr: p.mr.Addr() + uint64((c.numQPs+i)*p.buffSize), GID: p.gid, GIDIndex: p.gidIdx,
		})
	}
}

// av is the path to a peer QP.
func (p *perf) av(d dest) uverbs.AHAttr {
	a := uverbs.AHAttr{DLID: d.LID, SL: p.cfg.sl, PortNum: p.cfg.ibPort}
	if p.gidIdx != -1 {
		a.IsGlobal = true
		a.GRH = uverbs.GlobalRoute{DGID: d.GID, SGIDIndex: int(uint8(p.gidIdx)), HopLimit: defHopLimit}
	}
	return a
}

// connectQPs is ctx_connect: RTR and RTS towards the peer (UD: an address
// handle as well).
func (p *perf) connectQPs() error {
	c := p.cfg
	for i, qp := range p.qps {
		r := p.remote[i]
		rtr := uverbs.QPAttr{State: uverbs.QPStateRTR}
		mask := uverbs.QPAttrState
		if c.conn != connUD {
			rtr.AH, rtr.PathMTU, rtr.DestQPN, rtr.RQPSN = p.av(r), uverbs.MTU(p.mtu), r.QPN, r.PSN
			mask |= uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrDestQPN | uverbs.QPAttrRQPSN
			if c.conn == connRC {
				rtr.MaxDestRdAtomic, rtr.MinRNRTimer = uint8(p.local[i].OutReads), minRNRTimer
				mask |= uverbs.QPAttrMaxDestRdAtomic | uverbs.QPAttrMinRNRTimer
			}
		}
		if err := qp.Modify(&rtr, mask); err != nil {
			return p.fail(err, "Failed to modify QP %d to RTR", qp.QPN())
		}
		rts := uverbs.QPAttr{State: uverbs.QPStateRTS, SQPSN: p.local[i].PSN}
		mask = uverbs.QPAttrState | uverbs.QPAttrSQPSN
		if c.conn == connRC {
			rts.Timeout, rts.RetryCnt, rts.RNRRetry = c.qpTimeout, 7, 7
			rts.MaxRdAtomic = uint8(min(r.OutReads, 255))
			mask |= uverbs.QPAttrTimeout | uverbs.QPAttrRetryCnt | uverbs.QPAttrRNRRetry | uverbs.QPAttrMaxQPRdAtomic
		}
		if err := qp.Modify(&rts, mask); err != nil {
			return p.fail(err, "Failed to modify QP to RTS")
		}
		if c.conn == connUD {
			ah, err := p.pd.CreateAH(p.av(r))
			if err != nil {
				return p.fail(err, "Failed to create AH")
			}
			p.ahs = append(p.ahs, ah)
		}
	}
	return nil
}

// handshakes runs n handshakes of every QP's address, as perftest's main
// does between its steps; the last answer of each is the peer's address.
func (p *perf) handshakes(n int) error {
	for k := 0; k < n; k++ {
		for i := range p.local {
			r, err := p.comm.handshake(p.local[i])
			if err != nil {
				return p.fail(err, "Failed to exchange data between server and clients")
			}
			if len(p.remote) < len(p.local) {
				p.remote = append(p.remote, r)
			} else {
				p.remote[i] = r
			}
		}
	}
	return nil
}

// sync is one handshake of the first QP's address: a barrier.
func (p *perf) sync() error {
	if _, err := p.comm.handshake(p.local[0]); err != nil {
		return p.fail(err, " Failed to exchange data between server and clients")
	}
	return nil
}

// closeComm is ctx_close_connection.
func (p *perf) closeComm() error {
	if err := p.comm.close(p.local[0]); err != nil {
		return p.fail(err, "Failed to close connection between server and client")
	}
	return nil
}

// connectPeers is what every test's main does from the set-up to the
// start: the handshakes (as many as the C test does before it runs), with
// the QPs connected in between, and the addresses printed.
func (p *perf) connectPeers() error {
	c := p.cfg
	// write_lat, read_lat and atomic_lat shake hands once more before the
	// per-QP handshake.
	if c.test.kind == kindLat && c.test.verb != verbSend {
		if err := p.handshakes(1); err != nil {
			return err
		}
		p.remote = nil
	}
	if err := p.handshakes(1); err != nil {
		return err
	}
	// With -R the connection manager connected the QPs.
	if !c.rdmaCM {
		if isV4Mapped(p.local[0].GID) != isV4Mapped(p.remote[0].GID) {
			return p.fail(nil, "\n Found Incompatibility issue with GID types.\n Please Try to use a different IP version.\n")
		}
		if err := p.connectQPs(); err != nil {
			return err
		}
	}
	// send_lat and send_bw shake hands once more after connecting.
	if c.test.verb == verbSend {
		if err := p.sync(); err != nil {
			return err
		}
	}
	for i := range p.local {
		p.printDest("local", p.local[i])
	}
	for i := range p.local {
		r, err := p.comm.handshake(p.local[i])
		if err != nil {
			return p.fail(err, " Failed to exchange data between server and clients")
		}
		p.printDest("remote", r)
	}
	// "An additional handshake is required after moving qp to RTR" (all
	// but the send tests, which sync after posting their receives).
	if c.test.verb != verbSend {
		return p.sync()
	}
	return nil
}

// run is one side from start to end: the main of perftest's test.
func (p *perf) run(ctx context.Context) error {
	c := p.cfg
	p.mhz = cyclesPerMicrosecond()
	p.yieldCycles = uint64(p.mhz * yieldMicroseconds)
	if c.noYield {
		p.yieldCycles = math.MaxUint64
	}
	if err := p.setupDevice(); err != nil {
		return err
	}
	if c.rdmaCM {
		if err := p.connectCM(ctx); err != nil {
			return err
		}
		if err := p.createResourcesCM(ctx); err != nil {
			return err
		}
	} else {
		if err := p.connectTCP(ctx); err != nil {
			return err
		}
		if err := p.createResources(); err != nil {
			return err
		}
	}
	p.postList, p.cqMod = c.batch()
	p.printTestInfo()
	if err := p.connectPeers(); err != nil {
		return err
	}
	if c.test.kind == kindLat {
		return p.runLat(ctx)
	}
	return p.runBW(ctx)
}

// sizes are the message sizes of the run: -s, or 2..2^23 for -a (UD: up
// to the MTU).
func (p *perf) sizes() []int {
	c := p.cfg
	if !c.all {
		return []int{c.size}
	}
	top := maxSize
	if c.conn == connUD {
		top = mtuBytes(p.mtu)
	}
	var s []int
	for n := 2; n <= top; n *= 2 {
		s = append(s, n)
	}
	return s
}

// lockThread pins the polling goroutine to its OS thread for the run when
// --go-lock-thread asks for it. It is not the default: the scheduler's
// sysmon preempts any goroutine that runs 10 ms without yielding, and a
// preempted goroutine locked to its thread comes back only after its P has
// been handed to another thread and back (two futex wake-ups and thread
// switches), where an unlocked one is picked up again at once by the same
// thread. docs/performance.md has the figures.
func (p *perf) lockThread() func() {
	if !p.cfg.lockThread {
		return func() {}
	}
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}

// yieldMicroseconds is how long a busy-wait runs before it yields: well
// under sysmon's 10 ms, after which it would preempt the goroutine.
const yieldMicroseconds = 2000

// relax is called from busy-wait loops every spinCheck empty polls. Every
// yieldMicroseconds it yields the processor: a goroutine that yields is
// never preempted by sysmon, so no preemption signal interrupts the
// spinning, and sysmon, finding nothing to preempt, backs off to sleeping
// 10 ms at a time instead of waking every 20 µs for a millisecond after
// each preemption (both cost the poller CPU time under TCG). Keep
// GOMAXPROCS above 1: with a single P, sysmon takes the P away from a
// doorbell system call that lasts over 20 µs (rxe does the whole send
// inside it), and getting it back costs more than the yield saves.
func (p *perf) relax() {
	if now := cycles(); now-p.lastYield > p.yieldCycles {
		p.lastYield = now
		runtime.Gosched()
	}
}

// spinCheck is how many empty polls pass between calls to relax: reading
// the time-stamp counter is a helper call under TCG, and at every 64th
// spin relax was 6 % of a write_lat client's samples on 6.1.
const spinCheck = 1024

// close is destroy_ctx: everything, in dependency order; the first failure
// is reported.
func (p *perf) close() error {
	var first error
	step := func(err error, what string) {
		if err != nil && first == nil {
			first = p.fail(err, "Couldn't %s", what)
		}
	}
	p.closeCM() // the test connections and their QPs
	if p.comm != nil {
		p.comm.ch.close(false)
	}
	for _, qp := range p.qps {
		step(qp.Close(), "destroy QP")
	}
	for _, ah := range p.ahs {
		step(ah.Close(), "destroy AH")
	}
	if p.recvCQ != nil && p.recvCQ != p.sendCQ {
		step(p.recvCQ.Close(), "destroy CQ")
	}
	if p.sendCQ != nil {
		step(p.sendCQ.Close(), "destroy CQ")
	}
	if p.channel != nil {
		step(p.channel.Close(), "destroy the completion channel")
	}
	if p.mr != nil {
		step(p.mr.Close(), "deregister MR")
	}
	if p.buf != nil {
		step(p.buf.Close(), "free the work buffer")
	}
	if p.pd != nil {
		step(p.pd.Close(), "deallocate PD")
	}
	if p.dev != nil {
		step(p.dev.Close(), "release context")
	}
	return first
}
