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
	mem, err := unix.Mmap(fd, int64(mi.Offset), int(mi.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("rxe: mmap queue (offset %#x, %d bytes): %w", mi.Offset, mi.Size, err)
	}
	q := &queue{mem: mem, hdr: (*abi.RXEQueueBuf)(unsafe.Pointer(&mem[0]))}
	log2 := q.hdr.Log2ElemSize
	mask := q.hdr.IndexMask
	if log2 > 20 || 1<<log2 < minElem {
		unix.Munmap(mem)
		return nil, fmt.Errorf("rxe: queue element size 2^%d is below the %d bytes an entry needs; this kernel's queue format is not supported", log2, minElem)
	}
	n := uint64(mask) + 1
	if mask&(mask+1) != 0 || uint64(headerSize)+n<<log2 > uint64(len(mem)) {
		unix.Munmap(mem)
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
	err := unix.Munmap(q.mem)
	q.mem, q.slots, q.hdr = nil, nil, nil
	return err
}
