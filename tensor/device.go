package tensor

import (
	"errors"
	"fmt"
)

// Device is where a tensor's elements live, as torch.device: the host
// (CPU), a goddp/cuda/sim device ("sim:0") or a GPU ("cuda:0"). A device
// other than the CPU is implemented outside this package (goddp/cuda/devtensor
// for every device that runs goddp/cuda/kernels) and reached only through
// this interface, so package tensor imports no device.
//
// Device memory holds float32 elements. Work on a device is queued in call
// order on the device's compute stream and runs asynchronously: only
// Download (and so To(CPU()), Item) waits for it. Errors a kernel meets on
// the way are sticky and returned by the next Download or Synchronize.
type Device interface {
	// String is torch's name of the device: "cpu", "sim:0", "cuda:1".
	String() string
	// Alloc returns n zeroed float32 elements of device memory.
	Alloc(n int) (Storage, error)
	// Upload copies src into dst from element off; src may be reused when
	// it returns.
	Upload(dst Storage, off int, src []float32) error
	// Download waits for the work queued before it and copies len(dst)
	// elements of src from element off into dst.
	Download(dst []float32, src Storage, off int) error
	// Kernels is the device's op table; see Kernels.
	Kernels() *Kernels
	// Synchronize waits for the device's queued work and returns the first
	// error it met.
	Synchronize() error
}

// Storage is a block of device memory holding a device tensor's elements.
// Views of a device tensor share it.
type Storage interface {
	Device() Device
}

// ReleasableStorage is device memory that can go back to its device's
// cache before the garbage collector finds it unreachable: a Recycler
// releases the storage of the tensors its owner (the autograd engine after
// backward, FreeGraph) knows are dead, as the host's blocks are recycled,
// so that a training loop's device footprint is its working set and not
// whatever garbage builds up between two collections. Release returns the
// bytes given back, 0 when the storage was released before; afterwards the
// device refuses the storage as an operand, whichever header it comes
// through.
type ReleasableStorage interface {
	Storage
	Release() int64
}

// ErrDevice is the error of a request a device cannot serve (a dtype it does
// not hold, memory it cannot allocate, a copy that failed).
var ErrDevice = errors.New("tensor: device")

