package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"time"

	"github.com/goverbs/goverbs/internal/cli"
	"github.com/goverbs/goverbs/sysfs"
	"github.com/goverbs/goverbs/uverbs"
)

// failure is an error already reported on stderr in the C examples' words;
// run only turns it into exit status 1.
type failure struct{ err error }

func (f failure) Error() string { return f.err.Error() }
func (f failure) Unwrap() error { return f.err }

// pingpong is one side of a run: pingpong_context.
type pingpong struct {
	cfg    *config
	stdout io.Writer
	stderr io.Writer

	dev     *uverbs.Context
	channel *uverbs.CompChannel
	pd      *uverbs.PD
	buf     *uverbs.Buffer
	mr      *uverbs.MR
	cq      *uverbs.CQ
	srq     *uverbs.SRQ
	qps     []*uverbs.QP
	ah      *uverbs.AH // ud: the peer

	sendFlags uverbs.SendFlags
	recvWRs   []uverbs.RecvWR    // rx_depth identical receives
	sendWRs   [][1]uverbs.SendWR // one send per QP
	recvSGE   [1]uverbs.SGE
	sendSGE   [1]uverbs.SGE
	local     []dest
	remote    []dest
	pending   []int // per QP: wridRecv|wridSend still to complete
	numEvents int

	// ready, for tests, is called once the server listens.
	ready func(net.Addr)
}

// fail reports on stderr (the C message, then the cause when there is
// one) and returns the failure.
func (p *pingpong) fail(err error, format string, a ...any) error {
	fmt.Fprintf(p.stderr, format+"\n", a...)
	if err == nil {
		return failure{fmt.Errorf(format, a...)}
	}
	fmt.Fprintf(p.stderr, "%s: %v\n", p.cfg.prog, err)
	return failure{fmt.Errorf(format+": %w", append(a, err)...)}
}

// openDevice opens -d or, without it, the first device rdma-core would
// list.
func (p *pingpong) openDevice() error {
	name := p.cfg.ibDev
	if name == "" {
		devs, err := sysfs.New("/").Devices()
		if err != nil {
			return p.fail(err, "Failed to get IB devices list")
		}
		for _, d := range devs {
			if uverbs.CheckProvider(d) == nil {
				name = d.Name
				break
			}
		}
		if name == "" {
			return p.fail(nil, "No IB devices found")
		}
	}
	dev, err := uverbs.Open(name)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && p.cfg.ibDev != "" {
			return p.fail(err, "IB device %s not found", name)
		}
		return p.fail(err, "Couldn't get context for %s", name)
	}
	p.dev = dev
	return nil
}

