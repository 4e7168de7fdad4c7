#include "textflag.h"

// SSE2 (the amd64 baseline) ReLU kernels. Branch-free: the branchy Go loop
// mispredicts on half of all elements of a pre-activation, which made ReLU
// and its gradient ~12% of an MLP training step.

// func reluF32SSE(dst, src *float32, n int)
// dst[i] = max(0, src[i]) for i < n, n a multiple of 16. MAXPS returns its
// source operand when either is NaN, so NaN propagates as in torch.
TEXT ·reluF32SSE(SB), NOSPLIT, $0-24
	MOVQ  dst+0(FP), DI
	MOVQ  src+8(FP), SI
	MOVQ  n+16(FP), CX
	SHRQ  $4, CX
	JZ    fdone
	XORPS X7, X7

floop:
	MOVUPS (SI), X0
	MOVUPS 16(SI), X1
	MOVUPS 32(SI), X2
	MOVUPS 48(SI), X3
	MOVAPS X7, X4
	MOVAPS X7, X5
	MOVAPS X7, X6
	MOVAPS X7, X8
	MAXPS  X0, X4
	MAXPS  X1, X5
	MAXPS  X2, X6
	MAXPS  X3, X8
	MOVUPS X4, (DI)
	MOVUPS X5, 16(DI)
	MOVUPS X6, 32(DI)
	MOVUPS X8, 48(DI)
	ADDQ   $64, SI
	ADDQ   $64, DI
	DECQ   CX
	JNZ    floop

fdone:
	RET

// func reluBwdF32SSE(gx, gy, y *float32, n int)
// gx[i] = gy[i] if y[i] > 0 else 0, for i < n, n a multiple of 16.
// NaN in y compares false, so its gradient is 0 (torch's threshold_backward).
TEXT ·reluBwdF32SSE(SB), NOSPLIT, $0-32
	MOVQ  gx+0(FP), DI
	MOVQ  gy+8(FP), SI
	MOVQ  y+16(FP), DX
	MOVQ  n+24(FP), CX
	SHRQ  $4, CX
	JZ    bdone
	XORPS X7, X7

bloop:
	MOVUPS (DX), X0
	MOVUPS 16(DX), X1
	MOVUPS 32(DX), X2
	MOVUPS 48(DX), X3
	MOVAPS X7, X4
	MOVAPS X7, X5
	MOVAPS X7, X6
	MOVAPS X7, X8
	CMPPS  X0, X4, $1 // X4 = 0 < y
	CMPPS  X1, X5, $1
	CMPPS  X2, X6, $1
	CMPPS  X3, X8, $1
	MOVUPS (SI), X0
	MOVUPS 16(SI), X1
	MOVUPS 32(SI), X2
	MOVUPS 48(SI), X3
	ANDPS  X0, X4
	ANDPS  X1, X5
	ANDPS  X2, X6
	ANDPS  X3, X8
	MOVUPS X4, (DI)
	MOVUPS X5, 16(DI)
	MOVUPS X6, 32(DI)
	MOVUPS X8, 48(DI)
	ADDQ   $64, SI
	ADDQ   $64, DX
	ADDQ   $64, DI
	DECQ   CX
	JNZ    bloop

bdone:
	RET
