package uverbs

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Buffer is page-aligned memory outside the Go heap, for the device to read
// and write: an anonymous private mapping, excluded from fork (MADV_DONTFORK)
// so a child process can never take the pages the device is using. The
// garbage collector neither moves nor frees it; Close unmaps it, and refuses
// while a memory region still registers it.
type Buffer struct {
	mu   sync.Mutex
	mem  []byte
	regs int // live MRs over this buffer
}

// ErrBusy is returned when closing an object that others still depend on.
var ErrBusy = errors.New("uverbs: object is still in use")

// AllocBuffer maps size bytes (rounded up to whole pages), zeroed.
func AllocBuffer(size int) (*Buffer, error) {
	if size <= 0 {
		return nil, fmt.Errorf("uverbs: AllocBuffer: size %d: must be positive: %w", size, unix.EINVAL)
	}
	page := os.Getpagesize()
	n := (size + page - 1) / page * page
	if n < size {
		return nil, fmt.Errorf("uverbs: AllocBuffer: size %d overflows: %w", size, unix.EINVAL)
	}
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("uverbs: AllocBuffer(%d): mmap: %w", size, err)
	}
	if err := unix.Madvise(mem, unix.MADV_DONTFORK); err != nil {
		unix.Munmap(mem)
		return nil, fmt.Errorf("uverbs: AllocBuffer(%d): madvise(MADV_DONTFORK): %w", size, err)
	}
	return &Buffer{mem: mem[:size:n]}, nil
}

// Bytes returns the buffer's memory; nil after Close.
func (b *Buffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mem
}

// Len returns the size asked for.
func (b *Buffer) Len() int { return len(b.Bytes()) }

// Addr returns the address of the first byte (0 after Close).
func (b *Buffer) Addr() uint64 {
	m := b.Bytes()
	if m == nil {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(m))))
}

// Close unmaps the buffer. It fails with ErrBusy while an MR registers it,
// since the device could still write to the pages. Closing twice is a no-op.
func (b *Buffer) Close() error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mem == nil {
		return nil
	}
	if b.regs > 0 {
		return fmt.Errorf("uverbs: Buffer.Close: %d memory region(s) still register it: %w", b.regs, ErrBusy)
	}
	err := unix.Munmap(b.mem[:cap(b.mem)])
	b.mem = nil
	if err != nil {
		return fmt.Errorf("uverbs: Buffer.Close: munmap: %w", err)
	}
	return nil
}

// hold pins the buffer for an MR over [off, off+length).
func (b *Buffer) hold(off, length int) ([]byte, error) {
	if b == nil {
		return nil, errNilBuffer
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mem == nil {
		return nil, fmt.Errorf("uverbs: buffer: %w", ErrClosed)
	}
	if off < 0 || length <= 0 || off > len(b.mem) || length > len(b.mem)-off {
		return nil, fmt.Errorf("uverbs: buffer range [%d, %d+%d) is outside the %d-byte buffer: %w", off, off, length, len(b.mem), unix.EINVAL)
	}
	b.regs++
	return b.mem[off : off+length], nil
}

func (b *Buffer) release() {
	b.mu.Lock()
	b.regs--
	b.mu.Unlock()
}
