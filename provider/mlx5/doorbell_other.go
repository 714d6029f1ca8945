//go:build !amd64 && !arm64

package mlx5

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"
)

// On architectures without the assembly, sequentially consistent atomics
// stand in for the barriers: every store below is ordered with every
// other. (The write-combining flush has no portable equivalent; these
// architectures are untested with mlx5 hardware.)

var fence atomic.Uint32

func storeBE32(p *uint32, val uint32) {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], val)
	atomic.StoreUint32(p, *(*uint32)(unsafe.Pointer(&b)))
}

func ringDoorbell(dbrec *uint32, val uint32, reg, ctrl unsafe.Pointer) {
	storeBE32(dbrec, val)
	atomic.StoreUint64((*uint64)(reg), *(*uint64)(ctrl))
	fence.Add(1)
}

func ringBlueFlame(dbrec *uint32, val uint32, reg, src unsafe.Pointer, blocks int, ringStart, ringEnd unsafe.Pointer) {
	storeBE32(dbrec, val)
	for ; blocks > 0; blocks-- {
		for i := uintptr(0); i < 64; i += 8 {
			atomic.StoreUint64((*uint64)(unsafe.Add(reg, i)), *(*uint64)(unsafe.Add(src, i)))
		}
		reg = unsafe.Add(reg, 64)
		src = unsafe.Add(src, 64)
		if src == ringEnd {
			src = ringStart
		}
	}
	fence.Add(1)
}

func ringBlueFlame64(dbrec *uint32, val uint32, reg, src unsafe.Pointer) {
	ringBlueFlame(dbrec, val, reg, src, 1, nil, nil)
}

func storeDBRec(dbrec *uint32, val uint32) {
	fence.Add(1)
	storeBE32(dbrec, val)
}
