#include "textflag.h"

// DSB ST (option 0b1110) is rdma-core's udma_to_device_barrier and
// mmio_flush_writes on aarch64.

// DBREC stores the argument val, big endian, in the doorbell record at the
// argument dbrec after the WQEs (udma_to_device_barrier), then fences it
// (mmio_wc_start) before the register writes that follow; it uses R0 and
// R1.
#define DBREC \
	MOVD  dbrec+0(FP), R0; \
	MOVWU val+8(FP), R1; \
	REVW  R1, R1; \
	DSB   $0xe; \
	MOVW  R1, (R0); \
	DSB   $0xe

// func ringDoorbell(dbrec *uint32, val uint32, reg, ctrl unsafe.Pointer)
TEXT ·ringDoorbell(SB), NOSPLIT, $0-32
	MOVD  dbrec+0(FP), R0
	MOVWU val+8(FP), R1
	MOVD  reg+16(FP), R2
	MOVD  ctrl+24(FP), R3
	REVW  R1, R1
	DSB   $0xe            // udma_to_device_barrier
	MOVW  R1, (R0)        // doorbell record
	DSB   $0xe            // mmio_wc_start
	MOVD  (R3), R4
	MOVD  R4, (R2)        // the 8-byte doorbell
	DSB   $0xe            // mmio_flush_writes
	RET

// func ringBlueFlame(dbrec *uint32, val uint32, reg, src unsafe.Pointer, blocks int, ringStart, ringEnd unsafe.Pointer)
TEXT ·ringBlueFlame(SB), NOSPLIT, $0-56
	DBREC
	MOVD  reg+16(FP), R2
	MOVD  src+24(FP), R3
	MOVD  blocks+32(FP), R4
	MOVD  ringStart+40(FP), R5
	MOVD  ringEnd+48(FP), R6
	CMP   $0, R4
	BLE   done

loop:
	VLD1.P 64(R3), [V0.D2, V1.D2, V2.D2, V3.D2]
	VST1.P [V0.D2, V1.D2, V2.D2, V3.D2], 64(R2)
	CMP    R3, R6
	BNE    nowrap
	MOVD   R5, R3

nowrap:
	SUBS $1, R4, R4
	BNE  loop

done:
	DSB $0xe
	RET

// func storeDBRec(dbrec *uint32, val uint32)
TEXT ·storeDBRec(SB), NOSPLIT, $0-12
	MOVD  dbrec+0(FP), R0
	MOVWU val+8(FP), R1
	REVW  R1, R1
	DSB   $0xe
	MOVW  R1, (R0)
	RET

// func ringBlueFlame64(dbrec *uint32, val uint32, reg, src unsafe.Pointer)
TEXT ·ringBlueFlame64(SB), NOSPLIT, $0-32
	DBREC
	MOVD  reg+16(FP), R2
	MOVD  src+24(FP), R3
	VLD1  (R3), [V0.D2, V1.D2, V2.D2, V3.D2]
	VST1  [V0.D2, V1.D2, V2.D2, V3.D2], (R2)
	DSB   $0xe
	RET