// Kernels is a device's op table: the ops that autograd's and optim's device
// paths are written against, once for every device. The CPU has one too
// (cpu_kernels.go), filled for the ops on the one-table seam (doc.go,
// "Adding an op"); its entries also take float64 operands. A device supplies the
// entries it implements; a nil entry is an op the device lacks, and the op
// that needs it panics naming both (NoKernel). Every operand is a float32
// tensor on the device, contiguous, of the shapes each entry states; the
// call enqueues the work on the device's compute stream and returns.
//
// Adding a device is filling this table; adding an op to every device that
// runs goddp/cuda/kernels is one entry in goddp/cuda/devtensor.
type Kernels struct {
	// Gemm is C = alpha*op(A)*op(B) + beta*C on row-major matrices, as
	// package function Gemm (op(A) m×k, op(B) k×n, C m×n; ld* in elements).
	Gemm func(transA, transB bool, m, n, k int, alpha float32, a *Tensor, lda int,
		b *Tensor, ldb int, beta float32, c *Tensor, ldc int)
	// GemmStridedBatched is Gemm on batch matrices: matrix i of a, b and c
	// starts strideA, strideB, strideC elements after matrix i-1's (the
	// first at each tensor's own start), as cuBLAS's SgemmStridedBatched
	// (attention's per-head products in one call).
	GemmStridedBatched func(transA, transB bool, m, n, k int, alpha float32, a *Tensor, lda, strideA int,
		b *Tensor, ldb, strideB int, beta float32, c *Tensor, ldc, strideC, batch int)
	// Fill sets every element of x to v.
	Fill func(x *Tensor, v float32)
	// Copy copies src into dst (equal element counts).
	Copy func(dst, src *Tensor)
	// Axpy is y += a*x (equal element counts).
	Axpy func(y *Tensor, a float32, x *Tensor)
	// Scale is y = s*x (equal element counts; y may be x).
	Scale func(y, x *Tensor, s float32)
	// ScaleBy is x *= coef[0] for a one-element coef (a gradient times the
	// upstream scalar gradient, without reading it on the host).
	ScaleBy func(x, coef *Tensor)
	// Add is y = a + b (equal element counts).
	Add func(y, a, b *Tensor)
	// AddBias is y[r, c] += bias[c] for y [rows, cols] and bias [cols].
	AddBias func(y, bias *Tensor)
	// ReLU is y = max(x, 0); ReLUBackward is dx = dy where y > 0, else 0.
	ReLU         func(y, x *Tensor)
	ReLUBackward func(dx, dy, y *Tensor)
	// SumRows is out[c] = Σ_r x[r, c] for x [rows, cols] (the reduction over
	// dimension 0, a bias gradient); SumAll is out[0] = Σ x.
	SumRows func(out, x *Tensor)
	SumAll  func(out, x *Tensor)
	// LogSoftmax is y = log_softmax(x) over the last dimension of x
	// [rows, cols]; LogSoftmaxBackward is its gradient from y.
	LogSoftmax         func(y, x *Tensor)
	LogSoftmaxBackward func(dx, dy, y *Tensor)
	// SoftmaxCrossEntropy computes, for logits [rows, cols] and labels (one
	// per row, each in [0, cols)), loss[0] = scale * Σ_r (logsumexp(x_r) -
	// x_r[label]) and grad = scale * (softmax(x) - onehot(labels)).
	SoftmaxCrossEntropy func(grad, loss, logits *Tensor, labels []int, scale float32)
	// MSE computes loss[0] = lossScale * Σ (pred - target)² and grad =
	// gradScale * (pred - target).
	MSE func(grad, loss, pred, target *Tensor, gradScale, lossScale float32)
	// SGDMomentum is torch's SGD step with momentum buffer buf, fused (see
	// goddp/optim): d = g + wd*w; buf = d when first, else momentum*buf +
	// (1-dampening)*d; w -= lr * (nesterov ? d + momentum*buf : buf).
	SGDMomentum func(w, g, buf *Tensor, lr, momentum, dampening, wd float32, nesterov, first bool)
	// SumSquares is out[0] += Σ x² (out zeroed by the caller first, then
	// accumulated over several tensors); ClipCoef sets coef[0] =
	// min(1, maxNorm/(√sumsq[0] + 1e-6)) and norm[0] = √sumsq[0], as torch's
	// clip_grad_norm_, on the device.
	SumSquares func(out, x *Tensor)
	ClipCoef   func(coef, norm, sumsq *Tensor, maxNorm float32)
	// Adam is goddp/optim's Adam (decoupled false) or AdamW step, fused.
	Adam func(w, g, m, v *Tensor, lr, beta1, beta2, eps, wd float32, decoupled bool, stepSize, invBC2 float32)
	// AdamMulti is AdamStep over parallel lists sharing one step's
	// hyper-parameters (ws[i], gs[i], ms[i], vs[i] of equal element counts;
	// vmaxs AMSGrad's maxima, nil without it): torch's multi-tensor
	// (fused/foreach) update, in one launch however many tensors, a device
	// keeping the table of their addresses between steps. Element by
	// element the arithmetic is the per-tensor path's, so the results are
	// bit for bit. SGDMulti is SGDStep likewise (bufs nil without
	// momentum). A device's entries take neither vmaxs nor Maximize
	// (AdamStepMulti and SGDStepMulti refuse those first); the host's loop
	// over the per-tensor code. SumSquaresMulti sets out[0] = Σ x² over
	// every tensor of xs (out need not be zeroed; deterministic) and
	// ScaleByMulti is ScaleBy on each of xs: clip_grad_norm_ on a device
	// in four launches (optimstep.go).
	AdamMulti       func(ws, gs, ms, vs, vmaxs []*Tensor, h AdamHyper)
	SGDMulti        func(ws, gs, bufs []*Tensor, h SGDHyper)
	SumSquaresMulti func(out *Tensor, xs []*Tensor)
	ScaleByMulti    func(xs []*Tensor, coef *Tensor)

	// Convolutional networks (Conv2d, Conv2dBackward, MaxPool2d,
	// AvgPool2d and Dropout in device_cnn.go are written against these;
	// the host's are in cpu_cnn.go and also take float64 operands).
	//
	// Im2col writes the patch matrix of the s.N samples of x [N, C, H, W]
	// into cols [C*KH*KW, N*OH*OW]: row (channel, ki, kj), column (sample,
	// oy, ox), padding read as zero, so group g's rows are one block.
	// Col2im is its adjoint, gathered: dx [N, C, H, W] (overwritten) gets
	// the sum of the cols entries each element fed. s.O, s.Groups and
	// s.BF16 are not used.
	Im2col func(cols, x *Tensor, s *Conv2dShape)
	Col2im func(dx, cols *Tensor, s *Conv2dShape)
	// Conv2dForward and Conv2dBackward are a convolution library's passes
	// (the host's oneDNN, else its own im2col and GEMM per sample; cuDNN
	// on goddp/cuda), optional, every operand contiguous NCHW of s's
	// shape. Conv2dForward overwrites y with conv2d(x, w) + b (b [O], nil:
	// no bias), then max(y, 0) when relu (the host fuses it into oneDNN's
	// kernel). Conv2dBackward computes, each nil when not wanted, dx =
	// conv2d's input gradient from gy and w, dw = its weight gradient from
	// x and gy, and db = Σ gy per channel (only with dw), each added to
	// what it holds when acc[i] (0 dx, 1 dw, 2 db), else overwriting it.
	// With s.BF16 (autocast) the library may compute in bfloat16 and
	// round the result to it, as torch's autocast convolutions do. Each
	// reports false (Conv2dBackward: okX for dx, okW for dw and db), having
	// queued nothing for it, when the library cannot run s (none loaded,
	// turned off, a shape it does not take, a ReLU it cannot fuse, a
	// failed call): Conv2d and Conv2dBackward then run Im2col and Gemm
	// (and ReLU, SumChannels). The host's run every shape but a ReLU that
	// oneDNN cannot fuse.
	Conv2dForward  func(y, x, w, b *Tensor, s *Conv2dShape, relu bool) bool
	Conv2dBackward func(dx, dw, db, gy, x, w *Tensor, s *Conv2dShape, acc [3]bool) (okX, okW bool)
	// Swap01 is dst[b, a, k] = src[a, b, k] for src [na, nb, nk].
	Swap01 func(dst, src *Tensor, na, nb, nk int)
	// AddChannelBias is y[s, c, p] += bias[c] for y [n, c, l]; SumChannels
	// is out[c] = Σ_{s,p} x[s, c, p], added to out[c] when acc.
	AddChannelBias func(y, bias *Tensor, n, c, l int)
	SumChannels    func(out, x *Tensor, n, c, l int, acc bool)
	// MaxPool2d writes each window's maximum into y [N, C, OH, OW] and its
	// offset in the [H, W] plane into idx, of y's size: as int32 bits in a
	// float32 tensor on a device, as int64 in an Int64 tensor on the host
	// (torch's index type; MaxPool2d allocates each). MaxPool2dBackward
	// gathers dx (overwritten) from dy and idx.
	MaxPool2d         func(y, idx, x *Tensor, s *Pool2dShape)
	MaxPool2dBackward func(dx, dy, idx *Tensor, s *Pool2dShape)
	// Dropout is y = x * mask (y may be x), the mask keeping an element
	// with probability 1-p, scaled by 1/(1-p), drawn from a counter-based
	// hash of (seed, element index): a function of the seed alone. The
	// scale is 1/float32(1-p), as the CPU op's. DropoutFromRNG, optional,
	// is y = x * mask with the mask drawn from rng's stream and written
	// into mask (0 or 1/(1-p) per element) for the backward: the host's,
	// torch's CPU dropout bit for bit (one uniform draw per element), which
	// a seed alone cannot give. A device without it runs Dropout from one
	// seed drawn from rng.
	Dropout        func(y, x *Tensor, p float64, seed uint64)
	DropoutFromRNG func(y, mask, x *Tensor, p float64, rng *RNG)
	// AvgPool2d writes each window's mean into y [N, C, OH, OW]: torch's
	// avg_pool2d (the divisor counting padding when countIncludePad), or
	// adaptive_avg_pool2d's windows when adaptive (s's kernel, stride and
	// padding unused). AvgPool2dBackward gathers dx (overwritten) from dy.
	AvgPool2d         func(y, x *Tensor, s *Pool2dShape, countIncludePad, adaptive bool)
	AvgPool2dBackward func(dx, dy *Tensor, s *Pool2dShape, countIncludePad, adaptive bool)
	// StridedCopy copies the view src (any strides, broadcasts included)
	// into the contiguous dst of its shape: Contiguous on a device. src is
	// the one operand of the table that need not be contiguous.
	StridedCopy func(dst, src *Tensor)
	// Transformer ops (examples/gpt; tensor/device_gpt.go calls them).
	//
	// IndexSelect is y[o, k, :] = x[o, idx[k], :] for x [outer, n, inner]
	// and y [outer, len(idx), inner], every idx in [0, n); IndexAdd is its
	// gradient, gx[o, idx[k], :] += gy[o, k, :], summed in the order of k
	// (deterministic, as the CPU op).
	IndexSelect func(y, x *Tensor, idx []int, outer, n, inner int)
	IndexAdd    func(gx, gy *Tensor, idx []int, outer, n, inner int)
	// Ops along one axis of x viewed as [outer, n, inner] (op_grads.go,
	// index.go; the host's in cpu_index.go, cpu_reduce.go). Gather is
	// y[o, i] = x[o, index[o*inner+i], i] for y [outer, inner], every index
	// in [0, n); ScatterAdd is its adjoint, gx[o, index[o*inner+i], i] +=
	// gy[o, i]. MaxDim writes the maximum along n into y [outer, inner] and
	// the position of its first occurrence (NaN counting as the maximum,
	// as torch) as int32 bits into arg (float32, y's size, whatever x's
	// dtype); MaxDimBackward writes dx [outer, n, inner] whole: dy at arg's
	// positions, 0 elsewhere.
	Gather         func(y, x *Tensor, index []int, outer, n, inner int)
	ScatterAdd     func(gx, gy *Tensor, index []int, outer, n, inner int)
	MaxDim         func(y, arg, x *Tensor, outer, n, inner int)
	MaxDimBackward func(dx, dy, arg *Tensor, outer, n, inner int)
	// CopyBlock copies, for each o < outer, the w elements at
	// src[o*srcStride + srcOff] to dst[o*dstStride + dstOff]: Concat's
	// pieces into their place along its axis, and their gradients back out
	// (NarrowCopy).
	CopyBlock func(dst, src *Tensor, outer, w, dstStride, dstOff, srcStride, srcOff int)
	// Clamp is y = min(max(x, lo), hi); ClampBackward is dx = dy where
	// lo ≤ x ≤ hi, else 0. PowScalar is y = x**p; PowScalarBackward is
	// dx = dy·p·x**(p-1). dx may be dy. PowBackward is Pow's gradient at
	// y = a**b, every operand of y's size: da = gy·b·a**(b-1), db =
	// gy·y·log(a) with 0 where a = 0 (either nil: not wanted).
	Clamp             func(y, x *Tensor, lo, hi float64)
	ClampBackward     func(dx, dy, x *Tensor, lo, hi float64)
	PowScalar         func(y, x *Tensor, p float64)
	PowScalarBackward func(dx, dy, x *Tensor, p float64)
	PowBackward       func(da, db, gy, a, b, y *Tensor)
	// BCEWithLogits is the loss max(x, 0) - x·t + log(1 + e^-|x|) of
	// logits x against targets t: elementwise into loss (x's size), or with
	// reduce summed and divided by div (1, or the count for a mean) into
	// loss[0]. BCEWithLogitsBackward writes dx = (σ(x) - t)·g and dt = -x·g
	// (either nil: not wanted), g being gy elementwise, or with reduced
	// gy[0]/div.
	BCEWithLogits         func(loss, x, t *Tensor, reduce bool, div float64)
	BCEWithLogitsBackward func(dx, dt, gy, x, t *Tensor, reduced bool, div float64)
	// LayerNorm normalizes the rows of x [rows, d], as torch's layer_norm:
	// it writes each row's mean and rstd = 1/√(var + eps) (biased variance)
	// into mean and rstd [rows], and y = xhat*w + b with xhat = (x - mean) *
	// rstd computed from the mean and rstd it wrote (w and b [d], each may
	// be nil). LayerNormBackward recomputes xhat from x, mean and rstd (the
	// forward keeps them, not an activation-sized xhat, as torch's), writes
	// dx from gy, xhat, rstd and w (nil dx: not wanted) and adds Σ_r gy*xhat
	// to dw and Σ_r gy to db (either nil: not wanted). mean and rstd have
	// x's dtype (float32 on every device but the CPU's float64 gradient
	// checks).
	LayerNorm         func(y, mean, rstd, x, w, b *Tensor, eps float64)
	LayerNormBackward func(dx, dw, db, gy, x, mean, rstd, w *Tensor)
	// GELU is the exact (erf) GELU; GELUBackward its gradient from x (dx
	// may be dy).
	GELU         func(y, x *Tensor)
	GELUBackward func(dx, dy, x *Tensor)
	// GELUWithGrad, optional, is GELU that also writes its derivative
	// Φ(x) + x·φ(x) into d (float32 operands), so that the backward is the
	// product Mul(dx, dy, d) rather than GELUBackward's second evaluation;
	// a device without it saves x and runs GELUBackward.
	GELUWithGrad func(y, d, x *Tensor)
	// GELUTanh is GELU's tanh approximation ½x(1 + tanh(√(2/π)(x +
	// 0.044715x³))), GPT-2's activation (torch's F.gelu(x,
	// approximate='tanh')); GELUTanhBackward is dx = dy·GELUTanh'(x) (dx
	// may be dy). GELUTanhWithGrad, optional (float32 operands), also
	// writes the derivative into d, so that the backward is Mul(dx, dy, d);
	// a device without it saves x and runs GELUTanhBackward.
	GELUTanh         func(y, x *Tensor)
	GELUTanhBackward func(dx, dy, x *Tensor)
	GELUTanhWithGrad func(y, d, x *Tensor)
	// Softmax is y = softmax(x) over the last dimension of x [rows, cols];
	// SoftmaxBackward its gradient from y (dx may be dy).
	Softmax         func(y, x *Tensor)
	SoftmaxBackward func(dx, dy, y *Tensor)
	// AttentionSoftmax turns the scaled scores p [rows, s] into
	// probabilities in place, row r being query r % l of its matrix; with
	// causal, entries past the query get probability 0.
	// AttentionSoftmaxBackward turns dp [rows, s] into the scores'
	// gradient p ⊙ (dp - Σ_j dp·p) in place.
	AttentionSoftmax         func(p *Tensor, l int, causal bool)
	AttentionSoftmaxBackward func(dp, p *Tensor)
	// Attention and AttentionBackward, optional, are attention's forward
	// and backward over a plan's matrices (tensor.Attention, attention.go):
	// y and st.P from q, k and v, and dq, dk and dv (each nil when not
	// wanted; one tensor when q, k and v are one) from gy and st, each
	// written where the plan places it. The CPU's run each matrix's
	// products and softmax while its operands are in cache (triangular
	// products under a causal mask, bfloat16 packing); a device without
	// them runs the plan as GemmStridedBatched (or Gemm) and
	// AttentionSoftmax launches.
	Attention         func(y *Tensor, st *AttentionState, q, k, v *Tensor)
	AttentionBackward func(dq, dk, dv *Tensor, st *AttentionState, q, k, v, gy *Tensor)
	// FlashAttention is scaled dot-product attention computed tile by tile
	// with an online softmax (FlashAttention's algorithm: no [T, T] matrix
	// is stored). qkv is [B, T, 3, H, D] (GPT-2's c_attn output: queries,
	// keys, values, each with its H heads side by side); y is [B, T, H, D];
	// lse is [B, H, T], each query row's log Σ_j exp(scale·q·k_j) over the
	// keys it sees, from which the backward recomputes the probabilities.
	// With causal, query i sees keys 0..i. With bf16, q, k, v and the
	// probabilities are rounded to bfloat16 (nearest, ties to even) before
	// the products, accumulated in float32, as bf16 autocast's.
	FlashAttention func(y, lse, qkv *Tensor, b, t, h, d int, scale float32, causal, bf16 bool)
	// FlashAttentionBackward writes dqkv [B, T, 3, H, D] (overwritten) from
	// dy [B, T, H, D], qkv, y and lse (FlashAttention-2's backward: D_i =
	// Σ dy_i·y_i, then per tile P from lse, dV += Pᵀ dY, dP = dY Vᵀ,
	// dS = P ⊙ (dP − D), dQ += scale·dS K, dK += scale·dSᵀ Q).
	FlashAttentionBackward func(dqkv, dy, qkv, y, lse *Tensor, b, t, h, d int, scale float32, causal, bf16 bool)
	// Batch norm over x [n, c, l] (BatchNormForward in device_norm.go).
	//
	// BatchNormStats writes stats [2c+1]: per channel the batch mean and
	// biased variance (sums false), or Σx and Σx² (sums true: what
	// SyncBatchNorm all-reduces across replicas); then the count n*l.
	// BatchNormFinalize writes coef [2c] = (mean, 1/√(var+eps)) from stats
	// in training, from rm and rv in evaluation, and in training updates rm
	// and rv (nil: not tracked) with momentum and the unbiased variance.
	// BatchNormApply writes xhat and y = xhat*w + b (w, b may be nil).
	// BatchNormBackwardReduce writes sums [2c] = (Σgy, Σgy·xhat) and adds
	// them into db and dw (nil: not wanted). BatchNormBackwardInput writes
	// dx: in training from sums and the count in stats, in evaluation
	// (sums and stats nil) w*rstd*gy.
	BatchNormStats          func(stats, x *Tensor, n, c, l int, sums bool)
	BatchNormFinalize       func(coef, stats, rm, rv *Tensor, training, sums bool, momentum, eps float64)
	BatchNormApply          func(y, xhat, x, coef, w, b *Tensor, n, c, l int)
	BatchNormBackwardReduce func(sums, dw, db, gy, xhat *Tensor, n, c, l int)
	BatchNormBackwardInput  func(dx, gy, xhat, coef, w, sums, stats *Tensor, n, c, l int)
	// Sub, Mul and Div are y = a op b elementwise, every operand of y's
	// size (Add is above; tensor's Sub, Mul and Div materialize a
	// broadcast operand first). Exp, Log, Sqrt, Tanh and Sigmoid are
	// y = f(x) elementwise.
	Sub, Mul, Div                 func(y, a, b *Tensor)
	Exp, Log, Sqrt, Tanh, Sigmoid func(y, x *Tensor)
	// TanhBackward, SigmoidBackward and SqrtBackward are the gradients of
	// those ops from their output y: dy·(1-y²), dy·y·(1-y), dy/(2y).
	TanhBackward, SigmoidBackward, SqrtBackward func(dx, dy, y *Tensor)
	// Where is y = m ≠ 0 ? a : b elementwise, every operand of y's size
	// and contiguous; a nil a reads va, a nil b reads vb (masked_fill,
	// where and their gradients). y may alias an operand.
	Where func(y, m, a, b *Tensor, va, vb float64)

	// ---- bf16 autocast (amp.Autocast on a device; device_bf16.go).
	//
	// GemmBF16 is Gemm with op(A) and op(B) rounded to bfloat16 (round to
	// nearest, ties to even, as package function GemmBF16 and
	// internal/half) and the products accumulated in float32 into the
	// float32 C: the products of Linear and Conv2d under bf16 autocast. A
	// device without it refuses those products (NoKernel).
	GemmBF16 func(transA, transB bool, m, n, k int, alpha float32, a *Tensor, lda int,
		b *Tensor, ldb int, beta float32, c *Tensor, ldc int)
}

