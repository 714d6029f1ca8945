package rxe

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/transport"
)

// NewCQ implements provider.CQContext.
func (c *context) NewCQ(cqe int) (provider.CQ, error) { return &cq{life: c.life}, nil }

// cq is rxe's completion queue: a kernel ring of struct ib_uverbs_wc
// entries mapped into the process.
type cq struct {
	resp   abi.RXECreateCQResp
	resize abi.RXEResizeCQResp
	link   tracked // in the context's list of mapped objects

	life *lifetime
	mu   sync.Mutex
	q    *queue
	cons uint32 // ours: the kernel ignores what we would read back
}

// CreateData implements provider.CQ: no request, the mmap info back.
func (c *cq) CreateData() (in, out []byte) {
	return nil, unsafe.Slice((*byte)(unsafe.Pointer(&c.resp)), unsafe.Sizeof(c.resp))
}

// Created implements provider.CQ.
func (c *cq) Created(conn *transport.Conn, handle uint32, cqe int) error {
	var q *queue
	err := conn.UseFD(func(fd int) (err error) {
		q, err = mapQueue(fd, c.resp.MI, int(unsafe.Sizeof(abi.WC{})))
		return err
	})
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.q = q
	c.cons = atomic.LoadUint32(&q.hdr.ConsumerIndex) & q.mask
	c.mu.Unlock()
	if !c.life.track(&c.link, c) {
		// Closing: uverbs unmaps the queues (Destroyed) and destroys it.
		return provider.ErrClosed
	}
	return nil
}

// Destroyed implements provider.CQ.
func (c *cq) Destroyed() error {
	c.life.untrack(&c.link)
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.q.unmap()
	c.q = nil
	return err
}

// Resize implements provider.CQResizer. The lock is held across the
// command: the kernel copies the completions past the consumer index we
// published into the new queue, so a poll of the old ring in between would
// deliver them twice.
func (c *cq) Resize(conn *transport.Conn, send func(in, out []byte) (int, error)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.q == nil {
		return provider.ErrClosed
	}
	c.resize = abi.RXEResizeCQResp{}
	if _, err := send(nil, unsafe.Slice((*byte)(unsafe.Pointer(&c.resize)), unsafe.Sizeof(c.resize))); err != nil {
		return err
	}
	var q *queue
	err := conn.UseFD(func(fd int) (err error) {
		q, err = mapQueue(fd, c.resize.MI, int(unsafe.Sizeof(abi.WC{})))
		return err
	})
	if err != nil {
		// The kernel switched queues; without the new one the CQ is lost.
		c.q.unmap()
		c.q = nil
		return err
	}
	c.q.unmap()
	c.q = q
	c.cons = atomic.LoadUint32(&q.hdr.ConsumerIndex) & q.mask
	return nil
}
