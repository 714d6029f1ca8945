package uverbs

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

// The load test: many QPs and goroutines at once, the way a server uses the
// library, with every payload checksummed and every message accounted for.
//
// Four contexts (two on rxe0, two on rxe1) hold 32 RC QPs: 16 sender QPs,
// each connected over the veth pair to a receiver QP in a context of the
// other device. Each context shares one send CQ and one receive CQ among its
// QPs. Four sender QPs are shared by four posting goroutines each (the
// documented concurrent use of one QP), the other twelve have one poster;
// one goroutine polls each send CQ, and each receive CQ has two pollers
// (one CQ polled from two goroutines) that check and re-post the receive
// buffers. A message carries its stream, sequence number, length and the
// CRC-32C of its random payload; at the end every stream's sequence numbers
// must have arrived exactly once.
//
// It runs loadDuration of traffic (a few seconds; bounded for CI, also
// under -race); -soak=DURATION runs it longer.

var loadSoak = flag.Duration("soak", 0, "load: run the load test's traffic this long instead of a few seconds")

const (
	loadContexts     = 4
	loadPairs        = 16
	loadSharedQPs    = 4 // sender QPs with several posters
	loadSharedPost   = 4 // posters on each of them
	loadSendSlots    = 16
	loadRecvSlots    = 128
	loadSlot         = 4096 + loadHeader
	loadHeader       = 24
	loadMaxPayload   = 4096
	loadDefaultRun   = 4 * time.Second
	loadDrainTimeout = 30 * time.Second
)

var loadCRC = crc32.MakeTable(crc32.Castagnoli)

type loadCtx struct {
	c         *Context
	pd        *PD
	scq, rcq  *CQ
	gid       GIDEntry
	recvPairs map[uint32]*loadPair // by receiver QPN
}

type loadPair struct {
	id         int
	send, recv *QP
	sctx, rctx *loadCtx
	sbuf, rbuf *Buffer
	smr, rmr   *MR
}

// loadStream is one poster's sequence of messages.
type loadStream struct {
	id    uint32
	pair  *loadPair
	slot0 int           // first send slot it owns
	free  chan int      // send slots whose send completed
	sent  atomic.Uint64 // messages posted
}

// loadTally is what the receivers saw, per stream.
type loadTally struct {
	mu       sync.Mutex
	seen     [][]uint64 // per stream, a bit per sequence number (a soak stays small)
	messages int64
	bytes    int64
	dups     int64
	bad      []string
}

func (l *loadTally) fail(format string, args ...any) {
	l.mu.Lock()
	if len(l.bad) < 20 {
		l.bad = append(l.bad, fmt.Sprintf(format, args...))
	}
	l.mu.Unlock()
}

func (l *loadTally) has(stream int, seq uint64) bool {
	w := l.seen[stream]
	return seq/64 < uint64(len(w)) && w[seq/64]&(1<<(seq%64)) != 0
}

func (l *loadTally) mark(stream int, seq uint64) {
	for uint64(len(l.seen[stream])) <= seq/64 {
		l.seen[stream] = append(l.seen[stream], 0)
	}
	l.seen[stream][seq/64] |= 1 << (seq % 64)
}

