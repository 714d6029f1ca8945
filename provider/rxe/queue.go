package rxe

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
)

// queue is one of the kernel's rxe queues mapped into the process: a
// struct rxe_queue_buf header and the slots after it. User space owns the
// producer index of send and receive queues and the consumer index of
// completion queues; the kernel owns the others.
type queue struct {
	mem      []byte
	hdr      *abi.RXEQueueBuf
	slots    []byte
	elemSize int
	mask     uint32
}

// headerSize is where slot 0 starts.
const headerSize = int(unsafe.Sizeof(abi.RXEQueueBuf{}))

// mapQueue maps the queue the kernel described in mi on the uverbs fd and
// checks its header, so corrupt values can never send an index outside
// the mapping.
func mapQueue(fd int, mi abi.MMInfo, minElem int) (*queue, error) {
	return mapQueueAt(fd, mi, minElem, 0)
}

// mapQueueBelow maps a queue as mapQueue does, asking the kernel for the
// addresses just below other's mapping, so that the two can later go in
// one munmap (unmapPair). The address is a hint: where it is taken, the
// kernel places the queue elsewhere, and unmapPair unmaps them one by one.
func mapQueueBelow(fd int, mi abi.MMInfo, minElem int, other *queue) (*queue, error) {
	size := pageRound(uintptr(mi.Size))
	if other.start() < size {
		return mapQueue(fd, mi, minElem)
	}
	return mapQueueAt(fd, mi, minElem, other.start()-size)
}

func mapQueueAt(fd int, mi abi.MMInfo, minElem int, hint uintptr) (*queue, error) {
	if mi.Size < uint32(headerSize) {
		return nil, fmt.Errorf("rxe: kernel queue of %d bytes is smaller than its %d-byte header", mi.Size, headerSize)
	}
	mem, err := mapShared(fd, int64(mi.Offset), int(mi.Size), hint)
	if err != nil {
		return nil, fmt.Errorf("rxe: mmap queue (offset %#x, %d bytes): %w", mi.Offset, mi.Size, err)
	}
	q := &queue{mem: mem, hdr: (*abi.RXEQueueBuf)(unsafe.Pointer(&mem[0]))}
	log2 := q.hdr.Log2ElemSize
	mask := q.hdr.IndexMask
	if log2 > 20 || 1<<log2 < minElem {
		unmapShared(mem)
		return nil, fmt.Errorf("rxe: queue element size 2^%d is below the %d bytes an entry needs; this kernel's queue format is not supported", log2, minElem)
	}
	n := uint64(mask) + 1
	if mask&(mask+1) != 0 || uint64(headerSize)+n<<log2 > uint64(len(mem)) {
		unmapShared(mem)
		return nil, fmt.Errorf("rxe: queue header (index mask %#x, element 2^%d) does not fit the %d-byte mapping", mask, log2, len(mem))
	}
	q.elemSize = 1 << log2
	q.mask = mask
	q.slots = mem[headerSize : uint64(headerSize)+n<<log2]
	return q, nil
}

// capacity is the number of usable slots (one stays empty to tell full
// from empty).
func (q *queue) capacity() int { return int(q.mask) }

// unmapPair unmaps two queues (either may be nil), in one munmap where
// their mappings touch, as mapQueueBelow arranges for a QP's send and
// receive queues: half the system calls, one TLB flush, when a QP is
// destroyed.
func unmapPair(a, b *queue) error {
	if a != nil && a.mem != nil && b != nil && b.mem != nil {
		lo, hi := a, b
		if hi.start() < lo.start() {
			lo, hi = hi, lo
		}
		if lo.start()+pageRound(uintptr(len(lo.mem))) == hi.start() {
			err := unmapShared(unsafe.Slice(unsafe.SliceData(lo.mem), hi.start()+uintptr(len(hi.mem))-lo.start()))
			a.forget()
			b.forget()
			return err
		}
	}
	return errors.Join(a.unmap(), b.unmap())
}

// start is the address of the queue's mapping.
func (q *queue) start() uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(q.mem))) }

// pageRound rounds n up to whole pages, the length of n bytes' mapping.
func pageRound(n uintptr) uintptr {
	p := uintptr(pageSize)
	return (n + p - 1) &^ (p - 1)
}

var pageSize = unix.Getpagesize()

func (q *queue) unmap() error {
	if q == nil || q.mem == nil {
		return nil
	}
	err := unmapShared(q.mem)
	q.forget()
	return err
}

// forget drops the queue's view of a mapping that is gone.
func (q *queue) forget() { q.mem, q.slots, q.hdr = nil, nil, nil }

// mapShared and unmapShared map and unmap a queue by RawSyscall: both
// return at once (rxe's mmap hands over pages it allocated when the queue
// was created; the unmap is the process's own page tables), and a
// Syscall would let the Go scheduler hand the goroutine's P to another
// thread whenever the call outlasts the runtime monitor's tick, as it
// does under emulation, for each of the two or three queues of every QP
// and CQ (internal/transport's quick commands say more).
func mapShared(fd int, off int64, size int, hint uintptr) ([]byte, error) {
	addr, _, errno := unix.RawSyscall6(unix.SYS_MMAP, hint, uintptr(size), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_SHARED, uintptr(fd), uintptr(off))
	if errno != 0 {
		return nil, errno
	}
	return unsafe.Slice((*byte)(unsafe.Add(nil, addr)), size), nil
}

func unmapShared(mem []byte) error {
	if len(mem) == 0 {
		return unix.EINVAL
	}
	_, _, errno := unix.RawSyscall(unix.SYS_MUNMAP, uintptr(unsafe.Pointer(unsafe.SliceData(mem))), uintptr(len(mem)), 0)
	if errno != 0 {
		return errno
	}
	return nil
}
