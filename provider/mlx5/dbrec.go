package mlx5

import (
	"fmt"
	"math/bits"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// queueBuffer is memory the HCA reads and writes by DMA: anonymous,
// page-aligned and page-rounded (the kernel pins whole pages and the PRM
// wants queue buffers page-aligned), zeroed, and kept out of fork()ed
// children (MADV_DONTFORK), as libmlx5's mlx5_alloc_buf does: a child's
// copy-on-write would move the parent's pages away from the pinned ones.
type queueBuffer struct {
	mem    []byte
	mapped bool // mapped by allocQueueBuffer: free unmaps it (tests bring their own memory)
}

// allocQueueBuffer maps size bytes rounded up to pageSize.
func allocQueueBuffer(size, pageSize int) (queueBuffer, error) {
	if size <= 0 || pageSize <= 0 || pageSize&(pageSize-1) != 0 {
		return queueBuffer{}, fmt.Errorf("mlx5: queue buffer of %d bytes with page size %d", size, pageSize)
	}
	n := (size + pageSize - 1) &^ (pageSize - 1)
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return queueBuffer{}, fmt.Errorf("mlx5: allocate a %d-byte queue buffer: %w", n, err)
	}
	if err := unix.Madvise(mem, unix.MADV_DONTFORK); err != nil {
		unix.Munmap(mem)
		return queueBuffer{}, fmt.Errorf("mlx5: madvise(MADV_DONTFORK) on a queue buffer: %w", err)
	}
	return queueBuffer{mem: mem, mapped: true}, nil
}

// addr is the buffer's address, as the kernel's driver data carries it.
func (b queueBuffer) addr() uint64 {
	if len(b.mem) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(&b.mem[0])))
}

func (b *queueBuffer) free() error {
	if b.mem == nil {
		return nil
	}
	if !b.mapped {
		b.mem = nil
		return nil
	}
	err := unix.Munmap(b.mem)
	b.mem = nil
	if err != nil {
		return fmt.Errorf("mlx5: unmap a queue buffer: %w", err)
	}
	return nil
}

// dbRecord is one doorbell record: two big-endian 32-bit words the HCA
// reads by DMA (a QP's receive and send counters, an SRQ's counter, a
// CQ's consumer index and arm word), each in a cache line of its own.
type dbRecord struct {
	words *[2]uint32
	page  *dbPage
	slot  int
}

// addr is the record's address, as the kernel's driver data carries it.
func (d dbRecord) addr() uint64 { return uint64(uintptr(unsafe.Pointer(d.words))) }

// dbPage is one page of doorbell records, one per cache line.
type dbPage struct {
	buf  queueBuffer
	free []uint64 // bit set: slot free
	used int
}

// dbAllocator hands out doorbell records from shared pages, as
// libmlx5's mlx5_alloc_dbrec does: a page holds pageSize/cacheLine
// records, and a page whose records are all freed is unmapped.
type dbAllocator struct {
	mu        sync.Mutex
	pageSize  int
	stride    int // the device's cache line size
	pages     []*dbPage
	allocPage func(size, pageSize int) (queueBuffer, error) // tests put guard pages around it
}

func newDBAllocator(pageSize, cacheLine int) *dbAllocator {
	if cacheLine < 8 || cacheLine&(cacheLine-1) != 0 || cacheLine > pageSize {
		cacheLine = 64 // a kernel that reports nonsense still gets records that do not share a line
	}
	return &dbAllocator{pageSize: pageSize, stride: cacheLine, allocPage: allocQueueBuffer}
}

// alloc returns a zeroed doorbell record.
func (a *dbAllocator) alloc() (dbRecord, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var page *dbPage
	for _, p := range a.pages {
		if p.used < len(p.free)*64 && p.used < a.pageSize/a.stride {
			page = p
			break
		}
	}
	if page == nil {
		buf, err := a.allocPage(a.pageSize, a.pageSize)
		if err != nil {
			return dbRecord{}, fmt.Errorf("mlx5: doorbell record page: %w", err)
		}
		n := a.pageSize / a.stride
		page = &dbPage{buf: buf, free: make([]uint64, (n+63)/64)}
		for i := 0; i < n; i++ {
			page.free[i/64] |= 1 << (i % 64)
		}
		a.pages = append(a.pages, page)
	}
	for i, w := range page.free {
		if w == 0 {
			continue
		}
		j := bits.TrailingZeros64(w)
		page.free[i] &^= 1 << j
		page.used++
		slot := i*64 + j
		words := (*[2]uint32)(unsafe.Pointer(&page.buf.mem[slot*a.stride]))
		words[0], words[1] = 0, 0
		return dbRecord{words: words, page: page, slot: slot}, nil
	}
	panic("mlx5: doorbell page with a free count but no free slot") // unreachable: used < capacity
}

// release gives a record back; the last record of a page unmaps it.
func (a *dbAllocator) release(d dbRecord) error {
	if d.page == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	p := d.page
	if p.free[d.slot/64]&(1<<(d.slot%64)) != 0 {
		return nil // already free
	}
	p.free[d.slot/64] |= 1 << (d.slot % 64)
	p.used--
	if p.used > 0 {
		return nil
	}
	for i, q := range a.pages {
		if q == p {
			a.pages = append(a.pages[:i], a.pages[i+1:]...)
			break
		}
	}
	return p.buf.free()
}

// roundUpPow2 is the smallest power of two >= v (1 for 0).
func roundUpPow2(v uint32) uint32 {
	if v <= 1 {
		return 1
	}
	return 1 << bits.Len32(v-1)
}

// ilog2Ceil is libmlx5's ilog32(v - 1) for v >= 1: the exponent of
// roundUpPow2(v).
func ilog2Ceil(v uint32) uint32 {
	if v <= 1 {
		return 0
	}
	return uint32(bits.Len32(v - 1))
}

func alignUp(v, a int) int { return (v + a - 1) / a * a }