func TestLoadManyQPs(t *testing.T) {
	vmenv.RequireDevice(t, vmenv.RXE0)
	vmenv.RequireDevice(t, vmenv.RXE1)
	run := loadDefaultRun
	if *loadSoak > 0 {
		run = *loadSoak
	}
	var ctxs [loadContexts]*loadCtx
	for i := range ctxs {
		dev := vmenv.RXE0
		if i >= loadContexts/2 {
			dev = vmenv.RXE1
		}
		lc := &loadCtx{c: faultOpen(t, dev), recvPairs: map[uint32]*loadPair{}}
		var err error
		if lc.pd, err = lc.c.AllocPD(); err != nil {
			t.Fatal(err)
		}
		if lc.scq, err = lc.c.CreateCQ(loadPairs*loadSendSlots, nil); err != nil {
			t.Fatal(err)
		}
		if lc.rcq, err = lc.c.CreateCQ(loadPairs*loadRecvSlots, nil); err != nil {
			t.Fatal(err)
		}
		if lc.gid, err = lc.c.RecommendedGID(1); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lc.rcq.Close(); lc.scq.Close(); lc.pd.Close() })
		ctxs[i] = lc
	}
	newQP := func(lc *loadCtx) *QP {
		qp, err := lc.pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: lc.scq, RecvCQ: lc.rcq,
			Cap: QPCap{MaxSendWr: loadSharedPost * loadSendSlots, MaxRecvWr: loadRecvSlots, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { qp.Close() })
		return qp
	}
	register := func(lc *loadCtx, size int) (*Buffer, *MR) {
		buf, err := AllocBuffer(size)
		if err != nil {
			t.Fatal(err)
		}
		mr, err := lc.pd.RegisterBuffer(buf, 0, size, AccessLocalWrite)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mr.Close(); buf.Close() })
		return buf, mr
	}
	pairs := make([]*loadPair, loadPairs)
	var streams []*loadStream
	for i := range pairs {
		p := &loadPair{id: i, sctx: ctxs[i%loadContexts], rctx: ctxs[(i+loadContexts/2)%loadContexts]}
		p.send, p.recv = newQP(p.sctx), newQP(p.rctx)
		p.sbuf, p.smr = register(p.sctx, loadSharedPost*loadSendSlots*loadSlot)
		p.rbuf, p.rmr = register(p.rctx, loadRecvSlots*loadSlot)
		for _, x := range []struct {
			qp     *QP
			lc     *loadCtx
			remote Endpoint
		}{
			{p.send, p.sctx, Endpoint{QPN: p.recv.QPN(), PSN: 1, GID: p.rctx.gid.GID}},
			{p.recv, p.rctx, Endpoint{QPN: p.send.QPN(), PSN: 1, GID: p.sctx.gid.GID}},
		} {
			// RNR retry 7 is "retry forever": a sender outrunning its
			// receiver's re-posts waits instead of failing.
			if err := x.qp.Connect(ConnectAttr{SGIDIndex: x.lc.gid.Index, LocalPSN: 1, Timeout: 18, RNRRetry: 7, MinRNRTimer: 1,
				Access: AccessLocalWrite, Remote: x.remote}); err != nil {
				t.Fatal(err)
			}
		}
		p.rctx.recvPairs[p.recv.QPN()] = p
		for s := 0; s < loadRecvSlots; s++ {
			if err := loadPostRecv(p, s); err != nil {
				t.Fatal(err)
			}
		}
		posters := 1
		if i < loadSharedQPs {
			posters = loadSharedPost
		}
		for k := 0; k < posters; k++ {
			st := &loadStream{id: uint32(len(streams)), pair: p, slot0: k * loadSendSlots, free: make(chan int, loadSendSlots)}
			for s := 0; s < loadSendSlots; s++ {
				st.free <- st.slot0 + s
			}
			streams = append(streams, st)
		}
	}
	tally := &loadTally{seen: make([][]uint64, len(streams))}

	var stopPolling atomic.Bool
	var pollers sync.WaitGroup
	goroutines := 0
	for _, lc := range ctxs {
		goroutines += 3
		pollers.Add(3)
		go func() { defer pollers.Done(); loadPollSend(lc.scq, streams, tally, &stopPolling) }()
		for k := 0; k < 2; k++ {
			go func() { defer pollers.Done(); loadPollRecv(lc, tally, &stopPolling) }()
		}
	}
	deadline := time.Now().Add(run)
	start := time.Now()
	var posters sync.WaitGroup
	for _, st := range streams {
		goroutines++
		posters.Add(1)
		go func() { defer posters.Done(); loadPost(st, deadline, tally) }()
	}
	posters.Wait()
	var sent int64
	for _, st := range streams {
		sent += int64(st.sent.Load())
	}
	// Drain: every message posted must arrive.
	drained := waitFor(loadDrainTimeout, func() bool {
		tally.mu.Lock()
		defer tally.mu.Unlock()
		return tally.messages+tally.dups >= sent || len(tally.bad) > 0
	})
	stopPolling.Store(true)
	pollers.Wait()
	elapsed := time.Since(start)

	var lost int64
	for i, st := range streams {
		for seq := uint64(0); seq < st.sent.Load(); seq++ {
			if !tally.has(i, seq) {
				lost++
				if lost <= 5 {
					t.Errorf("stream %d (pair %d): message %d never arrived", i, st.pair.id, seq)
				}
			}
		}
	}
	for _, b := range tally.bad {
		t.Error(b)
	}
	if !drained {
		t.Errorf("after %v, %d of %d messages had arrived", loadDrainTimeout, tally.messages, sent)
	}
	if lost != 0 || tally.dups != 0 || tally.messages != sent {
		t.Errorf("%d messages posted, %d arrived: %d lost, %d duplicated", sent, tally.messages, lost, tally.dups)
	}
	t.Logf("load: %d QPs on %d contexts, %d goroutines (%d posters, %d on each of %d shared QPs; %d CQ pollers): "+
		"%d messages, %d payload bytes verified in %v (%.0f msg/s), %d lost, %d duplicated",
		2*loadPairs, loadContexts, goroutines, len(streams), loadSharedPost, loadSharedQPs, 3*loadContexts,
		tally.messages, tally.bytes, elapsed.Round(time.Millisecond), float64(tally.messages)/elapsed.Seconds(), lost, tally.dups)
}

func loadPostRecv(p *loadPair, slot int) error {
	off := uint64(slot * loadSlot)
	return p.recv.PostRecv([]RecvWR{{ID: uint64(slot), SGL: []SGE{{Addr: p.rmr.Addr() + off, Length: loadSlot, Lkey: p.rmr.Lkey()}}}})
}

