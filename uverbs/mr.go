package uverbs

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/transport"
)

// Access is the set of rights a memory region or QP grants (IBV_ACCESS_*).
type Access uint32

// Access flags.
const (
	AccessLocalWrite   Access = 1 << 0
	AccessRemoteWrite  Access = 1 << 1
	AccessRemoteRead   Access = 1 << 2
	AccessRemoteAtomic Access = 1 << 3
	AccessMWBind       Access = 1 << 4
	AccessZeroBased    Access = 1 << 5
	AccessOnDemand     Access = 1 << 6
	AccessHugeTLB      Access = 1 << 7
	// AccessRelaxedOrdering is an optional flag: kernels that do not know
	// it ignore it (it is dropped unless the kernel says it understands
	// optional flags).
	AccessRelaxedOrdering Access = 1 << 20

	accessOptionalRange Access = 0x3ff << 20 // IB_UVERBS_ACCESS_OPTIONAL_RANGE
	accessKnown                = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic |
		AccessMWBind | AccessZeroBased | AccessOnDemand | AccessHugeTLB | accessOptionalRange
)

func (a Access) String() string {
	names := []string{"LOCAL_WRITE", "REMOTE_WRITE", "REMOTE_READ", "REMOTE_ATOMIC", "MW_BIND", "ZERO_BASED", "ON_DEMAND", "HUGETLB"}
	var parts []string
	for i, n := range names {
		if a&(1<<i) != 0 {
			parts = append(parts, n)
		}
	}
	if a&AccessRelaxedOrdering != 0 {
		parts = append(parts, "RELAXED_ORDERING")
	}
	if rest := a &^ (0xff | AccessRelaxedOrdering); rest != 0 {
		parts = append(parts, fmt.Sprintf("%#x", uint32(rest)))
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, "|")
}

// MR is a registered memory region.
type MR struct {
	pd     *PD
	handle uint32
	lkey   uint32
	rkey   uint32
	mem    []byte
	iova   uint64
	access Access

	mu     sync.Mutex
	closed bool
	ref    *mrRef // shared with the MR's cleanup, which must not hold the MR
}

// mrRef is an MR's cleanup reference and what its registration holds
// besides the kernel's MR: the Buffer whose count it took or the pin on Go
// memory. Both are let go once the MR is deregistered, by Close or by the
// cleanup of an MR the program dropped: an unreachable runtime.Pinner that
// still pins is a fatal error, and a Buffer still counted can never close.
type mrRef struct {
	cleanupRef
	buf    *Buffer         // the buffer registered, if any
	pinner *runtime.Pinner // pins Go memory for the MR's life, if any
}

// letGo drops what the registration held; the MR is deregistered.
func (r *mrRef) letGo() {
	if r.buf != nil {
		r.buf.release()
		r.buf = nil
	}
	if r.pinner != nil {
		r.pinner.Unpin()
		r.pinner = nil
	}
}

// mrCleanup deregisters an MR the program dropped unclosed, then lets go
// of its memory. If the kernel refuses (the MR is still registered, so the
// device may still write to the memory), the memory stays held until the
// context closes, which frees the MR.
type mrCleanup struct {
	ctx     *Context
	ref     *mrRef
	handle  uint32
	parents // the MR's PD
}

func (a mrCleanup) run() {
	if !a.ref.finish() {
		return
	}
	// A context that is closing frees the MR when its file closes, which
	// may not have happened yet: until then the device may still write to
	// the memory, so it is let go of then (at once if the file is closed).
	if a.ctx.isClosed() || destroyMR(a.ctx, a.handle) != nil {
		a.ctx.keepUntilClose(a.ref.letGo)
		return
	}
	a.ref.letGo()
}

// addMRCleanup arms the cleanup of an MR the program may drop.
func addMRCleanup(mr *MR) {
	runtime.AddCleanup(mr, func(a mrCleanup) { a.run() }, mrCleanup{mr.pd.ctx, mr.ref, mr.handle, parents{pd: mr.pd}})
}

// RegisterBuffer registers length bytes of b from offset off. The device
// addresses them at IOVA equal to their virtual address, as ibv_reg_mr does.
// b cannot be closed until the MR is.
func (pd *PD) RegisterBuffer(b *Buffer, off, length int, access Access) (*MR, error) {
	return pd.RegisterBufferIOVA(b, off, length, 0, access, false)
}

// RegisterBufferIOVA registers like RegisterBuffer with an explicit IOVA
// (the address remote peers use; set useIOVA) as ibv_reg_mr_iova does.
func (pd *PD) RegisterBufferIOVA(b *Buffer, off, length int, iova uint64, access Access, useIOVA bool) (*MR, error) {
	if b == nil {
		return nil, fmt.Errorf("uverbs: reg_mr: nil buffer: %w", unix.EINVAL)
	}
	if err := pd.use(); err != nil {
		return nil, fmt.Errorf("uverbs: reg_mr: %w", err)
	}
	mem, err := b.hold(off, length)
	if err != nil {
		return nil, fmt.Errorf("uverbs: reg_mr: %w", err)
	}
	if !useIOVA {
		iova = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(mem))))
	}
	mr, err := pd.register(mem, iova, access, &mrRef{buf: b})
	if err != nil {
		b.release()
		return nil, err
	}
	return mr, nil
}