// setup is pp_init_ctx: device, PD, buffer, MR, CQ, (SRQ,) QPs in INIT.
func (p *pingpong) setup() error {
	c := p.cfg
	if err := p.openDevice(); err != nil {
		return err
	}
	if c.kind == kindUD {
		pa, err := p.dev.QueryPort(c.ibPort)
		if err != nil {
			return p.fail(err, "Unable to query port info for port %d", c.ibPort)
		}
		if mtu := pa.ActiveMTU.Bytes(); c.size > mtu {
			return p.fail(nil, "Requested size larger than port MTU (%d)", mtu)
		}
	}
	var err error
	if c.events {
		if p.channel, err = p.dev.NewCompChannel(); err != nil {
			return p.fail(err, "Couldn't create completion channel")
		}
	}
	if p.pd, err = p.dev.AllocPD(); err != nil {
		return p.fail(err, "Couldn't allocate PD")
	}
	bufLen := c.size
	if c.kind == kindUD {
		bufLen += udGRHBytes
	}
	if p.buf, err = uverbs.AllocBuffer(bufLen); err != nil {
		return p.fail(err, "Couldn't allocate work buf.")
	}
	if c.kind != kindSRQ { // srq_pingpong zeroes its buffer, the others fill it
		for i, b := 0, p.buf.Bytes(); i < len(b); i++ {
			b[i] = 0x7b
		}
	}
	if p.mr, err = p.pd.RegisterBuffer(p.buf, 0, bufLen, uverbs.AccessLocalWrite); err != nil {
		return p.fail(err, "Couldn't register MR")
	}
	cqe := c.rxDepth + 1
	if c.kind == kindSRQ {
		cqe = c.rxDepth + c.numQP
	}
	if p.cq, err = p.dev.CreateCQ(cqe, &uverbs.CQOptions{Channel: p.channel}); err != nil {
		return p.fail(err, "Couldn't create CQ")
	}
	qpType := uverbs.QPTypeRC
	switch c.kind {
	case kindUC:
		qpType = uverbs.QPTypeUC
	case kindUD:
		qpType = uverbs.QPTypeUD
	}
	caps := uverbs.QPCap{MaxSendWr: 1, MaxRecvWr: uint32(c.rxDepth), MaxSendSGE: 1, MaxRecvSGE: 1}
	if c.kind == kindSRQ {
		if p.srq, err = p.pd.CreateSRQ(uverbs.SRQAttr{MaxWr: uint32(c.rxDepth), MaxSGE: 1}); err != nil {
			return p.fail(err, "Couldn't create SRQ")
		}
		caps.MaxRecvWr, caps.MaxRecvSGE = 0, 0
	}
	p.sendFlags = uverbs.SendSignaled
	for i := 0; i < c.numQP; i++ {
		qp, err := p.pd.CreateQP(uverbs.QPInitAttr{Type: qpType, SendCQ: p.cq, RecvCQ: p.cq, SRQ: p.srq, Cap: caps})
		if err != nil {
			if c.kind == kindSRQ {
				return p.fail(err, "Couldn't create QP[%d]", i)
			}
			return p.fail(err, "Couldn't create QP")
		}
		p.qps = append(p.qps, qp)
		// Inline when the QP can take the whole message: the examples ask
		// for no inline data and use what the provider grants anyway.
		if int(qp.Cap().MaxInlineData) >= c.size {
			p.sendFlags |= uverbs.SendInline
		}
	}
	for i, qp := range p.qps {
		attr := uverbs.QPAttr{State: uverbs.QPStateInit, PkeyIndex: 0, Port: c.ibPort}
		mask := uverbs.QPAttrState | uverbs.QPAttrPkeyIndex | uverbs.QPAttrPort
		if c.kind == kindUD {
			attr.Qkey = udQkey
			mask |= uverbs.QPAttrQkey
		} else {
			mask |= uverbs.QPAttrAccessFlags // no remote rights: sends only
		}
		if err := qp.Modify(&attr, mask); err != nil {
			if c.kind == kindSRQ {
				return p.fail(err, "Failed to modify QP[%d] to INIT", i)
			}
			return p.fail(err, "Failed to modify QP to INIT")
		}
	}
	// The work requests are built once; posting reuses them.
	p.recvSGE[0] = uverbs.SGE{Addr: p.mr.Addr(), Length: uint32(bufLen), Lkey: p.mr.Lkey()}
	p.recvWRs = make([]uverbs.RecvWR, c.rxDepth)
	for i := range p.recvWRs {
		p.recvWRs[i] = uverbs.RecvWR{ID: wridRecv, SGL: p.recvSGE[:]}
	}
	p.sendSGE[0] = uverbs.SGE{Addr: p.mr.Addr(), Length: uint32(c.size), Lkey: p.mr.Lkey()}
	if c.kind == kindUD {
		p.sendSGE[0].Addr += udGRHBytes
	}
	p.sendWRs = make([][1]uverbs.SendWR, c.numQP)
	for i := range p.sendWRs {
		p.sendWRs[i][0] = uverbs.SendWR{ID: wridSend, Opcode: uverbs.WRSend, Flags: p.sendFlags, SGL: p.sendSGE[:]}
	}
	p.pending = make([]int, c.numQP)
	return nil
}

// postRecv posts n receives (to the SRQ for srq) and returns how many were
// posted: all or, when the queue refuses the list, none.
func (p *pingpong) postRecv(n int) int {
	if n <= 0 {
		return 0
	}
	var err error
	if p.srq != nil {
		err = p.srq.PostRecv(p.recvWRs[:n])
	} else {
		err = p.qps[0].PostRecv(p.recvWRs[:n])
	}
	if err != nil {
		fmt.Fprintf(p.stderr, "%s: post receive: %v\n", p.cfg.prog, err)
		return 0
	}
	return n
}

func (p *pingpong) postSend(i int) error {
	return p.qps[i].PostSend(p.sendWRs[i][:])
}

