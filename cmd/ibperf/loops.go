package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/goverbs/goverbs/uverbs"
)

// pollBatch is CTX_POLL_BATCH: completions taken per poll in bw tests.
const pollBatch = 16

// errAborted is the run's context ending while a loop spins.
var errAborted = fmt.Errorf("aborted")

// checkEvery is how many empty polls pass between looks at the context: a
// busy loop must still end when the run is cancelled.
const checkEvery = 1 << 14

// sendOpcode is the work request of the test.
func (p *perf) sendOpcode() uverbs.WROpcode {
	switch p.cfg.test.verb {
	case verbWrite:
		return uverbs.WRRDMAWrite
	case verbRead:
		return uverbs.WRRDMARead
	case verbAtomic:
		if p.cfg.atomic == atomicCAS {
			return uverbs.WRAtomicCmpAndSwp
		}
		return uverbs.WRAtomicFetchAndAdd
	}
	return uverbs.WRSend
}

// inc is INC(size, cache_line_size): the step between consecutive messages
// in the cycle buffer.
func (p *perf) inc(size int) int {
	if size > p.cacheLine {
		return (size + p.cacheLine - 1) / p.cacheLine * p.cacheLine
	}
	return p.cacheLine
}

// baseWR is the work request of QP i for a message of size bytes, as
// ctx_set_send_wqes builds it (flags aside).
func (p *perf) baseWR(i, size int, sge *uverbs.SGE) uverbs.SendWR {
	c := p.cfg
	*sge = uverbs.SGE{Addr: p.mr.Addr() + uint64(i*p.buffSize), Length: uint32(size), Lkey: p.mr.Lkey()}
	w := uverbs.SendWR{ID: uint64(i), Opcode: p.sendOpcode(), SGL: unsafe.Slice(sge, 1)}
	r := p.remote[i]
	switch c.test.verb {
	case verbWrite, verbRead, verbAtomic:
		w.RemoteAddr, w.Rkey = r.VAddr, r.Rkey
	}
	if c.test.verb == verbAtomic && c.atomic == atomicFAA {
		w.CompareAdd = 1 // ATOMIC_ADD_VALUE
	}
	if c.conn == connUD {
		w.AH, w.RemoteQPN, w.RemoteQkey = p.ahs[i], r.QPN, defQkey
		if p.cm != nil {
			// -R: where the connection manager said (the SIDR reply, or
			// the client's first datagram).
			w.RemoteQPN, w.RemoteQkey = p.cm.udQPN[i], p.cm.udQkey
		}
	}
	if (c.test.verb == verbSend || c.test.verb == verbWrite) && size <= p.inline {
		w.Flags |= uverbs.SendInline
	}
	return w
}

// recvAddr is where QP i's receives start (ctx_set_recv_wqes).
func (p *perf) recvAddr(i int) uint64 {
	a := p.mr.Addr() + uint64((p.cfg.numQPs+i)*p.buffSize)
	if p.cfg.conn == connUD {
		a += uint64(p.cacheLine - udGRHBytes)
	}
	return a
}

// recvLen is the receive buffer of a message: UD's carries the GRH.
func (p *perf) recvLen(size int) uint32 {
	if p.cfg.conn == connUD {
		return uint32(size + udGRHBytes)
	}
	return uint32(size)
}

// postRecvs posts n receives to QP i, one list, each at the next slot of
// the cycle buffer as perftest advances them for bw tests; next is the
// index of the first, and the returned value the index after the last.
func (p *perf) postRecvs(i, n, next, size int, wrs []uverbs.RecvWR, sges []uverbs.SGE) (int, error) {
	step := p.inc(size)
	slots := 1
	if p.cfg.test.kind == kindBW && size <= p.cycleBuffer/2 {
		slots = p.cycleBuffer / step
	}
	for k := 0; k < n; k++ {
		sges[k] = uverbs.SGE{Addr: p.recvAddr(i) + uint64(((next+k)%slots)*step), Length: p.recvLen(size), Lkey: p.mr.Lkey()}
		wrs[k] = uverbs.RecvWR{ID: uint64(i), SGL: sges[k : k+1]}
	}
	if err := p.qps[i].PostRecv(wrs[:n]); err != nil {
		return next, err
	}
	return next + n, nil
}

