package uverbs

import (
	"fmt"

	"github.com/goverbs/goverbs/internal/provider"
)

// PostSend posts a list of send work requests with one doorbell. Either
// all are queued or none is (the error, a *PostError, names the first
// refused). The QP must be in RTS (or SQD, SQE, ERR, where requests are
// flushed). Safe for concurrent use; allocates nothing.
func (qp *QP) PostSend(wrs []SendWR) error {
	if qp == nil {
		return errNilQP
	}
	switch QPState(qp.stateA.Load()) {
	case QPStateReset, QPStateInit, QPStateRTR:
		return fmt.Errorf("uverbs: post_send on QP %d in %v: %w", qp.qpn, QPState(qp.stateA.Load()), ErrQPState)
	}
	if qp.send == nil {
		return fmt.Errorf("uverbs: post_send: %s provider: %w", qp.pd.ctx.prov.Name(), ErrNotSupported)
	}
	if qp.typ == QPTypeUD {
		for i := range wrs {
			// An AH of another PD of the context: the kernel takes the
			// WR and fails it later in a completion; refuse it now.
			if ah := wrs[i].AH; ah != nil && ah.pd != qp.pd && ah.pd.ctx == qp.pd.ctx {
				return &PostError{Index: i, Err: ErrBadWR}
			}
		}
	}
	if err := qp.send.PostSend(sendWRs(wrs)); err != nil {
		return qp.pd.ctx.removedErr(postErr(err))
	}
	return nil
}

// PostRecv posts receive work requests (no system call). Not in RESET, as
// the IB spec says (C10-97.2.1).
func (qp *QP) PostRecv(wrs []RecvWR) error {
	if qp == nil {
		return errNilQP
	}
	if QPState(qp.stateA.Load()) == QPStateReset {
		return fmt.Errorf("uverbs: post_recv on QP %d in RESET: %w", qp.qpn, ErrQPState)
	}
	if qp.recv == nil {
		return fmt.Errorf("uverbs: post_recv: %s provider: %w", qp.pd.ctx.prov.Name(), ErrNotSupported)
	}
	if err := qp.recv.PostRecv(recvWRs(wrs)); err != nil {
		return qp.pd.ctx.removedErr(postErr(err))
	}
	return nil
}

// PostRecv posts receive work requests to the SRQ.
func (s *SRQ) PostRecv(wrs []RecvWR) error {
	if s == nil {
		return errNilSRQ
	}
	r, ok := s.prov.(provider.Receiver)
	if !ok {
		return fmt.Errorf("uverbs: post_srq_recv: %w", ErrNotSupported)
	}
	if err := r.PostRecv(recvWRs(wrs)); err != nil {
		return s.pd.ctx.removedErr(postErr(err))
	}
	return nil
}

// Poll moves up to len(wcs) completions into wcs and returns how many (no
// system call, no allocation).
func (cq *CQ) Poll(wcs []WC) (int, error) {
	if cq == nil {
		return 0, errNilCQ
	}
	if cq.poll == nil {
		return 0, fmt.Errorf("uverbs: poll_cq: %w", ErrNotSupported)
	}
	n, err := cq.poll.Poll(provWCs(wcs))
	if err != nil {
		return n, cq.ctx.removedErr(err)
	}
	return n, nil
}