// loadPost sends the stream's messages until deadline: random payloads of
// 0 to 4096 bytes behind a header with the CRC.
func loadPost(st *loadStream, deadline time.Time, tally *loadTally) {
	rng := rand.New(rand.NewPCG(uint64(st.id), 0x10ad))
	mem := st.pair.sbuf.Bytes()
	for seq := uint64(0); time.Now().Before(deadline); seq++ {
		var slot int
		select {
		case slot = <-st.free:
		case <-time.After(loadDrainTimeout):
			tally.fail("stream %d: no send slot came back in %v", st.id, loadDrainTimeout)
			return
		}
		n := rng.IntN(loadMaxPayload + 1)
		msg := mem[slot*loadSlot : slot*loadSlot+loadHeader+n]
		var word [8]byte
		for i := loadHeader; i < len(msg); i += 8 {
			binary.LittleEndian.PutUint64(word[:], rng.Uint64())
			copy(msg[i:], word[:])
		}
		binary.LittleEndian.PutUint32(msg[0:], 0x6c6f6164) // "load"
		binary.LittleEndian.PutUint32(msg[4:], st.id)
		binary.LittleEndian.PutUint64(msg[8:], seq)
		binary.LittleEndian.PutUint32(msg[16:], uint32(n))
		binary.LittleEndian.PutUint32(msg[20:], crc32.Checksum(msg[loadHeader:], loadCRC))
		id := uint64(st.id)<<32 | uint64(slot)
		wr := SendWR{ID: id, Opcode: WRSend, Flags: SendSignaled,
			SGL: []SGE{{Addr: st.pair.smr.Addr() + uint64(slot*loadSlot), Length: uint32(len(msg)), Lkey: st.pair.smr.Lkey()}}}
		// The slot came back with the send's completion; the send queue
		// entry may be freed an instant later.
		err := st.pair.send.PostSend([]SendWR{wr})
		for i := 0; errors.Is(err, ErrQueueFull) && i < 1000; i++ {
			time.Sleep(100 * time.Microsecond)
			err = st.pair.send.PostSend([]SendWR{wr})
		}
		if err != nil {
			tally.fail("stream %d: post_send: %v", st.id, err)
			return
		}
		st.sent.Add(1)
	}
}

// loadPollSend hands send slots back to their streams.
func loadPollSend(cq *CQ, streams []*loadStream, tally *loadTally, stop *atomic.Bool) {
	wcs := make([]WC, 32)
	for !stop.Load() {
		n, err := cq.Poll(wcs)
		if err != nil {
			tally.fail("send CQ: poll: %v", err)
			return
		}
		for _, wc := range wcs[:n] {
			st := int(wc.ID >> 32)
			if wc.Status != WCSuccess || st >= len(streams) {
				tally.fail("send completion %+v (%v)", wc, wc.Status)
				continue
			}
			streams[st].free <- int(uint32(wc.ID))
		}
		if n == 0 {
			time.Sleep(20 * time.Microsecond)
		}
	}
}

// loadPollRecv checks each message that arrived and re-posts its buffer.
// Two of these poll each receive CQ.
func loadPollRecv(lc *loadCtx, tally *loadTally, stop *atomic.Bool) {
	wcs := make([]WC, 32)
	for !stop.Load() {
		n, err := lc.rcq.Poll(wcs)
		if err != nil {
			tally.fail("receive CQ: poll: %v", err)
			return
		}
		for _, wc := range wcs[:n] {
			p := lc.recvPairs[wc.QPNum]
			if wc.Status != WCSuccess || p == nil || wc.ID >= loadRecvSlots {
				tally.fail("receive completion %+v (%v)", wc, wc.Status)
				continue
			}
			slot := int(wc.ID)
			msg := p.rbuf.Bytes()[slot*loadSlot : (slot+1)*loadSlot]
			stream := binary.LittleEndian.Uint32(msg[4:])
			seq := binary.LittleEndian.Uint64(msg[8:])
			size := binary.LittleEndian.Uint32(msg[16:])
			switch {
			case binary.LittleEndian.Uint32(msg[0:]) != 0x6c6f6164 || int(stream) >= len(tally.seen) || size > loadMaxPayload:
				tally.fail("pair %d: malformed message header % x", p.id, msg[:loadHeader])
			case wc.ByteLen != loadHeader+size:
				tally.fail("pair %d stream %d message %d: %d bytes received, header says %d", p.id, stream, seq, wc.ByteLen, loadHeader+size)
			case crc32.Checksum(msg[loadHeader:loadHeader+size], loadCRC) != binary.LittleEndian.Uint32(msg[20:]):
				tally.fail("pair %d stream %d message %d: payload checksum mismatch", p.id, stream, seq)
			default:
				tally.mu.Lock()
				if tally.has(int(stream), seq) {
					tally.dups++
				} else {
					tally.mark(int(stream), seq)
					tally.messages++
					tally.bytes += int64(size)
				}
				tally.mu.Unlock()
			}
			clear(msg[:loadHeader]) // a stale header must not pass for the next message
			if err := loadPostRecv(p, slot); err != nil {
				tally.fail("pair %d: post_recv: %v", p.id, err)
			}
		}
		if n == 0 {
			time.Sleep(20 * time.Microsecond)
		}
	}
}
