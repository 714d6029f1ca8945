package rxe

import (
	"encoding/binary"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/transport"
)

const (
	sendWQESize = int(unsafe.Sizeof(abi.RXESendWQE{}))
	recvWQESize = int(unsafe.Sizeof(abi.RXERecvWQE{}))
	sgeSize     = int(unsafe.Sizeof(abi.RXESGE{}))
)

// The provider's SGE must be laid out like the kernel's: PostSend copies
// SGE arrays as bytes.
var _ [0]struct{} = [unsafe.Sizeof(provider.SGE{}) - unsafe.Sizeof(abi.RXESGE{})]struct{}{}

// doorbell is rxe's "a send queue has work" signal: an empty POST_SEND
// write() (wr_count 0). wqe_size must be at least sizeof(ib_uverbs_send_wr)
// on current kernels; librxe sends sizeof(struct ibv_send_wr) = 128.
type doorbell struct {
	cmd  [32]byte
	resp [4]byte
}

const doorbellWQESize = 128

// detached is the lifetime of queues made outside a context (tests).
var detached lifetime

func (d *doorbell) init(handle uint32) {
	binary.LittleEndian.PutUint32(d.cmd[0:], abi.CmdPostSend)
	binary.LittleEndian.PutUint16(d.cmd[4:], uint16(len(d.cmd)/4))
	binary.LittleEndian.PutUint16(d.cmd[6:], uint16(len(d.resp)/4))
	binary.LittleEndian.PutUint64(d.cmd[8:], uint64(uintptr(unsafe.Pointer(&d.resp))))
	binary.LittleEndian.PutUint32(d.cmd[16:], handle)
	binary.LittleEndian.PutUint32(d.cmd[28:], doorbellWQESize)
}

// ring makes the one system call of a post. The caller holds the
// context's lifetime lock, so the fd is still the uverbs file.
//
// It is a RawSyscall: the kernel only hands the queue to rxe's requester
// (on some kernels it runs it in the caller's context) and never waits, so
// there is nothing for the Go scheduler to do meanwhile, and a Syscall
// would wake the runtime's monitor thread on the first post after the
// process was idle, a thread wake-up per message in a ping-pong
// (internal/transport's quick commands say more).
func (d *doorbell) ring(fd int) error {
	_, _, errno := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&d.cmd)), uintptr(len(d.cmd)))
	runtime.KeepAlive(d)
	if errno != 0 {
		return &transport.Error{Verb: "post_send doorbell", Transport: "write", Errno: errno}
	}
	return nil
}

// sendQueue is the send side of an rxe QP.
type sendQueue struct {
	mu        sync.Mutex
	q         *queue
	fd        int
	life      *lifetime
	qpType    provider.QPType
	maxSGE    int
	maxInline int
	db        doorbell
}

// free returns how many slots are free: the kernel owns the consumer index.
func (q *queue) free(prod uint32) int {
	cons := atomic.LoadUint32(&q.hdr.ConsumerIndex) & q.mask
	return int(q.mask - ((prod - cons) & q.mask))
}