// addresses fills in and prints the local addresses.
func (p *pingpong) addresses() error {
	c := p.cfg
	pa, err := p.dev.QueryPort(c.ibPort)
	if err != nil {
		return p.fail(err, "Couldn't get port info")
	}
	if pa.LinkLayer != uverbs.LinkLayerEthernet && pa.LID == 0 {
		return p.fail(nil, "Couldn't get local LID")
	}
	var gid uverbs.GID
	if c.gidIdx >= 0 {
		e, err := p.dev.QueryGID(c.ibPort, c.gidIdx)
		switch {
		case errors.Is(err, uverbs.ErrNoGID):
			// An empty entry reads as the zero GID, as ibv_query_gid
			// keeps it for its callers.
		case err != nil:
			if c.kind == kindUD || c.kind == kindSRQ {
				return p.fail(err, "Could not get local gid for gid index %d", c.gidIdx)
			}
			return p.fail(err, "can't read sgid of index %d", c.gidIdx)
		default:
			gid = e.GID
		}
	}
	sep := ","
	if c.kind == kindUD {
		sep = ":" // ibv_ud_pingpong's spelling
	}
	for _, qp := range p.qps {
		d := dest{LID: pa.LID, QPN: qp.QPN(), PSN: rand.Uint32() & 0xffffff, GID: gid}
		p.local = append(p.local, d)
		fmt.Fprintf(p.stdout, "  local address:  LID 0x%04x, QPN 0x%06x, PSN 0x%06x%s GID %s\n",
			d.LID, d.QPN, d.PSN, sep, cli.InetNtop6(d.GID))
	}
	return nil
}

// av is the address vector to the peer: with a GRH when the peer sent a
// GID (the examples test its interface ID), from our GID index, with the
// examples' hop limit: 64 in ud_pingpong's address handle, 1 in the
// others' RTR.
func (p *pingpong) av(d dest, dgid uverbs.GID) uverbs.AHAttr {
	a := uverbs.AHAttr{DLID: d.LID, SL: p.cfg.sl, PortNum: p.cfg.ibPort}
	if [8]byte(dgid[8:]) != [8]byte{} {
		a.IsGlobal = true
		hops := uint8(1)
		if p.cfg.kind == kindUD {
			hops = 64
		}
		// The C examples store the index in a uint8_t: without -g, -1
		// becomes 255, and the kernel refuses it.
		a.GRH = uverbs.GlobalRoute{DGID: dgid, SGIDIndex: int(uint8(p.cfg.gidIdx)), HopLimit: hops}
	}
	return a
}

// connect is pp_connect_ctx: the QPs to RTR and RTS towards remote (for
// ud: RTR, RTS and an address handle).
func (p *pingpong) connect(remote []dest) error {
	c := p.cfg
	name := func(i int) string {
		if c.kind == kindSRQ {
			return fmt.Sprintf("QP[%d]", i)
		}
		return "QP"
	}
	for i, qp := range p.qps {
		r := remote[i]
		rtr := uverbs.QPAttr{State: uverbs.QPStateRTR}
		rts := uverbs.QPAttr{State: uverbs.QPStateRTS, SQPSN: p.local[i].PSN}
		rtrMask := uverbs.QPAttrState
		rtsMask := uverbs.QPAttrState | uverbs.QPAttrSQPSN
		if c.kind != kindUD {
			rtr.PathMTU, rtr.DestQPN, rtr.RQPSN = c.mtu, r.QPN, r.PSN
			// srq_pingpong routes every QP to the first address's GID.
			rtr.AH = p.av(r, remote[0].GID)
			rtrMask |= uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrDestQPN | uverbs.QPAttrRQPSN
		}
		if c.kind == kindRC || c.kind == kindSRQ {
			rtr.MaxDestRdAtomic, rtr.MinRNRTimer = 1, 12
			rtrMask |= uverbs.QPAttrMaxDestRdAtomic | uverbs.QPAttrMinRNRTimer
			rts.Timeout, rts.RetryCnt, rts.RNRRetry, rts.MaxRdAtomic = 14, 7, 7, 1
			rtsMask |= uverbs.QPAttrTimeout | uverbs.QPAttrRetryCnt | uverbs.QPAttrRNRRetry | uverbs.QPAttrMaxQPRdAtomic
		}
		if err := qp.Modify(&rtr, rtrMask); err != nil {
			return p.fail(err, "Failed to modify %s to RTR", name(i))
		}
		if err := qp.Modify(&rts, rtsMask); err != nil {
			return p.fail(err, "Failed to modify %s to RTS", name(i))
		}
	}
	if c.kind == kindUD {
		ah, err := p.pd.CreateAH(p.av(remote[0], remote[0].GID))
		if err != nil {
			return p.fail(err, "Failed to create AH")
		}
		p.ah = ah
		w := &p.sendWRs[0][0]
		w.AH, w.RemoteQPN, w.RemoteQkey = ah, remote[0].QPN, udQkey
	}
	return nil
}

