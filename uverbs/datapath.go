package uverbs

import (
	"fmt"

	"github.com/goverbs/goverbs/internal/provider"
)

// The data path types. They live in a package every provider shares; these
// names are the API.
type (
	SGE       = provider.SGE
	SendWR    = provider.SendWR
	RecvWR    = provider.RecvWR
	WC        = provider.WC
	WROpcode  = provider.WROpcode
	SendFlags = provider.SendFlags
	WCStatus  = provider.WCStatus
	WCOpcode  = provider.WCOpcode
	WCFlags   = provider.WCFlags
	BindMW    = provider.BindMW
	// PostError says which work request of a list was refused; none of the
	// list was posted.
	PostError = provider.PostError
)

// Send opcodes.
const (
	WRRDMAWrite         = provider.WRRDMAWrite
	WRRDMAWriteWithImm  = provider.WRRDMAWriteWithImm
	WRSend              = provider.WRSend
	WRSendWithImm       = provider.WRSendWithImm
	WRRDMARead          = provider.WRRDMARead
	WRAtomicCmpAndSwp   = provider.WRAtomicCmpAndSwp
	WRAtomicFetchAndAdd = provider.WRAtomicFetchAndAdd
	WRLocalInv          = provider.WRLocalInv
	WRBindMW            = provider.WRBindMW
	WRSendWithInv       = provider.WRSendWithInv
)

// Send flags.
const (
	SendFence     = provider.SendFence
	SendSignaled  = provider.SendSignaled
	SendSolicited = provider.SendSolicited
	SendInline    = provider.SendInline
)

// Completion statuses and opcodes most programs check.
const (
	WCSuccess         = provider.WCSuccess
	WCLocLenErr       = provider.WCLocLenErr
	WCLocQPOpErr      = provider.WCLocQPOpErr
	WCLocProtErr      = provider.WCLocProtErr
	WCWRFlushErr      = provider.WCWRFlushErr
	WCRemInvReqErr    = provider.WCRemInvReqErr
	WCRemOpErr        = provider.WCRemOpErr
	WCRNRRetryExcErr  = provider.WCRNRRetryExcErr
	WCRemAccessErr    = provider.WCRemAccessErr
	WCRetryExcErr     = provider.WCRetryExcErr
	WCSend            = provider.WCSend
	WCRDMAWrite       = provider.WCRDMAWrite
	WCRDMARead        = provider.WCRDMARead
	WCCompSwap        = provider.WCCompSwap
	WCFetchAdd        = provider.WCFetchAdd
	WCBindMW          = provider.WCBindMW
	WCLocalInv        = provider.WCLocalInv
	WCRecv            = provider.WCRecv
	WCRecvRDMAWithImm = provider.WCRecvRDMAWithImm
	WCWithImm         = provider.WCWithImm
	WCWithInvalidate  = provider.WCWithInvalidate
	WCWithGRH         = provider.WCWithGRH
)

// Data path errors (match with errors.Is).
var (
	ErrQueueFull      = provider.ErrQueueFull
	ErrTooManySGE     = provider.ErrTooManySGE
	ErrInlineTooLarge = provider.ErrInlineTooLarge
	ErrBadWR          = provider.ErrBadWR
	// ErrQPState: the QP's state does not allow the post.
	ErrQPState = fmt.Errorf("uverbs: QP state does not allow posting")
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
			if ah, ok := wrs[i].AH.(*AH); ok && ah != nil && ah.pd != qp.pd && ah.pd.ctx == qp.pd.ctx {
				return &PostError{Index: i, Err: ErrBadWR}
			}
		}
	}
	if err := qp.send.PostSend(wrs); err != nil {
		return qp.pd.ctx.removedErr(err)
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
	if err := qp.recv.PostRecv(wrs); err != nil {
		return qp.pd.ctx.removedErr(err)
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
	if err := r.PostRecv(wrs); err != nil {
		return s.pd.ctx.removedErr(err)
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
	n, err := cq.poll.Poll(wcs)
	if err != nil {
		return n, cq.ctx.removedErr(err)
	}
	return n, nil
}