func (s *sendQueue) check(i int, wr *provider.SendWR) error {
	if len(wr.SGL) > s.maxSGE {
		return &provider.PostError{Index: i, Err: provider.ErrTooManySGE}
	}
	var length uint64
	for _, sg := range wr.SGL {
		length += uint64(sg.Length)
	}
	if length > 1<<31 {
		return &provider.PostError{Index: i, Err: provider.ErrBadWR}
	}
	op := wr.Opcode
	switch s.qpType {
	case abi.QPTypeUD:
		if op != provider.WRSend && op != provider.WRSendWithImm {
			return &provider.PostError{Index: i, Err: provider.ErrBadWR}
		}
		if wr.AH == nil {
			return &provider.PostError{Index: i, Err: provider.ErrBadWR}
		}
		a, ok := wr.AH.AH.(*ah)
		if !ok || a == nil || a.resp.AHNum == 0 || (a.life != s.life && a.life != nil) {
			// Not rxe's, or of another context (its number indexes another
			// device's pool).
			return &provider.PostError{Index: i, Err: provider.ErrBadWR}
		}
		if a.destroyed.Load() {
			return &provider.PostError{Index: i, Err: provider.ErrClosed}
		}
	case abi.QPTypeUC:
		switch op {
		case provider.WRSend, provider.WRSendWithImm, provider.WRRDMAWrite, provider.WRRDMAWriteWithImm,
			provider.WRLocalInv, provider.WRBindMW, provider.WRSendWithInv:
		default:
			return &provider.PostError{Index: i, Err: provider.ErrBadWR}
		}
	default:
		if op > provider.WRSendWithInv {
			return &provider.PostError{Index: i, Err: provider.ErrBadWR}
		}
	}
	switch op {
	case provider.WRAtomicCmpAndSwp, provider.WRAtomicFetchAndAdd:
		if length < 8 || wr.RemoteAddr&7 != 0 || wr.Flags&provider.SendInline != 0 {
			return &provider.PostError{Index: i, Err: provider.ErrBadWR}
		}
	case provider.WRBindMW:
		if len(wr.SGL) != 0 || wr.Imm != 0 {
			return &provider.PostError{Index: i, Err: provider.ErrBadWR}
		}
	case provider.WRRDMARead:
		if wr.Flags&provider.SendInline != 0 {
			return &provider.PostError{Index: i, Err: provider.ErrBadWR}
		}
	}
	if wr.Flags&provider.SendInline != 0 && length > uint64(s.maxInline) {
		return &provider.PostError{Index: i, Err: provider.ErrInlineTooLarge}
	}
	return nil
}

// PostSend implements provider.Sender: check every work request, write
// them all, publish the producer index once and ring the doorbell once.
func (s *sendQueue) PostSend(wrs []provider.SendWR) error {
	if len(wrs) == 0 {
		return nil
	}
	life := s.life
	if life == nil { // a queue outside any context: the package's tests
		life = &detached
	}
	// Held to the end: the context cannot close the fd under the doorbell,
	// and after it closed nothing is written at all.
	life.mu.RLock()
	defer life.mu.RUnlock()
	if life.closed {
		return provider.ErrClosed
	}
	s.mu.Lock()
	q := s.q
	if q == nil {
		s.mu.Unlock()
		return provider.ErrClosed
	}
	for i := range wrs {
		if err := s.check(i, &wrs[i]); err != nil {
			s.mu.Unlock()
			return err
		}
	}
	prod := atomic.LoadUint32(&q.hdr.ProducerIndex) & q.mask
	if free := q.free(prod); len(wrs) > free {
		s.mu.Unlock()
		return &provider.PostError{Index: free, Err: provider.ErrQueueFull}
	}
	for i := range wrs {
		s.write(q.slot(prod), &wrs[i])
		prod = (prod + 1) & q.mask
	}
	atomic.StoreUint32(&q.hdr.ProducerIndex, prod)
	s.mu.Unlock()
	return s.db.ring(s.fd)
}

// slot returns slot i, which the queue header guarantees is inside the
// mapping (mapQueue checked it and i is masked).
func (q *queue) slot(i uint32) []byte {
	off := int(i&q.mask) * q.elemSize
	return q.slots[off : off+q.elemSize : off+q.elemSize]
}

