package mlx5

import (
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/transport"
)

// A UAR (user access region) is a page of device registers mapped into the
// process: at 0x20 the CQ doorbell, at 0x800 two BlueFlame registers
// ("bfregs") of bf_reg_size bytes each, through which a send queue's
// doorbell is rung (an 8-byte write of the first WQE's control segment) or
// a whole small WQE is written (BlueFlame: the HCA need not read it from
// memory). Each BlueFlame register has two halves used alternately, so a
// write-combining flush of one never merges with the next.
//
// Kernels give UARs two ways. Static: GET_CONTEXT allocates tot_bfregs of
// them and each page is mapped with the mmap offset encoding (command
// MLX5_IB_MMAP_REGULAR_PAGE, index i). Dynamic (tot_bfregs 0 in the
// response, kernels since 4.19 when asked with MLX5_LIB_CAP_DYN_UAR): each
// page is a driver object (MLX5_IB_OBJECT_UAR) allocated by ioctl, which
// returns the mmap offset and the page's id that CREATE_QP/CREATE_CQ name.

// uarPage is one mapped UAR page.
type uarPage struct {
	mem     []byte // the mapping (PROT_WRITE only: reading device registers has side effects)
	dyn     bool   // a UAR object, destroyed with the context
	handle  uint32 // the UAR object's handle
	pageID  uint32 // the device's UAR index (dynamic UARs)
	ncMode  bool
	mmapOff int64
}

func (u *uarPage) base() unsafe.Pointer { return unsafe.Pointer(&u.mem[0]) }

// bfreg is one BlueFlame register as a QP uses it.
type bfreg struct {
	uar      *uarPage
	regOff   int // offset of the register in the UAR mapping
	bufSize  int // half the register: the most a BlueFlame copy may write; 0: doorbells only
	uuarn    int // 0: the register never takes BlueFlame copies
	needLock bool
	pageID   uint32 // dynamic UAR: the page CREATE_QP names
	dynIndex uint32 // legacy bfreg index CREATE_QP names (static pages)
	dyn      bool
	shared   bool
	users    int // QPs on a shared register

	mu     sync.Mutex // held across a doorbell when needLock
	offset int        // which half the next write goes to: 0 or bufSize
}

// kernelOps is what the context needs from the uverbs file beyond the
// commands package uverbs sends: mappings and the UAR object. The host
// tests stand ordinary memory in for the device's pages.
type kernelOps interface {
	mmap(offset int64, length int, prot int) ([]byte, error)
	munmap(b []byte) error
	allocUAR(typ uint32) (dynUAR, error)
	destroyUAR(handle uint32) error
}

// dynUAR is the answer of MLX5_IB_METHOD_UAR_OBJ_ALLOC.
type dynUAR struct {
	handle  uint32
	mmapOff uint64
	length  uint32
	pageID  uint32
}

// fileOps is kernelOps on a real uverbs file.
type fileOps struct{ conn *transport.Conn }