// runLat is the latency tests' part after the connection: the loop for
// every size and its report.
func (p *perf) runLat(ctx context.Context) error {
	c := p.cfg
	if c.test.verb == verbRead || c.test.verb == verbAtomic {
		if !p.isClient() {
			// The server of read_lat and atomic_lat only lends its memory.
			if err := p.closeComm(); err != nil {
				return err
			}
			fmt.Fprint(p.stdout, resultLine)
			return nil
		}
	}
	p.printLatHeader()
	for _, size := range p.sizes() {
		if c.test.verb == verbSend {
			wrs := make([]uverbs.RecvWR, c.rxDepth)
			sges := make([]uverbs.SGE, c.rxDepth)
			if _, err := p.postRecvs(0, c.rxDepth, 0, size, wrs, sges); err != nil {
				return p.fail(err, " Failed to post receive recv_wqes")
			}
			if err := p.sync(); err != nil {
				return err
			}
		}
		var err error
		if c.duration > 0 {
			p.tposted, p.tcompleted = make([]uint64, 1), make([]uint64, 1)
			var sampled int
			switch c.test.verb {
			case verbWrite:
				sampled, err = p.latWriteTimed(ctx, size)
			case verbSend:
				sampled, err = p.latSendTimed(ctx, size)
			default:
				sampled, err = p.latReadTimed(ctx, size)
			}
			if err != nil {
				return err
			}
			p.printLatDurationReport(size, sampled)
			continue
		}
		p.tposted = make([]uint64, c.iters)
		switch c.test.verb {
		case verbWrite:
			err = p.latWrite(ctx, size)
		case verbSend:
			err = p.latSend(ctx, size)
		default:
			err = p.latRead(ctx, size)
		}
		if err != nil {
			return err
		}
		p.printLatReport(size)
	}
	fmt.Fprint(p.stdout, resultLine)
	if c.test.verb == verbWrite {
		return nil // write_lat ends without closing the exchange
	}
	return p.closeComm()
}

// pollOne busy-polls cq for one completion.
func (p *perf) pollOne(ctx context.Context, cq *uverbs.CQ, wc []uverbs.WC, what string) error {
	_, err := p.pollUntilEnd(ctx, cq, wc, what, nil)
	return err
}

// latWrite is run_iter_lat_write: each side writes its counter into the
// last byte of the peer's buffer and spins on its own until the peer's
// write arrives; the server answers, the client starts.
func (p *perf) latWrite(ctx context.Context, size int) error {
	defer p.lockThread()()
	c := p.cfg
	var sge uverbs.SGE
	wr := [1]uverbs.SendWR{p.baseWR(0, size, &sge)}
	wr[0].Flags |= uverbs.SendSignaled
	mem := p.buf.Bytes()
	postByte := &mem[size-1]
	// The byte the peer writes, read through its aligned 32-bit word:
	// Go has no volatile byte load.
	pollOff := p.buffSize*c.numQPs + size - 1
	pollWord := (*uint32)(unsafe.Pointer(&mem[pollOff&^3]))
	shift := uint(pollOff&3) * 8
	var wc [1]uverbs.WC
	var scnt, ccnt, rcnt int
	server := !p.isClient()
	for scnt < c.iters || ccnt < c.iters || rcnt < c.iters {
		if rcnt < c.iters && !(scnt < 1 && server) {
			rcnt++
			want := uint32(byte(rcnt))
			for spins := 1; (atomic.LoadUint32(pollWord)>>shift)&0xff != want; spins++ {
				if spins%spinCheck == 0 {
					p.relax()
				}
				if spins%checkEvery == 0 && ctx.Err() != nil {
					return p.fail(errAborted, "write_lat: waiting for the peer's write %d", rcnt)
				}
			}
		}
		if scnt < c.iters {
			p.tposted[scnt] = cycles()
			scnt++
			*postByte = byte(scnt)
			if err := p.qps[0].PostSend(wr[:]); err != nil {
				return p.fail(err, "Couldn't post send: scnt=%d", scnt)
			}
		}
		if ccnt < c.iters {
			if err := p.pollOne(ctx, p.sendCQ, wc[:], "send"); err != nil {
				return err
			}
			ccnt++
		}
	}
	return nil
}

// latWriteTimed is run_iter_lat_write for a duration run: the same
// ping-pong until the clock ends, with no timestamps per message; it
// returns the completions of the sample. Either side may end first: the
// other stops spinning on the peer's write when its own clock ends.
func (p *perf) latWriteTimed(ctx context.Context, size int) (int, error) {
	defer p.lockThread()()
	c := p.cfg
	var sge uverbs.SGE
	wr := [1]uverbs.SendWR{p.baseWR(0, size, &sge)}
	wr[0].Flags |= uverbs.SendSignaled
	mem := p.buf.Bytes()
	postByte := &mem[size-1]
	pollOff := p.buffSize*c.numQPs + size - 1
	pollWord := (*uint32)(unsafe.Pointer(&mem[pollOff&^3]))
	shift := uint(pollOff&3) * 8
	var wc [1]uverbs.WC
	var scnt, rcnt, sampled int
	server := !p.isClient()
	dur := p.startDuration()
	defer dur.stop()
	outstanding := false // a write posted whose completion was not polled
	for !dur.ended() {
		if !(scnt < 1 && server) {
			rcnt++
			want := uint32(byte(rcnt))
			for spins := 1; (atomic.LoadUint32(pollWord)>>shift)&0xff != want && !dur.ended(); spins++ {
				if spins%spinCheck == 0 {
					p.relax()
				}
				if spins%checkEvery == 0 && ctx.Err() != nil {
					return 0, p.fail(errAborted, "write_lat: waiting for the peer's write %d", rcnt)
				}
			}
		}
		scnt++
		*postByte = byte(scnt)
		if err := p.qps[0].PostSend(wr[:]); err != nil {
			return 0, p.fail(err, "Couldn't post send: scnt=%d", scnt)
		}
		if dur.ended() {
			outstanding = true
			break
		}
		if err := p.pollOne(ctx, p.sendCQ, wc[:], "send"); err != nil {
			return 0, err
		}
		if dur.sampling() {
			sampled++
		}
	}
	p.drainLatWrite(ctx, rcnt, scnt, outstanding, wr[:], pollWord, shift, postByte)
	return sampled, nil
}

