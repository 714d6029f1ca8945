//go:build amd64 || arm64

package mlx5

import "unsafe"

// The doorbell sequence, as libmlx5's post_send_db and mlx5_bf_copy do it,
// with the barriers of rdma-core's util/udma_barrier.h:
//
//  1. udma_to_device_barrier: the WQEs are in memory before the doorbell
//     record says they exist (amd64: stores are not reordered with stores,
//     so a compiler barrier, which an assembly call is; arm64: DSB ST);
//  2. the doorbell record's send counter, big endian;
//  3. mmio_wc_start (SFENCE / DSB ST): the record is visible before the
//     write-combining write below;
//  4. the 8-byte doorbell (the first 8 bytes of the last WQE's control
//     segment) or the BlueFlame copy (the whole WQE, 64 bytes at a time,
//     in 16-byte SSE stores on amd64 and 64-byte NEON stores on arm64,
//     in ascending address order, never a memmove that could reorder or
//     split them; libmlx5 writes 8 bytes at a time on amd64, which a
//     write-combining buffer gathers the same way, but half the store
//     instructions take about 0.5 ns off a post);
//  5. mmio_flush_writes (SFENCE / DSB ST): the write-combining buffer is
//     flushed before the register half is toggled and before another
//     thread may use the register.
//
// They are in assembly so that the compiler can neither reorder the
// stores nor merge or split them.

// ringDoorbell stores val (host order; stored big endian) in the doorbell
// record and writes the 8 bytes at ctrl to the register reg.
//
//go:noescape
func ringDoorbell(dbrec *uint32, val uint32, reg, ctrl unsafe.Pointer)

// ringBlueFlame stores val in the doorbell record and copies blocks
// 64-byte blocks from src to reg; src wraps from ringEnd to ringStart.
//
//go:noescape
func ringBlueFlame(dbrec *uint32, val uint32, reg, src unsafe.Pointer, blocks int, ringStart, ringEnd unsafe.Pointer)

// storeDBRec stores val (host order; stored big endian) in a doorbell
// record after the WQEs before it (udma_to_device_barrier): the receive
// and SRQ doorbell, which has no register write.
//
//go:noescape
func storeDBRec(dbrec *uint32, val uint32)

// ringBlueFlame64 is ringBlueFlame of one block, which cannot wrap: the
// common WQE of 64 bytes or less, without the loop and with four
// arguments to pass instead of seven (about 0.6 ns of a post + poll).
//
//go:noescape
func ringBlueFlame64(dbrec *uint32, val uint32, reg, src unsafe.Pointer)