func (f fileOps) mmap(offset int64, length int, prot int) ([]byte, error) {
	var b []byte
	err := f.conn.UseFD(func(fd int) (err error) {
		b, err = unix.Mmap(fd, offset, length, prot, unix.MAP_SHARED)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mmap of %d bytes at offset %#x: %w", length, offset, err)
	}
	return b, nil
}

func (fileOps) munmap(b []byte) error { return unix.Munmap(b) }

func (f fileOps) allocUAR(typ uint32) (dynUAR, error) {
	var off uint64
	var length, pageID uint32
	q := transport.NewIoctl(abi.MLX5ObjectUAR, abi.MLX5MethodUARObjAlloc)
	defer q.Free()
	h := q.NewHandle(abi.MLX5AttrUARAllocHandle)
	q.Const(abi.MLX5AttrUARAllocType, uint64(typ))
	q.Out(abi.MLX5AttrUARAllocMmapOff, unsafe.Slice((*byte)(unsafe.Pointer(&off)), 8))
	q.Out(abi.MLX5AttrUARAllocMmapLen, unsafe.Slice((*byte)(unsafe.Pointer(&length)), 4))
	q.Out(abi.MLX5AttrUARAllocPageID, unsafe.Slice((*byte)(unsafe.Pointer(&pageID)), 4))
	if err := f.conn.Ioctl("mlx5 uar_obj_alloc", q); err != nil {
		return dynUAR{}, err
	}
	return dynUAR{handle: uint32(q.Data(h)), mmapOff: off, length: length, pageID: pageID}, nil
}

func (f fileOps) destroyUAR(handle uint32) error {
	q := transport.NewIoctl(abi.MLX5ObjectUAR, abi.MLX5MethodUARObjDestroy)
	defer q.Free()
	q.Handle(abi.MLX5AttrUARDestroyHandle, handle)
	return f.conn.Ioctl("mlx5 uar_obj_destroy", q)
}

// mapStaticUARs maps the pages GET_CONTEXT allocated and carves their
// BlueFlame registers, as libmlx5's mlx5_set_context does.
func (c *Context) mapStaticUARs() error {
	perPage := c.numUARsPerPage * abi.MLX5NumNonFPBfregsUAR
	pages := c.totUUARs / perPage
	gross := c.totUUARs / abi.MLX5NumNonFPBfregsUAR * abi.MLX5NumBfregsPerUAR
	c.bfs = make([]*bfreg, gross)
	for i := 0; i < pages; i++ {
		off := abi.MLX5MmapOffset(abi.MLX5MmapRegularPage, i, c.pageSize)
		mem, err := c.ops.mmap(off, c.pageSize, unix.PROT_WRITE)
		if err != nil {
			return fmt.Errorf("mlx5: map UAR page %d: %w", i, err)
		}
		if len(mem) < c.pageSize {
			c.ops.munmap(mem)
			return fmt.Errorf("mlx5: UAR page %d: mapping of %d bytes, want %d", i, len(mem), c.pageSize)
		}
		u := &uarPage{mem: mem, mmapOff: off}
		c.staticUARs = append(c.staticUARs, u)
		for j := 0; j < c.numUARsPerPage; j++ {
			for k := 0; k < abi.MLX5NumBfregsPerUAR; k++ {
				bfi := (i*c.numUARsPerPage+j)*abi.MLX5NumBfregsPerUAR + k
				if bfi >= gross {
					continue
				}
				b := &bfreg{uar: u, uuarn: bfi, dynIndex: uint32(bfi)}
				b.regOff = abi.MLX5AdapterPageSize*j + abi.MLX5BFOffset + k*c.bfRegSize
				if bfi != 0 {
					b.bufSize = c.bfRegSize / 2
				}
				b.needLock = c.needUUARLock(bfi)
				if b.regOff+2*b.bufSize > len(mem) || b.regOff+8 > len(mem) {
					continue // a register beyond the page: never handed out
				}
				c.bfs[bfi] = b
			}
		}
	}
	return nil
}

// needUUARLock is libmlx5's need_uuar_lock: register 0 is for doorbells
// only, the low-latency ones serve one QP each; the rest are shared.
func (c *Context) needUUARLock(uuarn int) bool {
	if uuarn == 0 {
		return false
	}
	i := uuarn/2 + uuarn%2
	return i < c.totUUARs-c.lowLatUUARs
}

// allocDynUAR allocates and maps one UAR object.
func (c *Context) allocDynUAR(typ uint32) (*uarPage, error) {
	d, err := c.ops.allocUAR(typ)
	if err != nil {
		return nil, fmt.Errorf("mlx5: allocate a UAR: %w", err)
	}
	length := int(d.length)
	if length < abi.MLX5AdapterPageSize || d.mmapOff > 1<<62 {
		c.ops.destroyUAR(d.handle)
		return nil, fmt.Errorf("mlx5: the kernel's UAR (length %d, mmap offset %#x) is not a page", d.length, d.mmapOff)
	}
	mem, err := c.ops.mmap(int64(d.mmapOff), length, unix.PROT_WRITE)
	if err != nil {
		c.ops.destroyUAR(d.handle)
		return nil, fmt.Errorf("mlx5: map a UAR: %w", err)
	}
	u := &uarPage{mem: mem, dyn: true, handle: d.handle, pageID: d.pageID, ncMode: typ == abi.MLX5UARAllocTypeNC, mmapOff: int64(d.mmapOff)}
	c.dynUARs = append(c.dynUARs, u)
	return u, nil
}

// insertDynBfregs carves a dynamic UAR page into its BlueFlame registers
// and queues them, as libmlx5's mlx5_insert_dyn_uuars does.
func (c *Context) insertDynBfregs(u *uarPage, shared bool) {
	perPage := c.numUARsPerPage * abi.MLX5NumNonFPBfregsUAR
	for j := 0; j < perPage; j++ {
		inPage := j / abi.MLX5NumNonFPBfregsUAR
		inUAR := j % abi.MLX5NumNonFPBfregsUAR
		b := &bfreg{uar: u, dyn: true, shared: shared, needLock: shared}
		b.regOff = inPage*abi.MLX5AdapterPageSize + abi.MLX5BFOffset + inUAR*c.bfRegSize
		if !u.ncMode {
			b.bufSize = c.bfRegSize / 2
			b.uuarn = 1
		}
		b.pageID = u.pageID + uint32(inPage)
		if b.regOff+max(2*b.bufSize, 8) > len(u.mem) {
			continue
		}
		if shared {
			c.sharedBfregs = append(c.sharedBfregs, b)
			c.allocShared++
		} else {
			c.dedicatedBfregs = append(c.dedicatedBfregs, b)
			c.allocDedicated++
		}
	}
}

// qpBfreg picks the register a new QP rings, as libmlx5's mlx5_get_qp_uar:
// a free dedicated one, else a new dedicated page while under the
// low-latency count, else a new shared page, else the least used shared.
// With dynamic UARs unusable for BlueFlame it returns the NC page.
func (c *Context) qpBfreg() (*bfreg, error) {
	c.uarMu.Lock()
	defer c.uarMu.Unlock()
	if c.bfRegSize == 0 {
		return c.ncBfreg, nil
	}
	for {
		if n := len(c.dedicatedBfregs); n > 0 {
			b := c.dedicatedBfregs[0]
			c.dedicatedBfregs = c.dedicatedBfregs[1:]
			return b, nil
		}
		if c.allocDedicated < c.maxDedicated {
			u, err := c.allocDynUAR(abi.MLX5UARAllocTypeBF)
			if err != nil {
				return nil, err
			}
			c.insertDynBfregs(u, false)
			continue
		}
		if c.allocShared < c.maxShared {
			u, err := c.allocDynUAR(abi.MLX5UARAllocTypeBF)
			if err != nil {
				return nil, err
			}
			c.insertDynBfregs(u, true)
		}
		var best *bfreg
		for _, b := range c.sharedBfregs {
			if best == nil || b.users < best.users {
				best = b
			}
		}
		if best == nil {
			return nil, fmt.Errorf("mlx5: no UAR for the QP: %w", transport.ErrNotSupported)
		}
		best.users++
		return best, nil
	}
}

// putQPBfreg gives a QP's register back (mlx5_put_qp_uar).
func (c *Context) putQPBfreg(b *bfreg) {
	if b == nil || !b.dyn {
		return
	}
	c.uarMu.Lock()
	defer c.uarMu.Unlock()
	if b.shared {
		b.users--
		return
	}
	if b == c.ncBfreg {
		return
	}
	c.dedicatedBfregs = append(c.dedicatedBfregs, b)
}

// setNCUAR allocates the context's non-cached UAR, the one CQs are armed
// through (libmlx5's mlx5_set_singleton_nc_uar). Kernels with static UARs
// only have none; CQs then use the first static page.
func (c *Context) setNCUAR() {
	if c.noKernDynUAR {
		return
	}
	u, err := c.allocDynUAR(abi.MLX5UARAllocTypeNC)
	if err != nil {
		return // as libmlx5: CQs fall back to the first static page, if any
	}
	c.ncUAR = u
	c.ncBfreg = &bfreg{uar: u, regOff: abi.MLX5BFOffset, dyn: true, pageID: u.pageID}
}

// CQUAR is the UAR page CQs are armed through and whether CREATE_CQ
// names its page id (MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX): the NC UAR
// when the kernel gave one, else the first static page. base is nil when
// the context has neither.
func (c *Context) CQUAR() (base unsafe.Pointer, pageID uint32, named bool) {
	if c.ncUAR != nil {
		return c.ncUAR.base(), c.ncUAR.pageID, true
	}
	if len(c.staticUARs) > 0 {
		return c.staticUARs[0].base(), 0, false
	}
	return nil, 0, false
}
