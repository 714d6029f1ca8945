package rxe

import (
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
	if mi.Size < uint32(headerSize) {
		return nil, fmt.Errorf("rxe: kernel queue of %d bytes is smaller than its %d-byte header", mi.Size, headerSize)
	}
	mem, err := mapShared(fd, int64(mi.Offset), int(mi.Size))
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

func (q *queue) unmap() error {
	if q == nil || q.mem == nil {
		return nil
	}
	err := unmapShared(q.mem)
	q.mem, q.slots, q.hdr = nil, nil, nil
	return err
}

// mapShared and unmapShared map and unmap a queue by RawSyscall: both
// return at once (rxe's mmap hands over pages it allocated when the queue
// was created; the unmap is the process's own page tables), and a
// Syscall would let the Go scheduler hand the goroutine's P to another
// thread whenever the call outlasts the runtime monitor's tick, as it
// does under emulation, for each of the two or three queues of every QP
// and CQ (internal/transport's quick commands say more).
func mapShared(fd int, off int64, size int) ([]byte, error) {
	addr, _, errno := unix.RawSyscall6(unix.SYS_MMAP, 0, uintptr(size), unix.PROT_READ|unix.PROT_WRITE,
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