// cpuDevice is the host.
type cpuDevice struct{}

// CPU returns the host device, where tensors live by default.
func CPU() Device { return cpuDevice{} }

func (cpuDevice) String() string { return "cpu" }
func (cpuDevice) Alloc(int) (Storage, error) {
	return nil, fmt.Errorf("%w: cpu tensors are made with New, not Alloc", ErrDevice)
}
func (cpuDevice) Upload(Storage, int, []float32) error {
	return fmt.Errorf("%w: cpu has no device memory to upload to", ErrDevice)
}
func (cpuDevice) Download([]float32, Storage, int) error {
	return fmt.Errorf("%w: cpu has no device memory to download from", ErrDevice)
}

// Kernels is the host's op table (cpu_kernels.go): the entries of the ops
// on the one-table seam. The ops still on the old path run their host
// code in the op and have no entry here.
func (cpuDevice) Kernels() *Kernels  { return &cpuTable }
func (cpuDevice) Synchronize() error { return nil }

// IsCPU reports whether d is the host (nil counts as the host).
func IsCPU(d Device) bool {
	if d == nil {
		return true
	}
	_, ok := d.(cpuDevice)
	return ok
}

// Device returns where t's elements live.
func (t *Tensor) Device() Device {
	if t.dev == nil {
		return cpuDevice{}
	}
	return t.dev.s.Device()
}

