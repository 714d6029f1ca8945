#include "textflag.h"

// DBREC stores the argument val, big endian, in the doorbell record at the
// argument dbrec, then fences it (mmio_wc_start) before the register
// writes that follow; it uses AX and BX.
#define DBREC \
	MOVQ   dbrec+0(FP), AX; \
	MOVL   val+8(FP), BX; \
	BSWAPL BX; \
	MOVL   BX, (AX); \
	SFENCE

// COPY64 copies the 64-byte block at SI to DI in four 16-byte stores, in
// ascending address order; it uses X0-X3.
#define COPY64 \
	MOVOU 0(SI), X0; \
	MOVOU 16(SI), X1; \
	MOVOU 32(SI), X2; \
	MOVOU 48(SI), X3; \
	MOVOU X0, 0(DI); \
	MOVOU X1, 16(DI); \
	MOVOU X2, 32(DI); \
	MOVOU X3, 48(DI)

// func ringDoorbell(dbrec *uint32, val uint32, reg, ctrl unsafe.Pointer)
TEXT ·ringDoorbell(SB), NOSPLIT, $0-32
	MOVQ   dbrec+0(FP), AX
	MOVL   val+8(FP), BX
	MOVQ   reg+16(FP), CX
	MOVQ   ctrl+24(FP), DX
	BSWAPL BX
	MOVL   BX, (AX)   // doorbell record (x86 keeps stores in order)
	SFENCE            // mmio_wc_start
	MOVQ   (DX), BX
	MOVQ   BX, (CX)   // the 8-byte doorbell
	SFENCE            // mmio_flush_writes
	RET

// func ringBlueFlame(dbrec *uint32, val uint32, reg, src unsafe.Pointer, blocks int, ringStart, ringEnd unsafe.Pointer)
TEXT ·ringBlueFlame(SB), NOSPLIT, $0-56
	DBREC
	MOVQ   reg+16(FP), DI
	MOVQ   src+24(FP), SI
	MOVQ   blocks+32(FP), CX
	MOVQ   ringStart+40(FP), R8
	MOVQ   ringEnd+48(FP), R9
	TESTQ  CX, CX
	JLE    done

loop:
	COPY64
	ADDQ $64, SI
	ADDQ $64, DI
	CMPQ SI, R9
	JNE  nowrap
	MOVQ R8, SI

nowrap:
	DECQ CX
	JNZ  loop

done:
	SFENCE
	RET

// func storeDBRec(dbrec *uint32, val uint32)
TEXT ·storeDBRec(SB), NOSPLIT, $0-12
	MOVQ   dbrec+0(FP), AX
	MOVL   val+8(FP), BX
	BSWAPL BX
	MOVL   BX, (AX)
	RET

// func ringBlueFlame64(dbrec *uint32, val uint32, reg, src unsafe.Pointer)
TEXT ·ringBlueFlame64(SB), NOSPLIT, $0-32
	DBREC
	MOVQ reg+16(FP), DI
	MOVQ src+24(FP), SI
	COPY64
	SFENCE
	RET
