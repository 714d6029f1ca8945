package uverbs

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/transport"
)

// MWType is a memory window type.
type MWType uint8

// Memory window types.
const (
	MWType1 MWType = 1
	MWType2 MWType = 2
)

// MW is a memory window: remote access to part of an MR, granted and
// revoked by binding work requests.
type MW struct {
	pd     *PD
	handle uint32
	rkey   uint32
	typ    MWType

	mu     sync.Mutex
	closed bool
	ref    *cleanupRef
}

// AllocMW allocates a memory window of the given type.
func (pd *PD) AllocMW(typ MWType) (*MW, error) {
	defer runtime.KeepAlive(pd) // reachable until the command is done, so no cleanup destroys it meanwhile
	if err := pd.use(); err != nil {
		return nil, fmt.Errorf("uverbs: alloc_mw: %w", err)
	}
	if typ != MWType1 && typ != MWType2 {
		return nil, fmt.Errorf("uverbs: alloc_mw: type %d: want 1 or 2: %w", typ, unix.EINVAL)
	}
	c := pd.ctx
	req := abi.AllocMW{PDHandle: pd.handle, MWType: uint8(typ)}
	var resp abi.AllocMWResp
	if err := c.conn.Write("alloc_mw", &transport.Write{
		Cmd: abi.CmdAllocMW, In: asBytes(&req), CoreIn: int(unsafe.Sizeof(req)),
		Out: asBytes(&resp), CoreOut: int(unsafe.Sizeof(resp)),
	}); err != nil {
		return nil, err
	}
	mw := &MW{pd: pd, handle: resp.MWHandle, rkey: resp.Rkey, typ: typ, ref: &cleanupRef{}}
	runtime.AddCleanup(mw, func(a destroyArgs) { a.run() }, destroyArgs{c, mw.ref, destroyMW, mw.handle, parents{pd: pd}})
	return mw, nil
}

// Rkey is the window's current remote key.
func (mw *MW) Rkey() uint32 { return mw.rkey }

// Type returns the window's type.
func (mw *MW) Type() MWType { return mw.typ }

// Close deallocates the window. Closing twice is a no-op.
func (mw *MW) Close() error {
	if mw == nil {
		return nil
	}
	mw.mu.Lock()
	defer mw.mu.Unlock()
	if mw.closed {
		return nil
	}
	if err := mw.pd.ctx.destroy(func() error { return destroyMW(mw.pd.ctx, mw.handle) }); err != nil {
		return err
	}
	mw.closed = true
	mw.ref.finish()
	return nil
}

// Rereg flags say what ReReg changes (IBV_REREG_MR_CHANGE_*).
const (
	ReregTranslation = 1 << 0 // the memory: see ReRegBuffer
	ReregPD          = 1 << 1
	ReregAccess      = 1 << 2
)

// ReReg changes the MR's access rights (ReregAccess) or PD (ReregPD) in
// place, keeping its memory; the keys the kernel answers replace the old
// ones (rxe keeps them). ReRegBuffer changes the memory. Where the kernel
// or its driver does not make the change, the error matches
// ErrNotSupported and names what was refused: Linux 6.1's rxe has no
// rereg at all, 6.12's changes PD and access but not the memory. Do not
// post work requests naming the MR while it is re-registered.
func (mr *MR) ReReg(flags int, pd *PD, access Access) error {
	if flags == 0 || flags&^(ReregPD|ReregAccess) != 0 {
		return fmt.Errorf("uverbs: rereg_mr: flags %#x: want ReregPD and/or ReregAccess (ReRegBuffer changes the memory): %w", flags, unix.EINVAL)
	}
	if mr == nil {
		return errNilMR
	}
	mr.mu.Lock()
	defer mr.mu.Unlock()
	if mr.closed {
		return fmt.Errorf("uverbs: rereg_mr: %w", ErrClosed)
	}
	c := mr.pd.ctx
	req := abi.ReregMR{MRHandle: mr.handle, Flags: uint32(flags), Start: mr.Addr(), Length: uint64(len(mr.mem)), HCAVA: mr.iova}
	if flags&ReregPD != 0 {
		if err := pd.use(); err != nil {
			return fmt.Errorf("uverbs: rereg_mr: %w", err)
		}
		if pd.ctx != c {
			return fmt.Errorf("uverbs: rereg_mr: the PD belongs to another context: %w", unix.EINVAL)
		}
		req.PDHandle = pd.handle
	}
	if flags&ReregAccess != 0 {
		if err := checkMRAccess("rereg_mr", access); err != nil {
			return err
		}
		req.AccessFlags = uint32(c.sentAccess(access))
	}
	resp, err := mr.rereg(&req)
	if err != nil {
		return err
	}
	mr.lkey, mr.rkey = resp.Lkey, resp.Rkey
	if flags&ReregPD != 0 {
		mr.pd = pd
	}
	if flags&ReregAccess != 0 {
		mr.access = access
	}
	return nil
}