// IsCPU reports whether t lives on the host.
func (t *Tensor) IsCPU() bool { return t.dev == nil }

// Storage returns the device memory behind a device tensor and the element
// offset at which t starts in it (torch's storage_offset); nil on the CPU.
// It is what device implementations use to address their operands.
func (t *Tensor) Storage() (Storage, int) {
	if t.dev == nil {
		return nil, t.offset
	}
	return t.dev.s, t.offset
}

// devRef holds a device tensor's Storage. The Tensor keeps a pointer to it,
// one word the garbage collector scans in every header, nil on the host.
type devRef struct{ s Storage }

// FromStorage wraps device memory s as a contiguous float32 tensor of the
// given shape starting at element 0. Devices use it for their results.
func FromStorage(s Storage, shape ...int) *Tensor {
	t := newHeader(Float32, len(shape))
	t.setRowMajor(shape)
	numel(shape)
	t.dev = &devRef{s}
	return t
}

// ZerosOn returns a zero-filled tensor on dev (torch.zeros(..., device=dev)).
// Devices hold float32 only.
func ZerosOn(dev Device, dt DType, shape ...int) (*Tensor, error) {
	if IsCPU(dev) {
		return New(dt, shape...), nil
	}
	if dt != Float32 {
		return nil, fmt.Errorf("%w: %v holds float32 tensors, not %v", ErrDevice, dev, dt)
	}
	s, err := dev.Alloc(numel(shape))
	if err != nil {
		return nil, fmt.Errorf("%w: allocating %s on %v: %w", ErrDevice, sh(shape), dev, err)
	}
	return FromStorage(s, shape...), nil
}

