package rxe

import (
	"unsafe"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/transport"
)

// NewCQ implements provider.CQContext.
func (*context) NewCQ(cqe int) (provider.CQ, error) { return &cq{}, nil }

// cq is rxe's completion queue: a kernel ring of struct ib_uverbs_wc
// entries mapped into the process.
type cq struct {
	resp abi.RXECreateCQResp
	q    *queue
}

// CreateData implements provider.CQ: no request, the mmap info back.
func (c *cq) CreateData() (in, out []byte) {
	return nil, unsafe.Slice((*byte)(unsafe.Pointer(&c.resp)), unsafe.Sizeof(c.resp))
}

// Created implements provider.CQ.
func (c *cq) Created(conn *transport.Conn, handle uint32, cqe int) error {
	q, err := mapQueue(conn.FD(), c.resp.MI, int(unsafe.Sizeof(abi.WC{})))
	if err != nil {
		return err
	}
	c.q = q
	return nil
}

// Destroyed implements provider.CQ.
func (c *cq) Destroyed() error { return c.q.unmap() }
