package rxe

import (
	"sync/atomic"
	"testing"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
)

// FuzzQueueHeader feeds mapQueue arbitrary headers and mapping sizes, as a
// buggy or hostile kernel could. Whatever it accepts must keep every slot
// inside the mapping, and the data path over it (with arbitrary indexes)
// must stay in bounds: slot() slices with bounds checks, so an escape
// panics here instead of reading stray memory.
func FuzzQueueHeader(f *testing.F) {
	f.Add(uint32(6), uint32(31), uint16(4096), uint32(3), uint32(1), uint8(0))
	f.Add(uint32(8), uint32(63), uint16(0xffff), uint32(70), uint32(0), uint8(1))
	f.Add(uint32(7), uint32(15), uint16(4096), uint32(0), uint32(0xffffffff), uint8(2))
	f.Add(uint32(6), uint32(0xffffffff), uint16(4096), uint32(0), uint32(0), uint8(0))
	f.Add(uint32(32), uint32(0), uint16(4096), uint32(0), uint32(0), uint8(1))
	f.Add(uint32(6), uint32(63), uint16(uint32(headerSize+64*64)), uint32(0), uint32(0), uint8(0))
	f.Fuzz(func(t *testing.T, log2, mask uint32, size uint16, prod, cons uint32, kind uint8) {
		minElem := [...]int{wcSize, sendWQESize, recvWQESize}[kind%3]
		file := (int(size) + 4095) / 4096 * 4096
		if file == 0 {
			file = 4096
		}
		fd := memfdQueue(t, file, abi.RXEQueueBuf{Log2ElemSize: log2, IndexMask: mask})
		q, err := mapQueue(fd, abi.MMInfo{Size: uint32(size)}, minElem)
		if err != nil {
			return
		}
		defer q.unmap()
		checkQueueInvariants(t, q, minElem)
		atomic.StoreUint32(&q.hdr.ProducerIndex, prod)
		atomic.StoreUint32(&q.hdr.ConsumerIndex, cons)
		switch kind % 3 {
		case 0:
			c := &cq{q: q, cons: cons}
			wcs := make([]provider.WC, 64)
			n, _ := c.Poll(wcs)
			if n > int(q.mask) {
				t.Fatalf("Poll returned %d from a %d-slot ring", n, q.mask)
			}
		case 1:
			room := q.elemSize - sendWQESize
			s := &sendQueue{q: q, fd: -1, qpType: abi.QPTypeRC, maxSGE: min(4, room/sgeSize), maxInline: min(64, room)}
			sgl := make([]provider.SGE, s.maxSGE)
			list := make([]provider.SendWR, 8)
			for i := range list {
				list[i] = provider.SendWR{ID: uint64(i), Opcode: provider.WRSend, SGL: sgl}
			}
			s.PostSend(list) // the doorbell on fd -1 fails; the ring writes are what matter
			if pi := atomic.LoadUint32(&q.hdr.ProducerIndex); pi != prod && pi > q.mask {
				t.Fatalf("published producer index %#x outside mask %#x", pi, q.mask)
			}
		case 2:
			r := &recvQueue{q: q, maxSGE: min(4, (q.elemSize-recvWQESize)/sgeSize)}
			sgl := make([]provider.SGE, r.maxSGE)
			list := make([]provider.RecvWR, 8)
			for i := range list {
				list[i] = provider.RecvWR{ID: uint64(i), SGL: sgl}
			}
			r.PostRecv(list)
			if pi := atomic.LoadUint32(&q.hdr.ProducerIndex); pi != prod && pi > q.mask {
				t.Fatalf("published producer index %#x outside mask %#x", pi, q.mask)
			}
		}
	})
}

// FuzzQueueIndexes drives the data path over a guarded ring (PROT_NONE
// pages right before the header and right after the last slot) with
// arbitrary index values and list lengths. Any access outside the ring
// faults; the counts must follow the ring arithmetic.
func FuzzQueueIndexes(f *testing.F) {
	f.Add(uint32(0), uint32(0), uint8(1), uint8(1))
	f.Add(uint32(0xffffffff), uint32(0), uint8(16), uint8(64))
	f.Add(uint32(5), uint32(0x80000005), uint8(15), uint8(3))
	f.Add(uint32(0xdeadbeef), uint32(0xcafebabe), uint8(200), uint8(255))
	f.Fuzz(func(t *testing.T, prod, cons uint32, nPost, nPoll uint8) {
		const mask = 15
		gc := newGuarded(t, 6, mask)
		c := &cq{q: gc.q, cons: cons}
		atomic.StoreUint32(&gc.q.hdr.ProducerIndex, prod)
		wcs := make([]provider.WC, int(nPoll))
		n, err := c.Poll(wcs)
		if err != nil {
			t.Fatal(err)
		}
		avail := int((prod&mask - cons&mask) & mask)
		if want := min(avail, int(nPoll)); n != want {
			t.Fatalf("Poll(%d) = %d with %d available", nPoll, n, avail)
		}

		s, gs, _ := newTestSQ(t, abi.QPTypeRC, 8, mask, 2, 64)
		s.fd = -1
		atomic.StoreUint32(&gs.q.hdr.ProducerIndex, prod)
		atomic.StoreUint32(&gs.q.hdr.ConsumerIndex, cons)
		free := int(mask - ((prod&mask - cons&mask) & mask))
		list := make([]provider.SendWR, int(nPost))
		for i := range list {
			list[i] = provider.SendWR{ID: uint64(i), Opcode: provider.WRRDMAWrite, SGL: []provider.SGE{{Length: 1}, {Length: 2}}}
		}
		err = s.PostSend(list)
		posted := atomic.LoadUint32(&gs.q.hdr.ProducerIndex)
		switch {
		case int(nPost) > free:
			if posted != prod {
				t.Fatalf("%d WRs with %d free: producer index moved from %#x to %#x", nPost, free, prod, posted)
			}
		case nPost > 0:
			if want := (prod + uint32(nPost)) & mask; posted != want {
				t.Fatalf("%d WRs from %#x: producer index %#x, want %#x (err %v)", nPost, prod, posted, want, err)
			}
		}

		r, gr := newTestRQ(t, mask, 2)
		atomic.StoreUint32(&gr.q.hdr.ProducerIndex, prod)
		atomic.StoreUint32(&gr.q.hdr.ConsumerIndex, cons)
		rl := make([]provider.RecvWR, int(nPost))
		err = r.PostRecv(rl)
		if (err == nil) != (int(nPost) <= free) {
			t.Fatalf("PostRecv of %d with %d free: %v", nPost, free, err)
		}
	})
}