// EmptyAllocator is a Device that can hand out memory without clearing it
// (torch.empty): ops whose kernels write every element of their result
// take it through MustEmptyOn, which saves a device a fill per result.
type EmptyAllocator interface {
	// AllocEmpty is Alloc without the zeroing: the elements hold whatever
	// the memory held (a device may fill them with NaN, to show an op that
	// reads what it did not write).
	AllocEmpty(n int) (Storage, error)
}

// MustEmptyOn is MustZerosOn for a result its op's kernels overwrite
// whole: on a device that is an EmptyAllocator its elements are not
// initialized. On the host it is zeroed, as MustZerosOn.
func MustEmptyOn(dev Device, shape ...int) *Tensor {
	ea, ok := dev.(EmptyAllocator)
	if !ok || IsCPU(dev) {
		return MustZerosOn(dev, shape...)
	}
	s, err := ea.AllocEmpty(numel(shape))
	if err != nil {
		panic(fmt.Sprintf("%v: allocating %s on %v: %v", ErrDevice, sh(shape), dev, err))
	}
	return FromStorage(s, shape...)
}

// MustZerosOn is ZerosOn for ops, which panic when the device cannot hold
// their result (as torch raises on out-of-memory).
func MustZerosOn(dev Device, shape ...int) *Tensor {
	t, err := ZerosOn(dev, Float32, shape...)
	if err != nil {
		panic(err.Error())
	}
	return t
}