// latDrainSeconds is how long a write_lat side whose clock has ended
// waits for another write from a peer that is still running, and
// latDrainMaxSeconds how long it answers at most: both sides start their
// clocks after the same handshake, so a peer that still writes after that
// is draining too, and two drainers would answer each other forever.
const (
	latDrainSeconds    = 0.5
	latDrainMaxSeconds = 1
)

// drainLatWrite keeps answering the peer's writes after this side's clock
// has ended, until none comes for latDrainSeconds. perftest's spin on the
// peer's write re-reads its state only as the compiler allows (the field
// is not volatile): a perftest peer whose clock ends later than ours would
// otherwise spin forever on a write that never comes. Nothing here counts,
// and a failed completion ends the drain (the peer may be gone).
func (p *perf) drainLatWrite(ctx context.Context, rcnt, scnt int, outstanding bool, wr []uverbs.SendWR, pollWord *uint32, shift uint, postByte *byte) {
	var wc [1]uverbs.WC
	grace := uint64(p.mhz * 1e6 * latDrainSeconds)
	stopAnswering := cycles() + uint64(p.mhz*1e6*latDrainMaxSeconds)
	for ctx.Err() == nil && cycles() < stopAnswering {
		want := uint32(byte(rcnt + 1))
		deadline := cycles() + grace
		for spins := 1; (atomic.LoadUint32(pollWord)>>shift)&0xff != want; spins++ {
			if spins%spinCheck == 0 {
				if cycles() > deadline || ctx.Err() != nil {
					if outstanding {
						// Let the last write complete (or fail) before the
						// QP goes.
						p.pollQuiet(ctx, wc[:], deadline+grace)
					}
					return
				}
				p.relax()
			}
		}
		rcnt++
		if outstanding && !p.pollQuiet(ctx, wc[:], deadline+grace) {
			return
		}
		scnt++
		*postByte = byte(scnt)
		if err := p.qps[0].PostSend(wr); err != nil {
			return
		}
		outstanding = true
	}
	if outstanding {
		p.pollQuiet(ctx, wc[:], cycles()+grace)
	}
}

// pollQuiet waits for one successful send completion until deadline
// (cycles), reporting nothing.
func (p *perf) pollQuiet(ctx context.Context, wc []uverbs.WC, deadline uint64) bool {
	for spins := 1; ; spins++ {
		n, err := p.sendCQ.Poll(wc[:1])
		if err != nil {
			return false
		}
		if n == 1 {
			return wc[0].Status == uverbs.WCSuccess
		}
		if spins%spinCheck == 0 {
			if cycles() > deadline || ctx.Err() != nil {
				return false
			}
			p.relax()
		}
	}
}

// latReadTimed is run_iter_lat (read_lat, atomic_lat) for a duration run.
func (p *perf) latReadTimed(ctx context.Context, size int) (int, error) {
	defer p.lockThread()()
	var sge uverbs.SGE
	wr := [1]uverbs.SendWR{p.baseWR(0, size, &sge)}
	wr[0].Flags |= uverbs.SendSignaled
	var wc [1]uverbs.WC
	sampled := 0
	dur := p.startDuration()
	defer dur.stop()
	for scnt := 1; !dur.ended(); scnt++ {
		if err := p.qps[0].PostSend(wr[:]); err != nil {
			return 0, p.fail(err, "Couldn't post send: scnt=%d", scnt)
		}
		if err := p.pollOne(ctx, p.sendCQ, wc[:], "send"); err != nil {
			return 0, err
		}
		if dur.sampling() {
			sampled++
		}
	}
	return sampled, nil
}

// latRead is run_iter_lat (read_lat, atomic_lat): post, wait for the
// completion, again.
func (p *perf) latRead(ctx context.Context, size int) error {
	defer p.lockThread()()
	var sge uverbs.SGE
	wr := [1]uverbs.SendWR{p.baseWR(0, size, &sge)}
	wr[0].Flags |= uverbs.SendSignaled
	var wc [1]uverbs.WC
	for scnt := 0; scnt < p.cfg.iters; {
		p.tposted[scnt] = cycles()
		scnt++
		if err := p.qps[0].PostSend(wr[:]); err != nil {
			return p.fail(err, "Couldn't post send: scnt=%d", scnt)
		}
		if err := p.pollOne(ctx, p.sendCQ, wc[:], "send"); err != nil {
			return err
		}
	}
	return nil
}