// exchange runs the TCP exchange in the role the command line gives.
func (p *pingpong) exchange(ctx context.Context) error {
	c := p.cfg
	if c.server != "" {
		conn, err := dial(ctx, c.server, c.tcpPort)
		if err != nil {
			return p.fail(err, "Couldn't connect to %s:%d", c.server, c.tcpPort)
		}
		defer conn.Close()
		if p.remote, err = clientExchange(ctx, conn, c.kind, p.local); err != nil {
			return p.fail(err, "Couldn't read/write remote address")
		}
		return nil
	}
	conn, err := listenAccept(ctx, c.tcpPort, p.ready)
	if err != nil {
		return p.fail(err, "Couldn't listen to port %d", c.tcpPort)
	}
	defer conn.Close()
	p.remote, err = serverExchange(ctx, conn, c.kind, p.local, p.connect)
	var f failure
	if errors.As(err, &f) {
		return p.fail(nil, "Couldn't connect to remote QP")
	}
	if err != nil {
		return p.fail(err, "Couldn't exchange addresses with the client")
	}
	return nil
}

// loop is the examples' main loop: wait for completions, count them,
// repost receives when few are left, and send again on a QP once both its
// send and its receive completed, until iters of each.
func (p *pingpong) loop(ctx context.Context) error {
	c := p.cfg
	nwc := 2
	if c.kind == kindSRQ {
		nwc = c.numQP + c.rxDepth
	}
	wcs := make([]uverbs.WC, nwc)
	refill := 1 // repost receives when this few are left
	if c.kind == kindSRQ {
		refill = c.numQP
	}
	routs := c.rxDepth
	rcnt, scnt := 0, 0
	for rcnt < c.iters || scnt < c.iters {
		if c.events {
			cq, err := p.channel.Wait(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return p.fail(context.Cause(ctx), "Failed to get cq_event")
				}
				return p.fail(err, "Failed to get cq_event")
			}
			p.numEvents++
			if cq != p.cq {
				return p.fail(nil, "CQ event for unknown CQ %p", cq)
			}
			if err := p.cq.RequestNotify(false); err != nil {
				return p.fail(err, "Couldn't request CQ notification")
			}
		}
		var ne int
		for spins := 0; ; spins++ {
			var err error
			if ne, err = p.cq.Poll(wcs); err != nil {
				return p.fail(err, "poll CQ failed")
			}
			if c.events || ne > 0 {
				break
			}
			// Busy polling, as the examples do, but not past the run's end.
			if spins&1023 == 1023 && ctx.Err() != nil {
				return p.fail(context.Cause(ctx), "poll CQ aborted")
			}
		}
		for i := 0; i < ne; i++ {
			wc := &wcs[i]
			if wc.Status != uverbs.WCSuccess {
				return p.fail(nil, "Failed status %s (%d) for wr_id %d", wc.Status, int(wc.Status), int(wc.ID))
			}
			qi := 0
			if c.kind == kindSRQ {
				if qi = p.findQP(wc.QPNum); qi < 0 {
					return p.fail(nil, "Couldn't find QPN %06x", wc.QPNum)
				}
			}
			switch wc.ID {
			case wridSend:
				scnt++
			case wridRecv:
				if routs--; routs <= refill {
					routs += p.postRecv(c.rxDepth - routs)
					if routs < c.rxDepth {
						return p.fail(nil, "Couldn't post receive (%d)", routs)
					}
				}
				rcnt++
			default:
				return p.fail(nil, "Completion for unknown wr_id %d", int(wc.ID))
			}
			p.pending[qi] &^= int(wc.ID)
			if scnt < c.iters && p.pending[qi] == 0 {
				if err := p.postSend(qi); err != nil {
					return p.fail(err, "Couldn't post send")
				}
				p.pending[qi] = wridRecv | wridSend
			}
		}
	}
	return nil
}

func (p *pingpong) findQP(qpn uint32) int {
	for i, qp := range p.qps {
		if qp.QPN() == qpn {
			return i
		}
	}
	return -1
}

