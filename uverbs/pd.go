package uverbs

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/transport"
)

// PD is a protection domain: the objects created in it (MRs, QPs, AHs,
// SRQs) can only be used together.
type PD struct {
	ctx    *Context
	handle uint32

	mu     sync.Mutex
	closed bool
	ref    *cleanupRef
}

// cleanupRef lets a forgotten object's cleanup tell whether Close ran.
type cleanupRef struct {
	mu   sync.Mutex
	done bool
}

func (r *cleanupRef) finish() (first bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	first = !r.done
	r.done = true
	return first
}

// AllocPD allocates a protection domain.
func (c *Context) AllocPD() (*PD, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	req := abi.AllocPD{}
	var resp abi.AllocPDResp
	if err := c.conn.Write("alloc_pd", &transport.Write{
		Cmd: abi.CmdAllocPD, In: asBytes(&req), CoreIn: int(unsafe.Sizeof(req)),
		Out: asBytes(&resp), CoreOut: int(unsafe.Sizeof(resp)),
	}); err != nil {
		return nil, err
	}
	pd := &PD{ctx: c, handle: resp.PDHandle, ref: &cleanupRef{}}
	// A PD the program forgot is destroyed when it becomes unreachable.
	runtime.AddCleanup(pd, func(a destroyArgs) { a.run() }, destroyArgs{c, pd.ref, destroyPD, resp.PDHandle, parents{}})
	return pd, nil
}

// Handle returns the kernel's handle of the PD.
func (pd *PD) Handle() uint32 { return pd.handle }

// Context returns the context the PD belongs to.
func (pd *PD) Context() *Context { return pd.ctx }

// Close deallocates the PD. The kernel refuses (EBUSY) while objects
// created in it still exist; the PD then stays usable. Closing twice, or
// after the context was closed, is a no-op.
func (pd *PD) Close() error {
	if pd == nil {
		return nil
	}
	pd.mu.Lock()
	defer pd.mu.Unlock()
	if pd.closed || pd.ctx.isClosed() {
		pd.closed = true
		return nil
	}
	if err := pd.ctx.destroyErr(destroyPD(pd.ctx, pd.handle)); err != nil {
		return err
	}
	pd.closed = true
	pd.ref.finish()
	return nil
}

func (pd *PD) use() error {
	if pd == nil {
		return invalid("PD", "nil PD")
	}
	pd.mu.Lock()
	defer pd.mu.Unlock()
	if pd.closed {
		return fmt.Errorf("uverbs: PD %d: %w", pd.handle, ErrClosed)
	}
	return pd.ctx.check()
}

// destroyArgs is what a cleanup needs to destroy a forgotten kernel object
// without referring to the object itself.
type destroyArgs struct {
	ctx     *Context
	ref     *cleanupRef
	destroy func(*Context, uint32) error
	handle  uint32
	parents // an MW's or AH's PD
}

// parents keeps a forgotten object's parents (its PD, CQs, SRQ, domain)
// reachable until its own cleanup has run: objects dropped together become
// unreachable in the same cycle, and their cleanups run in any order, so
// a parent's could otherwise come first and be refused (EBUSY: the child
// still uses it), leaving it in the kernel until the context closes.
type parents struct {
	pd     *PD
	cq     *CQ // an XRC SRQ's CQ, a QP's send CQ
	recvCQ *CQ
	srq    *SRQ
	xrcd   *XRCD
}

func (a destroyArgs) run() {
	if !a.ref.finish() || a.ctx.isClosed() {
		return
	}
	// Errors have nowhere to go; the kernel frees everything with the
	// context in any case.
	_ = a.destroy(a.ctx, a.handle)
}
