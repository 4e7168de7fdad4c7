// Device kernels for Linear/MLP training in float32 (goddp/cuda). This file
// is the source; ptx.go holds the PTX that NVRTC generates from it
// (go generate ./cuda/kernels, which needs libnvrtc from nvidia-cuda-dev
// but no GPU). None of these kernels has run on a GPU yet.
//
// Every kernel takes one thread per element (per row for softmax_ce) and
// checks its bound, so any grid that covers the range works; goddp
// launches 256-thread blocks. Matrices are row-major.

extern "C" {

// y[r, c] += b[c] for a [rows, cols] y (Linear's bias).
__global__ void add_bias_f32(float *y, const float *b, int rows, int cols) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < rows * cols) y[i] += b[i % cols];
}

// y = max(x, 0); y may be x.
__global__ void relu_f32(float *y, const float *x, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

// dx = dy where x > 0, else 0 (torch's gradient at 0 is 0); dx may be dy.
__global__ void relu_bwd_f32(float *dx, const float *dy, const float *x, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

// Mean squared error, forward and backward at once: sq = (p - t)^2 (the
// caller sums it), grad = scale * (p - t) with scale = 2/n for the mean.
__global__ void mse_f32(float *grad, float *sq, const float *pred, const float *target, int n, float scale) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) {
		float d = pred[i] - target[i];
		sq[i] = d * d;
		grad[i] = scale * d;
	}
}

// Softmax cross-entropy over [rows, cols] logits against class labels, one
// thread per row: loss[r] = logsumexp(x_r) - x_r[label] (the caller sums
// it), grad[r, c] = scale * (softmax(x_r)[c] - [c == label]) with
// scale = 1/rows for the mean. Computed stably around the row maximum.
__global__ void softmax_ce_f32(float *grad, float *loss, const float *logits, const int *labels, int rows, int cols, float scale) {
	int r = blockIdx.x * blockDim.x + threadIdx.x;
	if (r >= rows) return;
	const float *x = logits + (long)r * cols;
	float *g = grad + (long)r * cols;
	float m = x[0];
	for (int c = 1; c < cols; c++) m = fmaxf(m, x[c]);
	float s = 0.0f;
	for (int c = 0; c < cols; c++) s += expf(x[c] - m);
	int y = labels[r];
	loss[r] = logf(s) + m - x[y];
	float inv = 1.0f / s;
	for (int c = 0; c < cols; c++) g[c] = scale * (expf(x[c] - m) * inv - (c == y ? 1.0f : 0.0f));
}

// w -= lr * g (plain SGD).
__global__ void sgd_f32(float *w, const float *g, int n, float lr) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) w[i] -= lr * g[i];
}

// x = v (e.g. the ones vector that turns column sums into a GEMM).
__global__ void fill_f32(float *x, float v, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] = v;
}

}
