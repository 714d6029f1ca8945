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
func (*context) NewQP(init provider.QPInit) (provider.QP, error) {
	switch init.Type {
	case abi.QPTypeRC, abi.QPTypeUC, abi.QPTypeUD:
	default:
		return nil, transport.NotSupported("rxe: QP type %d", init.Type)
	}
	return &qp{}, nil
}

// qp is rxe's queue pair: kernel send and receive rings mapped into the
// process.
type qp struct {
	resp abi.RXECreateQPResp
	sq   *queue
	rq   *queue // nil with an SRQ
}

// CreateData implements provider.QP.
func (q *qp) CreateData() (in, out []byte) {
	return nil, unsafe.Slice((*byte)(unsafe.Pointer(&q.resp)), unsafe.Sizeof(q.resp))
}

// Created implements provider.QP.
func (q *qp) Created(conn *transport.Conn, handle, qpn uint32, caps provider.QPInit) error {
	sq, err := mapQueue(conn.FD(), q.resp.SQMI, int(unsafe.Sizeof(abi.RXESendWQE{})))
	if err != nil {
		return err
	}
	q.sq = sq
	if !caps.HasSRQ && q.resp.RQMI.Size != 0 {
		rq, err := mapQueue(conn.FD(), q.resp.RQMI, int(unsafe.Sizeof(abi.RXERecvWQE{})))
		if err != nil {
			sq.unmap()
			q.sq = nil
			return err
		}
		q.rq = rq
	}
	return nil
}

// Destroyed implements provider.QP.
func (q *qp) Destroyed() error {
	err := q.sq.unmap()
	if err2 := q.rq.unmap(); err == nil {
		err = err2
	}
	return err
}
