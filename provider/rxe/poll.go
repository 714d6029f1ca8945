package rxe

import (
	"math/bits"
	"sync/atomic"
	"unsafe"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
)

// The kernel fills user CQEs with its own enum ib_wc_flags, which number
// the flags differently from libibverbs.
const (
	kernelWCGRH            = 1 << 0
	kernelWCWithImm        = 1 << 1
	kernelWCWithInvalidate = 1 << 2
	kernelWCIPCSumOK       = 1 << 3
)

// Poll implements provider.Poller: copy out what the kernel produced and
// publish the new consumer index once.
func (c *cq) Poll(wcs []provider.WC) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.q
	if q == nil {
		return 0, provider.ErrClosed
	}
	if len(wcs) == 0 {
		return 0, nil
	}
	// Both indices are masked: a corrupt header cannot send us outside
	// the ring.
	prod := atomic.LoadUint32(&q.hdr.ProducerIndex) & q.mask
	cons := c.cons & q.mask
	n := 0
	for n < len(wcs) && cons != prod {
		k := (*abi.WC)(unsafe.Pointer(&q.slot(cons)[0]))
		w := &wcs[n]
		w.ID = k.WRID
		w.Status = provider.WCStatus(k.Status)
		w.Opcode = provider.WCOpcode(k.Opcode)
		w.VendorErr = k.VendorErr
		w.ByteLen = k.ByteLen
		w.QPNum = k.QPNum
		w.SrcQP = k.SrcQP
		w.PkeyIndex = k.PkeyIndex
		w.SLID = k.SLID
		w.SL = k.SL
		w.DLIDPathBits = k.DLIDPathBits
		var f provider.WCFlags
		if k.WCFlags&kernelWCGRH != 0 {
			f |= provider.WCWithGRH
		}
		w.Imm = 0
		if k.WCFlags&kernelWCWithImm != 0 {
			f |= provider.WCWithImm
			w.Imm = bits.ReverseBytes32(k.Ex)
		}
		if k.WCFlags&kernelWCWithInvalidate != 0 {
			f |= provider.WCWithInvalidate
			w.Imm = k.Ex
		}
		if k.WCFlags&kernelWCIPCSumOK != 0 {
			f |= provider.WCIPCSumOK
		}
		w.Flags = f
		cons = (cons + 1) & q.mask
		n++
	}
	if n > 0 {
		c.cons = cons
		atomic.StoreUint32(&q.hdr.ConsumerIndex, cons)
	}
	return n, nil
}
