package rsocket

import (
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/uverbs"
)

// ErrNotMapped is wrapped by WriteIO's error when no mapping of the peer
// covers the offset it was to write.
var ErrNotMapped = errors.New("rsocket: the peer has mapped no memory at this offset")

// IOMap is memory of this side that the peer writes straight into with
// its WriteIO (rsockets' riomap with PROT_WRITE, which riostream uses): the
// peer's device writes it without a message and without this side's CPU.
// The data is in place once stream data the peer wrote after it arrives
// here: its writes and its stream data travel in order. riostream instead
// waits for the last byte of its buffer to take a value the peer put
// there (Load reads such a byte); on rxe that is not enough: rxe copies a
// packet's payload into memory with the kernel's memcpy, which may copy
// 32 bytes or more backwards, so that the last byte can be in memory
// before the first bytes of its packet. Make one with Conn.MapIO.
//
// The memory is the package's (mapped apart from Go's heap, so that the
// garbage collector never moves it); Bytes returns it. Close ends the
// mapping without telling the peer, as riounmap does: a peer that writes
// it after that fails its connection.
type IOMap struct {
	c      *Conn
	slot   int // the peer's slot it takes
	off    uint64
	size   int
	mu     sync.RWMutex // Load and Bytes read-lock it: release unmaps the memory under the write lock
	mem    *uverbs.Buffer
	mr     *uverbs.MR
	buf    []byte
	freed  bool
	closeE error
}

// MapIO makes size bytes of new memory that the peer may write with its
// WriteIO at the stream offsets offset to offset+size-1 (riomap with
// PROT_WRITE at that offset), and sends the mapping to the peer: at once
// if a credit and a control slot are free, or else with this side's next
// Write or WriteIO, which send mappings before anything else. The peer
// keeps Config.IOMapSize mappings of this side at a time (its
// RDMA_IOMAPSIZE); when it offers none, or all are taken, MapIO fails
// with an error matching unix.ENOMEM (riomap's). Each mapping sent costs
// this side one of the peer's credits for good when the peer runs
// librdmacm, whose receiver does not count the message; a Go peer gives
// it back.
func (c *Conn) MapIO(size int, offset uint64) (*IOMap, error) {
	switch {
	case size <= 0 || size > math.MaxUint32:
		return nil, c.opErr("iomap", fmt.Errorf("rsocket: MapIO size %d is outside 1..2^32-1: %w", size, unix.EINVAL))
	case offset+uint64(size) < offset:
		return nil, c.opErr("iomap", fmt.Errorf("rsocket: MapIO offset %d + size %d wraps: %w", offset, size, unix.EINVAL))
	}
	m := &IOMap{c: c, off: offset, size: size}
	c.mu.Lock()
	if err := c.writeErr(); err != nil { // a mapping is sent as writes are
		c.mu.Unlock()
		return nil, c.opErr("iomap", err)
	}
	if c.ioMaps == nil {
		c.ioMaps = make([]*IOMap, c.peerIO.Length)
	}
	m.slot = -1
	for i, o := range c.ioMaps {
		if o == nil {
			m.slot = i
			c.ioMaps[i] = m
			break
		}
	}
	c.mu.Unlock()
	if m.slot < 0 {
		if c.peerIO.Length == 0 {
			return nil, c.opErr("iomap", fmt.Errorf("rsocket: the peer takes no mappings (its iomap size is 0): %w", unix.ENOMEM))
		}
		return nil, c.opErr("iomap", fmt.Errorf("rsocket: all %d of the peer's iomap slots are mapped: %w", c.peerIO.Length, unix.ENOMEM))
	}
	mem, mr, err := c.registerIOMap(size)
	m.mu.Lock()
	if err == nil && m.freed { // the connection closed meanwhile
		mr.Close()
		mem.Close()
		err = net.ErrClosed
	}
	if err != nil {
		m.freed = true
		m.mu.Unlock()
		c.mu.Lock()
		if c.ioMaps != nil && c.ioMaps[m.slot] == m {
			c.ioMaps[m.slot] = nil
		}
		c.mu.Unlock()
		return nil, c.opErr("iomap", err)
	}
	m.mem, m.mr, m.buf = mem, mr, mem.Bytes()
	m.mu.Unlock()
	c.mu.Lock()
	live := c.ioMaps != nil && c.ioMaps[m.slot] == m // not freed by Close meanwhile
	if live {
		c.ioPending = append(c.ioPending, m)
		c.sendIOMaps()
	}
	c.mu.Unlock()
	if !live {
		m.release()
		return nil, c.opErr("iomap", net.ErrClosed)
	}
	return m, nil
}