// latSend is run_iter_lat_send: the server waits for a message and
// answers; receives are reposted one per message while more are due.
func (p *perf) latSend(ctx context.Context, size int) error {
	defer p.lockThread()()
	c := p.cfg
	var sge uverbs.SGE
	wr := [1]uverbs.SendWR{p.baseWR(0, size, &sge)}
	// Post receives again at the first slot, as perftest reposts its one
	// receive work request.
	rsge := [1]uverbs.SGE{{Addr: p.recvAddr(0), Length: p.recvLen(size), Lkey: p.mr.Lkey()}}
	rwr := [1]uverbs.RecvWR{{ID: 0, SGL: rsge[:]}}
	var wc, swc [1]uverbs.WC
	var scnt, rcnt int
	client := p.isClient()
	cqMod := min(c.cqMod, c.txDepth)
	for scnt < c.iters || rcnt < c.iters {
		if rcnt < c.iters && !(scnt < 1 && client) {
			if err := p.pollOne(ctx, p.recvCQ, wc[:], "receive"); err != nil {
				return err
			}
			rcnt++
			if rcnt+c.rxDepth <= c.iters {
				if err := p.qps[0].PostRecv(rwr[:]); err != nil {
					return p.fail(err, "Couldn't post recv: rcnt=%d", rcnt)
				}
			}
		}
		if scnt < c.iters {
			p.tposted[scnt] = cycles()
			scnt++
			poll := false
			if scnt%cqMod == 0 || scnt == c.iters {
				poll = true
				wr[0].Flags |= uverbs.SendSignaled
			}
			if err := p.qps[0].PostSend(wr[:]); err != nil {
				return p.fail(err, "Couldn't post send: scnt=%d", scnt)
			}
			if poll {
				if err := p.pollOne(ctx, p.sendCQ, swc[:], "send"); err != nil {
					return err
				}
				wr[0].Flags &^= uverbs.SendSignaled
			}
		}
	}
	return nil
}

// latSendTimed is run_iter_lat_send for a duration run: the clock starts
// at the first message received (perftest's set_on_first_rx_packet), the
// messages received during the sample are counted, and a receive is
// reposted for every message. A side waiting for a message stops when its
// own clock ends, so neither side outlives its peer by more than the gap
// between their first receives.
func (p *perf) latSendTimed(ctx context.Context, size int) (int, error) {
	defer p.lockThread()()
	c := p.cfg
	var sge uverbs.SGE
	wr := [1]uverbs.SendWR{p.baseWR(0, size, &sge)}
	rsge := [1]uverbs.SGE{{Addr: p.recvAddr(0), Length: p.recvLen(size), Lkey: p.mr.Lkey()}}
	rwr := [1]uverbs.RecvWR{{ID: 0, SGL: rsge[:]}}
	var wc, swc [1]uverbs.WC
	var dur *durationClock // started by the first message received
	defer func() { dur.stop() }()
	client := p.isClient()
	cqMod := min(c.cqMod, c.txDepth)
	sampled := 0
	for scnt := 0; ; {
		if !(scnt < 1 && client) {
			got, err := p.pollUntilEnd(ctx, p.recvCQ, wc[:], "receive", dur)
			if err != nil {
				return 0, err
			}
			if !got {
				break
			}
			if dur == nil {
				dur = p.startDuration()
			}
			if dur.sampling() {
				sampled++
			}
			if err := p.qps[0].PostRecv(rwr[:]); err != nil {
				return 0, p.fail(err, "Couldn't post recv: rcnt=%d", sampled)
			}
		}
		if dur.ended() {
			break
		}
		scnt++
		signaled := scnt%cqMod == 0
		if signaled {
			wr[0].Flags |= uverbs.SendSignaled
		}
		if err := p.qps[0].PostSend(wr[:]); err != nil {
			return 0, p.fail(err, "Couldn't post send: scnt=%d", scnt)
		}
		if signaled {
			if err := p.pollOne(ctx, p.sendCQ, swc[:], "send"); err != nil {
				return 0, err
			}
			wr[0].Flags &^= uverbs.SendSignaled
		}
	}
	return sampled, nil
}

// pollUntilEnd waits for one completion of cq (an error completion fails
// the run), or gives up, reporting false, once the duration clock dur ends
// (never while dur is nil: an iteration run, or a clock not started yet).
func (p *perf) pollUntilEnd(ctx context.Context, cq *uverbs.CQ, wc []uverbs.WC, what string, dur *durationClock) (bool, error) {
	spins := 0
	for {
		n, err := cq.Poll(wc[:1])
		if err != nil {
			return false, p.fail(err, "poll CQ failed")
		}
		if n == 1 {
			if wc[0].Status != uverbs.WCSuccess {
				return false, p.fail(nil, " Completion with error at %s:\n Failed status %d: wr_id %d syndrom 0x%x (%s)",
					what, int(wc[0].Status), wc[0].ID, wc[0].VendorErr, wc[0].Status)
			}
			return true, nil
		}
		if dur.ended() {
			return false, nil
		}
		if err := p.idle(ctx, &spins, cq, nil); err != nil {
			return false, err
		}
	}
}

