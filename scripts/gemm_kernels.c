// gemm_kernels: OpenBLAS against oneDNN's dnnl_sgemm, from C, on one thread
// (or THREADS), at the shapes goddp's engine routes (tensor/engine.c).
//
//   gcc -O2 scripts/gemm_kernels.c -o /tmp/gemm_kernels -lopenblas -ldnnl -lgomp
//   /tmp/gemm_kernels [THREADS]
//
// Each line: m n k tA tB, then the best of 5 timed runs (about 0.4 s each)
// in GFLOPS for each library, and which one tensor/engine.c picks. The runs
// alternate libraries so both sample the same host phases; with THREADS > 1
// the idle library's spinning threads can still cost the other a little, so
// compare at 1 thread, as the engine calls them.
#include <dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void openblas_set_num_threads(int);
char *openblas_get_corename(void);
void omp_set_num_threads(int);
void cblas_sgemm(int order, int transA, int transB, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc);

static double now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static const int shapes[][5] = {
    // m, n, k, tA, tB
    {256, 256, 256, 0, 0}, {512, 512, 512, 0, 0}, {1024, 1024, 1024, 0, 0}, {128, 128, 128, 0, 0},
    {64, 64, 64, 0, 0}, {256, 256, 256, 0, 1}, {1024, 1024, 1024, 0, 1}, {128, 512, 512, 0, 1},
    // the 784-512-512-10 MLP at batch 64: forward, input gradient, weight gradient
    {64, 512, 784, 0, 1}, {64, 512, 512, 0, 1}, {64, 10, 512, 0, 1}, {64, 784, 512, 0, 0},
    {64, 512, 512, 0, 0}, {64, 512, 10, 0, 0}, {512, 784, 64, 1, 0}, {512, 512, 64, 1, 0},
    {10, 512, 64, 1, 0},
    // the Fashion-MNIST convnet at batch 64: Linear(3136,1024) and Linear(1024,10) forward, input
    // gradient, weight gradient; then per sample conv1 (1->32, 5x5 on 28x28) forward and dWT,
    // conv2 (32->64, 5x5 on 14x14) forward, dWT and dcols (im2col path, autograd/conv2d.go)
    {64, 1024, 3136, 0, 1}, {64, 3136, 1024, 0, 0}, {1024, 3136, 64, 1, 0},
    {64, 10, 1024, 0, 1}, {64, 1024, 10, 0, 0}, {10, 1024, 64, 1, 0},
    {32, 784, 25, 0, 0}, {25, 32, 784, 0, 1}, {64, 196, 800, 0, 0}, {800, 64, 196, 0, 1},
    {800, 196, 64, 1, 0},
    // examples/gpt per rank (32 sequences of 64 tokens, width 128, vocab 80): the qkv, proj, fc1,
    // fc2 and head Linears forward, input gradient, weight gradient; then one head's attention
    // (64 queries and keys of 32): scores, output, and the backward's products
    {2048, 384, 128, 0, 1}, {2048, 128, 128, 0, 1}, {2048, 512, 128, 0, 1}, {2048, 128, 512, 0, 1},
    {2048, 80, 128, 0, 1}, {2048, 128, 384, 0, 0}, {2048, 128, 128, 0, 0}, {2048, 128, 512, 0, 0},
    {2048, 512, 128, 0, 0}, {2048, 128, 80, 0, 0}, {384, 128, 2048, 1, 0}, {128, 128, 2048, 1, 0},
    {512, 128, 2048, 1, 0}, {128, 512, 2048, 1, 0}, {80, 128, 2048, 1, 0},
    {64, 64, 32, 0, 1}, {64, 32, 64, 0, 0}, {64, 32, 64, 1, 0}, {64, 64, 32, 0, 1},
};

static double run(int lib, int m, int n, int k, int ta, int tb, const float *a, const float *b, float *c) {
	int lda = ta ? m : k, ldb = tb ? k : n;
	double flop = 2.0 * m * n * k;
	int reps = (int)(4e10 / 100 / flop) + 1; // about 0.4 s at 100 GFLOPS
	double t0 = now();
	for (int i = 0; i < reps; i++) {
		if (lib)
			dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1, a, lda, b, ldb, 0, c, n);
		else
			cblas_sgemm(101, ta ? 112 : 111, tb ? 112 : 111, m, n, k, 1, a, lda, b, ldb, 0, c, n);
	}
	return flop * reps / (now() - t0) / 1e9;
}

int main(int argc, char **argv) {
	int threads = argc > 1 ? atoi(argv[1]) : 1;
	openblas_set_num_threads(threads);
	omp_set_num_threads(threads);
	printf("openblas core %s\n", openblas_get_corename());
	printf("threads=%d\n%5s %5s %5s %2s %2s %9s %9s %s\n", threads, "m", "n", "k", "tA", "tB", "openblas",
	       "onednn", "engine");
	for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
		int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2], ta = shapes[s][3], tb = shapes[s][4];
		float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * k * n),
		      *c = malloc(sizeof(float) * m * n);
		for (int i = 0; i < m * k; i++)
			a[i] = (float)rand() / RAND_MAX;
		for (int i = 0; i < k * n; i++)
			b[i] = (float)rand() / RAND_MAX;
		double best[2] = {0, 0};
		for (int r = 0; r < 10; r++) {
			double g = run(r & 1, m, n, k, ta, tb, a, b, c);
			if (g > best[r & 1])
				best[r & 1] = g;
		}
		// The rule in tensor/engine.c's use_dnnl (for an OpenBLAS with AVX2 kernels; run with
		// OPENBLAS_CORETYPE=SkylakeX or Haswell where OpenBLAS 0.3.21 falls back to Prescott).
		int dnnl = m >= 64 && n >= 64 && k >= 64 && (long)m * n * k >= (1 << 20) &&
		           (!tb || m >= (__builtin_cpu_is("intel") ? 64 : 128));
		printf("%5d %5d %5d %2d %2d %9.1f %9.1f %s\n", m, n, k, ta, tb, best[0], best[1],
		       dnnl ? "onednn" : "openblas");
		free(a), free(b), free(c);
	}
	return 0;
}
