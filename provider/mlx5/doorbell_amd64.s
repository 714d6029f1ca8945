#include "textflag.h"

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
	MOVQ   dbrec+0(FP), AX
	MOVL   val+8(FP), BX
	BSWAPL BX
	MOVL   BX, (AX)
	SFENCE
	MOVQ   reg+16(FP), DI
	MOVQ   src+24(FP), SI
	MOVQ   blocks+32(FP), CX
	MOVQ   ringStart+40(FP), R8
	MOVQ   ringEnd+48(FP), R9
	TESTQ  CX, CX
	JLE    done

loop:
	MOVQ 0(SI), AX
	MOVQ AX, 0(DI)
	MOVQ 8(SI), AX
	MOVQ AX, 8(DI)
	MOVQ 16(SI), AX
	MOVQ AX, 16(DI)
	MOVQ 24(SI), AX
	MOVQ AX, 24(DI)
	MOVQ 32(SI), AX
	MOVQ AX, 32(DI)
	MOVQ 40(SI), AX
	MOVQ AX, 40(DI)
	MOVQ 48(SI), AX
	MOVQ AX, 48(DI)
	MOVQ 56(SI), AX
	MOVQ AX, 56(DI)
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