// runBW is the bandwidth tests' part after the connection.
func (p *perf) runBW(ctx context.Context) error {
	c := p.cfg
	p.printBWHeader()
	if c.infinite {
		return p.runInfinite(ctx)
	}
	if c.test.verb != verbSend && !p.isClient() && !c.duplex {
		// write_bw, read_bw, atomic_bw: the server waits for the client's
		// end and prints its report.
		if err := p.sync(); err != nil {
			return err
		}
		theirs, err := p.comm.reports(bwReport{})
		if err != nil {
			return p.fail(err, " Failed to exchange data between server and clients")
		}
		p.printBWReport(theirs)
		if err := p.closeComm(); err != nil {
			return err
		}
		fmt.Fprint(p.stdout, resultLine)
		return nil
	}
	var last bwReport
	sizes := p.sizes()
	for k, size := range sizes {
		var err error
		switch {
		case c.test.verb == verbSend && c.duplex:
			// run_iter_bi: both sides post receives, shake hands and send.
			last, err = p.bwClient(ctx, size, true, nil)
		case c.test.verb == verbSend && !p.isClient():
			last, err = p.bwServer(ctx, size, nil)
		default:
			// The send_bw client waits for the server's receives; both
			// sides of a bidirectional test start together.
			if c.test.verb == verbSend || c.duplex {
				if err := p.sync(); err != nil {
					return err
				}
			}
			last, err = p.bwClient(ctx, size, false, nil)
		}
		if err != nil {
			return err
		}
		if c.duplex && c.test.verb != verbSend && c.all {
			// Peers from 4.6 on sync again after each size.
			if err := p.sync(); err != nil {
				return err
			}
		}
		switch {
		case c.duplex && !(c.test.verb == verbSend && c.duration > 0):
			// Each side prints the sum of both directions.
			theirs, err := p.comm.reports(last)
			if err != nil {
				return p.fail(err, " Failed to exchange data between server and clients")
			}
			p.printBWReport(last.plus(theirs))
		default:
			p.printBWReport(last)
		}
		if c.test.verb == verbSend && c.all && k < len(sizes)-1 {
			if err := p.sync(); err != nil {
				return err
			}
		}
	}
	if c.all {
		fmt.Fprint(p.stdout, resultLine)
	}
	if c.test.verb != verbSend && !c.duplex {
		if err := p.sync(); err != nil {
			return err
		}
		if _, err := p.comm.reports(last); err != nil {
			return p.fail(err, " Failed to exchange data between server and clients")
		}
	}
	if err := p.closeComm(); err != nil {
		return err
	}
	if !c.all {
		fmt.Fprint(p.stdout, resultLine)
	}
	return nil
}

// plus is print_full_bw_report's sum of a bidirectional test's two
// reports: the rates add up, the size and iterations are this side's.
func (r bwReport) plus(o bwReport) bwReport {
	r.Peak += o.Peak
	r.Avg += o.Avg
	r.MsgRate += o.MsgRate
	return r
}

// runInfinite is --run_infinitely: the sending sides (the client; with -b
// both) send until the run is stopped and print their bandwidth every -D
// seconds, as does the send_bw server for what it receives. The server of
// a one-way write_bw, read_bw or atomic_bw waits, as perftest's does, for
// an end that never comes.
func (p *perf) runInfinite(ctx context.Context) error {
	c := p.cfg
	factor := 1
	if c.duplex {
		factor = 2 // both directions (never send_bw: refused)
	}
	inf := &infiniteReport{p: p, size: c.size, factor: factor}
	var err error
	switch {
	case c.test.verb == verbSend && !p.isClient():
		_, err = p.bwServer(ctx, c.size, inf)
	case c.test.verb == verbSend:
		if err := p.sync(); err != nil {
			return err
		}
		_, err = p.bwClient(ctx, c.size, false, inf)
	case !p.isClient() && !c.duplex:
		return p.awaitEnd(ctx)
	default:
		_, err = p.bwClient(ctx, c.size, false, inf)
	}
	if err == nil {
		err = failure{errAborted}
	}
	return err
}

// awaitEnd is the one-way --run_infinitely server's wait in its next
// handshake, which ends only when the client goes (or this run is
// stopped): the exchange's time limit only starts the wait again.
func (p *perf) awaitEnd(ctx context.Context) error {
	for {
		_, err := p.comm.handshake(p.local[0])
		switch {
		case ctx.Err() != nil:
			return failure{errAborted}
		case errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
			continue
		case err == nil:
			err = fmt.Errorf("%w: a handshake from a client that should be sending", ErrBadMessage)
		}
		return p.fail(err, " Failed to exchange data between server and clients")
	}
}

// infiniteReport is run_infinitely's report: the loop counts what
// completes, and a goroutine prints the rate since its last line every
// duration seconds (perftest's print thread).
type infiniteReport struct {
	p            *perf
	size, factor int
	iters        atomic.Uint64
	stop         atomic.Bool
	done         chan struct{}
}

// add counts n messages; nil (no infinite run) counts nothing.
func (r *infiniteReport) add(n int) {
	if r != nil {
		r.iters.Add(uint64(n))
	}
}

// stopped reports whether the loop should end: the run was cancelled.
func (r *infiniteReport) stopped() bool { return r != nil && r.stop.Load() }

