package mlx5

import "github.com/goverbs/goverbs/internal/provider"

// A completion names its work queue only by number (the QPN, or the SRQ's
// number) and a WQE counter; these interfaces are how a CQ reaches the
// queue to learn the work request's ID and retire it. QP and SRQ creation
// attach the queues to their CQs; poll never allocates or locks anything
// but the CQ.

// sendCompleter is what a CQ needs from a QP's send queue.
type sendCompleter interface {
	// completeSend retires the send WQEs up to and including the one whose
	// WQE counter (the one its control segment carried) is wqeCounter:
	// the earlier unsignaled ones complete with it. It returns that WQE's
	// wr_id and, for WQEs whose CQE does not tell what they were (UMR
	// posts such as LOCAL_INV and BIND_MW, NOP), the completion opcode
	// recorded at post.
	//
	// inline, when not nil, is data the HCA scattered into the CQE (a
	// small RDMA READ or atomic response, with scatter-to-CQE): it belongs
	// in that WQE's local scatter list; status reports a list too short
	// for it (IBV_WC_LOC_LEN_ERR), else WCSuccess.
	//
	// ok is false when no WQE with that counter is outstanding: the CQE is
	// corrupt or stale, and nothing is retired.
	completeSend(wqeCounter uint16, inline []byte) (wrID uint64, opcode provider.WCOpcode, status provider.WCStatus, ok bool)
}

// recvCompleter is what a CQ needs from a receive queue: a QP's RQ, which
// completes in order and ignores the counter, or an SRQ, which completes
// the WQE at wqeCounter and frees that slot.
type recvCompleter interface {
	// completeRecv retires the receive WQE and returns its wr_id. inline,
	// when not nil, is the payload the HCA scattered into the CQE (scatter
	// to CQE): it is copied into the WQE's scatter list; status reports a
	// list too short for it (IBV_WC_LOC_LEN_ERR), else WCSuccess. ok is
	// false when the queue has no such WQE outstanding (empty RQ, SRQ slot
	// out of range or free): nothing is retired.
	completeRecv(wqeCounter uint16, inline []byte) (wrID uint64, status provider.WCStatus, ok bool)
}

// rxCSummer is implemented by receive queues whose completions report
// the HCA's IP checksum validation: libmlx5's MLX5_RX_CSUM_VALID, which it
// sets on a raw packet QP brought up on an Ethernet port of a device with
// IBV_DEVICE_RAW_IP_CSUM. It is asked on every receive completion of the
// QP's own RQ (never of an SRQ, as libmlx5), so it may change after
// attach.
type rxCSummer interface{ rxCSumValid() bool }

// cqLink is one QP's entry in a CQ's table.
type cqLink struct {
	qpn   uint32
	send  sendCompleter // nil when the CQ is only the QP's receive CQ
	sq    *sendQueue    // send, when it is a QP's send queue (Poll inlines its completeSend)
	recv  recvCompleter // the RQ, the QP's SRQ, or nil (send CQ only)
	rxSum rxCSummer     // the RQ, when it reports checksums
}

// attach makes the CQ deliver completions of QP qpn: s is its send queue
// when this is its send CQ (else nil), r its receive queue (the SRQ when
// it has one) when this is its receive CQ (else nil). A QP whose send and
// receive CQ are the same CQ attaches once with both. Attaching a QPN
// twice is an error.
func (cq *CQ) attach(qpn uint32, s sendCompleter, r recvCompleter) error {
	if qpn > maxQPN {
		return &FieldError{Field: "qpn", Value: uint64(qpn), Reason: "beyond 24 bits"}
	}
	cq.mu.LockExcl()
	defer cq.mu.UnlockExcl()
	if cq.qps == nil {
		cq.qps = make(map[uint32]*cqLink)
	}
	if _, dup := cq.qps[qpn]; dup {
		return &FieldError{Field: "qpn", Value: uint64(qpn), Reason: "already attached to this CQ"}
	}
	l := &cqLink{qpn: qpn, send: s, recv: r}
	l.sq, _ = s.(*sendQueue)
	l.rxSum, _ = r.(rxCSummer)
	cq.qps[qpn] = l
	return nil
}

// detach stops the CQ delivering completions of QP qpn and, as libmlx5
// does when a QP is destroyed, removes its completions still in the ring
// so that a later poll does not meet a QPN it no longer knows (SRQ WQEs
// they consumed are given back through the SRQ's completeRecv).
func (cq *CQ) detach(qpn uint32) {
	cq.mu.LockExcl()
	defer cq.mu.UnlockExcl()
	l := cq.qps[qpn]
	if l == nil {
		return
	}
	cq.clean(l)
	delete(cq.qps, qpn)
	if cq.last == l {
		cq.last = nil
	}
}

// cleanQP removes QP qpn's completions from the ring, as libmlx5's
// mlx5_modify_qp does when it moves a QP to RESET (mlx5_cq_clean); the QP
// stays attached.
func (cq *CQ) cleanQP(qpn uint32) {
	cq.mu.LockExcl()
	defer cq.mu.UnlockExcl()
	if l := cq.qps[qpn]; l != nil {
		cq.clean(l)
	}
}

// attachSRQ makes the CQ deliver receive completions that name no QP it
// knows but carry n in the CQE's srqn_uidx field: an XRC SRQ (whose
// completions name the XRC target QP). Under CQE version 1 n is the SRQ's
// user index.
func (cq *CQ) attachSRQ(n uint32, r recvCompleter) error {
	if n > maxQPN {
		return &FieldError{Field: "srqn", Value: uint64(n), Reason: "beyond 24 bits"}
	}
	cq.mu.LockExcl()
	defer cq.mu.UnlockExcl()
	if cq.srqs == nil {
		cq.srqs = make(map[uint32]recvCompleter)
	}
	if _, dup := cq.srqs[n]; dup {
		return &FieldError{Field: "srqn", Value: uint64(n), Reason: "already attached to this CQ"}
	}
	cq.srqs[n] = r
	return nil
}

// detachSRQ undoes attachSRQ.
func (cq *CQ) detachSRQ(n uint32) {
	cq.mu.LockExcl()
	defer cq.mu.UnlockExcl()
	delete(cq.srqs, n)
}