// To returns t on dev (torch's t.to(device)): t itself when it is there
// already, else a contiguous copy. Copies to the host wait for the device
// work queued before them.
func (t *Tensor) To(dev Device) (*Tensor, error) {
	if dev == nil {
		dev = cpuDevice{}
	}
	from := t.Device()
	if from == dev || (IsCPU(from) && IsCPU(dev)) {
		return t, nil
	}
	if IsCPU(dev) {
		out := New(Float32, t.shape...)
		if err := download(out.F32(), t); err != nil {
			return nil, err
		}
		return out, nil
	}
	host := t
	if !IsCPU(from) {
		var err error
		if host, err = t.To(cpuDevice{}); err != nil {
			return nil, err
		}
	}
	out, err := ZerosOn(dev, t.dtype, t.shape...)
	if err != nil {
		return nil, err
	}
	if err := dev.Upload(out.dev.s, 0, host.Contiguous().F32()); err != nil {
		return nil, fmt.Errorf("%w: copying %s to %v: %w", ErrDevice, sh(t.shape), dev, err)
	}
	return out, nil
}

// SetData makes t the tensor src is, sharing its storage (torch's
// t.set_(src), and module.to's param.data = ...): its device, memory,
// dtype, shape and strides. Every holder of t sees src's elements from
// then on, so a module's buffers can move to a device in place.
func (t *Tensor) SetData(src *Tensor) {
	if t == src {
		return
	}
	*t = Tensor{f32: src.f32, f64: src.f64, i64: src.i64, dtype: src.dtype, offset: src.offset, dev: src.dev, blk: src.blk}
	t.initDims(len(src.shape))
	copy(t.shape, src.shape)
	copy(t.strides, src.strides)
}

