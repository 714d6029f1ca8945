package rxe

import (
	"unsafe"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/transport"
)

// NewQP implements provider.QPContext. The kernel rejects driver input on
// rxe's CREATE_QP, so the request is empty; the answer says where the send
// and receive queues are.
func (c *context) NewQP(init provider.QPInit) (provider.QP, error) {
	switch init.Type {
	case abi.QPTypeRC, abi.QPTypeUC, abi.QPTypeUD:
	case abi.QPTypeXRCIni:
		return nil, transport.NotSupported("rxe: XRC_SEND QPs are not supported")
	case abi.QPTypeXRCTgt:
		return nil, transport.NotSupported("rxe: XRC_RECV QPs are not supported")
	case abi.QPTypeRawPacket:
		return nil, transport.NotSupported("rxe: RAW_PACKET QPs are not supported")
	default:
		return nil, transport.NotSupported("rxe: QP type %d", init.Type)
	}
	q := &qp{}
	q.sendQueue.life = c.life
	return q, nil
}

// qp is rxe's queue pair: kernel send and receive rings mapped into the
// process.
type qp struct {
	resp abi.RXECreateQPResp
	link tracked // in the context's list of mapped objects
	sendQueue
	recvQueue // q nil with an SRQ
}

// CreateData implements provider.QP.
func (q *qp) CreateData() (in, out []byte) {
	return nil, unsafe.Slice((*byte)(unsafe.Pointer(&q.resp)), unsafe.Sizeof(q.resp))
}

// Created implements provider.QP.
func (q *qp) Created(conn *transport.Conn, handle, qpn uint32, caps provider.QPInit) error {
	var sq, rq *queue
	err := conn.UseFD(func(fd int) (err error) {
		if sq, err = mapQueue(fd, q.resp.SQMI, sendWQESize); err != nil {
			return err
		}
		if !caps.HasSRQ && q.resp.RQMI.Size != 0 {
			if rq, err = mapQueueBelow(fd, q.resp.RQMI, recvWQESize, sq); err != nil {
				sq.unmap()
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Never trust the capabilities beyond what a slot can hold.
	room := sq.elemSize - sendWQESize
	q.sendQueue.q = sq
	q.sendQueue.fd = conn.FD()
	q.sendQueue.qpType = caps.Type
	q.sendQueue.maxSGE = min(int(caps.MaxSendSGE), room/sgeSize)
	q.sendQueue.maxInline = min(int(caps.MaxInlineData), room)
	q.sendQueue.db.init(handle)
	q.recvQueue.srq = caps.HasSRQ
	if rq != nil {
		q.recvQueue.q = rq
		q.recvQueue.maxSGE = min(int(caps.MaxRecvSGE), (rq.elemSize-recvWQESize)/sgeSize)
	}
	if !q.sendQueue.life.track(&q.link, q) {
		// Closing: uverbs unmaps the queues (Destroyed) and destroys it.
		return provider.ErrClosed
	}
	return nil
}

// Destroyed implements provider.QP.
func (q *qp) Destroyed() error {
	q.sendQueue.life.untrack(&q.link)
	q.sendQueue.mu.Lock()
	q.recvQueue.mu.Lock()
	err := unmapPair(q.sendQueue.q, q.recvQueue.q)
	q.sendQueue.q, q.recvQueue.q = nil, nil
	q.recvQueue.mu.Unlock()
	q.sendQueue.mu.Unlock()
	return err
}
