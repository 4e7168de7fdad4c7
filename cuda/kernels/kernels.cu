// Device kernels for training in float32 (goddp/cuda). This file is the
// source of both builds: ptx.go holds the PTX that NVRTC generates from it
// for the GPU (go generate ./cuda/kernels, which needs libnvrtc from
// nvidia-cuda-dev but no GPU), and goddp/cuda/sim compiles it as host C++
// (with cudahost.h) and runs it on the simulated device, where CI tests
// every kernel against goddp's CPU ops.
//
// Indexing is 64-bit throughout: counts arrive as long long and every
// index is computed in long long (global_index, global_stride), so tensors
// of 2^31 elements and more are addressed correctly (32-bit indices
// wrapped there and wrote before the buffer). Every kernel is correct for
// any grid and any block size, one included: elementwise kernels loop with
// a grid stride; row kernels give each block a row at a time and reduce
// with block_sum/block_max, which handle any blockDim.x up to 1024 (CUDA's
// limit). Matrices are row-major.

typedef long long i64;

// The first element this thread handles, and the distance to its next one.
// Both are widened before they are multiplied.
__device__ i64 global_index() { return (i64)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ i64 global_stride() { return (i64)gridDim.x * blockDim.x; }

#define FOR_EACH(i, n) for (i64 i = global_index(); i < (n); i += global_stride())

// Rows a block handles in turn (one block per row at a time).
#define FOR_EACH_ROW(r, rows) for (i64 r = blockIdx.x; r < (rows); r += gridDim.x)

// block_sum returns the sum of every thread's v to every thread of the
// block. A pairwise tree that skips the missing partner, so any blockDim.x
// works. Every thread of the block must call it.
__device__ float block_sum(float v) {
	__shared__ float part[1024];
	unsigned int t = threadIdx.x;
	part[t] = v;
	__syncthreads();
	for (unsigned int s = 1; s < blockDim.x; s *= 2) {
		if (t % (2 * s) == 0 && t + s < blockDim.x) part[t] += part[t + s];
		__syncthreads();
	}
	float r = part[0];
	__syncthreads(); // part is reused by the next call
	return r;
}

// block_max is block_sum with fmaxf.
__device__ float block_max(float v) {
	__shared__ float part[1024];
	unsigned int t = threadIdx.x;
	part[t] = v;
	__syncthreads();
	for (unsigned int s = 1; s < blockDim.x; s *= 2) {
		if (t % (2 * s) == 0 && t + s < blockDim.x) part[t] = fmaxf(part[t], part[t + s]);
		__syncthreads();
	}
	float r = part[0];
	__syncthreads();
	return r;
}

// Bit casts through a union (CUDA and host C++ both accept it).
__device__ unsigned int f32_bits(float f) {
	union {
		float f;
		unsigned int u;
	} v;
	v.f = f;
	return v.u;
}

__device__ float f32_from_bits(unsigned int u) {
	union {
		float f;
		unsigned int u;
	} v;
	v.u = u;
	return v.f;
}

__device__ float f16_bits_to_f32(unsigned short h) {
	unsigned int o = (unsigned int)(h & 0x7fffu) << 13;
	unsigned int exp = o & (0x1fu << 23);
	o += (127u - 15u) << 23; // rebias
	if (exp == 0x1fu << 23) {
		o += (128u - 16u) << 23; // inf/NaN: exponent all ones, payload kept
	} else if (exp == 0) {
		o += 1u << 23; // zero or subnormal: renormalise
		o = f32_bits(f32_from_bits(o) - f32_from_bits(113u << 23));
	}
	return f32_from_bits(o | (unsigned int)(h & 0x8000u) << 16);
}

__device__ unsigned short f32_to_f16_bits(float f) {
	unsigned int x = f32_bits(f);
	unsigned int a = x & 0x7fffffffu;
	unsigned short sign = (unsigned short)((x >> 16) & 0x8000u);
	if (a - (113u << 23) < (143u - 113u) << 23) {
		// Normal result: rebias and round the 13 dropped bits to
		// nearest-even; a mantissa carry bumps the exponent (up to inf).
		return sign | (unsigned short)((a - (112u << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13);
	}
	if (a > 0x7f800000u) return sign | 0x7e00u | (unsigned short)((a >> 13) & 0x3ffu); // NaN
	if (a >= (127u + 16u) << 23) return sign | 0x7c00u;                                // >= 65536 or inf
	// Below the smallest normal half: adding 0.5 aligns the subnormal's
	// integer mantissa with float32's low bits, and the add rounds to
	// nearest-even (needs denormals, NVRTC's default -ftz=false).
	float r = f32_from_bits(a) + 0.5f;
	return sign | (unsigned short)(f32_bits(r) - f32_bits(0.5f));
}

extern "C" {

// x = v (e.g. the ones vector that turns column sums into a GEMV).
__global__ void fill_f32(float *x, float v, i64 n) {
	FOR_EACH(i, n) x[i] = v;
}

// y = s * x; y may be x (scaling, negation, DDP's copy into a bucket
// divided by the world size).
__global__ void scale_f32(float *y, const float *x, i64 n, float s) {
	FOR_EACH(i, n) y[i] = s * x[i];
}

// y += s * x (gradient accumulation).
__global__ void axpy_f32(float *y, const float *x, i64 n, float s) {
	FOR_EACH(i, n) y[i] += s * x[i];
}

// x *= *coef, the coefficient read from device memory (clip_coef_f32's
// output), so clipping never waits for the host.
__global__ void scale_by_f32(float *x, const float *coef, i64 n) {
	float c = *coef;
	FOR_EACH(i, n) x[i] *= c;
}

// Binary elementwise ops over same-shaped operands; y may alias either.
__global__ void add_f32(float *y, const float *a, const float *b, i64 n) {
	FOR_EACH(i, n) y[i] = a[i] + b[i];
}
__global__ void sub_f32(float *y, const float *a, const float *b, i64 n) {
	FOR_EACH(i, n) y[i] = a[i] - b[i];
}
__global__ void mul_f32(float *y, const float *a, const float *b, i64 n) {
	FOR_EACH(i, n) y[i] = a[i] * b[i];
}
__global__ void div_f32(float *y, const float *a, const float *b, i64 n) {
	FOR_EACH(i, n) y[i] = a[i] / b[i];
}

// The divisor's gradient of a / b: db = -dy * a / b^2 (da = dy / b is
// div_f32; mul's gradients are mul_f32).
__global__ void div_bwd_b_f32(float *db, const float *dy, const float *a, const float *b, i64 n) {
	FOR_EACH(i, n) db[i] = -dy[i] * a[i] / (b[i] * b[i]);
}

// y[r, c] += b[c] for a [rows, cols] y (Linear's bias).
__global__ void add_bias_f32(float *y, const float *b, i64 rows, i64 cols) {
	FOR_EACH(i, rows * cols) y[i] += b[i % cols];
}

// Unary elementwise ops; y may be x.
__global__ void relu_f32(float *y, const float *x, i64 n) {
	FOR_EACH(i, n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
__global__ void exp_f32(float *y, const float *x, i64 n) {
	FOR_EACH(i, n) y[i] = expf(x[i]);
}
__global__ void log_f32(float *y, const float *x, i64 n) {
	FOR_EACH(i, n) y[i] = logf(x[i]);
}
__global__ void sqrt_f32(float *y, const float *x, i64 n) {
	FOR_EACH(i, n) y[i] = sqrtf(x[i]);
}
__global__ void tanh_f32(float *y, const float *x, i64 n) {
	FOR_EACH(i, n) y[i] = tanhf(x[i]);
}
// 1/(1+e^-x), computed from e^-|x| so neither side overflows.
__global__ void sigmoid_f32(float *y, const float *x, i64 n) {
	FOR_EACH(i, n) {
		float v = x[i];
		float e = expf(-fabsf(v));
		y[i] = v >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
	}
}

// Their gradients, from the input x or the output y; dx may be dy.
// dx = dy where x > 0, else 0 (torch's gradient at 0 is 0).
__global__ void relu_bwd_f32(float *dx, const float *dy, const float *x, i64 n) {
	FOR_EACH(i, n) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}
// tanh: dx = dy * (1 - y^2).
__global__ void tanh_bwd_f32(float *dx, const float *dy, const float *y, i64 n) {
	FOR_EACH(i, n) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
}
// sigmoid: dx = dy * y * (1 - y).
__global__ void sigmoid_bwd_f32(float *dx, const float *dy, const float *y, i64 n) {
	FOR_EACH(i, n) dx[i] = dy[i] * y[i] * (1.0f - y[i]);
}
// sqrt: dx = dy / (2 y). (exp: dx = dy * y and log: dx = dy / x are
// mul_f32 and div_f32.)
__global__ void sqrt_bwd_f32(float *dx, const float *dy, const float *y, i64 n) {
	FOR_EACH(i, n) dx[i] = dy[i] / (2.0f * y[i]);
}

// out[r] = sum over c of x[r, c]: the reduction over the last dimension.
__global__ void sum_cols_f32(float *out, const float *x, i64 rows, i64 cols) {
	FOR_EACH_ROW(r, rows) {
		float s = 0.0f;
		for (i64 c = threadIdx.x; c < cols; c += blockDim.x) s += x[r * cols + c];
		s = block_sum(s);
		if (threadIdx.x == 0) out[r] = s;
	}
}

// *out += sum of x[i]^2 (out must be zeroed first): the squared L2 norm
// that grad-norm clipping needs, over any number of tensors in turn.
__global__ void sum_squares_f32(float *out, const float *x, i64 n) {
	float s = 0.0f;
	FOR_EACH(i, n) s += x[i] * x[i];
	s = block_sum(s);
	if (threadIdx.x == 0) atomicAdd(out, s);
}

// *out += sum of x (out must be zeroed first): total losses.
__global__ void sum_f32(float *out, const float *x, i64 n) {
	float s = 0.0f;
	FOR_EACH(i, n) s += x[i];
	s = block_sum(s);
	if (threadIdx.x == 0) atomicAdd(out, s);
}

// coef = min(1, max_norm / (sqrt(*sumsq) + 1e-6)) and norm = sqrt(*sumsq),
// as torch's clip_grad_norm_ (one thread); scale_by_f32 then applies coef.
__global__ void clip_coef_f32(float *coef, float *norm, const float *sumsq, float max_norm) {
	if (global_index() == 0) {
		float nrm = sqrtf(*sumsq);
		float c = max_norm / (nrm + 1e-6f);
		*coef = c < 1.0f ? c : 1.0f;
		*norm = nrm;
	}
}

// Softmax and log-softmax over the last dimension of [rows, cols], stably
// around the row maximum; a block per row.
__global__ void softmax_f32(float *y, const float *x, i64 rows, i64 cols) {
	FOR_EACH_ROW(r, rows) {
		const float *xr = x + r * cols;
		float *yr = y + r * cols;
		float m = -3.402823466e38f; // -FLT_MAX (NVRTC has no math.h)
		for (i64 c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
		m = block_max(m);
		float s = 0.0f;
		for (i64 c = threadIdx.x; c < cols; c += blockDim.x) s += expf(xr[c] - m);
		s = block_sum(s);
		float inv = 1.0f / s;
		for (i64 c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = expf(xr[c] - m) * inv;
	}
}

__global__ void log_softmax_f32(float *y, const float *x, i64 rows, i64 cols) {
	FOR_EACH_ROW(r, rows) {
		const float *xr = x + r * cols;
		float *yr = y + r * cols;
		float m = -3.402823466e38f; // -FLT_MAX (NVRTC has no math.h)
		for (i64 c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
		m = block_max(m);
		float s = 0.0f;
		for (i64 c = threadIdx.x; c < cols; c += blockDim.x) s += expf(xr[c] - m);
		float lse = m + logf(block_sum(s));
		for (i64 c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = xr[c] - lse;
	}
}

// Softmax's gradient from its output y: dx = y * (dy - sum_c dy*y).
__global__ void softmax_bwd_f32(float *dx, const float *dy, const float *y, i64 rows, i64 cols) {
	FOR_EACH_ROW(r, rows) {
		const float *g = dy + r * cols, *yr = y + r * cols;
		float s = 0.0f;
		for (i64 c = threadIdx.x; c < cols; c += blockDim.x) s += g[c] * yr[c];
		s = block_sum(s);
		for (i64 c = threadIdx.x; c < cols; c += blockDim.x) dx[r * cols + c] = yr[c] * (g[c] - s);
	}
}

// Log-softmax's gradient from its output y: dx = dy - exp(y) * sum_c dy.
__global__ void log_softmax_bwd_f32(float *dx, const float *dy, const float *y, i64 rows, i64 cols) {
	FOR_EACH_ROW(r, rows) {
		const float *g = dy + r * cols, *yr = y + r * cols;
		float s = 0.0f;
		for (i64 c = threadIdx.x; c < cols; c += blockDim.x) s += g[c];
		s = block_sum(s);
		for (i64 c = threadIdx.x; c < cols; c += blockDim.x) dx[r * cols + c] = g[c] - expf(yr[c]) * s;
	}
}

// Mean squared error, forward and backward at once: sq = (p - t)^2 (the
// caller sums it), grad = scale * (p - t) with scale = 2/n for the mean.
__global__ void mse_f32(float *grad, float *sq, const float *pred, const float *target, i64 n, float scale) {
	FOR_EACH(i, n) {
		float d = pred[i] - target[i];
		sq[i] = d * d;
		grad[i] = scale * d;
	}
}

// Softmax cross-entropy over [rows, cols] logits against class labels, one
// thread per row: loss[r] = logsumexp(x_r) - x_r[label] (the caller sums
// it), grad[r, c] = scale * (softmax(x_r)[c] - [c == label]) with
// scale = 1/rows for the mean. Computed stably around the row maximum.
__global__ void softmax_ce_f32(float *grad, float *loss, const float *logits, const int *labels, i64 rows, i64 cols, float scale) {
	FOR_EACH(r, rows) {
		const float *x = logits + r * cols;
		float *g = grad + r * cols;
		float m = x[0];
		for (i64 c = 1; c < cols; c++) m = fmaxf(m, x[c]);
		float s = 0.0f;
		for (i64 c = 0; c < cols; c++) s += expf(x[c] - m);
		i64 y = labels[r];
		loss[r] = logf(s) + m - x[y];
		float inv = 1.0f / s;
		for (i64 c = 0; c < cols; c++) g[c] = scale * (expf(x[c] - m) * inv - (c == y ? 1.0f : 0.0f));
	}
}

// w -= lr * g (plain SGD).
__global__ void sgd_f32(float *w, const float *g, i64 n, float lr) {
	FOR_EACH(i, n) w[i] -= lr * g[i];
}

// SGD with momentum, dampening, weight decay and Nesterov, fused, as
// torch's (and goddp/optim's) SGD: d = g + wd*w; buf = d at the first step
// (first != 0), else momentum*buf + (1-dampening)*d; w -= lr * (nesterov ?
// d + momentum*buf : buf). Flags are floats so that every argument is 8
// bytes wide or a float.
__global__ void sgd_momentum_f32(float *w, const float *g, float *buf, i64 n, float lr, float momentum,
                                 float dampening, float wd, float nesterov, float first) {
	FOR_EACH(i, n) {
		float d = g[i] + wd * w[i];
		float b = first != 0.0f ? d : momentum * buf[i] + (1.0f - dampening) * d;
		buf[i] = b;
		w[i] -= lr * (nesterov != 0.0f ? d + momentum * b : b);
	}
}

// adam_elem is element i's Adam or AdamW update (adam_f32's comment),
// shared by adam_f32 and multi_tensor_adam_f32 so both give the same bits.
__device__ __forceinline__ void adam_elem(float *w, const float *g, float *m, float *v, i64 i, float lr, float beta1,
                                          float beta2, float eps, float wd, float decoupled, float step_size,
                                          float inv_bc2) {
	float wi = w[i];
	float gi = g[i];
	if (decoupled != 0.0f) {
		wi -= lr * wd * wi;
	} else {
		gi += wd * wi;
	}
	float mi = beta1 * m[i] + (1.0f - beta1) * gi;
	float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
	m[i] = mi;
	v[i] = vi;
	w[i] = wi - step_size * mi / (sqrtf(vi) * inv_bc2 + eps);
}

// Adam and AdamW, fused, as goddp/optim: with decoupled != 0 (AdamW)
// w *= 1 - lr*wd first, else g += wd*w (Adam's L2); then
// m = b1*m + (1-b1)*g, v = b2*v + (1-b2)*g^2 and
// w -= step_size * m / (sqrt(v) * inv_bc2 + eps), where
// step_size = lr / (1 - b1^t) and inv_bc2 = 1 / sqrt(1 - b2^t).
__global__ void adam_f32(float *w, const float *g, float *m, float *v, i64 n, float lr, float beta1, float beta2,
                         float eps, float wd, float decoupled, float step_size, float inv_bc2) {
	FOR_EACH(i, n) {
		adam_elem(w, g, m, v, i, lr, beta1, beta2, eps, wd, decoupled, step_size, inv_bc2);
	}
}

// ---- 16-bit floats for DDP's compression hooks on device memory
// (fp16/bf16_compress_hook): bit for bit goddp/internal/half, which the
// CPU hooks and comm's reductions use. Narrowing rounds to nearest, ties
// to even; overflow gives inf; NaN stays a quiet NaN with the top of its
// payload. The 16-bit values are held as unsigned short.

__global__ void f32_to_f16(unsigned short *y, const float *x, i64 n) {
	FOR_EACH(i, n) y[i] = f32_to_f16_bits(x[i]);
}

__global__ void f16_to_f32(float *y, const unsigned short *x, i64 n) {
	FOR_EACH(i, n) y[i] = f16_bits_to_f32(x[i]);
}

__device__ unsigned short f32_to_bf16_bits(float f) {
	unsigned int u = f32_bits(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (unsigned short)(u >> 16);
}

__global__ void f32_to_bf16(unsigned short *y, const float *x, i64 n) {
	FOR_EACH(i, n) y[i] = f32_to_bf16_bits(x[i]);
}

__global__ void bf16_to_f32(float *y, const unsigned short *x, i64 n) {
	FOR_EACH(i, n) y[i] = f32_from_bits((unsigned int)x[i] << 16);
}

// round_bf16_f32 is bf16_to_f32(f32_to_bf16(x)) in one pass: bfloat16
// values held in float32, which TF32 tensor cores (10 bits of mantissa)
// multiply exactly.
__global__ void round_bf16_f32(float *y, const float *x, i64 n) {
	FOR_EACH(i, n) y[i] = f32_from_bits((unsigned int)f32_to_bf16_bits(x[i]) << 16);
}

}

// ---- Convolutional networks: Conv2d as im2col and GEMMs, MaxPool2d,
// Dropout. Gradients are gathered (each output element sums what fed it,
// in a fixed order), never scattered with atomics, so they are
// deterministic.

extern "C" {

// im2col for n samples x [n, c, h, w]: cols [c*kh*kw, n*oh*ow], row
// (channel, ki, kj), column (sample, oy, ox); padding reads as zero. The
// rows of group g are the block [g*cg*kh*kw, (g+1)*cg*kh*kw), so each
// group's GEMM covers all n samples at once.
__global__ void im2col_f32(float *cols, const float *x, i64 n, i64 c, i64 h, i64 w, i64 kh, i64 kw, i64 sh, i64 sw,
                           i64 ph, i64 pw, i64 dh, i64 dw, i64 oh, i64 ow) {
	i64 l = oh * ow, nl = n * l;
	FOR_EACH(i, c * kh * kw * nl) {
		i64 col = i % nl, row = i / nl;
		i64 s = col / l, p = col % l, oy = p / ow, ox = p % ow;
		i64 kj = row % kw, t = row / kw, ki = t % kh, ch = t / kh;
		i64 iy = oy * sh - ph + ki * dh, ix = ox * sw - pw + kj * dw;
		cols[i] = (iy >= 0 && iy < h && ix >= 0 && ix < w) ? x[((s * c + ch) * h + iy) * w + ix] : 0.0f;
	}
}

// col2im, im2col's adjoint, gathered: dx[s, ch, iy, ix] = the sum of the
// cols entries that im2col_f32 read from it (dx is overwritten).
__global__ void col2im_f32(float *dx, const float *cols, i64 n, i64 c, i64 h, i64 w, i64 kh, i64 kw, i64 sh, i64 sw,
                           i64 ph, i64 pw, i64 dh, i64 dw, i64 oh, i64 ow) {
	i64 l = oh * ow, nl = n * l;
	FOR_EACH(i, n * c * h * w) {
		i64 ix = i % w, t = i / w, iy = t % h;
		t /= h;
		i64 ch = t % c, s = t / c;
		float acc = 0.0f;
		for (i64 ki = 0; ki < kh; ki++) {
			i64 y = iy + ph - ki * dh;
			if (y < 0 || y % sh != 0 || y / sh >= oh) continue;
			i64 oy = y / sh;
			for (i64 kj = 0; kj < kw; kj++) {
				i64 xx = ix + pw - kj * dw;
				if (xx < 0 || xx % sw != 0 || xx / sw >= ow) continue;
				acc += cols[((ch * kh + ki) * kw + kj) * nl + s * l + oy * ow + xx / sw];
			}
		}
		dx[i] = acc;
	}
}

// dst[b, a, k] = src[a, b, k] for src [na, nb, nk]: between a convolution's
// GEMM layout [channels, samples, positions] and NCHW.
__global__ void swap01_f32(float *dst, const float *src, i64 na, i64 nb, i64 nk) {
	FOR_EACH(i, na * nb * nk) {
		i64 k = i % nk, t = i / nk, b = t % nb, a = t / nb;
		dst[(b * na + a) * nk + k] = src[i];
	}
}

// y[s, ch, p] += bias[ch] for y [n, c, l] (a convolution's bias).
__global__ void add_channel_bias_f32(float *y, const float *bias, i64 n, i64 c, i64 l) {
	FOR_EACH(i, n * c * l) y[i] += bias[(i / l) % c];
}

// Channel sums of x [n, c, l] (a convolution's bias gradient) in two
// stages, as the column sums below: sum_channels_part_f32's work item b
// (blocks take them grid-stride) sums channel b % c over images
// [chunk*(b / c), +chunk), each image's l values contiguous, into
// part[(b / c)*c + b % c]; col_sums_f32 then adds the chunks in order. One
// block per channel over every image left most of a GPU idle (32 or 64
// blocks), and its index arithmetic took a division and a remainder per
// element.
__global__ void sum_channels_part_f32(float *part, const float *x, i64 n, i64 c, i64 l, i64 chunk) {
	i64 chunks = (n + chunk - 1) / chunk;
	FOR_EACH_ROW(b, chunks * c) {
		i64 k = b / c, ch = b % c;
		i64 i1 = (k + 1) * chunk < n ? (k + 1) * chunk : n;
		float s = 0.0f;
		for (i64 i = k * chunk; i < i1; i++) {
			const float *p = x + (i * c + ch) * l;
			for (i64 j = threadIdx.x; j < l; j += blockDim.x) s += p[j];
		}
		s = block_sum(s);
		if (threadIdx.x == 0) part[k * c + ch] = s;
	}
}

// Max pooling over planes [planes, h, w] into y [planes, oh, ow], padding
// counting as -inf; idx gets each maximum's offset in its plane (the first
// in row-major window order on ties, as goddp's CPU op).
__global__ void max_pool2d_f32(float *y, int *idx, const float *x, i64 planes, i64 h, i64 w, i64 kh, i64 kw, i64 sh,
                               i64 sw, i64 ph, i64 pw, i64 oh, i64 ow) {
	FOR_EACH(i, planes * oh * ow) {
		i64 ox = i % ow, t = i / ow, oy = t % oh, p = t / oh;
		i64 y0 = oy * sh - ph, x0 = ox * sw - pw;
		i64 ylo = y0 < 0 ? 0 : y0, yhi = y0 + kh < h ? y0 + kh : h;
		i64 xlo = x0 < 0 ? 0 : x0, xhi = x0 + kw < w ? x0 + kw : w;
		const float *xp = x + p * h * w;
		i64 bi = ylo * w + xlo;
		float best = xp[bi];
		for (i64 iy = ylo; iy < yhi; iy++) {
			for (i64 ix = xlo; ix < xhi; ix++) {
				float v = xp[iy * w + ix];
				if (v > best || v != v) {
					best = v;
					bi = iy * w + ix;
				}
			}
		}
		y[i] = best;
		idx[i] = (int)bi;
	}
}

// Max pooling's gradient, gathered: dx[p, iy, ix] = the sum of dy over the
// outputs whose window holds (iy, ix) and whose maximum it was. The index
// arithmetic (eight divisions an element) is the kernel's cost: in 32
// bits when every index fits, as it does for any batch whose gradient
// holds fewer than 2^31 elements, a 64-bit division costing several
// 32-bit ones.
// MAX_POOL2D_GRAD_AT defines NAME, the gradient of one element with
// indices of type I (kernels.cu is extern "C": no templates).
#define MAX_POOL2D_GRAD_AT(NAME, I)                                                                             \
	__device__ float NAME(I i, const float *dy, const int *idx, I h, I w, I kh, I kw, I sh, I sw, I ph, I pw, I oh, \
	                      I ow) {                                                                                 \
		I ix = i % w, t = i / w, iy = t % h, p = t / h;                                                         \
		/* Windows oy*sh-ph <= iy < oy*sh-ph+kh, and likewise for x. */                                         \
		I ylo = iy + ph + 1 > kh ? (iy + ph + 1 - kh + sh - 1) / sh : 0;                                        \
		I xlo = ix + pw + 1 > kw ? (ix + pw + 1 - kw + sw - 1) / sw : 0;                                        \
		I yhi = (iy + ph) / sh, xhi = (ix + pw) / sw;                                                           \
		yhi = yhi < oh - 1 ? yhi : oh - 1;                                                                      \
		xhi = xhi < ow - 1 ? xhi : ow - 1;                                                                      \
		int me = (int)(iy * w + ix);                                                                            \
		float acc = 0.0f;                                                                                       \
		for (I oy = ylo; oy <= yhi; oy++) {                                                                     \
			for (I ox = xlo; ox <= xhi; ox++) {                                                             \
				I j = (p * oh + oy) * ow + ox;                                                          \
				if (idx[j] == me) acc += dy[j];                                                         \
			}                                                                                               \
		}                                                                                                       \
		return acc;                                                                                             \
	}
typedef unsigned int u32;
MAX_POOL2D_GRAD_AT(max_pool2d_grad_u32, u32)
MAX_POOL2D_GRAD_AT(max_pool2d_grad_i64, i64)

__global__ void max_pool2d_bwd_f32(float *dx, const float *dy, const int *idx, i64 planes, i64 h, i64 w, i64 kh, i64 kw,
                                   i64 sh, i64 sw, i64 ph, i64 pw, i64 oh, i64 ow) {
	i64 n = planes * h * w;
	// Unsigned: oh and ow must be positive for oh - 1 and ow - 1.
	if (n < ((i64)1 << 31) && oh > 0 && ow > 0 && planes * oh * ow < ((i64)1 << 31) && h + ph < ((i64)1 << 30) &&
	    w + pw < ((i64)1 << 30)) {
		FOR_EACH(i, n) {
			dx[i] = max_pool2d_grad_u32((u32)i, dy, idx, (u32)h, (u32)w, (u32)kh, (u32)kw, (u32)sh, (u32)sw, (u32)ph,
			                            (u32)pw, (u32)oh, (u32)ow);
		}
		return;
	}
	FOR_EACH(i, n) {
		dx[i] = max_pool2d_grad_i64(i, dy, idx, h, w, kh, kw, sh, sw, ph, pw, oh, ow);
	}
}

}

// splitmix64's finalizer: a bijection of 64-bit words whose outputs for
// consecutive inputs look independent.
__device__ unsigned long long mix64(unsigned long long z) {
	z += 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

extern "C" {

// Inverted dropout: y[i] = x[i] * scale where element i is kept, else
// x[i] * 0. Element i is kept when u < keep for u, 24 bits of a
// counter-based hash of (seed, i) scaled to [0, 1): the mask is a function
// of the seed alone, the same on every device and grid, and the backward
// pass regenerates it rather than storing it. y may be x.
__global__ void dropout_f32(float *y, const float *x, i64 n, i64 seed, float keep, float scale) {
	FOR_EACH(i, n) {
		unsigned long long hsh = mix64((unsigned long long)seed ^ mix64((unsigned long long)i));
		float u = (float)(hsh >> 40) * 5.9604644775390625e-8f; // 2^-24
		y[i] = x[i] * (u < keep ? scale : 0.0f);
	}
}

}

// Average pooling's window for output (oy, ox): input rows [*ylo, *yhi),
// columns [*xlo, *xhi), and the divisor. adaptive != 0 is
// adaptive_avg_pool2d's window (rows [oy*h/oh, ceil((oy+1)*h/oh))), which
// ignores k*, s*, p*; otherwise the divisor counts padding when incl != 0,
// the window clipped to the padded input as torch's pool_size.
__device__ float avg_window(i64 oy, i64 ox, i64 h, i64 w, i64 kh, i64 kw, i64 sh, i64 sw, i64 ph, i64 pw, i64 oh, i64 ow,
                            float incl, float adaptive, i64 *ylo, i64 *yhi, i64 *xlo, i64 *xhi) {
	if (adaptive != 0.0f) {
		*ylo = oy * h / oh;
		*yhi = ((oy + 1) * h + oh - 1) / oh;
		*xlo = ox * w / ow;
		*xhi = ((ox + 1) * w + ow - 1) / ow;
		return (float)((*yhi - *ylo) * (*xhi - *xlo));
	}
	i64 y0 = oy * sh - ph, x0 = ox * sw - pw;
	*ylo = y0 < 0 ? 0 : y0;
	*yhi = y0 + kh < h ? y0 + kh : h;
	*xlo = x0 < 0 ? 0 : x0;
	*xhi = x0 + kw < w ? x0 + kw : w;
	if (incl != 0.0f) {
		i64 ye = y0 + kh < h + ph ? y0 + kh : h + ph, xe = x0 + kw < w + pw ? x0 + kw : w + pw;
		return (float)((ye - y0) * (xe - x0));
	}
	return (float)((*yhi - *ylo) * (*xhi - *xlo));
}

extern "C" {

// Average pooling (avg_pool2d, or adaptive_avg_pool2d when adaptive != 0)
// over planes [planes, h, w] into y [planes, oh, ow].
__global__ void avg_pool2d_f32(float *y, const float *x, i64 planes, i64 h, i64 w, i64 kh, i64 kw, i64 sh, i64 sw,
                               i64 ph, i64 pw, i64 oh, i64 ow, float incl, float adaptive) {
	FOR_EACH(i, planes * oh * ow) {
		i64 ox = i % ow, t = i / ow, oy = t % oh, p = t / oh;
		i64 ylo, yhi, xlo, xhi;
		float div = avg_window(oy, ox, h, w, kh, kw, sh, sw, ph, pw, oh, ow, incl, adaptive, &ylo, &yhi, &xlo, &xhi);
		const float *xp = x + p * h * w;
		float s = 0.0f;
		for (i64 iy = ylo; iy < yhi; iy++)
			for (i64 ix = xlo; ix < xhi; ix++) s += xp[iy * w + ix];
		y[i] = s / div;
	}
}

// Its gradient, gathered: dx[p, iy, ix] = the sum of dy/divisor over the
// outputs whose window holds (iy, ix), in output order.
__global__ void avg_pool2d_bwd_f32(float *dx, const float *dy, i64 planes, i64 h, i64 w, i64 kh, i64 kw, i64 sh,
                                   i64 sw, i64 ph, i64 pw, i64 oh, i64 ow, float incl, float adaptive) {
	FOR_EACH(i, planes * h * w) {
		i64 ix = i % w, t = i / w, iy = t % h, p = t / h;
		i64 oylo, oyhi, oxlo, oxhi; // candidate outputs, each checked below
		if (adaptive != 0.0f) {
			oylo = iy * oh / h - 1;
			oyhi = ((iy + 1) * oh + h - 1) / h;
			oxlo = ix * ow / w - 1;
			oxhi = ((ix + 1) * ow + w - 1) / w;
		} else {
			oylo = iy + ph - kh + 1;
			oylo = oylo <= 0 ? 0 : (oylo + sh - 1) / sh;
			oyhi = (iy + ph) / sh;
			oxlo = ix + pw - kw + 1;
			oxlo = oxlo <= 0 ? 0 : (oxlo + sw - 1) / sw;
			oxhi = (ix + pw) / sw;
		}
		oylo = oylo < 0 ? 0 : oylo;
		oxlo = oxlo < 0 ? 0 : oxlo;
		oyhi = oyhi < oh - 1 ? oyhi : oh - 1;
		oxhi = oxhi < ow - 1 ? oxhi : ow - 1;
		const float *g = dy + p * oh * ow;
		float acc = 0.0f;
		for (i64 oy = oylo; oy <= oyhi; oy++) {
			for (i64 ox = oxlo; ox <= oxhi; ox++) {
				i64 ylo, yhi, xlo, xhi;
				float div = avg_window(oy, ox, h, w, kh, kw, sh, sw, ph, pw, oh, ow, incl, adaptive, &ylo, &yhi, &xlo, &xhi);
				if (iy >= ylo && iy < yhi && ix >= xlo && ix < xhi) acc += g[oy * ow + ox] / div;
			}
		}
		dx[i] = acc;
	}
}

}

extern "C" {

// dst = src as a contiguous copy of a strided view: meta holds the view's
// ndim sizes, then its ndim strides (in elements, 0 for a broadcast
// dimension); src points at the view's first element.
__global__ void strided_copy_f32(float *dst, const float *src, i64 n, i64 ndim, const i64 *meta) {
	FOR_EACH(i, n) {
		i64 r = i, off = 0;
		for (i64 d = ndim - 1; d >= 0; d--) {
			i64 sz = meta[d];
			off += (r % sz) * meta[ndim + d];
			r /= sz;
		}
		dst[i] = src[off];
	}
}

}

// ---- Transformer ops (examples/gpt): embedding rows, layer norm, GELU and
// the masked softmax of attention. Attention's products are the launcher's
// SGEMM on strided views of the packed qkv buffer; these kernels do the
// rest.

extern "C" {

// y[o, k, :] = x[o, idx[k], :] for x [outer, n, inner] and y [outer, m,
// inner] (index_select; an embedding lookup with outer = 1). idx is int32,
// each in [0, n) (checked on the host).
__global__ void index_select_f32(float *y, const float *x, const int *idx, i64 outer, i64 n, i64 m, i64 inner) {
	FOR_EACH(i, outer * m * inner) {
		i64 c = i % inner;
		i64 k = (i / inner) % m;
		i64 o = i / (m * inner);
		y[i] = x[(o * n + idx[k]) * inner + c];
	}
}

// index_select's gradient, gx[o, j, :] += sum over k with idx[k] == j of
// gy[o, k, :], deterministically and without atomics: the host groups the
// positions k by row j (pos[start[j] .. start[j+1]) lists them in
// increasing k), so one thread per element of gx adds its rows in the
// order of the CPU op.
__global__ void index_add_f32(float *gx, const float *gy, const int *start, const int *pos, i64 outer, i64 n, i64 m,
                              i64 inner) {
	FOR_EACH(i, outer * n * inner) {
		i64 c = i % inner;
		i64 j = (i / inner) % n;
		i64 o = i / (n * inner);
		float s = gx[i];
		for (i64 p = start[j]; p < start[j + 1]; p++) s += gy[(o * m + pos[p]) * inner + c];
		gx[i] = s;
	}
}

// Layer norm over the last dimension of x [rows, d], one thread per row
// (rows are d_model long and there are B*T of them, which fills the
// device; no barrier, so the simulated device runs it as a plain loop), as
// torch's layer_norm: mean [rows] and rstd [rows] = 1/sqrt(var + eps)
// (biased variance, two passes) are kept for the backward, which
// recomputes xhat = (x - mean) * rstd from them (layer_norm_xhat_f32, the
// same float operations, so the same bits); y = xhat * w + b. w and b may
// be null (no affine).
__global__ void layer_norm_f32(float *y, float *mean_out, float *rstd, const float *x, const float *w, const float *b,
                               i64 rows, i64 d, float eps) {
	FOR_EACH(r, rows) {
		const float *xr = x + r * d;
		float s = 0.0f;
		for (i64 c = 0; c < d; c++) s += xr[c];
		float mean = s / (float)d;
		float v = 0.0f;
		for (i64 c = 0; c < d; c++) {
			float e = xr[c] - mean;
			v += e * e;
		}
		float rs = 1.0f / sqrtf(v / (float)d + eps);
		mean_out[r] = mean;
		rstd[r] = rs;
		for (i64 c = 0; c < d; c++) {
			float h = (xr[c] - mean) * rs;
			if (w) h *= w[c];
			if (b) h += b[c];
			y[r * d + c] = h;
		}
	}
}

// xhat [rows, d] = (x - mean) * rstd: layer norm's normalized input,
// recomputed for the backward from the statistics the forward kept.
__global__ void layer_norm_xhat_f32(float *xhat, const float *x, const float *mean, const float *rstd, i64 rows,
                                    i64 d) {
	FOR_EACH(i, rows * d) {
		i64 r = i / d;
		xhat[i] = (x[i] - mean[r]) * rstd[r];
	}
}

// Layer norm's input gradient, one thread per row: with gh = gy * w (gy
// when w is null), dx = rstd * (gh - mean(gh) - xhat * mean(gh * xhat)).
__global__ void layer_norm_bwd_f32(float *dx, const float *gy, const float *xhat, const float *rstd, const float *w,
                                   i64 rows, i64 d) {
	FOR_EACH(r, rows) {
		const float *g = gy + r * d, *h = xhat + r * d;
		float s1 = 0.0f, s2 = 0.0f;
		for (i64 c = 0; c < d; c++) {
			float gh = w ? g[c] * w[c] : g[c];
			s1 += gh;
			s2 += gh * h[c];
		}
		s1 /= (float)d;
		s2 /= (float)d;
		float rs = rstd[r];
		for (i64 c = 0; c < d; c++) {
			float gh = w ? g[c] * w[c] : g[c];
			dx[r * d + c] = rs * (gh - s1 - h[c] * s2);
		}
	}
}

// Column sums in two stages, for reductions over many rows and few columns
// (a bias gradient over B*T rows, LayerNorm's parameter gradients), where
// one thread per column would leave the device nearly idle: the first
// stage's blocks each sum a chunk of rows for 32 columns, and the second
// adds the chunks' partial sums, column by column, in order. The partition
// is fixed by the shape, so the result is deterministic.
//
// col_sums_part_f32, launched with blocks of 256 threads: work item b
// (blocks take them grid-stride) is columns [32*(b % tiles), +32) of rows
// [chunk*(b / tiles), +chunk), tiles = ceil(cols/32); its 256 threads are
// 32 columns by 8 lanes, lane j summing rows j, j+8, ... of the chunk, and
// lane 0 adds the 8 lanes in order. It writes part[k*cols + c] = sum of
// x[r, c] (times y[r, c] when y is not null) over chunk k's rows.
__global__ void col_sums_part_f32(float *part, const float *x, const float *y, i64 rows, i64 cols, i64 chunk) {
	__shared__ float lanes[8][32];
	i64 tiles = (cols + 31) / 32, chunks = (rows + chunk - 1) / chunk;
	unsigned int col = threadIdx.x % 32, lane = threadIdx.x / 32;
	for (i64 b = blockIdx.x; b < tiles * chunks; b += gridDim.x) {
		i64 c = (b % tiles) * 32 + col, k = b / tiles;
		i64 r0 = k * chunk, r1 = r0 + chunk < rows ? r0 + chunk : rows;
		float s = 0.0f;
		if (c < cols) {
			for (i64 r = r0 + lane; r < r1; r += 8) s += y ? x[r * cols + c] * y[r * cols + c] : x[r * cols + c];
		}
		lanes[lane][col] = s;
		__syncthreads();
		if (lane == 0 && c < cols) {
			float t = 0.0f;
			for (int j = 0; j < 8; j++) t += lanes[j][col];
			part[k * cols + c] = t;
		}
		__syncthreads(); // lanes is reused by the next item
	}
}

// out[c] = sum over k of part[k*cols + c] (the chunks in order), plus
// out[c] when acc != 0: col_sums_part_f32's second stage.
__global__ void col_sums_f32(float *out, const float *part, i64 chunks, i64 cols, float acc) {
	FOR_EACH(c, cols) {
		float s = 0.0f;
		for (i64 k = 0; k < chunks; k++) s += part[k * cols + c];
		out[c] = acc != 0.0f ? out[c] + s : s;
	}
}

// The exact GELU, torch's default: y = x * Phi(x) = x/2 * (1 + erf(x/sqrt2)),
// and its gradient dx = dy * (Phi(x) + x * phi(x)); dx may be dy.
__global__ void gelu_f32(float *y, const float *x, i64 n) {
	FOR_EACH(i, n) {
		float v = x[i];
		y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
	}
}

__global__ void gelu_bwd_f32(float *dx, const float *dy, const float *x, i64 n) {
	FOR_EACH(i, n) {
		float v = x[i];
		float cdf = 0.5f * (1.0f + erff(v * 0.70710678118654752f));
		float pdf = 0.39894228040143267794f * expf(-0.5f * v * v);
		dx[i] = dy[i] * (cdf + v * pdf);
	}
}

// Attention's softmax in place over the rows of p [rows, s], the scores
// already scaled; row r is query i = r % l of its matrix. With causal set
// (non-zero), entries j > i get probability 0 and are not read, so a row
// softmaxes its first min(i+1, s) entries. One thread per row: rows are
// the context length long and there are B*heads*T of them.
__global__ void attn_softmax_f32(float *p, i64 rows, i64 l, i64 s, float causal) {
	FOR_EACH(r, rows) {
		float *pr = p + r * s;
		i64 i = r % l;
		i64 n = causal != 0.0f ? (i + 1 < s ? i + 1 : s) : s;
		float m = -3.402823466e38f;
		for (i64 c = 0; c < n; c++) m = fmaxf(m, pr[c]);
		float sum = 0.0f;
		for (i64 c = 0; c < n; c++) {
			float e = expf(pr[c] - m);
			pr[c] = e;
			sum += e;
		}
		float inv = 1.0f / sum;
		for (i64 c = 0; c < n; c++) pr[c] *= inv;
		for (i64 c = n; c < s; c++) pr[c] = 0.0f;
	}
}

// Its gradient in place, one thread per row: ds = p * (dp - sum_c dp*p),
// over [rows, s]; masked entries have p = 0 and get 0.
__global__ void attn_softmax_bwd_f32(float *dp, const float *p, i64 rows, i64 s) {
	FOR_EACH(r, rows) {
		float *g = dp + r * s;
		const float *pr = p + r * s;
		float dot = 0.0f;
		for (i64 c = 0; c < s; c++) dot += g[c] * pr[c];
		for (i64 c = 0; c < s; c++) g[c] = pr[c] * (g[c] - dot);
	}
}


// Batch norm over x [n, c, l] (l the spatial size), channel by channel.
// The statistics are accumulated in double, in the CPU op's order, so a
// channel of n*l values loses no more than the float32 inputs carry; one
// thread per channel (channels are tens to hundreds, and the simulated
// device runs it as a plain loop).
//
// bn_stats_f32 writes stats [2c+1]: with sums zero, the batch mean and
// biased variance (two passes, as the CPU's BatchNorm); with sums
// non-zero, Σx and Σx² (what SyncBatchNorm all-reduces across replicas);
// stats[2c] is the count n*l either way.
__global__ void bn_stats_f32(float *stats, const float *x, i64 n, i64 c, i64 l, float sums) {
	FOR_EACH(ch, c) {
		double s = 0.0, ss = 0.0;
		for (i64 i = 0; i < n; i++) {
			const float *xr = x + (i * c + ch) * l;
			for (i64 j = 0; j < l; j++) {
				double v = (double)xr[j];
				s += v;
				ss += v * v;
			}
		}
		double cnt = (double)(n * l);
		if (sums != 0.0f) {
			stats[ch] = (float)s;
			stats[c + ch] = (float)ss;
		} else {
			double mean = s / cnt, v = 0.0;
			for (i64 i = 0; i < n; i++) {
				const float *xr = x + (i * c + ch) * l;
				for (i64 j = 0; j < l; j++) {
					double e = (double)xr[j] - mean;
					v += e * e;
				}
			}
			stats[ch] = (float)mean;
			stats[c + ch] = (float)(v / cnt);
		}
		if (ch == 0) stats[2 * c] = (float)cnt;
	}
}

// bn_finalize_f32 turns the statistics into coef [2c] = (mean, rstd) and,
// in training with running statistics (rm and rv non-null), updates them:
// run = (1-momentum)*run + momentum*stat, the variance unbiased with the
// count in stats[2c]. In evaluation (training zero) the mean and variance
// are rm and rv and stats is not read. One thread per channel.
__global__ void bn_finalize_f32(float *coef, const float *stats, float *rm, float *rv, i64 c, float training,
                                float sums, float momentum, float eps) {
	FOR_EACH(ch, c) {
		double mean, var;
		if (training != 0.0f) {
			double cnt = (double)stats[2 * c];
			if (sums != 0.0f) {
				mean = (double)stats[ch] / cnt;
				var = (double)stats[c + ch] / cnt - mean * mean;
				if (var < 0.0) var = 0.0;
			} else {
				mean = (double)stats[ch];
				var = (double)stats[c + ch];
			}
			if (rm) {
				double m = (double)momentum;
				rm[ch] = (float)((1.0 - m) * (double)rm[ch] + m * mean);
				rv[ch] = (float)((1.0 - m) * (double)rv[ch] + m * var * cnt / (cnt - 1.0));
			}
		} else {
			mean = (double)rm[ch];
			var = (double)rv[ch];
		}
		coef[ch] = (float)mean;
		coef[c + ch] = (float)(1.0 / sqrt(var + (double)eps));
	}
}

// bn_apply_f32: xhat = (x - mean) * rstd and y = xhat*w + b (w, b may be
// null), elementwise over [n, c, l] with coef from bn_finalize_f32.
__global__ void bn_apply_f32(float *y, float *xhat, const float *x, const float *coef, const float *w, const float *b,
                             i64 n, i64 c, i64 l) {
	FOR_EACH(i, n * c * l) {
		i64 ch = (i / l) % c;
		float h = (x[i] - coef[ch]) * coef[c + ch];
		xhat[i] = h;
		if (w) h *= w[ch];
		if (b) h += b[ch];
		y[i] = h;
	}
}

// bn_bwd_reduce_f32 writes sums [2c] = (Σ gy, Σ gy*xhat) per channel, in
// double, and adds them into db and dw (either may be null). One thread
// per channel, in the CPU op's order.
__global__ void bn_bwd_reduce_f32(float *sums, float *dw, float *db, const float *gy, const float *xhat,
                                  i64 n, i64 c, i64 l) {
	FOR_EACH(ch, c) {
		double sg = 0.0, sgh = 0.0;
		for (i64 i = 0; i < n; i++) {
			i64 off = (i * c + ch) * l;
			for (i64 j = 0; j < l; j++) {
				double g = (double)gy[off + j];
				sg += g;
				sgh += g * (double)xhat[off + j];
			}
		}
		sums[ch] = (float)sg;
		sums[c + ch] = (float)sgh;
		if (dw) dw[ch] += (float)sgh;
		if (db) db[ch] += (float)sg;
	}
}

// bn_bwd_input_f32 is the input gradient, elementwise: in training (sums
// non-null, the count in stats[2c]) dx = w*rstd*(gy - Σgy/cnt -
// xhat*Σ(gy*xhat)/cnt); in evaluation (sums null) dx = w*rstd*gy. w may be
// null (one).
__global__ void bn_bwd_input_f32(float *dx, const float *gy, const float *xhat, const float *coef, const float *w,
                                 const float *sums, const float *stats, i64 n, i64 c, i64 l) {
	FOR_EACH(i, n * c * l) {
		i64 ch = (i / l) % c;
		float scale = coef[c + ch];
		if (w) scale *= w[ch];
		if (sums) {
			float cnt = stats[2 * c];
			dx[i] = scale * (gy[i] - sums[ch] / cnt - xhat[i] * (sums[c + ch] / cnt));
		} else {
			dx[i] = scale * gy[i];
		}
	}
}

// where_f32 is y = m != 0 ? a : b elementwise over n, a null a reading va
// and a null b reading vb: masked_fill (a null), where, and their
// gradients (one side null, reading 0). y may alias any operand.
__global__ void where_f32(float *y, const float *m, const float *a, const float *b, float va, float vb, i64 n) {
	FOR_EACH(i, n) {
		y[i] = m[i] != 0.0f ? (a ? a[i] : va) : (b ? b[i] : vb);
	}
}

}

// ---- Fused causal attention (FlashAttention-2's algorithm).
//
// tensor.Kernels' FlashAttention and FlashAttentionBackward: qkv is
// [B, T, 3, H, D] (q, k and v of a token side by side, each H heads of D),
// y and dy are [B, T, H, D], lse is [B, H, T] (a query row's log Σ_j
// exp(scale·q·k_j) over the keys it sees: key 0..i with causal, all T
// without). Nothing T×T is stored: the forward streams the keys and values
// through shared memory with an online softmax (a running maximum and sum
// a row), and the backward recomputes the probabilities from lse tile by
// tile (FlashAttention-2, Dao 2023). Key blocks wholly past a query tile's
// last row (causal) are skipped, and query tiles wholly before a key tile.
//
// bf16 (autocast) is the host kernel's arithmetic (tensor's
// cpu_flash_attention.go), which these kernels are tested against: q, k,
// v, dy, the probabilities and the scores' gradient dS are rounded to
// bfloat16 (nearest, ties to even: f32_to_bf16_bits) as the operands of
// the products, which accumulate in float32; scores, sums, lse and
// D = Σ dỹ·y stay float32. In the forward the rounded probabilities are
// FlashAttention's unnormalised e^(s − running max), the row's sum taken
// before rounding, so the result depends on where the running maximum is
// updated: every FA_KB keys from key 0, as the host kernel's key tiles.
//
// Plain float32 FMA code, one thread per query row (forward, dQ) or key
// row (dK, dV), which keeps that row's vectors in thread-local arrays of
// FA_MAXD and reads the other side's rows from a shared tile (every
// thread of a block reads the same element: a broadcast). It does NOT use
// tensor cores (the PTX targets compute_52, which has no mma) and has not
// been timed or tuned on a GPU: it is the correct reference for a faster
// version, not FlashAttention's speed.
//
// The backward is deterministic (no atomics), where FlashAttention-2's,
// and torch's, add dQ with atomicAdd in an order that varies from run to
// run: flash_attn_bwd_f32 gives each block a tile of keys, which loops
// over the query tiles that see them and writes dK and dV;
// flash_attn_bwd_dq_f32 gives each block a tile of queries, which loops
// over their keys and writes dQ, recomputing S and P once more. Together
// they write every element of dqkv.
//
// Any block size works (a block's tile is blockDim.x rows) and any grid
// (blocks loop over the tiles); D is at most FA_MAXD (devtensor checks).

#define FA_MAXD 128
#define FA_KB 128 // keys between running-maximum updates: tensor's flashTileK
#define FA_BC 32  // rows a shared tile holds

extern "C" {

// fa_round is x rounded to bfloat16 when on is non-zero, else x.
__device__ __forceinline__ float fa_round(float x, float on) {
	return on != 0.0f ? f32_from_bits((unsigned int)f32_to_bf16_bits(x) << 16) : x;
}

// fa_dot is Σ_c a[c]·b[c] over n, accumulated in order.
__device__ __forceinline__ float fa_dot(const float *a, const float *b, i64 n) {
	float s = 0.0f;
	for (i64 c = 0; c < n; c++) s += a[c] * b[c];
	return s;
}

// fa_load copies rows [r0, r0+n) of one head's q, k, v or dy (src points
// at token 0's, consecutive tokens stride apart) into a shared tile of
// FA_MAXD a row, rounded with bf16; the block's threads share the copy.
__device__ __forceinline__ void fa_load(float *tile, const float *src, i64 r0, i64 n, i64 stride, i64 d, float bf16) {
	for (i64 e = threadIdx.x; e < n * d; e += blockDim.x) {
		i64 r = e / d, c = e % d;
		tile[r * FA_MAXD + c] = fa_round(src[(r0 + r) * stride + c], bf16);
	}
}

// fa_seen is how many of the n keys k0.. query i sees.
__device__ __forceinline__ i64 fa_seen(i64 i, i64 k0, i64 n, float causal) {
	if (causal == 0.0f) return n;
	i64 v = i - k0 + 1;
	return v < 0 ? 0 : (v < n ? v : n);
}

// y and lse from qkv; a block per tile of blockDim.x queries of one (b, h).
// Per block of FA_KB keys: the scores (keys a shared tile at a time), the
// online softmax's update, then the values (a shared tile at a time).
__global__ void flash_attn_fwd_f32(float *y, float *lse, const float *qkv, i64 b, i64 t, i64 h, i64 d, float scale,
                                   float causal, float bf16) {
	__shared__ float tile[FA_BC * FA_MAXD];
	i64 br = blockDim.x, tiles = (t + br - 1) / br, stride = 3 * h * d;
	FOR_EACH_ROW(w, tiles * b * h) {
		i64 bh = w / tiles, q0 = (w % tiles) * br;
		i64 bi = bh / h, hi = bh % h;
		const float *qb = qkv + bi * t * stride + hi * d, *kb = qb + h * d, *vb = qb + 2 * h * d;
		i64 i = q0 + (i64)threadIdx.x;
		bool row = i < t;
		float q[FA_MAXD], acc[FA_MAXD], s[FA_KB];
		for (i64 c = 0; c < d; c++) {
			q[c] = row ? fa_round(qb[i * stride + c], bf16) : 0.0f;
			acc[c] = 0.0f;
		}
		// The keys any row of the tile sees.
		i64 kend = causal != 0.0f ? (q0 + br < t ? q0 + br : t) : t;
		float m = f32_from_bits(0xff800000u), l = 0.0f; // -inf
		for (i64 kb0 = 0; kb0 < kend; kb0 += FA_KB) {
			i64 nb = kend - kb0 < FA_KB ? kend - kb0 : FA_KB;
			i64 nj = row ? fa_seen(i, kb0, nb, causal) : 0;
			for (i64 k0 = 0; k0 < nb; k0 += FA_BC) {
				i64 n = nb - k0 < FA_BC ? nb - k0 : FA_BC;
				__syncthreads(); // the previous tile is read
				fa_load(tile, kb, kb0 + k0, n, stride, d, bf16);
				__syncthreads();
				for (i64 j = 0; j < n && k0 + j < nj; j++) s[k0 + j] = scale * fa_dot(q, tile + j * FA_MAXD, d);
			}
			if (nj > 0) {
				float mt = m, sum = 0.0f;
				for (i64 j = 0; j < nj; j++) mt = fmaxf(mt, s[j]);
				float alpha = expf(m - mt); // 0 at the first block (m = -inf)
				for (i64 j = 0; j < nj; j++) {
					float p = expf(s[j] - mt);
					sum += p;
					s[j] = fa_round(p, bf16);
				}
				l = l * alpha + sum;
				m = mt;
				for (i64 c = 0; c < d; c++) acc[c] *= alpha;
			}
			for (i64 k0 = 0; k0 < nb; k0 += FA_BC) {
				i64 n = nb - k0 < FA_BC ? nb - k0 : FA_BC;
				__syncthreads();
				fa_load(tile, vb, kb0 + k0, n, stride, d, bf16);
				__syncthreads();
				for (i64 j = 0; j < n && k0 + j < nj; j++) {
					float p = s[k0 + j];
					const float *vr = tile + j * FA_MAXD;
					for (i64 c = 0; c < d; c++) acc[c] += p * vr[c];
				}
			}
		}
		if (row) {
			float inv = 1.0f / l, *yr = y + ((bi * t + i) * h + hi) * d;
			for (i64 c = 0; c < d; c++) yr[c] = acc[c] * inv;
			lse[bh * t + i] = m + logf(l);
		}
	}
}

// dd [B, H, T] = Σ_c dỹ·y over each query row (FlashAttention-2's D, the
// softmax backward's Σ_j P·dP), dy rounded with bf16; a thread per row.
__global__ void flash_attn_bwd_dot_f32(float *dd, const float *dy, const float *y, i64 b, i64 t, i64 h, i64 d,
                                       float bf16) {
	FOR_EACH(r, b * h * t) {
		i64 bh = r / t, i = r % t, bi = bh / h, hi = bh % h;
		i64 off = ((bi * t + i) * h + hi) * d;
		float s = 0.0f;
		for (i64 c = 0; c < d; c++) s += fa_round(dy[off + c], bf16) * y[off + c];
		dd[r] = s;
	}
}

// dK and dV of dqkv; a block per tile of blockDim.x keys of one (b, h),
// looping over the query tiles that see them (from the tile's first key on
// with causal).
__global__ void flash_attn_bwd_f32(float *dqkv, const float *dy, const float *qkv, const float *lse, const float *dd,
                                   i64 b, i64 t, i64 h, i64 d, float scale, float causal, float bf16) {
	__shared__ float qs[FA_BC * FA_MAXD];
	__shared__ float dys[FA_BC * FA_MAXD];
	__shared__ float ls[FA_BC], ds[FA_BC];
	i64 bk = blockDim.x, tiles = (t + bk - 1) / bk, stride = 3 * h * d, ystride = h * d;
	FOR_EACH_ROW(w, tiles * b * h) {
		i64 bh = w / tiles, k0 = (w % tiles) * bk;
		i64 bi = bh / h, hi = bh % h;
		const float *qb = qkv + bi * t * stride + hi * d, *kb = qb + h * d, *vb = qb + 2 * h * d;
		const float *dyb = dy + bi * t * ystride + hi * d;
		i64 j = k0 + (i64)threadIdx.x;
		bool row = j < t;
		float k[FA_MAXD], v[FA_MAXD], dk[FA_MAXD], dv[FA_MAXD];
		for (i64 c = 0; c < d; c++) {
			k[c] = row ? fa_round(kb[j * stride + c], bf16) : 0.0f;
			v[c] = row ? fa_round(vb[j * stride + c], bf16) : 0.0f;
			dk[c] = 0.0f;
			dv[c] = 0.0f;
		}
		for (i64 q0 = causal != 0.0f ? k0 : 0; q0 < t; q0 += FA_BC) {
			i64 n = t - q0 < FA_BC ? t - q0 : FA_BC;
			__syncthreads();
			fa_load(qs, qb, q0, n, stride, d, bf16);
			fa_load(dys, dyb, q0, n, ystride, d, bf16);
			for (i64 r = threadIdx.x; r < n; r += blockDim.x) {
				ls[r] = lse[bh * t + q0 + r];
				ds[r] = dd[bh * t + q0 + r];
			}
			__syncthreads();
			if (!row) continue;
			// Queries i >= j see key j.
			for (i64 r = causal != 0.0f && j > q0 ? j - q0 : 0; r < n; r++) {
				const float *qr = qs + r * FA_MAXD, *dyr = dys + r * FA_MAXD;
				float p = expf(scale * fa_dot(qr, k, d) - ls[r]);
				float dsv = fa_round(p * (fa_dot(dyr, v, d) - ds[r]), bf16);
				p = fa_round(p, bf16);
				for (i64 c = 0; c < d; c++) {
					dv[c] += p * dyr[c];
					dk[c] += dsv * qr[c];
				}
			}
		}
		if (row) {
			float *g = dqkv + (bi * t + j) * stride + hi * d;
			for (i64 c = 0; c < d; c++) {
				g[h * d + c] = scale * dk[c];
				g[2 * h * d + c] = dv[c];
			}
		}
	}
}

// dQ of dqkv; a block per tile of blockDim.x queries of one (b, h),
// looping over the key tiles they see.
__global__ void flash_attn_bwd_dq_f32(float *dqkv, const float *dy, const float *qkv, const float *lse, const float *dd,
                                      i64 b, i64 t, i64 h, i64 d, float scale, float causal, float bf16) {
	__shared__ float ks[FA_BC * FA_MAXD];
	__shared__ float vs[FA_BC * FA_MAXD];
	i64 br = blockDim.x, tiles = (t + br - 1) / br, stride = 3 * h * d;
	FOR_EACH_ROW(w, tiles * b * h) {
		i64 bh = w / tiles, q0 = (w % tiles) * br;
		i64 bi = bh / h, hi = bh % h;
		const float *qb = qkv + bi * t * stride + hi * d, *kb = qb + h * d, *vb = qb + 2 * h * d;
		i64 i = q0 + (i64)threadIdx.x;
		bool row = i < t;
		float q[FA_MAXD], g[FA_MAXD], dq[FA_MAXD];
		for (i64 c = 0; c < d; c++) {
			q[c] = row ? fa_round(qb[i * stride + c], bf16) : 0.0f;
			g[c] = row ? fa_round(dy[((bi * t + i) * h + hi) * d + c], bf16) : 0.0f;
			dq[c] = 0.0f;
		}
		float lg = row ? lse[bh * t + i] : 0.0f, di = row ? dd[bh * t + i] : 0.0f;
		i64 kend = causal != 0.0f ? (q0 + br < t ? q0 + br : t) : t;
		for (i64 k0 = 0; k0 < kend; k0 += FA_BC) {
			i64 n = kend - k0 < FA_BC ? kend - k0 : FA_BC;
			__syncthreads();
			fa_load(ks, kb, k0, n, stride, d, bf16);
			fa_load(vs, vb, k0, n, stride, d, bf16);
			__syncthreads();
			i64 nj = row ? fa_seen(i, k0, n, causal) : 0;
			for (i64 jj = 0; jj < nj; jj++) {
				const float *kr = ks + jj * FA_MAXD;
				float p = expf(scale * fa_dot(q, kr, d) - lg);
				float dsv = fa_round(p * (fa_dot(g, vs + jj * FA_MAXD, d) - di), bf16);
				for (i64 c = 0; c < d; c++) dq[c] += dsv * kr[c];
			}
		}
		if (row) {
			float *o = dqkv + (bi * t + i) * stride + hi * d;
			for (i64 c = 0; c < d; c++) o[c] = scale * dq[c];
		}
	}
}

}

// ---- Multi-tensor optimizer updates (torch's multi_tensor_apply, behind
// its fused/foreach AdamW and SGD and clip_grad_norm_): one launch covers
// every tensor of a parameter list, however many, instead of one launch a
// tensor. goddp/cuda/devtensor (multitensor.go) builds the table, in device
// memory, as i64 words for nt tensors in `lists` parallel lists (for Adam
// the parameters, gradients, m and v):
//
//	[t]                        element count of tensor t (equal in every list)
//	[nt*(1+l) + t]             address of list l's tensor t
//	[nt*(1+lists) + t]         tensor t's first chunk
//	[nt*(2+lists) + c]         chunk c's tensor
//
// Chunk c of tensor t is its elements [(c - first[t])*chunk, +chunk), cut
// at its end. Blocks take chunks grid-stride and a block's threads stride
// over its chunk, so each element gets exactly the arithmetic of the
// per-tensor kernel (adam_f32, sgd_momentum_f32, axpy_f32, scale_by_f32),
// in the same order of operations: results are bit for bit theirs
// whatever the grid.

extern "C" {

struct mt_span {
	i64 t, lo, hi; // tensor, first element, one past the last
};

__device__ mt_span mt_locate(const i64 *table, i64 nt, i64 lists, i64 c, i64 chunk) {
	mt_span s;
	s.t = table[nt * (2 + lists) + c];
	s.lo = (c - table[nt * (1 + lists) + s.t]) * chunk;
	i64 n = table[s.t];
	s.hi = s.lo + chunk < n ? s.lo + chunk : n;
	return s;
}

__device__ float *mt_ptr(const i64 *table, i64 nt, i64 l, i64 t) { return (float *)table[nt * (1 + l) + t]; }

// Adam and AdamW over the lists (w, g, m, v): adam_f32's update.
__global__ void multi_tensor_adam_f32(const i64 *table, i64 nt, i64 nchunks, i64 chunk, float lr, float beta1,
                                      float beta2, float eps, float wd, float decoupled, float step_size,
                                      float inv_bc2) {
	for (i64 c = blockIdx.x; c < nchunks; c += gridDim.x) {
		mt_span s = mt_locate(table, nt, 4, c, chunk);
		float *w = mt_ptr(table, nt, 0, s.t), *g = mt_ptr(table, nt, 1, s.t);
		float *m = mt_ptr(table, nt, 2, s.t), *v = mt_ptr(table, nt, 3, s.t);
		for (i64 i = s.lo + threadIdx.x; i < s.hi; i += blockDim.x) {
			adam_elem(w, g, m, v, i, lr, beta1, beta2, eps, wd, decoupled, step_size, inv_bc2);
		}
	}
}

// SGD with momentum over the lists (w, g, buf): sgd_momentum_f32's update.
__global__ void multi_tensor_sgd_momentum_f32(const i64 *table, i64 nt, i64 nchunks, i64 chunk, float lr,
                                              float momentum, float dampening, float wd, float nesterov,
                                              float first) {
	for (i64 c = blockIdx.x; c < nchunks; c += gridDim.x) {
		mt_span s = mt_locate(table, nt, 3, c, chunk);
		float *w = mt_ptr(table, nt, 0, s.t), *g = mt_ptr(table, nt, 1, s.t), *buf = mt_ptr(table, nt, 2, s.t);
		for (i64 i = s.lo + threadIdx.x; i < s.hi; i += blockDim.x) {
			float d = g[i] + wd * w[i];
			float b = first != 0.0f ? d : momentum * buf[i] + (1.0f - dampening) * d;
			buf[i] = b;
			w[i] -= lr * (nesterov != 0.0f ? d + momentum * b : b);
		}
	}
}

// SGD without momentum over the lists (w, g): w += decay*w when
// decay_on != 0, then w += step*g, each rounded as axpy_f32's y += s*x
// (decay = -lr*wd, step = -lr, or lr when maximizing: the per-tensor
// path's two axpys).
__global__ void multi_tensor_sgd_f32(const i64 *table, i64 nt, i64 nchunks, i64 chunk, float decay, float step,
                                     float decay_on) {
	for (i64 c = blockIdx.x; c < nchunks; c += gridDim.x) {
		mt_span s = mt_locate(table, nt, 2, c, chunk);
		float *w = mt_ptr(table, nt, 0, s.t), *g = mt_ptr(table, nt, 1, s.t);
		for (i64 i = s.lo + threadIdx.x; i < s.hi; i += blockDim.x) {
			float wi = w[i];
			if (decay_on != 0.0f) wi += decay * wi;
			wi += step * g[i];
			w[i] = wi;
		}
	}
}

// part[c] = the sum of x*x over chunk c of the list (x): the first stage of
// a sum of squares over every tensor (clip_grad_norm_). No atomics: the
// partition is fixed by the table and the block size, so the sum is too.
__global__ void multi_tensor_sum_squares_f32(float *part, const i64 *table, i64 nt, i64 nchunks, i64 chunk) {
	for (i64 c = blockIdx.x; c < nchunks; c += gridDim.x) {
		mt_span s = mt_locate(table, nt, 1, c, chunk);
		const float *x = mt_ptr(table, nt, 0, s.t);
		float acc = 0.0f;
		for (i64 i = s.lo + threadIdx.x; i < s.hi; i += blockDim.x) acc += x[i] * x[i];
		acc = block_sum(acc);
		if (threadIdx.x == 0) part[c] = acc;
	}
}

// *out = the sum of part[0, n), by block 0 alone (its threads stride over
// part, then block_sum) so that the order, and the result, are fixed; the
// second stage of multi_tensor_sum_squares_f32.
__global__ void multi_tensor_sum_f32(float *out, const float *part, i64 n) {
	if (blockIdx.x != 0) return;
	float s = 0.0f;
	for (i64 i = threadIdx.x; i < n; i += blockDim.x) s += part[i];
	s = block_sum(s);
	if (threadIdx.x == 0) *out = s;
}

// x *= *coef over the list (x): scale_by_f32 on every tensor (clipping by
// clip_coef_f32's coefficient, never read on the host).
__global__ void multi_tensor_scale_by_f32(const i64 *table, i64 nt, i64 nchunks, i64 chunk, const float *coef) {
	float k = *coef;
	for (i64 c = blockIdx.x; c < nchunks; c += gridDim.x) {
		mt_span s = mt_locate(table, nt, 1, c, chunk);
		float *x = mt_ptr(table, nt, 0, s.t);
		for (i64 i = s.lo + threadIdx.x; i < s.hi; i += blockDim.x) x[i] *= k;
	}
}

} // ---- End of the multi-tensor optimizer updates.

// ---- Ops along one axis and pointwise gradients (tensor/op_grads.go,
// tensor/index.go): Gather and ScatterAdd, Max along an axis, Concat's
// block copy, Clamp, PowScalar and Pow's gradients, BCEWithLogits. x is
// viewed as [outer, n, inner]; index operands are int32 (uploaded, or
// max_dim_f32's arg, int32 bits in a float32 tensor).

extern "C" {

// y[o, c] = x[o, idx[o*inner + c], c] (idx checked on the host).
__global__ void gather_f32(float *y, const float *x, const int *idx, i64 outer, i64 n, i64 inner) {
	FOR_EACH(k, outer * inner) {
		i64 o = k / inner, c = k % inner;
		y[k] = x[(o * n + idx[k]) * inner + c];
	}
}

// gx[o, idx[o*inner + c], c] += gy[o, c]: each (o, c) writes its own
// column of gx, so no two threads meet and no atomics are needed.
__global__ void scatter_add_f32(float *gx, const float *gy, const int *idx, i64 outer, i64 n, i64 inner) {
	FOR_EACH(k, outer * inner) {
		i64 o = k / inner, c = k % inner;
		gx[(o * n + idx[k]) * inner + c] += gy[k];
	}
}

// y[o, c] = max_j x[o, j, c] and arg[o, c] its first position (as int32
// bits), NaN counting as the maximum (the first NaN), as torch and the
// host's loop.
__global__ void max_dim_f32(float *y, float *arg, const float *x, i64 outer, i64 n, i64 inner) {
	int *am = (int *)arg;
	FOR_EACH(k, outer * inner) {
		i64 o = k / inner, c = k % inner;
		const float *xc = x + o * n * inner + c;
		float best = xc[0];
		int bi = 0;
		for (i64 j = 1; j < n; j++) {
			float v = xc[j * inner];
			if (v > best || (v != v && best == best)) {
				best = v;
				bi = (int)j;
			}
		}
		y[k] = best;
		am[k] = bi;
	}
}

// dx[o, j, c] = dy[o, c] where j is arg[o, c], else 0 (dx written whole).
__global__ void max_dim_bwd_f32(float *dx, const float *dy, const float *arg, i64 outer, i64 n, i64 inner) {
	const int *am = (const int *)arg;
	FOR_EACH(i, outer * n * inner) {
		i64 c = i % inner, j = (i / inner) % n, o = i / (n * inner);
		i64 k = o * inner + c;
		dx[i] = am[k] == j ? dy[k] : 0.0f;
	}
}

// For each o < outer, the w elements at src + o*ss + so go to
// dst + o*ds + dof (Concat's pieces, and their gradients back out).
__global__ void copy_block_f32(float *dst, const float *src, i64 outer, i64 w, i64 ds, i64 dof, i64 ss, i64 so) {
	FOR_EACH(i, outer * w) {
		i64 o = i / w, c = i % w;
		dst[o * ds + dof + c] = src[o * ss + so + c];
	}
}

// y = min(max(x, lo), hi), NaN staying NaN; the gradient passes dy where
// lo <= x <= hi, bounds included, as torch.
__global__ void clamp_f32(float *y, const float *x, float lo, float hi, i64 n) {
	FOR_EACH(i, n) {
		float v = x[i];
		y[i] = v < lo ? lo : (v > hi ? hi : v);
	}
}

__global__ void clamp_bwd_f32(float *dx, const float *dy, const float *x, float lo, float hi, i64 n) {
	FOR_EACH(i, n) dx[i] = (x[i] >= lo && x[i] <= hi) ? dy[i] : 0.0f;
}

// y = x**p, squares as a product (the host's loop does too).
__global__ void pow_scalar_f32(float *y, const float *x, float p, i64 n) {
	FOR_EACH(i, n) y[i] = p == 2.0f ? x[i] * x[i] : (p == 1.0f ? x[i] : powf(x[i], p));
}

// dx = dy * p * x**(p-1), with the host's special cases p = 0, 1, 2.
__global__ void pow_scalar_bwd_f32(float *dx, const float *dy, const float *x, float p, i64 n) {
	FOR_EACH(i, n) {
		float g = dy[i];
		dx[i] = p == 0.0f ? 0.0f : (p == 1.0f ? g : (p == 2.0f ? 2.0f * g * x[i] : g * p * powf(x[i], p - 1.0f)));
	}
}

// Pow's gradient at y = a**b: da = gy*b*a**(b-1); db = gy*y*log(a), 0
// where a = 0 (log's -inf). da or db may be null (not wanted).
__global__ void pow_bwd_f32(float *da, float *db, const float *gy, const float *a, const float *b, const float *y,
                            i64 n) {
	FOR_EACH(i, n) {
		float g = gy[i];
		if (da) da[i] = g * (b[i] * powf(a[i], b[i] - 1.0f));
		if (db) {
			float la = a[i] == 0.0f ? 0.0f : logf(a[i]); // log(±0) = -inf, the only -inf
			db[i] = g * y[i] * la;
		}
	}
}

// The elementwise loss max(x, 0) - x*t + log1p(exp(-|x|)); a reduction
// sums it afterwards (SumAll) and divides.
__global__ void bce_logits_f32(float *loss, const float *x, const float *t, i64 n) {
	FOR_EACH(i, n) {
		float v = x[i];
		loss[i] = fmaxf(v, 0.0f) - v * t[i] + log1pf(expf(-fabsf(v)));
	}
}

// dx = (sigmoid(x) - t)*g, dt = -x*g (either null: not wanted), g being
// gy[i], or gy[0]/div when reduced.
__global__ void bce_logits_bwd_f32(float *dx, float *dt, const float *gy, const float *x, const float *t, float reduced,
                                   float div, i64 n) {
	FOR_EACH(i, n) {
		float g = reduced != 0.0f ? gy[0] / div : gy[i];
		float v = x[i];
		if (dx) dx[i] = g / (1.0f + expf(-v)) - t[i] * g;
		if (dt) dt[i] = -v * g;
	}
}

} // ---- End of the ops along one axis and pointwise gradients.

// ---- GELU's tanh approximation (tensor/gelu_tanh.go), GPT-2's activation:
// y = x*s and GELU'(x) = s*(1 + 2*sqrt(2/pi)*x*(1-s)*(1 + 3*0.044715*x^2))
// with s = sigmoid(2u) = (1 + tanh u)/2, u = sqrt(2/pi)*(x + 0.044715*x^3),
// s and 1-s both from w = exp(-2|u|) as 1/(1+w) and w/(1+w), so neither
// tail cancels (torch's 0.5*x*(1 + tanh u) loses the left tail in float32).
// |x| is clamped to 20, past which the results are saturated (x or -0;
// 1 or -0), so +-Inf give the limits; the comparisons let NaN through.

extern "C" {

__device__ float gelu_tanh_s(float x, float *oms, float *c) {
	float xl = x < -20.0f ? -20.0f : x;
	float cc = xl > 20.0f ? 20.0f : xl;
	float u = 0.7978845608028654f * (cc + 0.044715f * cc * cc * cc);
	float w = expf(-2.0f * fabsf(u));
	float q = 1.0f / (1.0f + w);
	float wq = w * q;
	*oms = x < 0.0f ? q : wq;
	*c = cc;
	return x < 0.0f ? wq : q;
}

__device__ float gelu_tanh_value(float x, float s) { return (x < -20.0f ? -20.0f : x) * s; }

__device__ float gelu_tanh_deriv(float s, float oms, float c) {
	return s * (1.0f + 1.5957691216057308f * c * oms * (1.0f + 0.134145f * c * c));
}

__global__ void gelu_tanh_f32(float *y, const float *x, i64 n) {
	FOR_EACH(i, n) {
		float v = x[i], oms, c;
		y[i] = gelu_tanh_value(v, gelu_tanh_s(v, &oms, &c));
	}
}

// The value and the derivative in one pass, for an input that needs a
// gradient: the backward is then one product (mul_f32).
__global__ void gelu_tanh_with_grad_f32(float *y, float *d, const float *x, i64 n) {
	FOR_EACH(i, n) {
		float v = x[i], oms, c;
		float s = gelu_tanh_s(v, &oms, &c);
		y[i] = gelu_tanh_value(v, s);
		d[i] = gelu_tanh_deriv(s, oms, c);
	}
}

// dx = dy*GELU'(x); dx may be dy.
__global__ void gelu_tanh_bwd_f32(float *dx, const float *dy, const float *x, i64 n) {
	FOR_EACH(i, n) {
		float v = x[i], oms, c;
		float s = gelu_tanh_s(v, &oms, &c);
		dx[i] = dy[i] * gelu_tanh_deriv(s, oms, c);
	}
}

} // ---- End of GELU's tanh approximation.