// pageSize is the step of -c's pattern (sysconf(_SC_PAGESIZE) in C).
var pageSize = os.Getpagesize()

// checkOffset is where the payload starts in the buffer.
func (p *pingpong) checkOffset() int {
	if p.cfg.kind == kindUD {
		return udGRHBytes
	}
	return 0
}

// run is one side from start to end, main() of the examples.
func (p *pingpong) run(ctx context.Context) error {
	c := p.cfg
	if err := p.setup(); err != nil {
		return err
	}
	if routs := p.postRecv(c.rxDepth); routs < c.rxDepth {
		return p.fail(nil, "Couldn't post receive (%d)", routs)
	}
	if c.events {
		if err := p.cq.RequestNotify(false); err != nil {
			return p.fail(err, "Couldn't request CQ notification")
		}
	}
	if err := p.addresses(); err != nil {
		return err
	}
	if err := p.exchange(ctx); err != nil {
		return err
	}
	for _, d := range p.remote {
		fmt.Fprintf(p.stdout, "  remote address: LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s\n",
			d.LID, d.QPN, d.PSN, cli.InetNtop6(d.GID))
	}
	if c.server != "" {
		if err := p.connect(p.remote); err != nil {
			return err
		}
	}
	off := p.checkOffset()
	if c.server != "" {
		if c.check {
			// The examples write i / page_size % sizeof(char) at the
			// start of each page: always 0. Kept, so that a C server
			// checking our data (and a C client's data checked here)
			// agree.
			b := p.buf.Bytes()
			for i := 0; i < c.size; i += pageSize {
				b[off+i] = 0
			}
		}
		for i := range p.qps {
			if err := p.postSend(i); err != nil {
				return p.fail(err, "Couldn't post send")
			}
			p.pending[i] = wridRecv | wridSend
		}
	} else {
		for i := range p.pending {
			p.pending[i] = wridRecv
		}
	}
	start := time.Now()
	if err := p.loop(ctx); err != nil {
		return err
	}
	end := time.Now()

	// The examples keep the microseconds in a float and divide in float
	// (usec / iters) or double (the rest); so does this, to print the same.
	usec := float32(end.UnixMicro() - start.UnixMicro())
	bytes := int64(c.size) * int64(c.iters) * 2
	fmt.Fprintf(p.stdout, "%d bytes in %s seconds = %s Mbit/sec\n",
		bytes, cFixed2(float64(usec)/1e6), cFixed2(float64(bytes)*8/float64(usec)))
	fmt.Fprintf(p.stdout, "%d iters in %s seconds = %s usec/iter\n",
		c.iters, cFixed2(float64(usec)/1e6), cFixed2(float64(usec/float32(c.iters))))
	if c.server == "" && c.check {
		b := p.buf.Bytes()
		for i := 0; i < c.size; i += pageSize {
			if b[off+i] != 0 {
				fmt.Fprintf(p.stdout, "invalid data in page %d\n", i/pageSize)
			}
		}
	}
	return nil
}

// close is pp_close_ctx: everything, in dependency order; the first
// failure is reported.
func (p *pingpong) close() error {
	var first error
	step := func(err error, what string) {
		if err != nil && first == nil {
			first = p.fail(err, "Couldn't %s", what)
		}
	}
	if p.numEvents > 0 && p.cq != nil {
		// ibv_ack_cq_events before the CQ goes: every event Wait returned.
		p.cq.AckEvents(p.numEvents)
		p.numEvents = 0
	}
	for i, qp := range p.qps {
		step(qp.Close(), fmt.Sprintf("destroy QP[%d]", i))
	}
	if p.srq != nil {
		step(p.srq.Close(), "destroy SRQ")
	}
	if p.cq != nil {
		step(p.cq.Close(), "destroy CQ")
	}
	if p.mr != nil {
		step(p.mr.Close(), "deregister MR")
	}
	if p.buf != nil {
		step(p.buf.Close(), "free the work buffer")
	}
	if p.ah != nil {
		step(p.ah.Close(), "destroy AH")
	}
	if p.pd != nil {
		step(p.pd.Close(), "deallocate PD")
	}
	if p.channel != nil {
		step(p.channel.Close(), "destroy completion channel")
	}
	if p.dev != nil {
		step(p.dev.Close(), "release context")
	}
	return first
}
