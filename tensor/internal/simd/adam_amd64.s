#include "textflag.h"

// func adamF32SSE(p, grad, m, v *float32, n int, c *AdamConsts)
// The common Adam/AdamW update over n elements, n a multiple of 8, in the
// scalar loop's exact order of operations (so results are bit-identical):
//   m = b1*m + omb1*g
//   v = b2*v + (omb2*g)*g
//   p = p - (step*m) / (sqrt(v)*invBc2 + eps)
// c holds b1, omb1, b2, omb2, invBc2, eps, step as float32s.
TEXT ·adamF32SSE(SB), NOSPLIT, $0-48
	MOVQ p+0(FP), DI
	MOVQ grad+8(FP), SI
	MOVQ m+16(FP), R8
	MOVQ v+24(FP), R9
	MOVQ n+32(FP), CX
	MOVQ c+40(FP), AX
	MOVSS 0(AX), X8
	SHUFPS $0, X8, X8   // b1
	MOVSS 4(AX), X9
	SHUFPS $0, X9, X9   // omb1
	MOVSS 8(AX), X10
	SHUFPS $0, X10, X10 // b2
	MOVSS 12(AX), X11
	SHUFPS $0, X11, X11 // omb2
	MOVSS 16(AX), X12
	SHUFPS $0, X12, X12 // invBc2
	MOVSS 20(AX), X13
	SHUFPS $0, X13, X13 // eps
	MOVSS 24(AX), X14
	SHUFPS $0, X14, X14 // step
	SHRQ $2, CX
	JZ   done

loop:
	MOVUPS (SI), X0     // g
	MOVUPS (R8), X1     // m
	MULPS  X8, X1       // b1*m
	MOVAPS X0, X2
	MULPS  X9, X2       // omb1*g
	ADDPS  X2, X1       // m'
	MOVUPS X1, (R8)
	MOVUPS (R9), X3     // v
	MULPS  X10, X3      // b2*v
	MOVAPS X0, X4
	MULPS  X11, X4      // omb2*g
	MULPS  X0, X4       // (omb2*g)*g
	ADDPS  X4, X3       // v'
	MOVUPS X3, (R9)
	SQRTPS X3, X5
	MULPS  X12, X5
	ADDPS  X13, X5      // sqrt(v')*invBc2 + eps
	MOVAPS X1, X6
	MULPS  X14, X6      // step*m'
	DIVPS  X5, X6
	MOVUPS (DI), X7
	SUBPS  X6, X7
	MOVUPS X7, (DI)
	ADDQ   $16, SI
	ADDQ   $16, R8
	ADDQ   $16, R9
	ADDQ   $16, DI
	DECQ   CX
	JNZ    loop

done:
	RET
