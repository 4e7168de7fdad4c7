// Device kernels for Linear/MLP training in float32 (goddp/cuda). This file
// is the source; ptx.go holds the PTX that NVRTC generates from it
// (go generate ./cuda/kernels, which needs libnvrtc from nvidia-cuda-dev
// but no GPU). None of these kernels has run on a GPU yet.
//
// Indexing is 64-bit throughout: counts arrive as long long and every
// index is computed in long long, so tensors of 2^31 elements and more are
// addressed correctly (32-bit indices wrapped there and wrote before the
// buffer). Each kernel loops with a grid stride, so any grid works; goddp
// launches 256-thread blocks, at most 2^20 of them. Matrices are
// row-major.

typedef long long i64;

#define FOR_EACH(i, n)                                                        \
	for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (i64)gridDim.x * blockDim.x)

extern "C" {

// y[r, c] += b[c] for a [rows, cols] y (Linear's bias).
__global__ void add_bias_f32(float *y, const float *b, i64 rows, i64 cols) {
	FOR_EACH(i, rows * cols) y[i] += b[i % cols];
}

// y = max(x, 0); y may be x.
__global__ void relu_f32(float *y, const float *x, i64 n) {
	FOR_EACH(i, n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

// dx = dy where x > 0, else 0 (torch's gradient at 0 is 0); dx may be dy.
__global__ void relu_bwd_f32(float *dx, const float *dy, const float *x, i64 n) {
	FOR_EACH(i, n) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
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

// x = v (e.g. the ones vector that turns column sums into a GEMV).
__global__ void fill_f32(float *x, float v, i64 n) {
	FOR_EACH(i, n) x[i] = v;
}

}