// start starts the reports; the returned function ends them.
func (r *infiniteReport) start(ctx context.Context) func() {
	if r == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	r.done = make(chan struct{})
	go func() {
		defer close(r.done)
		t := time.NewTicker(time.Duration(r.p.cfg.duration) * time.Second)
		defer t.Stop()
		from, last := cycles(), uint64(0)
		for {
			select {
			case <-ctx.Done():
				r.stop.Store(true)
				return
			case <-t.C:
				now, n := cycles(), r.iters.Load()
				r.p.printBWReport(r.p.infiniteResult(r.size, n-last, now-from, r.factor))
				from, last = now, n
			}
		}
	}()
	return func() {
		cancel()
		<-r.done
	}
}

// infiniteResult is print_report_bw for one line of run_infinitely: n
// messages in the cycles since the last line, factor times the size for
// a bidirectional run; no peak.
func (p *perf) infiniteResult(size int, n, elapsed uint64, factor int) bwReport {
	unit := 1048576.0
	if p.cfg.gbits {
		unit = 125000000
	}
	cyclesPerSec := p.mhz * 1e6
	t := float64(max(elapsed, 1))
	return bwReport{Size: uint64(size), Iters: n,
		Avg:     float64(factor*size) * float64(n) * cyclesPerSec / (t * unit),
		MsgRate: float64(n) * cyclesPerSec * float64(factor) / (t * 1e6)}
}

// eventWait is -e: where a loop has polled its CQs empty, the first call
// of idle arms them (the loop polls again before it waits, so that nothing
// completed before the arm is missed) and the next waits for an event on
// the completion channel and acknowledges it.
type eventWait struct {
	armed [2]*uverbs.CQ
}

// idle arms a and b (either may be nil) or, armed, waits for an event.
func (e *eventWait) idle(ctx context.Context, ch *uverbs.CompChannel, a, b *uverbs.CQ) error {
	if e.armed != [2]*uverbs.CQ{a, b} {
		for _, cq := range [2]*uverbs.CQ{a, b} {
			if cq != nil {
				if err := cq.RequestNotify(false); err != nil {
					return err
				}
			}
		}
		e.armed = [2]*uverbs.CQ{a, b}
		return nil
	}
	cq, err := ch.Wait(ctx)
	if err != nil {
		return err
	}
	cq.AckEvents(1)
	e.armed = [2]*uverbs.CQ{}
	return nil
}

// idle is what a loop does when its polls found nothing: with -e it arms
// or waits (see eventWait); busy polling relaxes now and then and looks at
// ctx.
func (p *perf) idle(ctx context.Context, spins *int, a, b *uverbs.CQ) error {
	if p.channel != nil && (a != nil || b != nil) {
		if err := p.events.idle(ctx, p.channel, a, b); err != nil {
			if ctx.Err() != nil {
				err = errAborted
			}
			return p.fail(err, "Failed to get cq_event")
		}
		return nil
	}
	if *spins++; *spins%spinCheck == 0 {
		p.relax()
	}
	if *spins%checkEvery == 0 && ctx.Err() != nil {
		return p.fail(errAborted, "poll CQ aborted")
	}
	return nil
}

// bwQP is one QP's state in a bandwidth run.
type bwQP struct {
	wrs        []uverbs.SendWR
	sges       []uverbs.SGE
	scnt, ccnt int
	unsignaled int // messages posted since the last signaled one
	// pl1 (post list 1): the addresses perftest moves along the cycle
	// buffer after each post.
	locBase, remBase uint64
}

// The work request ID of a bandwidth run: the QP index in the low half,
// how many messages its completion stands for in the high half.
func bwID(qp, covers int) uint64 { return uint64(qp) | uint64(covers)<<32 }