// RegisterPinned registers Go memory. The first element of mem is pinned
// with a runtime.Pinner until the MR is closed, so the garbage collector
// neither moves nor frees it while the device may use it. mem must come
// from a single allocation (a slice of one array); the caller must not let
// the device write to it after Close.
func (pd *PD) RegisterPinned(mem []byte, access Access) (*MR, error) {
	if len(mem) == 0 {
		return nil, fmt.Errorf("uverbs: reg_mr: empty memory: %w", unix.EINVAL)
	}
	if err := pd.use(); err != nil {
		return nil, fmt.Errorf("uverbs: reg_mr: %w", err)
	}
	p := new(runtime.Pinner)
	p.Pin(unsafe.SliceData(mem))
	mr, err := pd.register(mem, uint64(uintptr(unsafe.Pointer(unsafe.SliceData(mem)))), access, &mrRef{pinner: p})
	if err != nil {
		p.Unpin()
		return nil, err
	}
	return mr, nil
}

// checkMRAccess refuses what the kernel would refuse with a bare EINVAL.
func checkMRAccess(verb string, access Access) error {
	if access&^accessKnown != 0 {
		return fmt.Errorf("uverbs: %s: access %v has unknown bits: %w", verb, access, unix.EINVAL)
	}
	if access&(AccessRemoteWrite|AccessRemoteAtomic) != 0 && access&AccessLocalWrite == 0 {
		// The kernel says EINVAL; say why first.
		return fmt.Errorf("uverbs: %s: access %v: REMOTE_WRITE and REMOTE_ATOMIC require LOCAL_WRITE: %w", verb, access, unix.EINVAL)
	}
	return nil
}

// sentAccess drops the optional bits a kernel that does not promise to
// ignore unknown ones must not see, as rdma-core does.
func (c *Context) sentAccess(access Access) Access {
	if c.coreSupport&abi.CoreSupportOptionalMRAccess == 0 {
		return access &^ accessOptionalRange
	}
	return access
}

// register sends REG_MR; ref holds what the registration holds, which the
// caller lets go of itself if register fails.
func (pd *PD) register(mem []byte, iova uint64, access Access, ref *mrRef) (*MR, error) {
	defer runtime.KeepAlive(pd) // reachable until the command is done, so no cleanup destroys it meanwhile
	if err := checkMRAccess("reg_mr", access); err != nil {
		return nil, err
	}
	c := pd.ctx
	sent := c.sentAccess(access)
	req := abi.RegMR{
		Start:       uint64(uintptr(unsafe.Pointer(unsafe.SliceData(mem)))),
		Length:      uint64(len(mem)),
		HCAVA:       iova,
		PDHandle:    pd.handle,
		AccessFlags: uint32(sent),
	}
	var resp abi.RegMRResp
	err := c.conn.Write("reg_mr", &transport.Write{
		Cmd: abi.CmdRegMR, In: asBytes(&req), CoreIn: int(unsafe.Sizeof(req)),
		Out: asBytes(&resp), CoreOut: int(unsafe.Sizeof(resp)),
	})
	runtime.KeepAlive(mem)
	if err != nil {
		return nil, memlockHint(err, len(mem))
	}
	mr := &MR{pd: pd, handle: resp.MRHandle, lkey: resp.Lkey, rkey: resp.Rkey, mem: mem, iova: iova, access: access, ref: ref}
	addMRCleanup(mr)
	return mr, nil
}

// Lkey is the key local work requests use to name the MR.
func (mr *MR) Lkey() uint32 { return mr.lkey }

// Rkey is the key a remote peer uses for RDMA to the MR.
func (mr *MR) Rkey() uint32 { return mr.rkey }

// Bytes returns the registered memory.
func (mr *MR) Bytes() []byte { return mr.mem }

// Addr returns the address of the first registered byte.
func (mr *MR) Addr() uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(mr.mem)))) }

// IOVA returns the address the device uses for the first byte.
func (mr *MR) IOVA() uint64 { return mr.iova }

// Len returns the registered length.
func (mr *MR) Len() int { return len(mr.mem) }

// Access returns the access rights the MR was registered with.
func (mr *MR) Access() Access { return mr.access }

// PD returns the protection domain of the MR.
func (mr *MR) PD() *PD { return mr.pd }

// Handle returns the kernel's handle of the MR.
func (mr *MR) Handle() uint32 { return mr.handle }

// Close deregisters the MR and releases its memory's pin or buffer.
// Closing twice is a no-op.
func (mr *MR) Close() error {
	if mr == nil {
		return nil
	}
	mr.mu.Lock()
	defer mr.mu.Unlock()
	if mr.closed {
		return nil
	}
	if err := mr.pd.ctx.destroy(func() error { return destroyMR(mr.pd.ctx, mr.handle) }); err != nil {
		return err
	}
	mr.closed = true
	mr.ref.finish()
	mr.ref.letGo()
	return nil
}