// MustTo is To for code that treats a failed copy as fatal (tests, ops).
func (t *Tensor) MustTo(dev Device) *Tensor {
	out, err := t.To(dev)
	if err != nil {
		panic(err.Error())
	}
	return out
}

func download(dst []float32, t *Tensor) error {
	if !t.IsContiguous() {
		t = t.deviceContiguous()
	}
	if err := t.dev.s.Device().Download(dst, t.dev.s, t.offset); err != nil {
		return fmt.Errorf("%w: copying %s from %v: %w", ErrDevice, sh(t.shape), t.Device(), err)
	}
	return nil
}

// Copy copies src into dst where either may be on any device (torch's
// dst.copy_(src)); shapes must hold the same number of elements. Copies
// from a device wait for its queued work.
func Copy(dst, src *Tensor) error {
	if dst.Numel() != src.Numel() {
		return fmt.Errorf("%w: copy of %s into %s", ErrDevice, sh(src.shape), sh(dst.shape))
	}
	switch {
	case dst.dev == nil && src.dev == nil:
		CopyFrom(dst, src.Reshape(dst.shape...))
		return nil
	case dst.dev == nil:
		if dst.dtype != Float32 {
			return fmt.Errorf("%w: copy from %v into a %v tensor", ErrDevice, src.Device(), dst.dtype)
		}
		if dst.IsContiguous() {
			return download(dst.F32(), src)
		}
		tmp := New(Float32, dst.shape...)
		if err := download(tmp.F32(), src); err != nil {
			return err
		}
		CopyFrom(dst, tmp)
		return nil
	case src.dev == nil:
		if src.dtype != Float32 || !dst.IsContiguous() {
			return fmt.Errorf("%w: copy of a %v tensor into a view on %v", ErrDevice, src.dtype, dst.Device())
		}
		return dst.dev.s.Device().Upload(dst.dev.s, dst.offset, src.Contiguous().F32())
	case dst.Device() == src.Device():
		k := KernelsOf("copy", dst, src)
		NeedKernel(k.Copy != nil, "copy", dst.Device())
		k.Copy(dst, src)
		return nil
	default:
		host, err := src.To(cpuDevice{})
		if err != nil {
			return err
		}
		return Copy(dst, host)
	}
}

