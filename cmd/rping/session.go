package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/goverbs/goverbs/uverbs"
)

// Work request IDs: which buffer a completion is about.
const (
	wrRecv uint64 = iota + 1
	wrSend
	wrRDMA
)

// errFlushed is a completion flushed by the QP's move to the error state:
// the connection is going away (rping's cq thread ends quietly on it).
var errFlushed = errors.New("work request flushed")

// cqError is a completion that failed: rping's "cq completion failed
// status %d".
type cqError struct{ status uverbs.WCStatus }

func (e *cqError) Error() string { return fmt.Sprintf("cq completion failed status %d", e.status) }

// session is one connection's verbs resources, as rping sets them up
// (rping_setup_qp, rping_setup_buffers): a PD, a completion channel and a
// CQ of 2*sqDepth entries shared by both queues, and four registered
// buffers: recv (16 bytes, LOCAL_WRITE), send (16 bytes), rdma (size bytes,
// the server's sink and the client's echo buffer) and, on the client,
// start (size bytes, the ping the server reads).
type session struct {
	pd *uverbs.PD
	ch *uverbs.CompChannel
	cq *uverbs.CQ
	qp *uverbs.QP // created on the CM ID (or by the session with -q)

	mem                           *uverbs.Buffer
	recvMR, sendMR, rdmaMR, start *uverbs.MR
	wcs                           [1]uverbs.WC
}

// Offsets in mem: the 16-byte messages, then the two data buffers.
const (
	offRecv = 0
	offSend = infoSize
	offRDMA = 2 * infoSize
)

// newSession allocates the PD, CQ and buffers on dev; client adds the
// start buffer.
func newSession(dev *uverbs.Context, size int, client bool) (s *session, err error) {
	s = &session{}
	defer func() {
		if err != nil {
			s.close()
			s = nil
		}
	}()
	if s.pd, err = dev.AllocPD(); err != nil {
		return s, fmt.Errorf("ibv_alloc_pd failed: %w", err)
	}
	if s.ch, err = dev.NewCompChannel(); err != nil {
		return s, fmt.Errorf("ibv_create_comp_channel failed: %w", err)
	}
	if s.cq, err = dev.CreateCQ(2*sqDepth, &uverbs.CQOptions{Channel: s.ch}); err != nil {
		return s, fmt.Errorf("ibv_create_cq failed: %w", err)
	}
	total := offRDMA + 2*size
	if s.mem, err = uverbs.AllocBuffer(total); err != nil {
		return s, fmt.Errorf("rdma_buf malloc failed: %w", err)
	}
	remote := uverbs.AccessLocalWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteWrite
	if s.recvMR, err = s.pd.RegisterBuffer(s.mem, offRecv, infoSize, uverbs.AccessLocalWrite); err != nil {
		return s, fmt.Errorf("recv_buf reg_mr failed: %w", err)
	}
	if s.sendMR, err = s.pd.RegisterBuffer(s.mem, offSend, infoSize, 0); err != nil {
		return s, fmt.Errorf("send_buf reg_mr failed: %w", err)
	}
	if s.rdmaMR, err = s.pd.RegisterBuffer(s.mem, offRDMA, size, remote); err != nil {
		return s, fmt.Errorf("rdma_buf reg_mr failed: %w", err)
	}
	if client {
		if s.start, err = s.pd.RegisterBuffer(s.mem, offRDMA+size, size, remote); err != nil {
			return s, fmt.Errorf("start_buf reg_mr failed: %w", err)
		}
	}
	return s, nil
}

// qpInitAttr is rping_create_qp's QP: RC, 16 sends, 2 receives, one SGE
// each, both queues on the session's CQ.
func (s *session) qpInitAttr() uverbs.QPInitAttr {
	return uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: s.cq, RecvCQ: s.cq,
		Cap: uverbs.QPCap{MaxSendWr: sqDepth, MaxRecvWr: 2, MaxSendSGE: 1, MaxRecvSGE: 1}}
}