// ReRegBuffer moves the MR to length bytes of b from offset off
// (IBV_REREG_MR_CHANGE_TRANSLATION), keeping its PD and access rights;
// the device addresses them at their virtual address, as RegisterBuffer
// does. The memory registered before is released (its buffer may be
// closed, its pin dropped) once the kernel took the change. rxe does not
// change an MR's memory (ErrNotSupported, named); close the MR and
// register anew there.
func (mr *MR) ReRegBuffer(b *Buffer, off, length int) error {
	if mr == nil {
		return errNilMR
	}
	if b == nil {
		return fmt.Errorf("uverbs: rereg_mr: nil buffer: %w", unix.EINVAL)
	}
	mr.mu.Lock()
	defer mr.mu.Unlock()
	if mr.closed {
		return fmt.Errorf("uverbs: rereg_mr: %w", ErrClosed)
	}
	mem, err := b.hold(off, length)
	if err != nil {
		return fmt.Errorf("uverbs: rereg_mr: %w", err)
	}
	addr := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(mem))))
	req := abi.ReregMR{MRHandle: mr.handle, Flags: ReregTranslation, Start: addr, Length: uint64(length), HCAVA: addr}
	resp, err := mr.rereg(&req)
	if err != nil {
		b.release()
		return err
	}
	mr.ref.letGo()
	mr.ref.buf = b
	mr.mem, mr.iova = mem, addr
	mr.lkey, mr.rkey = resp.Lkey, resp.Rkey
	return nil
}

// rereg sends REREG_MR; a refusal for want of support names the change.
func (mr *MR) rereg(req *abi.ReregMR) (abi.ReregMRResp, error) {
	var resp abi.ReregMRResp
	c := mr.pd.ctx
	err := c.conn.Write("rereg_mr", &transport.Write{
		Cmd: abi.CmdReregMR, In: asBytes(req), CoreIn: int(unsafe.Sizeof(*req)),
		Out: asBytes(&resp), CoreOut: int(unsafe.Sizeof(resp)),
	})
	if errors.Is(err, ErrNotSupported) {
		var what []string
		for _, f := range []struct {
			bit  uint32
			name string
		}{{ReregTranslation, "memory"}, {ReregPD, "PD"}, {ReregAccess, "access rights"}} {
			if req.Flags&f.bit != 0 {
				what = append(what, f.name)
			}
		}
		return resp, fmt.Errorf("uverbs: rereg_mr: the kernel's %s driver does not change an MR's %s: %w",
			c.prov.Name(), strings.Join(what, " and "), err)
	}
	return resp, err
}

// RegisterDmabuf registers length bytes at offset of a dma-buf (e.g. GPU
// memory exported by its driver). Kernels and providers without dma-buf
// support (rxe) give an error matching ErrNotSupported.
func (pd *PD) RegisterDmabuf(fd int, offset, length, iova uint64, access Access) (*MR, error) {
	defer runtime.KeepAlive(pd) // reachable until the command is done, so no cleanup destroys it meanwhile
	if err := pd.use(); err != nil {
		return nil, fmt.Errorf("uverbs: reg_dmabuf_mr: %w", err)
	}
	if fd < 0 || length == 0 {
		return nil, fmt.Errorf("uverbs: reg_dmabuf_mr: fd %d length %d: want a dma-buf fd and a positive length: %w", fd, length, unix.EINVAL)
	}
	c := pd.ctx
	var lkey, rkey uint32
	q := transport.NewIoctl(abi.ObjectMR, abi.MethodRegDmabufMR)
	defer q.Free()
	iHandle := q.NewHandle(abi.AttrRegDmabufMRHandle)
	q.Handle(abi.AttrRegDmabufMRPDHandle, pd.handle)
	q.U64(abi.AttrRegDmabufMROffset, offset)
	q.U64(abi.AttrRegDmabufMRLength, length)
	q.U64(abi.AttrRegDmabufMRIOVA, iova)
	q.U32(abi.AttrRegDmabufMRFD, uint32(fd))
	q.U32(abi.AttrRegDmabufMRAccessFlags, uint32(access))
	q.Out(abi.AttrRegDmabufMRRespLkey, asBytes(&lkey))
	q.Out(abi.AttrRegDmabufMRRespRkey, asBytes(&rkey))
	if err := c.conn.Ioctl("reg_dmabuf_mr", q); err != nil {
		return nil, err
	}
	mr := &MR{pd: pd, handle: uint32(q.Data(iHandle)), lkey: lkey, rkey: rkey, iova: iova, access: access, ref: &mrRef{}}
	addMRCleanup(mr)
	return mr, nil
}