// bwClient is run_iter_bw: keep up to tx_depth messages in flight on
// every QP, posted postList at a time with one completion per cqMod, and
// count completions until iters per QP. With bi it is run_iter_bi (send_bw
// -b): receives are posted first and reposted as they complete, the server
// sends once the first message arrived, and the run ends when as many
// messages came as went. With inf it runs until stopped (run_infinitely).
func (p *perf) bwClient(ctx context.Context, size int, bi bool, inf *infiniteReport) (bwReport, error) {
	c := p.cfg
	nqp := len(p.qps)
	var rwrs []uverbs.RecvWR
	var rsges []uverbs.SGE
	var next []int
	if bi {
		var err error
		if rwrs, rsges, next, err = p.firstRecvs(size); err != nil {
			return bwReport{}, err
		}
	}
	defer p.lockThread()()
	pl, cqMod := p.postList, p.cqMod
	perftestMode := !c.goBatching()
	tot := c.iters * nqp
	peak := !c.noPeak && c.iters <= 20000
	if peak {
		p.tposted = make([]uint64, tot)
		p.tcompleted = make([]uint64, tot)
	} else {
		p.tposted, p.tcompleted = make([]uint64, 1), make([]uint64, 1)
	}
	step := uint64(p.inc(size))
	cycle := size <= p.cycleBuffer/2
	slots := uint64(1)
	if cycle {
		slots = uint64(p.cycleBuffer) / step
	}
	qs := make([]bwQP, nqp)
	for i := range qs {
		q := &qs[i]
		q.wrs = make([]uverbs.SendWR, pl)
		q.sges = make([]uverbs.SGE, pl)
		for j := range q.wrs {
			q.wrs[j] = p.baseWR(i, size, &q.sges[j])
			if pl > 1 && cycle {
				// A list's messages go to consecutive slots.
				q.sges[j].Addr += (uint64(j) % slots) * step
				if q.wrs[j].RemoteAddr != 0 {
					q.wrs[j].RemoteAddr += (uint64(j) % slots) * step
				}
			}
		}
		q.locBase, q.remBase = q.sges[0].Addr, q.wrs[0].RemoteAddr
	}
	var wcs, rwcs [pollBatch]uverbs.WC
	repost := make([]int, nqp)
	totS, totC, totR := 0, 0, 0
	// A duration run posts until its clock ends and counts the messages
	// completed during its sample (with bi, those received as well). The
	// server of a bidirectional run starts sending, and its clock, at the
	// first message received.
	timed := c.duration > 0
	waitFirst := bi && !p.isClient()
	var dur *durationClock
	if !waitFirst && inf == nil {
		dur = p.startDuration()
	}
	defer func() { dur.stop() }()
	stopReports := inf.start(ctx)
	defer stopReports()
	sampled := 0
	if !peak && !timed {
		p.tposted[0] = cycles()
	}
	spins := 0
	for (!timed && (totS < tot || totC < tot || (bi && totR < tot))) || (timed && !dur.ended() && !inf.stopped()) {
		for i := range qs {
			q := &qs[i]
			for !waitFirst && (timed || q.scnt < c.iters) && q.scnt-q.ccnt+pl <= c.txDepth {
				n := pl
				if !timed {
					n = min(pl, c.iters-q.scnt)
				}
				wrs := q.wrs[:n]
				for j := range wrs {
					q.unsignaled++
					idx := q.scnt + j
					var signal bool
					last := !timed && idx == c.iters-1
					if perftestMode {
						if pl == 1 {
							signal = (idx+1)%cqMod == 0 || last
						} else {
							signal = (j+1)%cqMod == 0
						}
					} else {
						signal = j == n-1 || last
					}
					if signal {
						wrs[j].Flags |= uverbs.SendSignaled
						wrs[j].ID = bwID(i, q.unsignaled)
						q.unsignaled = 0
					} else {
						wrs[j].Flags &^= uverbs.SendSignaled
					}
				}
				if peak {
					t := cycles()
					for j := 0; j < n; j++ {
						p.tposted[totS+j] = t
					}
				}
				if dur.ended() {
					break
				}
				if err := p.qps[i].PostSend(wrs); err != nil {
					return bwReport{}, p.fail(err, "Couldn't post send: qp %d scnt=%d ", i, q.scnt)
				}
				if pl == 1 && cycle {
					// increase_loc_addr / increase_rem_addr.
					k := uint64(q.scnt+1) % slots
					q.sges[0].Addr = q.locBase + k*step
					if q.remBase != 0 {
						q.wrs[0].RemoteAddr = q.remBase + k*step
					}
				}
				q.scnt += n
				totS += n
			}
		}
		got := 0
		var recvWait, sendWait *uverbs.CQ
		if bi && (timed || totR < tot) {
			recvWait = p.recvCQ
			ne, err := p.recvCQ.Poll(rwcs[:])
			if err != nil {
				return bwReport{}, p.fail(err, "poll CQ failed")
			}
			if ne > 0 && waitFirst {
				waitFirst = false
				if timed {
					dur = p.startDuration()
				}
			}
			if err := p.countRecvs(rwcs[:ne], &totR, &sampled, dur, repost, next); err != nil {
				return bwReport{}, err
			}
			if err := p.repostRecvs(repost, next, size, rwrs, rsges, totR); err != nil {
				return bwReport{}, err
			}
			got += ne
		}
		if (!timed && totC < tot) || (timed && totC < totS) {
			sendWait = p.sendCQ
			ne, err := p.sendCQ.Poll(wcs[:])
			if err != nil {
				return bwReport{}, p.fail(err, "poll CQ failed")
			}
			t := uint64(0)
			if peak && ne > 0 {
				t = cycles()
			}
			for k := 0; k < ne; k++ {
				wc := &wcs[k]
				if wc.Status != uverbs.WCSuccess {
					return bwReport{}, p.fail(nil, " Completion with error at client\n Failed status %d: wr_id %d syndrom 0x%x\nscnt=%d, ccnt=%d",
						int(wc.Status), wc.ID&0xffffffff, wc.VendorErr, totS, totC)
				}
				qi, covers := int(wc.ID&0xffffffff), int(wc.ID>>32)
				qs[qi].ccnt += covers
				if dur.sampling() {
					sampled += covers
				}
				inf.add(covers)
				if peak {
					for j := 0; j < covers && totC+j < tot; j++ {
						p.tcompleted[totC+j] = t
					}
				}
				totC += covers
			}
			got += ne
		}
		if got == 0 {
			if err := p.idle(ctx, &spins, recvWait, sendWait); err != nil {
				return bwReport{}, err
			}
		}
	}
	if inf.stopped() {
		return bwReport{}, failure{errAborted}
	}
	if timed {
		return p.bwResult(size, sampled, false, pl, cqMod), nil
	}
	if !peak {
		p.tcompleted[0] = cycles()
	}
	return p.bwResult(size, tot, peak, pl, cqMod), nil
}

