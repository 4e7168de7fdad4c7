// Package tensor is goddp's n-dimensional array: a strided view over flat
// storage, with the math that autograd, nn and optim need. It imports no
// gorgonia package; tensor/gorgoniatensor converts to and from
// gorgonia.org/tensor's *Dense (ToDense aliases a contiguous tensor's storage).
//
// # Model
//
// A Tensor has a dtype (Float32, the training type; Float64, used by
// finite-difference gradient checks; Int64, torch's long: labels, token
// ids and max-pool indices, each dtype in a storage slice of its own
// type), a shape, element strides and an offset into shared storage.
// Views — Reshape of a contiguous tensor, Transpose, Permute, Narrow,
// Unsqueeze, Squeeze, Expand, T — share storage and copy nothing. Every
// allocating function (Add, MatMul, Sum, ...) returns a new contiguous
// tensor and never aliases its inputs. The in-place helpers
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
// BLAS engine is chosen, at build time. BLASName reports which:
//
//   - "onednn+openblas", the default: engine.c runs single-threaded kernels
//     from oneDNN (dnnl_sgemm, for float32 products with every dimension at
//     least 64, and m at least 128 when op(B) is transposed, 64 on Intel:
//     5-20% faster per core there) and from OpenBLAS (everything else, and float64), and
//     spreads one product over threads itself: it cuts C into one slice per
//     thread along its longer side, computes the first slice on the calling
//     thread and hands the others to a process-wide pool of C helper
//     threads. oneDNN's own threading lost to OpenBLAS from Go: libgomp
//     keeps one thread team per calling OS thread, and Go moves goroutines
//     between threads. Debian: apt-get install libopenblas-dev libdnnl-dev.
//   - "openblas" with -tags nodnnl: the same pool over OpenBLAS kernels only.
//
// OpenBLAS picks its kernel set when it loads, from the CPU model, and
// version 0.3.21 (Debian 12) falls back to generic SSE3 kernels
// ("Prescott", 3-5x slower) on CPUs newer than it knows, such as Intel's
// family 6 model 207. Before its first product the engine checks
// openblas_get_corename against the CPU's features: a core without AVX2
// kernels on an AVX2 or AVX-512 CPU makes it re-run OpenBLAS's own
// initialisation with OPENBLAS_CORETYPE naming Haswell or SkylakeX (set for
// that moment, then removed). A user's OPENBLAS_CORETYPE is obeyed; if the
// kernels stay pre-AVX2, every float32 product goes to oneDNN. BLASCore
// reports the result.
//   - "go" with CGO_ENABLED=0 or -tags noblas: gonum's pure-Go BLAS.
//
// The engine's thread count is process-wide state inside the engine, as it
// is inside OpenBLAS and libgomp; set it once from main with
// SetThreads(ThreadsFromEnv()), which reads GODDP_NUM_THREADS and then
// OMP_NUM_THREADS, so that two ranks on two cores run one thread each (the
// default is the CPUs this process may run on). With one thread no helper
// is started. The engine sets OpenBLAS itself to one thread, for the whole
// process: other code calling OpenBLAS directly runs single-threaded.
//
// The package's mutable Go state is three process-wide objects, each of a
// kind a process has one of: the host's caching allocator (Host, alloc.go),
// the device driver registry, written only by drivers' init functions
// (RegisterDevice, registry.go), and the kernel profiler's current
// recording (KernelProfile.Start, kernelprofile.go). Randomness comes
// from an explicit, seeded RNG, which is torch's CPU generator: NewRNG(s) draws what torch.Generator().manual_seed(s) draws, in
// rand, randn, randint, randperm and bernoulli_, bit for bit (see
// docs/reproducibility.md).
//
// # Convolutions
//
// Conv2dForward, Conv2dBackwardData and Conv2dBackwardWeights run 2-d
// float32 convolutions on oneDNN's convolution primitives (conv_dnnl.c) in
// the default build, on the calling thread alone: the caller splits a batch
// over its own goroutines (autograd.Conv2d splits over Threads()), as
// engine.c's pool does for GEMMs and for the same libgomp reason. oneDNN
// chooses blocked layouts (nChw16c on AVX-512) for its jit kernels; each
// call reorders the plain NCHW arrays into per-thread staging buffers and
// back, as torch's mkldnn path does, and primitives are built once per
// shape. They report false where the build or oneDNN has no kernel for a
// shape (-tags nodnnl, the pure-Go engine), and the caller falls back to
// im2col and Gemm.
//
// A BLAS call is a cgo call, which Go's scheduler treats as a syscall: a
// goroutine that does nothing but call BLAS would, after 10 ms, have its P
// retaken by the runtime's sysmon during every call (25% of GEMM speed at
// n=256 when every core runs a GEMM thread, as with one rank per core).
// Gemm yields about once every 4 ms to prevent
// that (schedhint.go).
//
// # Vector kernels
//
// ReLU and its gradient run SSE2 kernels (internal/simd; Go assembly lives
// there because this package uses cgo). Exp, Sigmoid and Tanh on float32
// run branch-free polynomial kernels (fastmath.go) within 0.55 ulp of
// float64 math; GELU computes in float32 arithmetic, within 8 ulps, the
// left tail included; float64 keeps the math package.
//
// Add, Sub, Mul and Div (tensor-tensor, tensor-scalar, scalar-tensor, and
// the in-place d += s of AddInto/Axpy) on float32 and float64 from 128
// elements run C loops that GCC vectorises, built for AVX-512, AVX2 and
// baseline x86 and chosen at load time (binary_kernels.c); each element is
// the same single IEEE operation, so results are bit-identical to the Go
// loops that builds without cgo run. SumAll adds in float64 in a fixed
// 16-lane order (reduce.go) that sum_kernels.c vectorises with the same bits.
//
// # Memory
//
// Host storage from 1 KiB up comes from the CPU's caching allocator
// (Host(), alloc.go; the shared implementation is tensor/internal/caching):
// blocks rounded to size classes, kept on free lists when given back, as in
// PyTorch's caching allocator. The autograd engine gives back what a
// backward pass no longer needs, and Variable.FreeGraph a finished step's
// intermediates, through a Recycler; storage never given back is freed by
// the garbage collector as before. Outputs of binary and unary ops and
// Contiguous copies take a block as its last user left it, without the
// zeroing pass: each writes every element before the tensor escapes.
// Host().Stats() reports allocated, reserved, peaks, hits and misses;
// Host().EmptyCache() drops the cached blocks. A request whose class is
// empty takes an idle block of a larger class up to twice its size (best
// fit), and every Recycler.Flush is a tick at which classes unused for
// caching.DefaultIdleTicks ticks (about two steps) are released: cached
// blocks are live to the garbage collector, whose heap goal grows with
// them, so the cache keeps only what the steps reuse.
//
// The sim and cuda devices (goddp/cuda/devtensor) take tensor memory from
// the same allocator over their own blocks, per stream; on cuda an
// allocation that runs out of memory empties the cache and retries once.
// Every device with a caching allocator is a MemoryManager: MemoryStatsOf
// and EmptyCache work on cpu, sim and cuda alike.
//
// # Devices
//
// A tensor lives on a Device, as in torch: the host (CPU(), the default),
// a goddp/cuda/sim simulated GPU ("sim:0") or a GPU ("cuda:0"). t.To(dev)
// copies it there, ZerosOn creates it there, Copy moves elements between
// any two, and Item, To(CPU()) and Copy to the host wait for the device.
// A device tensor keeps its elements in device memory (a Storage) and
// never in f32/f64, so host code that reads them (F32, At) panics naming
// the device instead of reading stale memory.
//
// Ops reach a device through one table, Kernels, that the device supplies
// (goddp/cuda/devtensor fills it once for every device that runs
// goddp/cuda/kernels); package tensor imports no device. The ops dispatch
// here and nowhere else (dispatch.go): Add, ReLU, Linear, LogSoftmax, the
// fused losses, SumInto and the optimizer updates (SGDStep, AdamStep,
// ClipGradNorm) run their CPU code on host operands and their device's
// table entry otherwise, so autograd and optim call them with no device
// branch and each op is written once. Operands on two devices panic naming
// both ("tensor: Add: operands on cpu and sim:0"; the updates return
// ErrMixedDevices instead), and an op without a device path panics with
// NoKernel ("Conv2d has no kernel on sim:0"). On the host the check is a
// nil comparison: no allocation.
//
// # Adding an op
//
// The CPU is a device like sim and cuda: CPU().Kernels() is the host's
// table (cpu_kernels.go and the cpu_*.go files), whose entries are the
// host loops with their C engine and AVX-512 paths, and which also take
// float64 operands (the gradient checks). An op on the one-table seam
// looks up the table of its operands' device, the host's included
// (table in elementwise_grad.go), and calls the entry; a nil entry panics
// with NoKernel naming the op and the device, never falling back to the
// host. Adding such an op is four pieces, which the fused attention
// (autograd.FlashSelfAttention, 2026-11-29) shows:
//
//  1. Entries in Kernels (device.go), forward and backward, on contiguous
//     operands of the shapes their comment states, the forward writing
//     what the backward needs besides its result: FlashAttention(y, lse,
//     qkv, b, t, h, d, scale, causal, bf16) writes each query row's
//     log-sum-exp, from which FlashAttentionBackward(dqkv, dy, qkv, y,
//     lse, ...) recomputes the probabilities. The comment is the contract
//     every device implements, down to what bf16 rounds.
//  2. The CPU kernel, in a file of its own (cpu_flash_attention.go) and
//     set in cpu_kernels.go's init: a function over f32s and f64s of its
//     operands, on the package's Gemm and C row kernels
//     (flash_attention_kernels.c; Go loops serve float64 and builds
//     without cgo), its scratch from the host cache.
//  3. The CUDA kernels, appended to goddp/cuda/kernels/kernels.cu
//     (flash_attn_fwd_f32; flash_attn_bwd_dot_f32, flash_attn_bwd_f32,
//     flash_attn_bwd_dq_f32), and their entries in goddp/cuda/devtensor's
//     table (flash.go); sim runs the same source, so its tests
//     (cuda/sim/flash_attention_test.go) check them without a GPU.
//  4. The tensor function and the autograd rule. The function
//     (FlashAttention, FlashAttentionBackward) checks the shapes,
//     allocates its results with EmptyAs or ZerosAs on the operand's
//     device and calls that device's entry; the autograd op calls it in
//     forward and backward and keeps what its backward needs (qkv, y, lse)
//     as tensors on the op's device, never reading their elements. Its
//     tests hold it to a reference (the op it replaces, or float64 formed
//     whole) and to GradCheck in float64, and fail when the kernel is
//     broken.
//
// An elementwise function with a gradient is one more UnaryFn: its
// forward and backward entries and a case in UnaryForward and
// UnaryBackward; autograd's one unaryOp records every one of them. As of
// 2026-11-29 the seam carries the elementwise family (Exp, Log, Sqrt,
// Tanh, Sigmoid, ReLU, GELU, Neg), GELU's tanh approximation (GPT-2's
// activation: GELUTanh, GELUTanhBackward, GELUTanhWithGrad), batch normalization (BatchNorm and
// SyncBatchNorm: BatchNormForward, BatchNormBackward), Softmax and
// LogSoftmax (any axis, the entries working on the last), Where and
// MaskedFill, the fused attention (FlashSelfAttention: FlashAttention,
// FlashAttentionBackward), and the ops along one axis with the pointwise gradients of
// index.go and op_grads.go (Gather, ScatterAdd, IndexSelect, IndexAdd,
// Concat, MaxDim, Clamp, PowScalar, Pow's gradient, BCEWithLogits, and
// ExpandContiguous, which spreads a reduction's gradient back), and the
// convolutional-network ops of device_cnn.go (Conv2d, Conv2dReLU and their
// backward, MaxPool2d, AvgPool2d and AdaptiveAvgPool2d, Dropout: the
// host's entries in cpu_cnn.go), LayerNorm (layernorm.go: torch's
// contract on every device, the forward keeping each row's mean and rstd
// and the backward recomputing xhat), attention (attention.go: an
// AttentionPlan's matrices, the host's per-matrix loops with triangular
// and bf16 products as the CPU's Attention entries, GEMMs and
// AttentionSoftmax on a device without them) and MatMul's products
// (GemmBatch over the Gemm entries, which the CPU's table has too). The
// other ops are on the old path: their host code sits in the op (in
// autograd, over host slices, or in this package behind an onDevice test).
//
// # Profiling the kernels
//
// A KernelProfile, once started, records every host matrix product (Gemm,
// Gemm64, GemmBF16, and so Linear and attention) and convolution pass by
// kernel and shape: calls, time and FLOPs. The kernels' own rate at a
// model's shapes is the most its step can reach; trainer's -kernel-profile
// prints it beside the step's. It is process-wide, like the host
// allocator: one profile records at a time (ErrProfiling otherwise).
//
// # Errors
//
// Shape and dtype mismatches are programmer errors: the op panics with a
// message that names the op and both shapes (for example
// "tensor: Add: shapes [2 3] and [4] cannot be broadcast"), as gomlx and
// torch do. The same holds for out-of-range axes and indices. Functions that
// can fail on runtime input (RNG.SetState) return errors wrapped
// with the "tensor: " prefix instead.
package tensor