func (c *Conn) registerIOMap(size int) (*uverbs.Buffer, *uverbs.MR, error) {
	mem, err := uverbs.AllocBuffer(size)
	if err != nil {
		return nil, nil, err
	}
	mr, err := c.pd.RegisterBuffer(mem, 0, size, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite)
	if err != nil {
		mem.Close()
		return nil, nil, err
	}
	return mem, mr, nil
}

// Bytes returns the mapped memory; nil after Close. The memory is
// unmapped by Close (IOMap's or Conn's): the slice must not be used once
// either may have run (Load may).
func (m *IOMap) Bytes() []byte {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.freed {
		return nil
	}
	return m.buf
}

// Offset returns the stream offset of the memory's first byte.
func (m *IOMap) Offset() uint64 { return m.off }

// Len returns the size of the mapping.
func (m *IOMap) Len() int { return m.size }

// Load reads byte i of the memory atomically: a loop waiting for a byte
// the peer writes sees it change (a plain read may be hoisted out of the
// loop by the compiler). What else the peer wrote may not all be in place
// yet (see IOMap). It panics if i is out of range, as an index does, and
// returns 0 after Close.
func (m *IOMap) Load(i int) byte {
	if i < 0 || i >= m.size {
		panic(fmt.Sprintf("rsocket: IOMap.Load(%d) of a %d-byte mapping", i, m.size))
	}
	// The load is made under the read lock: release unmaps the memory
	// under the write lock, so that a Close racing with Load makes it
	// return 0, never read unmapped memory.
	m.mu.RLock()
	if m.freed || m.buf == nil {
		m.mu.RUnlock()
		return 0
	}
	// The aligned word that holds byte i: the memory is page-aligned and
	// whole pages long, so the word is inside it.
	w := atomic.LoadUint32((*uint32)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(m.buf)), i&^3)))
	m.mu.RUnlock()
	var x [4]byte
	*(*uint32)(unsafe.Pointer(&x)) = w
	return x[i&3]
}

// Close ends the mapping (riounmap): the memory is deregistered and
// freed, and the peer's slot is free for this side's next MapIO. The peer
// is not told. Close is idempotent; Conn.Close closes every mapping.
func (m *IOMap) Close() error {
	c := m.c
	c.mu.Lock()
	if c.ioMaps != nil && c.ioMaps[m.slot] == m {
		c.ioMaps[m.slot] = nil
	}
	for i, p := range c.ioPending {
		if p == m {
			c.ioPending = append(c.ioPending[:i], c.ioPending[i+1:]...)
			break
		}
	}
	c.mu.Unlock()
	return m.release()
}

func (m *IOMap) release() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.freed {
		return m.closeE
	}
	m.freed = true
	if m.mr != nil {
		m.closeE = m.mr.Close()
	}
	if m.mem != nil {
		// Unmapped under the write lock: Load reads it under the read
		// lock.
		m.closeE = errors.Join(m.closeE, m.mem.Close())
	}
	return m.closeE
}

