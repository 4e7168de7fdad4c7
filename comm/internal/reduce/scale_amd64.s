#include "textflag.h"

// SSE2 (the amd64 baseline) kernels for AVG's final division. The scalar
// Go loop is one DIVSS per element; at DDP's gradient sizes (2.7 MB for
// the MLP) that was about 5% of a world-2 training step.

// func divF32SSE(x *float32, n int, d float32)
// x[i] /= d for i < n, n a multiple of 16: DIVPS rounds each lane as DIVSS.
TEXT ·divF32SSE(SB), NOSPLIT, $0-20
	MOVQ  x+0(FP), DI
	MOVQ  n+8(FP), CX
	MOVSS d+16(FP), X7
	SHUFPS $0, X7, X7
	SHRQ  $4, CX
	JZ    dfdone

dfloop:
	MOVUPS (DI), X0
	MOVUPS 16(DI), X1
	MOVUPS 32(DI), X2
	MOVUPS 48(DI), X3
	DIVPS  X7, X0
	DIVPS  X7, X1
	DIVPS  X7, X2
	DIVPS  X7, X3
	MOVUPS X0, (DI)
	MOVUPS X1, 16(DI)
	MOVUPS X2, 32(DI)
	MOVUPS X3, 48(DI)
	ADDQ   $64, DI
	DECQ   CX
	JNZ    dfloop

dfdone:
	RET

// func mulF32SSE(x *float32, n int, s float32)
// x[i] *= s for i < n, n a multiple of 16. Used for d a power of two, where
// x*(1/d) rounds to exactly x/d.
TEXT ·mulF32SSE(SB), NOSPLIT, $0-20
	MOVQ  x+0(FP), DI
	MOVQ  n+8(FP), CX
	MOVSS s+16(FP), X7
	SHUFPS $0, X7, X7
	SHRQ  $4, CX
	JZ    mfdone

mfloop:
	MOVUPS (DI), X0
	MOVUPS 16(DI), X1
	MOVUPS 32(DI), X2
	MOVUPS 48(DI), X3
	MULPS  X7, X0
	MULPS  X7, X1
	MULPS  X7, X2
	MULPS  X7, X3
	MOVUPS X0, (DI)
	MOVUPS X1, 16(DI)
	MOVUPS X2, 32(DI)
	MOVUPS X3, 48(DI)
	ADDQ   $64, DI
	DECQ   CX
	JNZ    mfloop

mfdone:
	RET

// func divF64SSE(x *float64, n int, d float64)
// x[i] /= d for i < n, n a multiple of 8.
TEXT ·divF64SSE(SB), NOSPLIT, $0-24
	MOVQ  x+0(FP), DI
	MOVQ  n+8(FP), CX
	MOVSD d+16(FP), X7
	SHUFPD $0, X7, X7
	SHRQ  $3, CX
	JZ    ddone

ddloop:
	MOVUPD (DI), X0
	MOVUPD 16(DI), X1
	MOVUPD 32(DI), X2
	MOVUPD 48(DI), X3
	DIVPD  X7, X0
	DIVPD  X7, X1
	DIVPD  X7, X2
	DIVPD  X7, X3
	MOVUPD X0, (DI)
	MOVUPD X1, 16(DI)
	MOVUPD X2, 32(DI)
	MOVUPD X3, 48(DI)
	ADDQ   $64, DI
	DECQ   CX
	JNZ    ddloop

ddone:
	RET

// func mulF64SSE(x *float64, n int, s float64)
// x[i] *= s for i < n, n a multiple of 8.
TEXT ·mulF64SSE(SB), NOSPLIT, $0-24
	MOVQ  x+0(FP), DI
	MOVQ  n+8(FP), CX
	MOVSD s+16(FP), X7
	SHUFPD $0, X7, X7
	SHRQ  $3, CX
	JZ    mdone

mdloop:
	MOVUPD (DI), X0
	MOVUPD 16(DI), X1
	MOVUPD 32(DI), X2
	MOVUPD 48(DI), X3
	MULPD  X7, X0
	MULPD  X7, X1
	MULPD  X7, X2
	MULPD  X7, X3
	MOVUPD X0, (DI)
	MOVUPD X1, 16(DI)
	MOVUPD X2, 32(DI)
	MOVUPD X3, 48(DI)
	ADDQ   $64, DI
	DECQ   CX
	JNZ    mdloop

mdone:
	RET