// KernelsOf returns the op table of the device the tensors live on, or nil
// when they all live on the host (nil tensors are skipped). Tensors on
// different devices make op panic naming both, as torch's "Expected all
// tensors to be on the same device". Ops call it first; on the host it
// costs a few comparisons.
func KernelsOf(op string, ts ...*Tensor) *Kernels { return kernelsFor(op, ts...) }

// NoKernel is the message of an op that a device lacks: "conv2d has no
// kernel on sim:0".
func NoKernel(op string, d Device) string {
	return fmt.Sprintf("%s has no kernel on %v; copy its operands to the host with To(tensor.CPU())", op, d)
}

// NeedKernel panics with NoKernel(op, d) unless ok (the entry exists).
func NeedKernel(ok bool, op string, d Device) {
	if !ok {
		panic(NoKernel(op, d))
	}
}

// OnCPU panics with NoKernel(op, ...) when any of ts lives on a device: the
// guard of ops that have no device path.
func OnCPU(op string, ts ...*Tensor) {
	for _, t := range ts {
		if t != nil && t.dev != nil {
			panic(NoKernel(op, t.Device()))
		}
	}
}

// deviceItem reads a one-element device tensor.
func (t *Tensor) deviceItem() float64 {
	var v [1]float32
	if err := download(v[:], t); err != nil {
		panic(err.Error())
	}
	return float64(v[0])
}

// deviceClone copies a device tensor on its device.
func (t *Tensor) deviceClone() *Tensor {
	out := MustZerosOn(t.Device(), t.shape...)
	if err := Copy(out, t); err != nil {
		panic(err.Error())
	}
	return out
}

// deviceHostAccess is the panic of host code reading a device tensor's
// elements.
func (t *Tensor) deviceHostAccess(what string) string {
	return fmt.Sprintf("tensor: %s on a tensor on %v: its elements are in device memory (an op without a kernel on %v?); copy it to the host with To(tensor.CPU())",
		what, t.Device(), t.Device())
}

// deviceInPlace runs an in-place helper's device kernel: dst and src (nil
// for none) on one device, contiguous and of equal element counts (device
// kernels do not broadcast).
func deviceInPlace(op string, dst, src *Tensor, has func(*Kernels) bool, run func(*Kernels)) {
	k := KernelsOf(op, dst, src)
	NeedKernel(has(k), op, dst.Device())
	if !dst.IsContiguous() || (src != nil && (!src.IsContiguous() || src.Numel() != dst.Numel())) {
		panic(NoKernel(op+" on views or with broadcasting", dst.Device()))
	}
	run(k)
}