// sendIOMaps sends the pending mappings while a credit and a control slot
// are free (rsockets' rs_send_iomaps): each is an RDMA WRITE WITH
// IMMEDIATE of its entry into the peer's slot. Holds mu.
func (c *Conn) sendIOMaps() {
	for len(c.ioPending) > 0 && c.ctrlAvail > 0 && c.sseqNo != c.sseqComp && c.writeErr() == nil {
		m := c.ioPending[0]
		putIOMapEntry(c.ctrlSlot(iomapBytes), c.peerOrd, ioMapEntry{Offset: m.off, Addr: m.mr.Addr(), Key: m.mr.Rkey(), Length: uint32(m.size)})
		c.sendWR[0] = uverbs.SendWR{ID: c.signaledID(wrCtrl, 0, 0), Flags: uverbs.SendSignaled,
			Opcode: uverbs.WRRDMAWriteWithImm, Imm: mkImm(opIOMapSGL, uint32(m.slot)), SGL: c.sendSGE[:],
			RemoteAddr: c.peerIO.Addr + uint64(m.slot)*iomapBytes, Rkey: c.peerIO.Key}
		err := c.qp.PostSend(c.sendWR[:])
		c.sendWR[0].SGL = nil
		if err != nil {
			c.err = fmt.Errorf("rsocket: sending a mapping: %w", err)
			return
		}
		c.ctrlSeq++
		c.ctrlAvail--
		c.sseqNo++
		c.ioPending[0] = nil
		c.ioPending = c.ioPending[1:]
	}
}

// findIOMap finds the slot of this side's that maps stream offset off,
// as the peer last wrote it (rs_find_iomap), trying the last one found
// first. Holds mu.
func (c *Conn) findIOMap(off uint64) (ioMapEntry, bool) {
	n := len(c.ioSl) / iomapBytes
	for k := range n {
		i := (c.ioLast + k) % n
		if e := parseIOMapEntry(c.ioSl[i*iomapBytes:]); e.covers(off) {
			c.ioLast = i
			return e, true
		}
	}
	return ioMapEntry{}, false
}

// WriteIO writes p into the peer's memory mapped at stream offset offset
// onwards (rsockets' riowrite), by plain RDMA writes that the peer's CPU
// does not see: the peer mapped it with its MapIO (riomap), and this
// side takes Config.IOMapSize of its mappings. Like Write, it may not be
// called after CloseWrite. Mappings this side sent
// before go first, and data written by Write after WriteIO returns
// arrives after what it wrote. The writes take no credit; they take send
// queue slots and staging room as Write does, and wait for them, within
// the write deadline. Where no mapping covers an offset, WriteIO stops
// there with an error wrapping ErrNotMapped, having written the bytes
// before it.
func (c *Conn) WriteIO(p []byte, offset uint64) (int, error) {
	if offset+uint64(len(p)) < offset {
		return 0, c.opErr("write", fmt.Errorf("rsocket: WriteIO offset %d + %d bytes wraps: %w", offset, len(p), unix.EINVAL))
	}
	return c.write(p, true, offset)
}

// postDirect posts the first bytes of rest as one plain RDMA write to the
// peer's memory mapped at stream offset off and returns how many, or 0
// when it must wait. Holds mu.
func (c *Conn) postDirect(rest []byte, off uint64, olen *int) (int, error) {
	if !c.sendRoom() {
		return 0, nil
	}
	e, ok := c.findIOMap(off)
	if !ok {
		if len(c.ioSl) == 0 {
			return 0, fmt.Errorf("%w: this side takes no mappings of the peer's (Config.IOMapSize 0)", ErrNotMapped)
		}
		return 0, fmt.Errorf("%w: offset %d", ErrNotMapped, off)
	}
	n, inline := c.chunk(len(rest), olen, uint64(e.Length)-(off-e.Offset))
	if err := c.postWrite(rest[:n], inline, uverbs.WRRDMAWrite, 0, e.Addr+(off-e.Offset), e.Key); err != nil {
		c.err = fmt.Errorf("rsocket: posting an iomap write: %w", err)
		return 0, c.err
	}
	return n, nil
}