func (s *session) recvBuf() []byte { return s.recvMR.Bytes() }
func (s *session) rdmaBuf() []byte { return s.rdmaMR.Bytes() }
func (s *session) startBuf() []byte {
	return s.start.Bytes()
}

// postRecv posts the one receive rping keeps posted.
func (s *session) postRecv() error {
	return s.qp.PostRecv([]uverbs.RecvWR{{ID: wrRecv, SGL: []uverbs.SGE{{Addr: s.recvMR.Addr(), Length: infoSize, Lkey: s.recvMR.Lkey()}}}})
}

// sendInfo SENDs the advertisement of mr (rping_format_send): its address,
// rkey and the ping size.
func (s *session) sendInfo(mr *uverbs.MR, size int) error {
	info{Addr: mr.Addr(), Rkey: mr.Rkey(), Size: uint32(size)}.marshal(s.sendMR.Bytes())
	return s.sendGoAhead()
}

// sendGoAhead SENDs the send buffer as it is (the server's "go ahead": its
// send buffer is never filled, only the length matters).
func (s *session) sendGoAhead() error {
	return s.qp.PostSend([]uverbs.SendWR{{ID: wrSend, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{{Addr: s.sendMR.Addr(), Length: infoSize, Lkey: s.sendMR.Lkey()}}}})
}

// rdma posts an RDMA READ or WRITE of n bytes between the rdma buffer and
// the peer's advertised buffer.
func (s *session) rdma(op uverbs.WROpcode, peer info, n int) error {
	return s.qp.PostSend([]uverbs.SendWR{{ID: wrRDMA, Opcode: op, Flags: uverbs.SendSignaled,
		SGL:        []uverbs.SGE{{Addr: s.rdmaMR.Addr(), Length: uint32(n), Lkey: s.rdmaMR.Lkey()}},
		RemoteAddr: peer.Addr, Rkey: peer.Rkey}})
}

// next returns the next completion other than a SEND's, as rping's cq
// thread hands on receives and RDMA completions: a receive's message is
// read into the returned info and the receive re-posted. It parks on the
// completion channel while the CQ is empty, until ctx ends.
func (s *session) next(ctx context.Context) (uverbs.WC, info, error) {
	for {
		if _, err := s.cq.Wait(ctx, s.wcs[:]); err != nil {
			return uverbs.WC{}, info{}, err
		}
		wc := s.wcs[0]
		switch {
		case wc.Status == uverbs.WCWRFlushErr:
			return wc, info{}, errFlushed
		case wc.Status != uverbs.WCSuccess:
			return wc, info{}, &cqError{wc.Status}
		case wc.Opcode == uverbs.WCSend:
			continue
		case wc.Opcode == uverbs.WCRecv:
			var in info
			if wc.ByteLen == infoSize {
				in, _ = parseInfo(s.recvBuf(), int(wc.ByteLen))
			}
			if err := s.postRecv(); err != nil {
				return wc, in, fmt.Errorf("post recv error: %w", err)
			}
			if wc.ByteLen != infoSize {
				return wc, in, fmt.Errorf("Received bogus data, size %d", wc.ByteLen)
			}
			return wc, in, nil
		}
		return wc, info{}, nil
	}
}

// close frees everything but the QP (the CM ID's, destroyed with it, or
// closed by the caller first).
func (s *session) close() error {
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	for _, mr := range []*uverbs.MR{s.start, s.rdmaMR, s.sendMR, s.recvMR} {
		if mr != nil {
			keep(mr.Close())
		}
	}
	if s.mem != nil {
		keep(s.mem.Close())
	}
	if s.cq != nil {
		keep(s.cq.Close())
	}
	if s.ch != nil {
		keep(s.ch.Close())
	}
	if s.pd != nil {
		keep(s.pd.Close())
	}
	return first
}