func (s *sendQueue) write(slot []byte, wr *provider.SendWR) {
	wqe := (*abi.RXESendWQE)(unsafe.Pointer(&slot[0]))
	*wqe = abi.RXESendWQE{}
	w := &wqe.WR
	w.WRID = wr.ID
	w.Opcode = uint32(wr.Opcode)
	w.SendFlags = uint32(wr.Flags)
	switch wr.Opcode {
	case provider.WRSendWithImm, provider.WRRDMAWriteWithImm:
		w.Ex = bits.ReverseBytes32(wr.Imm) // imm_data is big endian
	case provider.WRSendWithInv, provider.WRLocalInv:
		w.Ex = wr.InvalidateRkey
	}
	u := w.WR[:]
	switch wr.Opcode {
	case provider.WRRDMAWrite, provider.WRRDMAWriteWithImm, provider.WRRDMARead:
		binary.LittleEndian.PutUint64(u[0:], wr.RemoteAddr)
		binary.LittleEndian.PutUint32(u[8:], wr.Rkey)
		wqe.IOVA = wr.RemoteAddr
	case provider.WRAtomicCmpAndSwp, provider.WRAtomicFetchAndAdd:
		binary.LittleEndian.PutUint64(u[0:], wr.RemoteAddr)
		binary.LittleEndian.PutUint64(u[8:], wr.CompareAdd)
		binary.LittleEndian.PutUint64(u[16:], wr.Swap)
		binary.LittleEndian.PutUint32(u[24:], wr.Rkey)
		wqe.IOVA = wr.RemoteAddr
	case provider.WRSend, provider.WRSendWithImm:
		if s.qpType == abi.QPTypeUD {
			binary.LittleEndian.PutUint32(u[0:], wr.RemoteQPN)
			binary.LittleEndian.PutUint32(u[4:], wr.RemoteQkey)
			binary.LittleEndian.PutUint32(u[12:], wr.AH.AH.(*ah).resp.AHNum)
		}
	case provider.WRBindMW:
		b := &wr.Bind
		binary.LittleEndian.PutUint64(u[0:], b.Addr)
		binary.LittleEndian.PutUint64(u[8:], b.Length)
		binary.LittleEndian.PutUint32(u[16:], b.MRLkey)
		binary.LittleEndian.PutUint32(u[20:], b.MWRkey)
		binary.LittleEndian.PutUint32(u[24:], b.NewRkey)
		binary.LittleEndian.PutUint32(u[28:], b.Access)
	}
	var length uint32
	data := slot[sendWQESize:]
	if wr.Flags&provider.SendInline != 0 {
		for _, sg := range wr.SGL {
			n := copy(data, userBytes(sg.Addr, sg.Length))
			data = data[n:]
			length += sg.Length
		}
	} else {
		for i := range wr.SGL {
			length += wr.SGL[i].Length
		}
		if len(wr.SGL) > 0 {
			copy(data, unsafe.Slice((*byte)(unsafe.Pointer(&wr.SGL[0])), len(wr.SGL)*sgeSize))
		}
	}
	wqe.DMA.Length = length
	wqe.DMA.Resid = length
	wqe.DMA.NumSGE = uint32(len(wr.SGL))
}

// userBytes views registered memory by address, for inline sends.
func userBytes(addr uint64, n uint32) []byte {
	if n == 0 {
		return nil
	}
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	return unsafe.Slice((*byte)(p), n)
}

// recvQueue is a receive queue of a QP or an SRQ.
type recvQueue struct {
	mu     sync.Mutex
	q      *queue
	maxSGE int
	srq    bool // the QP has no receive queue of its own
}

// PostRecv implements provider.Receiver.
func (r *recvQueue) PostRecv(wrs []provider.RecvWR) error {
	if len(wrs) == 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.q
	if q == nil {
		if r.srq {
			return transport.NotSupported("rxe: the QP receives from an SRQ")
		}
		return provider.ErrClosed
	}
	for i := range wrs {
		if len(wrs[i].SGL) > r.maxSGE {
			return &provider.PostError{Index: i, Err: provider.ErrTooManySGE}
		}
	}
	prod := atomic.LoadUint32(&q.hdr.ProducerIndex) & q.mask
	if free := q.free(prod); len(wrs) > free {
		return &provider.PostError{Index: free, Err: provider.ErrQueueFull}
	}
	for i := range wrs {
		slot := q.slot(prod)
		wqe := (*abi.RXERecvWQE)(unsafe.Pointer(&slot[0]))
		*wqe = abi.RXERecvWQE{WRID: wrs[i].ID}
		var length uint32
		for _, sg := range wrs[i].SGL {
			length += sg.Length
		}
		if n := len(wrs[i].SGL); n > 0 {
			copy(slot[recvWQESize:], unsafe.Slice((*byte)(unsafe.Pointer(&wrs[i].SGL[0])), n*sgeSize))
		}
		wqe.DMA.Length = length
		wqe.DMA.Resid = length
		wqe.DMA.NumSGE = uint32(len(wrs[i].SGL))
		prod = (prod + 1) & q.mask
	}
	atomic.StoreUint32(&q.hdr.ProducerIndex, prod)
	return nil
}