// firstRecvs posts rx_depth receives on every QP and shakes hands, so that
// the peer sends only once they are posted. It returns the work requests
// and SGEs to repost with, and each QP's next receive index.
func (p *perf) firstRecvs(size int) (wrs []uverbs.RecvWR, sges []uverbs.SGE, next []int, err error) {
	c := p.cfg
	wrs = make([]uverbs.RecvWR, max(c.rxDepth, pollBatch))
	sges = make([]uverbs.SGE, len(wrs))
	next = make([]int, len(p.qps))
	for i := range p.qps {
		if next[i], err = p.postRecvs(i, c.rxDepth, 0, size, wrs, sges); err != nil {
			return nil, nil, nil, p.fail(err, " Failed to post receive recv_wqes")
		}
	}
	if err := p.sync(); err != nil {
		return nil, nil, nil, err
	}
	return wrs, sges, next, nil
}

// countRecvs checks receive completions and counts them in rcnt (and in
// sampled during dur's sample), and marks their QPs' receives as due again
// in repost (an iteration run: while fewer than iters were posted).
func (p *perf) countRecvs(wcs []uverbs.WC, rcnt, sampled *int, dur *durationClock, repost, next []int) error {
	timed := p.cfg.duration > 0
	for k := range wcs {
		wc := &wcs[k]
		if wc.Status != uverbs.WCSuccess {
			return p.fail(nil, " Completion with error at server\n Failed status %d: wr_id %d syndrom 0x%x\n rcnt=%d",
				int(wc.Status), wc.ID, wc.VendorErr, *rcnt)
		}
		*rcnt++
		if dur.sampling() {
			*sampled++
		}
		if qi := int(wc.ID); timed || next[qi] < p.cfg.iters {
			repost[qi]++
		}
	}
	return nil
}

// repostRecvs posts again the receives that completed (repost[qi] per
// QP), one list per QP, and clears repost; an iteration run posts no more
// than iters per QP in all. Receives cost no system call, so perftest's
// one-at-a-time reposting is kept in spirit.
func (p *perf) repostRecvs(repost, next []int, size int, wrs []uverbs.RecvWR, sges []uverbs.SGE, rcnt int) error {
	timed := p.cfg.duration > 0
	for qi := range repost {
		n := repost[qi]
		if !timed {
			n = min(n, p.cfg.iters-next[qi])
		}
		if n > 0 {
			var err error
			if next[qi], err = p.postRecvs(qi, n, next[qi], size, wrs, sges); err != nil {
				return p.fail(err, "Couldn't post recv Qp=%d rcnt=%d", qi, rcnt)
			}
		}
		repost[qi] = 0
	}
	return nil
}

// bwServer is run_iter_bw_server (send_bw): receives posted rx_depth
// ahead, reposted as they complete, until iters per QP. The clock starts at
// the first message. With inf it is run_iter_bw_infinitely_server: it
// counts what arrives until stopped.
func (p *perf) bwServer(ctx context.Context, size int, inf *infiniteReport) (bwReport, error) {
	c := p.cfg
	nqp := len(p.qps)
	wrs, sges, next, err := p.firstRecvs(size)
	if err != nil {
		return bwReport{}, err
	}
	defer p.lockThread()()
	tot := c.iters * nqp
	rcnt := 0
	var wcs [pollBatch]uverbs.WC
	p.tposted, p.tcompleted = make([]uint64, 1), make([]uint64, 1)
	repost := make([]int, nqp) // per poll: receives due per QP
	spins := 0
	// A duration run's clock starts at the first message, and every
	// receive is reposted until it ends.
	timed := c.duration > 0
	var dur *durationClock
	defer func() { dur.stop() }()
	stopReports := inf.start(ctx)
	defer stopReports()
	sampled := 0
	for (!timed && rcnt < tot) || (timed && !dur.ended() && !inf.stopped()) {
		ne, err := p.recvCQ.Poll(wcs[:])
		if err != nil {
			return bwReport{}, p.fail(err, "Poll Receive CQ failed")
		}
		if ne == 0 {
			if err := p.idle(ctx, &spins, p.recvCQ, nil); err != nil {
				return bwReport{}, err
			}
			continue
		}
		if rcnt == 0 {
			if timed {
				if inf == nil {
					dur = p.startDuration()
				}
			} else {
				p.tposted[0] = cycles()
			}
		}
		if err := p.countRecvs(wcs[:ne], &rcnt, &sampled, dur, repost, next); err != nil {
			return bwReport{}, err
		}
		inf.add(ne)
		if err := p.repostRecvs(repost, next, size, wrs, sges, rcnt); err != nil {
			return bwReport{}, err
		}
	}
	if inf.stopped() {
		return bwReport{}, failure{errAborted}
	}
	if timed {
		return p.bwResult(size, sampled, false, 1, 1), nil
	}
	p.tcompleted[0] = cycles()
	return p.bwResult(size, tot, false, 1, 1), nil
}
