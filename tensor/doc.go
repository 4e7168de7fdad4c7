// Package tensor is goddp's n-dimensional array: a strided view over flat
// storage that Dense() exposes as a gorgonia.org/tensor *Dense without
// copying, with the math that autograd, nn and optim need.
//
// # Model
//
// A Tensor has a dtype (Float32, the training type, or Float64, used by
// finite-difference gradient checks), a shape, element strides and an
// offset into shared storage. Views — Reshape of a contiguous tensor,
// Transpose, Permute, Narrow, Unsqueeze, Squeeze, Expand, T — share storage
// and copy nothing. Every allocating function (Add, MatMul, Sum, ...) returns
// a new contiguous tensor and never aliases its inputs. The in-place helpers
// (CopyFrom, Fill, AddInto, Axpy, ScaleInto, ScatterAdd, IndexAdd,
// MatMulInto) write into an existing tensor and, on contiguous operands,
// allocate nothing, so optimizer steps and hot loops stay garbage-free.
//
// Binary ops broadcast as NumPy and torch do. Elementwise work runs as plain
// loops over the backing slices, not through gorgonia's engine: after
// collapsing dimensions that every operand walks contiguously, a same-shape
// op is one flat loop and a bias add is one loop per row
// (BenchmarkGorgoniaVsLoop holds the measurement behind this choice).
//
// # BLAS
//
// Every matrix product goes through Gemm/Gemm64, the one place where the
// BLAS engine is chosen, at build time: OpenBLAS through gonum's netlib cgo
// bindings by default (Debian: apt-get install libopenblas-dev), or gonum's
// pure-Go BLAS when built with CGO_ENABLED=0 or -tags noblas. BLASName
// reports which. The engine's thread count is process-wide state inside
// OpenBLAS; set it once from main with SetThreads(ThreadsFromEnv()), which
// reads GODDP_NUM_THREADS and then OMP_NUM_THREADS, so that two ranks on
// two cores run one thread each. The package itself holds no mutable
// package-level state; randomness comes from an explicit, seeded RNG.
//
// A BLAS call is a cgo call, which Go's scheduler treats as a syscall: a
// goroutine that does nothing but call BLAS would, after 10 ms, have its P
// retaken by the runtime's sysmon during every call (25% of GEMM speed at
// n=256 on the 2-core VM). Gemm yields about once every 4 ms to prevent
// that (schedhint.go).
//
// # Vector kernels
//
// ReLU and its gradient run SSE2 kernels (internal/simd; Go assembly lives
// there because this package uses cgo). Exp, Sigmoid, Tanh and GELU on
// float32 run branch-free polynomial kernels (fastmath.go) within 0.55 ulp
// of float64 math; float64 keeps the math package.
//
// # Errors
//
// Shape and dtype mismatches are programmer errors: the op panics with a
// message that names the op and both shapes (for example
// "tensor: Add: shapes [2 3] and [4] cannot be broadcast"), as gomlx and
// torch do. The same holds for out-of-range axes and indices. Functions that
// can fail on runtime input (RNG.SetState, FromDense) return errors wrapped
// with the "tensor: " prefix instead.
package tensor
