package mlx5

import (
	"encoding/binary"
	"math/bits"
	"unsafe"

	"github.com/goverbs/goverbs/internal/abi"
)

// Everything the HCA reads is big endian. These write through a pointer
// into a queue buffer; the compiler turns each into one byte-swapping
// store.

func putBE16(p unsafe.Pointer, v uint16) { binary.BigEndian.PutUint16((*[2]byte)(p)[:], v) }
func putBE32(p unsafe.Pointer, v uint32) { binary.BigEndian.PutUint32((*[4]byte)(p)[:], v) }
func putBE64(p unsafe.Pointer, v uint64) { binary.BigEndian.PutUint64((*[8]byte)(p)[:], v) }
func readBE32(p unsafe.Pointer) uint32   { return binary.BigEndian.Uint32((*[4]byte)(p)[:]) }

// storeBE64 writes v big endian at p (8-byte aligned) in one 8-byte
// store. putBE64 of a value whose high bytes the compiler knows are zero
// may come out as several narrower stores, and the doorbell and
// BlueFlame copies read the WQE 8 bytes at a time: a load spanning
// several stores still in the store buffer is not forwarded but waits
// for them all to reach the cache.
func storeBE64(p unsafe.Pointer, v uint64) {
	if !bigEndianHost {
		v = bits.ReverseBytes64(v)
	}
	*(*uint64)(p) = v
}

// Segment sizes, in bytes.
const (
	ctrlSegSize     = int(unsafe.Sizeof(abi.MLX5WQECtrlSeg{}))     // 16
	dataSegSize     = int(unsafe.Sizeof(abi.MLX5WQEDataSeg{}))     // 16
	raddrSegSize    = int(unsafe.Sizeof(abi.MLX5WQERaddrSeg{}))    // 16
	atomicSegSize   = int(unsafe.Sizeof(abi.MLX5WQEAtomicSeg{}))   // 16
	datagramSegSize = int(unsafe.Sizeof(abi.MLX5WQEDatagramSeg{})) // 48
	xrcSegSize      = int(unsafe.Sizeof(abi.MLX5WQEXRCSeg{}))      // 16
	umrCtrlSegSize  = int(unsafe.Sizeof(abi.MLX5WQEUMRCtrlSeg{}))  // 48
	mkeySegSize     = int(unsafe.Sizeof(abi.MLX5WQEMkeyContextSeg{}))
	// An Ethernet segment as libmlx5 declares it: the PRM's 16 bytes and
	// 16 more of inline headers.
	ethSegSize      = int(unsafe.Sizeof(abi.MLX5WQEEthSeg{})) + 16
	ethInlineHdrOff = int(unsafe.Offsetof(abi.MLX5WQEEthSeg{}.InlineHdr)) + 2 // inline_hdr_start
	inlineSegSize   = int(unsafe.Sizeof(abi.MLX5WQEInlineSeg{}))
	srqNextSegSize  = int(unsafe.Sizeof(abi.MLX5WQESRQNextSeg{}))
	wqeBB           = abi.MLX5SendWQEBB
	// umrKLMSize is the room libmlx5 reserves for one KLM of a bind.
	umrKLMSize = 64
	atomicSize = 8 // the bytes an atomic's SGE receives
)

// ethInlineHdrRest is offsetof(struct mlx5_wqe_eth_seg, inline_hdr), 16:
// where the inline headers past inline_hdr_start's 2 bytes go. A raw
// packet WQE's Ethernet segment takes (ethInlineHdrRest + the inline
// header bytes) / 16 units: the PRM's 16 bytes even when no header is
// inline (eth_min_inline 0), 32 with 18 header bytes.
const ethInlineHdrRest = int(unsafe.Sizeof(abi.MLX5WQEEthSeg{}))

// Overheads libmlx5's sq_overhead computes for the default operations of
// each QP type: the largest fixed part of any WQE the QP may post.
const (
	// RC, UC and XRC may post a LOCAL_INV or BIND_MW: control, UMR
	// control, mkey context and a KLM.
	rcOverhead = ctrlSegSize + umrCtrlSegSize + mkeySegSize + umrKLMSize // 192
	udOverhead = ctrlSegSize + datagramSegSize                           // 64
	// RAW_PACKET: control and the Ethernet segment.
	rawOverhead = ctrlSegSize + ethSegSize // 48
)
