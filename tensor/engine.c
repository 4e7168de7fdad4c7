//go:build cgo && !noblas

// The default GEMM engine: single-threaded kernels from oneDNN (float32, the
// shapes where it is faster) and OpenBLAS (everything else), spread over
// threads by a small pool of our own.
//
// Why our own threads. oneDNN's dnnl_sgemm is 5-20% faster than OpenBLAS on
// one thread at the shapes that matter (scripts/gemm_kernels.c), but its
// threads come from libgomp, which keeps one thread team per calling OS
// thread. Go runs a goroutine on whichever thread holds its P, so teams
// multiplied and their idle spinners competed with the GEMM (119-155 GFLOPS
// from Go against OpenBLAS's 174 at n=256). Here each kernel runs with one
// OpenMP/OpenBLAS thread, and the product is cut into one slice per thread:
// the caller computes the first slice and the pool's helpers the others.
//
// The pool is process-wide, like OpenBLAS's and libgomp's own: helper threads
// are C threads with every signal blocked, started on first need and never
// stopped. One caller at a time uses them (a trylock); a second concurrent
// GEMM runs on its caller's thread alone rather than wait. Helpers spin for
// spinIdleNS after a slice, then sleep on a futex; the caller spins for its
// helpers up to spinWaitNS, then sleeps. Spinning keeps the hand-off under a
// microsecond for back-to-back GEMMs.

#define _GNU_SOURCE
#include "engine.h"

#include <errno.h>
#include <cpuid.h>
#include <immintrin.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifdef GODDP_DNNL
#include <dnnl.h>
void omp_set_num_threads(int);
int omp_get_max_threads(void);
#endif

// OpenBLAS's CBLAS, declared here so that no particular cblas.h is needed.
enum { cblasRowMajor = 101, cblasNoTrans = 111, cblasTrans = 112 };
void cblas_sgemm(int order, int transA, int transB, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
void cblas_dgemm(int order, int transA, int transB, int m, int n, int k, double alpha,
                 const double *a, int lda, const double *b, int ldb, double beta, double *c, int ldc);
void openblas_set_num_threads(int n);
// OpenBLAS's DYNAMIC_ARCH entry points (Debian builds it so); weak, so that
// a single-target OpenBLAS without them still links.
char *openblas_get_corename(void) __attribute__((weak));
void gotoblas_dynamic_init(void) __attribute__((weak));
void gotoblas_dynamic_quit(void) __attribute__((weak));

enum {
	maxThreads = 64,
	// minPartFlops is the least work worth a slice of its own: about 10 µs
	// on one core of the 2-core VM, where the hand-off costs under 1 µs.
	minPartFlops = 1 << 20,
	spinIdleNS = 200 * 1000,
	spinWaitNS = 2 * 1000 * 1000,
	// A status of our own for dimensions OpenBLAS's 32-bit ints cannot hold.
	statusTooBig = -1,
};

typedef struct {
	int dbl, dnnl, ta, tb;
	int bf16; // a and b hold bfloat16, c float32 (gemm_bf16)
	int64_t m, n, k, lda, ldb, ldc;
	double alpha, beta;
	const void *a, *b;
	void *c;
	int rc;
	const float *bias; // float32 only: added to every row of c (goddp_linear_f32)
} part_t;

typedef struct {
	_Atomic uint32_t seq;  // bumped by the caller to hand over job
	_Atomic uint32_t done; // set to seq by the helper when job is finished
	_Atomic int sleeping;  // the helper is in (or entering) a futex wait on seq
	_Atomic int waiting;   // the caller is in (or entering) a futex wait on done
	part_t job;
	char pad[64];
} slot_t;

// What pool_init found and did about OpenBLAS's kernel set (blas_core_fix).
static struct {
	char detected[32]; // the core OpenBLAS picked for itself
	int reinit;        // 1: we re-initialised it with a better core
	int slow;          // 1: it still runs pre-AVX2 kernels on an AVX2 CPU
	int narrow;        // 1: it runs AVX2 kernels on a CPU with full-width AVX-512 (see wide_avx512)
	int intel;         // the CPU is an Intel one (oneDNN's jit sgemm is tuned there)
	int bf16;          // the CPU has AVX512-BF16 (gemm_bf16's conversions and products)
	int wide;          // the CPU runs 512-bit vectors at full width (wide_avx512)
	int small;         // small products run on gemm_small_kernels.c (amd_avx512)
} blas_core;

static struct {
	pthread_once_t once;
	pthread_mutex_t mu; // held by the caller using the helpers
	_Atomic int threads;
	int started; // helpers started, guarded by mu
	slot_t slot[maxThreads - 1];
} pool = {PTHREAD_ONCE_INIT, PTHREAD_MUTEX_INITIALIZER, 1, 0};

static void pool_init(void);

static int64_t now_ns(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static void futex_wait(_Atomic uint32_t *addr, uint32_t val) {
	syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *addr) {
	syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

// wait_for returns *addr once it differs from val (ne) or equals it (!ne),
// spinning for up to spinNS and then sleeping on a futex; flag asks the other
// side for a wake-up while it sleeps.
static uint32_t wait_for(_Atomic uint32_t *addr, uint32_t val, int ne, _Atomic int *flag, int64_t spinNS) {
	uint32_t v;
	int64_t deadline = 0;
	for (unsigned i = 0;; i++) {
		v = atomic_load_explicit(addr, memory_order_acquire);
		if ((v != val) == ne)
			return v;
		if ((i & 127) == 127) {
			int64_t t = now_ns();
			if (deadline == 0)
				deadline = t + spinNS;
			else if (t > deadline)
				break;
		}
		cpu_relax();
	}
	for (;;) {
		atomic_store(flag, 1); // seq_cst: pairs with the other side's store, then load of flag
		v = atomic_load(addr);
		if ((v != val) != ne)
			futex_wait(addr, v);
		atomic_store(flag, 0);
		v = atomic_load_explicit(addr, memory_order_acquire);
		if ((v != val) == ne)
			return v;
	}
}

static void one_thread_kernels(void) {
#ifdef GODDP_DNNL
	// oneDNN sizes its parallel regions from this thread's OpenMP ICV.
	if (omp_get_max_threads() != 1)
		omp_set_num_threads(1);
#endif
}

static int use_dnnl(int ta, int tb, int64_t m, int64_t n, int64_t k) {
#ifdef GODDP_DNNL
	// Measured on one thread of an AMD host (scripts/gemm_kernels.c): oneDNN is 5-20% ahead
	// for op(B) untransposed from about 128³ and at the MLP's 64×512×{512,784}
	// and 512×{512,784}×64 shapes; with op(B) transposed it is 2-9% ahead from
	// m=128 up but mixed at m=64 (64×512×512: 82-87 against 84-90 GFLOPS);
	// and it is behind on thin or small products (64×10×512 with op(B)
	// transposed: 35-39 against 105-109; 64³: 93 against 107).
	//
	// On Intel (the Xeon of family 6 model 207, against OpenBLAS's SkylakeX
	// kernels) oneDNN is ahead with op(B) transposed at m=64 as well:
	// 64×512×784 126 against 97, 64×1024×3136 120 against 108.
	//
	// When OpenBLAS runs pre-AVX2 kernels on an AVX2 CPU (blas_core_fix could
	// not repair it), it is 3-5x behind everywhere, and oneDNN takes all.
	//
	// On a CPU with full-width AVX-512 (AMD Zen 5) where OpenBLAS runs its
	// AVX2 kernels (the Haswell or Zen set, chosen by OPENBLAS_CORETYPE or by
	// OpenBLAS itself), oneDNN's AVX-512 sgemm is ahead at every shape
	// measured, small ones included (one thread of an EPYC Zen 5,
	// scripts/gemm_kernels.c): 64³ 186 against 96 GFLOPS, 64×10×512 with
	// op(B) transposed 75 against 54, a GPT head's 64×32×64 121 against 53,
	// its 2048×512×128 Linear 169 against 67. Zen 4 runs AVX-512 on 256-bit
	// halves, and there OpenBLAS's AVX2 kernels kept the small shapes.
	(void)ta;
	if (blas_core.slow || blas_core.narrow)
		return 1;
	return m >= 64 && n >= 64 && k >= 64 && m * n * k >= (1 << 20) && (!tb || m >= (blas_core.intel ? 64 : 128));
#else
	(void)ta, (void)tb, (void)m, (void)n, (void)k;
	return 0;
#endif
}

int goddp_sgemm_kernel(int transA, int transB, int64_t m, int64_t n, int64_t k) {
	pthread_once(&pool.once, pool_init);
	return use_dnnl(transA, transB, m, n, k);
}

const char *goddp_blas_core(const char **detected, int *reinit, int *slow, int *narrow) {
	pthread_once(&pool.once, pool_init);
	*detected = blas_core.detected;
	*reinit = blas_core.reinit;
	*slow = blas_core.slow;
	*narrow = blas_core.narrow;
	return openblas_get_corename ? openblas_get_corename() : "";
}

static int run_bf16_part(part_t *p);
static int run_part(part_t *p);

// run_bias_part runs a float32 slice with a bias row: through oneDNN's
// matmul, the bias in its epilogue, or, where oneDNN has no implementation
// (or the build has no oneDNN), as c's rows set to the bias and the product
// added (beta = 1).
static int run_bias_part(part_t *p) {
#ifdef GODDP_DNNL
	if (p->dnnl) {
		int rc = goddp_matmul_slice(1, p->ta, p->tb, p->m, p->n, p->k, (float)p->alpha, p->a, p->lda, p->b, p->ldb,
		                            (float)p->beta, p->c, p->ldc, p->bias);
		if (rc <= 0)
			return rc;
	}
#endif
	float *c = p->c;
	for (int64_t i = 0; i < p->m; i++)
		memcpy(c + i * p->ldc, p->bias, (size_t)p->n * sizeof(float));
	part_t q = *p;
	q.bias = NULL;
	q.beta = 1;
	return run_part(&q);
}

static int run_part(part_t *p) {
	if (p->bf16)
		return run_bf16_part(p);
	if (p->bias)
		return run_bias_part(p);
	if (p->dnnl) {
#ifdef GODDP_DNNL
		one_thread_kernels();
		return (int)dnnl_sgemm(p->ta ? 'T' : 'N', p->tb ? 'T' : 'N', p->m, p->n, p->k, (float)p->alpha,
		                       p->a, p->lda, p->b, p->ldb, (float)p->beta, p->c, p->ldc);
#endif
	}
	if (p->m > INT_MAX || p->n > INT_MAX || p->k > INT_MAX || p->lda > INT_MAX || p->ldb > INT_MAX ||
	    p->ldc > INT_MAX)
		return statusTooBig;
	int ta = p->ta ? cblasTrans : cblasNoTrans, tb = p->tb ? cblasTrans : cblasNoTrans;
	if (p->dbl)
		cblas_dgemm(cblasRowMajor, ta, tb, (int)p->m, (int)p->n, (int)p->k, p->alpha, p->a, (int)p->lda,
		            p->b, (int)p->ldb, p->beta, p->c, (int)p->ldc);
	else
		cblas_sgemm(cblasRowMajor, ta, tb, (int)p->m, (int)p->n, (int)p->k, (float)p->alpha, p->a,
		            (int)p->lda, p->b, (int)p->ldb, (float)p->beta, p->c, (int)p->ldc);
	return 0;
}

static void *helper(void *arg) {
	slot_t *s = arg;
	uint32_t last = 0;
	for (;;) {
		last = wait_for(&s->seq, last, 1, &s->sleeping, spinIdleNS);
		s->job.rc = run_part(&s->job);
		atomic_store(&s->done, last); // seq_cst: pairs with the caller's waiting flag
		if (atomic_load(&s->waiting))
			futex_wake(&s->done);
	}
	return NULL;
}

static int online_cpus(void) {
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
		return CPU_COUNT(&set);
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}

// cpu_level is 2 for AVX-512 (F, BW, DQ, VL: OpenBLAS's SkylakeX kernels),
// 1 for AVX2 with FMA (its Haswell kernels), 0 otherwise. GCC's
// __builtin_cpu_supports also checks that the OS saves the wide registers.
static int cpu_level(void) {
#if defined(__x86_64__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
		return 2;
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		return 1;
#endif
	return 0;
}

// blas_core_fix checks the kernel set OpenBLAS's DYNAMIC_ARCH picked for
// this CPU. OpenBLAS 0.3.21 (Debian 12) does not know newer CPUs, Intel's
// family 6 model 207 (Emerald Rapids) among them, and falls back to its
// generic "Prescott" SSE3 kernels there: sgemm at about 30 GFLOPS on one core
// where its SkylakeX kernels reach 100-150 (scripts/gemm_kernels.c). When
// the picked core has no AVX2 kernels but the CPU has AVX2 (or AVX-512), we
// re-run OpenBLAS's own initialisation with OPENBLAS_CORETYPE naming the
// right set, as the variable would have done at load time, and restore the
// environment. This runs once, before the engine's first product. A user's
// OPENBLAS_CORETYPE is left alone. If OpenBLAS cannot be re-initialised
// (a single-target build), float32 products all go to oneDNN (use_dnnl).
static void blas_core_fix(void) {
#if defined(__x86_64__)
	__builtin_cpu_init();
	blas_core.intel = __builtin_cpu_is("intel");
#endif
	if (!openblas_get_corename)
		return;
	const char *name = openblas_get_corename();
	snprintf(blas_core.detected, sizeof blas_core.detected, "%s", name ? name : "");
	static const char *const avx2_cores[] = {"Haswell",    "Zen",        "SkylakeX",
	                                         "Cooperlake", "SapphireRapids", "Excavator"};
	for (size_t i = 0; i < sizeof avx2_cores / sizeof avx2_cores[0]; i++)
		if (strcmp(blas_core.detected, avx2_cores[i]) == 0)
			return;
	int level = cpu_level();
	if (level == 0)
		return;
	if (getenv("OPENBLAS_CORETYPE") || !gotoblas_dynamic_init || !gotoblas_dynamic_quit) {
		blas_core.slow = 1;
		return;
	}
	const char *want = level == 2 ? "SkylakeX" : "Haswell";
	gotoblas_dynamic_quit();
	setenv("OPENBLAS_CORETYPE", want, 1);
	gotoblas_dynamic_init();
	unsetenv("OPENBLAS_CORETYPE");
	name = openblas_get_corename();
	blas_core.reinit = 1;
	blas_core.slow = !name || strcmp(name, want) != 0;
}

// wide_avx512 reports whether the CPU executes 512-bit vectors at full
// width: AMD from family 1Ah (Zen 5) on. Intel CPUs with AVX-512 get
// OpenBLAS's SkylakeX kernels, so the question does not arise there unless
// OPENBLAS_CORETYPE says otherwise, and then the shape rule stays.
static int wide_avx512(void) {
#if defined(__x86_64__)
	unsigned a, b, c, d;
	if (cpu_level() < 2 || !__builtin_cpu_is("amd") || !__get_cpuid(1, &a, &b, &c, &d))
		return 0;
	unsigned family = (a >> 8) & 0xf;
	if (family == 0xf)
		family += (a >> 20) & 0xff;
	return family >= 0x1a;
#else
	return 0;
#endif
}

// amd_avx512 reports whether the CPU is an AMD one with AVX-512 (Zen 4 and
// later), where the small-product kernel (use_small) was measured ahead.
static int amd_avx512(void) {
#if defined(__x86_64__)
	return cpu_level() == 2 && __builtin_cpu_is("amd");
#else
	return 0;
#endif
}

static void pool_init(void) {
	blas_core_fix();
	blas_core.wide = wide_avx512();
	blas_core.small = amd_avx512();
	if (!blas_core.slow && openblas_get_corename && blas_core.wide) {
		const char *name = openblas_get_corename();
		blas_core.narrow = name && (strcmp(name, "Haswell") == 0 || strcmp(name, "Zen") == 0);
	}
	// AVX512-BF16 (Zen 4 and later, Cooper Lake, Sapphire Rapids; AMX-BF16
	// implies it on the Intel parts that have AMX).
	__builtin_cpu_init();
	blas_core.bf16 = __builtin_cpu_supports("avx512bf16");
	// Our pool does the threading: every kernel call runs on one thread.
	openblas_set_num_threads(1);
	int n = online_cpus();
	atomic_store(&pool.threads, n < maxThreads ? n : maxThreads);
}

void goddp_set_threads(int n) {
	pthread_once(&pool.once, pool_init);
	if (n < 1)
		n = 1;
	if (n > maxThreads)
		n = maxThreads;
	atomic_store(&pool.threads, n);
}

int goddp_threads(void) {
	pthread_once(&pool.once, pool_init);
	return atomic_load(&pool.threads);
}

// start_helpers makes at least want helpers exist and returns how many do.
// The caller holds pool.mu.
static int start_helpers(int want) {
	if (pool.started >= want)
		return pool.started;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old); // inherited: signals stay with Go's threads
	while (pool.started < want) {
		pthread_t t;
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		int err = pthread_create(&t, &attr, helper, &pool.slot[pool.started]);
		pthread_attr_destroy(&attr);
		if (err != 0)
			break; // run with the helpers we have
		pool.started++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return pool.started;
}

// split cuts p into at most t slices along the longer of m and n (the other
// operand is then read, and packed, by every slice) and returns their count.
static int split(const part_t *p, part_t *parts, int t) {
	int byN = p->n >= p->m;
	int64_t len = byN ? p->n : p->m;
	int64_t align = byN ? 16 : 8; // whole kernel tiles per slice
	int64_t chunk = (len + t - 1) / t;
	chunk = (chunk + align - 1) / align * align;
	size_t es = p->dbl ? sizeof(double) : sizeof(float);
	size_t ab = p->bf16 ? sizeof(uint16_t) : es; // elements of a and b
	int np = 0;
	for (int64_t off = 0; off < len && np < t; off += chunk, np++) {
		part_t *q = &parts[np];
		*q = *p;
		int64_t size = len - off < chunk ? len - off : chunk;
		if (byN) {
			q->n = size;
			q->b = (const char *)p->b + (size_t)(p->tb ? off * p->ldb : off) * ab;
			q->c = (char *)p->c + (size_t)off * es;
			if (p->bias)
				q->bias = p->bias + off;
		} else {
			q->m = size;
			q->a = (const char *)p->a + (size_t)(p->ta ? off : off * p->lda) * ab;
			q->c = (char *)p->c + (size_t)(off * p->ldc) * es;
		}
	}
	return np;
}

static int gemm(part_t *p) {
	pthread_once(&pool.once, pool_init);
	double flops = 2.0 * (double)p->m * (double)p->n * (double)p->k;
	int t = atomic_load(&pool.threads);
	if (flops / minPartFlops < t)
		t = (int)(flops / minPartFlops);
	if (t <= 1 || pthread_mutex_trylock(&pool.mu) != 0) {
		return run_part(p);
	}
	int helpers = start_helpers(t - 1);
	if (helpers + 1 < t)
		t = helpers + 1;
	part_t parts[maxThreads];
	int np = split(p, parts, t);
	uint32_t seqs[maxThreads];
	for (int i = 1; i < np; i++) {
		slot_t *s = &pool.slot[i - 1];
		s->job = parts[i];
		seqs[i] = atomic_load_explicit(&s->seq, memory_order_relaxed) + 1;
		atomic_store(&s->seq, seqs[i]); // seq_cst: pairs with the helper's sleeping flag
		if (atomic_load(&s->sleeping))
			futex_wake(&s->seq);
	}
	int rc = run_part(&parts[0]);
	for (int i = 1; i < np; i++) {
		slot_t *s = &pool.slot[i - 1];
		wait_for(&s->done, seqs[i], 0, &s->waiting, spinWaitNS);
		if (rc == 0)
			rc = s->job.rc;
	}
	pthread_mutex_unlock(&pool.mu);
	return rc;
}

// use_small reports whether goddp_sgemm runs a product on the AVX-512
// register kernel (gemm_small_kernels.c): small products, up to 2**19
// multiply-adds, on an AMD CPU with AVX-512. On one thread, at a GPT's
// attention products (operands strided as in the model), against the
// engine's other choices:
//   - EPYC Zen 5 (full-width AVX-512): 64×64×32 with Bᵀ 162-168 GFLOPS
//     against oneDNN's sgemm at 97-103, 64×32×64 191 against 150, with Aᵀ
//     197 against 150;
//   - EPYC Zen 4 (AVX-512 on 256-bit halves), against OpenBLAS's Cooper
//     Lake kernels: 64×64×32 with Bᵀ 98 against 78-79, 64×32×64 108-109
//     against 78-82, with Aᵀ 108-109 against 78-80.
// On Intel it was not measured, and the engine's choice stands.
static int use_small(int64_t m, int64_t n, int64_t k, float beta) {
	return blas_core.small && m * n * k <= (1 << 19) && goddp_small_shape(m, n, k, beta);
}

int goddp_sgemm_uses_small(int64_t m, int64_t n, int64_t k, float beta) {
	pthread_once(&pool.once, pool_init);
	return use_small(m, n, k, beta);
}

int goddp_sgemm(int transA, int transB, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
	pthread_once(&pool.once, pool_init); // use_dnnl reads blas_core
	if (use_small(m, n, k, beta)) {
		goddp_sgemm_small(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
		return 0;
	}
	part_t p = {0, use_dnnl(transA, transB, m, n, k), transA, transB, 0, m, n, k, lda, ldb, ldc,
	            alpha, beta, a, b, c, 0};
	return gemm(&p);
}

int goddp_sgemm_tri(int mode, int transA, int transB, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                    int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc) {
	pthread_once(&pool.once, pool_init);
	if (blas_core.small && m * n * k <= (1 << 19) && goddp_small_tri_shape(mode, m, n, k)) {
		goddp_sgemm_small_tri(mode, transA, transB, m, n, k, alpha, a, lda, b, ldb, c, ldc);
		return 0;
	}
	return goddp_sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, 0, c, ldc);
}

// uses_tri_bf16 reports whether goddp_sgemm_tri_bf16 runs a shape on the
// AVX512-BF16 register kernel: where the float32 one runs (AMD with
// AVX-512) and the CPU has AVX512-BF16.
static int uses_tri_bf16(int mode, int64_t m, int64_t n, int64_t k) {
	return blas_core.small && blas_core.bf16 && m * n * k <= (1 << 19) && goddp_small_tri_shape(mode, m, n, k);
}

int goddp_sgemm_uses_tri_bf16(int mode, int64_t m, int64_t n, int64_t k) {
	pthread_once(&pool.once, pool_init);
	return uses_tri_bf16(mode, m, n, k);
}

int goddp_sgemm_tri_bf16(int mode, int transA, int transB, int64_t m, int64_t n, int64_t k, float alpha,
                         const void *a, int a16, int64_t lda, const void *b, int b16, int64_t ldb, float *c,
                         int64_t ldc) {
	pthread_once(&pool.once, pool_init);
	if (!uses_tri_bf16(mode, m, n, k))
		return 1;
	goddp_sgemm_small_tri_bf16(mode, transA, transB, m, n, k, alpha, a, a16, lda, b, b16, ldb, c, ldc);
	return 0;
}

// linear_fused reports whether a float32 Linear forward of this shape adds
// its bias in oneDNN's matmul epilogue. Measured on one thread of an EPYC
// Zen 5 (matmul with bias against sgemm after filling the rows, 12 rotating
// operand sets): 2048×{512,384,128}×128 and 2048×128×512 ran 10-20% faster
// (2048×128×512 at 191 against 167 GFLOPS), 64×512×512 at 188-192 against
// 167; but a narrow output fell behind: 64×10×512 at 30-34 against 65-66.
// So the epilogue takes the shapes that go to oneDNN anyway, from 64
// outputs up.
static int linear_fused(int64_t m, int64_t n, int64_t k) {
#ifdef GODDP_DNNL
	return n >= 64 && m * n * k >= (1 << 20) && use_dnnl(0, 1, m, n, k);
#else
	(void)m, (void)n, (void)k;
	return 0;
#endif
}

int goddp_linear_fused(int64_t m, int64_t n, int64_t k) {
	pthread_once(&pool.once, pool_init);
	return linear_fused(m, n, k);
}

int goddp_linear_f32(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx, const float *w, int64_t ldw,
                     const float *bias, float *y, int64_t ldy) {
	pthread_once(&pool.once, pool_init);
	int fused = bias && linear_fused(m, n, k);
	part_t p = {0, fused || use_dnnl(0, 1, m, n, k), 0, 1, 0, m, n, k, ldx, ldw, ldy, 1, 0, x, w, y, 0, bias};
	if (bias && !fused) {
		// The rows start as the bias on the calling thread, and every slice adds its product.
		for (int64_t i = 0; i < m; i++)
			memcpy(y + i * ldy, bias, (size_t)n * sizeof(float));
		p.bias = NULL;
		p.beta = 1;
	}
	return gemm(&p);
}

int goddp_dgemm(int transA, int transB, int64_t m, int64_t n, int64_t k, double alpha, const double *a,
                int64_t lda, const double *b, int64_t ldb, double beta, double *c, int64_t ldc) {
	part_t p = {1, 0, transA, transB, 0, m, n, k, lda, ldb, ldc, alpha, beta, a, b, c, 0};
	return gemm(&p);
}

// bfloat16 products (autocast's matmul and linear). The caller's float32
// operands are rounded to bf16 once, on the calling thread, into per-thread
// buffers; the product is then cut into slices as for float32, and each
// slice runs oneDNN's bf16 matmul (gemm_bf16_dnnl.c) on its thread.

static inline uint16_t f32_to_bf16(float f) {
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40); // NaN stays a quiet NaN
	u += 0x7fffu + ((u >> 16) & 1);          // round to nearest, ties to even
	return (uint16_t)(u >> 16);
}

static inline float bf16_to_f32(uint16_t h) {
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

void goddp_round_bf16(const float *x, float *y, int64_t n) {
	for (int64_t i = 0; i < n; i++)
		y[i] = bf16_to_f32(f32_to_bf16(x[i]));
}

// span is the number of elements a rows×cols matrix with row stride ld spans.
static int64_t span(int64_t rows, int64_t cols, int64_t ld) {
	return rows > 0 && cols > 0 ? (rows - 1) * ld + cols : 0;
}

typedef struct {
	void *p;
	size_t cap;
} tbuf_t;

static void *tbuf(tbuf_t *b, size_t size) {
	if (b->cap < size) {
		free(b->p);
		size = (size + 4095) / 4096 * 4096;
		b->p = aligned_alloc(64, size);
		b->cap = b->p ? size : 0;
	}
	return b->p;
}

static __thread tbuf_t tls_bf16[2], tls_f32[2];

// run_bf16_part runs a slice through oneDNN, or, where oneDNN has no bf16
// matmul for it, as a float32 product of the bf16 values widened back
// (the same products, exact in float32; only the summation order differs).
static int run_bf16_part(part_t *p) {
	int rc = -1;
#ifdef GODDP_DNNL
	rc = goddp_matmul_slice(0, p->ta, p->tb, p->m, p->n, p->k, (float)p->alpha, p->a, p->lda, p->b, p->ldb,
	                        (float)p->beta, p->c, p->ldc, p->bias);
	if (rc <= 0)
		return rc;
#endif
	int64_t na = p->ta ? span(p->k, p->m, p->lda) : span(p->m, p->k, p->lda);
	int64_t nb = p->tb ? span(p->n, p->k, p->ldb) : span(p->k, p->n, p->ldb);
	float *a = tbuf(&tls_f32[0], (size_t)na * sizeof(float)), *b = tbuf(&tls_f32[1], (size_t)nb * sizeof(float));
	if (!a || !b)
		return -1;
	const uint16_t *ha = p->a, *hb = p->b;
	for (int64_t i = 0; i < na; i++)
		a[i] = bf16_to_f32(ha[i]);
	for (int64_t i = 0; i < nb; i++)
		b[i] = bf16_to_f32(hb[i]);
	part_t q = *p;
	q.bf16 = 0;
	q.dnnl = use_dnnl(p->ta, p->tb, p->m, p->n, p->k);
	q.a = a, q.b = b;
	(void)rc;
	return run_part(&q);
}

// to_bf16 rounds n floats to bf16. With AVX512-BF16 it runs vcvtne2ps2bf16,
// 32 values an instruction (the operands of a product are converted on the
// calling thread before the slices start, so this is on the critical path:
// the scalar loop cost as much as the product itself at K=768, N=256); the
// instruction rounds as f32_to_bf16 does, but reads float32 subnormals as
// zero, which only subnormal inputs notice.
__attribute__((target("avx512f,avx512bf16"))) static void to_bf16_avx512(const float *x, uint16_t *y, int64_t n) {
	int64_t i = 0;
	for (; i + 32 <= n; i += 32) {
		__m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(x + i));
		_mm512_storeu_si512((void *)(y + i), (__m512i)v);
	}
	for (; i < n; i++)
		y[i] = f32_to_bf16(x[i]);
}

static void to_bf16(const float *x, uint16_t *y, int64_t n) {
	if (blas_core.bf16) { // set by pool_init, which every caller of to_bf16 runs first
		to_bf16_avx512(x, y, n);
		return;
	}
	for (int64_t i = 0; i < n; i++)
		y[i] = f32_to_bf16(x[i]);
}

// to_bf16_add_rows is to_bf16 over a rows×cols contiguous matrix that
// also adds its rows to d (d[c] += Σ_r x[r·cols + c], rows in order,
// goddp_add_rows_f32's sums to the bit): a bf16 Linear's output gradient,
// rounded for its two products and summed for its bias in one read.
__attribute__((target("avx512f,avx512bf16"))) static void to_bf16_add_rows_avx512(const float *x, uint16_t *y,
                                                                                 float *d, int64_t rows,
                                                                                 int64_t cols) {
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * cols;
		uint16_t *yr = y + r * cols;
		int64_t c = 0;
		for (; c + 32 <= cols; c += 32) {
			__m512 lo = _mm512_loadu_ps(xr + c), hi = _mm512_loadu_ps(xr + c + 16);
			_mm512_storeu_si512((void *)(yr + c), (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
			_mm512_storeu_ps(d + c, _mm512_add_ps(_mm512_loadu_ps(d + c), lo));
			_mm512_storeu_ps(d + c + 16, _mm512_add_ps(_mm512_loadu_ps(d + c + 16), hi));
		}
		for (; c < cols; c++) {
			yr[c] = f32_to_bf16(xr[c]);
			d[c] += xr[c];
		}
	}
}

static void to_bf16_add_rows(const float *x, uint16_t *y, float *d, int64_t rows, int64_t cols) {
	if (blas_core.bf16) {
		to_bf16_add_rows_avx512(x, y, d, rows, cols);
		return;
	}
	for (int64_t r = 0; r < rows; r++)
		for (int64_t c = 0; c < cols; c++) {
			y[r * cols + c] = f32_to_bf16(x[r * cols + c]);
			d[c] += x[r * cols + c];
		}
}

// to_bf16_mul_add_rows is to_bf16_add_rows of the products x ⊙ s, each
// rounded to float32 first (as goddp_bin_vv_f32 multiplies): an
// activation's backward (s its derivative) folded into the bf16 Linear
// before it, one pass where the two read and wrote the float32 product in
// between. The same bits as the multiply, then to_bf16_add_rows;
// fp-contract is off so that the product is not fused into the sums.
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
__attribute__((target("avx512f,avx512bf16"))) static void
to_bf16_mul_add_rows_avx512(const float *x, const float *s, uint16_t *y, float *d, int64_t rows, int64_t cols) {
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * cols, *sr = s + r * cols;
		uint16_t *yr = y + r * cols;
		int64_t c = 0;
		for (; c + 32 <= cols; c += 32) {
			__m512 lo = _mm512_mul_ps(_mm512_loadu_ps(xr + c), _mm512_loadu_ps(sr + c));
			__m512 hi = _mm512_mul_ps(_mm512_loadu_ps(xr + c + 16), _mm512_loadu_ps(sr + c + 16));
			_mm512_storeu_si512((void *)(yr + c), (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
			_mm512_storeu_ps(d + c, _mm512_add_ps(_mm512_loadu_ps(d + c), lo));
			_mm512_storeu_ps(d + c + 16, _mm512_add_ps(_mm512_loadu_ps(d + c + 16), hi));
		}
		for (; c < cols; c++) {
			float v = xr[c] * sr[c];
			yr[c] = f32_to_bf16(v);
			d[c] += v;
		}
	}
}

static void to_bf16_mul_add_rows(const float *x, const float *s, uint16_t *y, float *d, int64_t rows,
                                 int64_t cols) {
	if (blas_core.bf16) {
		to_bf16_mul_add_rows_avx512(x, s, y, d, rows, cols);
		return;
	}
	for (int64_t r = 0; r < rows; r++)
		for (int64_t c = 0; c < cols; c++) {
			float v = x[r * cols + c] * s[r * cols + c];
			y[r * cols + c] = f32_to_bf16(v);
			d[c] += v;
		}
}
#pragma GCC pop_options

void goddp_to_bf16_mul_add_rows(const float *x, const float *s, uint16_t *y, float *d, int64_t rows, int64_t cols) {
	pthread_once(&pool.once, pool_init);
	to_bf16_mul_add_rows(x, s, y, d, rows, cols);
}

void goddp_to_bf16(const float *x, uint16_t *y, int64_t n) {
	pthread_once(&pool.once, pool_init); // to_bf16 reads blas_core
	to_bf16(x, y, n);
}

void goddp_to_bf16_add_rows(const float *x, uint16_t *y, float *d, int64_t rows, int64_t cols) {
	pthread_once(&pool.once, pool_init);
	to_bf16_add_rows(x, y, d, rows, cols);
}

// goddp_gelu_with_grad_to_bf16 is goddp_gelu_with_grad_f32 whose output is
// rounded to bfloat16 (to_bf16) block by block while it is in L1: an MLP
// whose second Linear reads only the rounding never stores the float32
// GELU. The same bits as the two passes.
void goddp_gelu_with_grad_to_bf16(uint16_t *y, float *grad, const float *x, int64_t n) {
	pthread_once(&pool.once, pool_init); // to_bf16 reads blas_core
	float buf[1024] __attribute__((aligned(64)));
	for (int64_t i = 0; i < n; i += 1024) {
		int64_t m = n - i < 1024 ? n - i : 1024;
		goddp_gelu_with_grad_f32(buf, grad + i, x + i, m);
		to_bf16(buf, y + i, m);
	}
}

// as_bf16 returns an operand of n values as bfloat16: x itself when x16
// is set (rounded already), else x rounded into buf; NULL when buf cannot
// grow.
static const uint16_t *as_bf16(const void *x, int x16, int64_t n, tbuf_t *buf) {
	if (x16 || n == 0)
		return x;
	uint16_t *t = tbuf(buf, (size_t)n * sizeof(uint16_t));
	if (t)
		to_bf16(x, t, n);
	return t;
}

// gemm_bf16 runs the product of op(A) and op(B) rounded to bf16, with a
// bias row in the epilogue when bias is not NULL. An operand whose flag
// (a16, b16) is set holds bfloat16 values already (goddp_to_bf16), and is
// used as it is; a float32 one is rounded here, into this thread's buffer.
static int gemm_bf16(int transA, int transB, int64_t m, int64_t n, int64_t k, float alpha, const void *a, int a16,
                     int64_t lda, const void *b, int b16, int64_t ldb, float beta, float *c, int64_t ldc,
                     const float *bias) {
	pthread_once(&pool.once, pool_init);
	const uint16_t *ha = as_bf16(a, a16, transA ? span(k, m, lda) : span(m, k, lda), &tls_bf16[0]);
	const uint16_t *hb = as_bf16(b, b16, transB ? span(n, k, ldb) : span(k, n, ldb), &tls_bf16[1]);
	if (!ha || !hb)
		return -2;
	part_t p = {0, 0, transA, transB, 1, m, n, k, lda, ldb, ldc, alpha, beta, ha, hb, c, 0, bias};
	return gemm(&p);
}

int goddp_gemm_bf16_mixed(int transA, int transB, int64_t m, int64_t n, int64_t k, float alpha, const void *a,
                          int a16, int64_t lda, const void *b, int b16, int64_t ldb, float beta, float *c,
                          int64_t ldc) {
	return gemm_bf16(transA, transB, m, n, k, alpha, a, a16, lda, b, b16, ldb, beta, c, ldc, NULL);
}

int goddp_linear_bf16_mixed(int64_t m, int64_t n, int64_t k, const void *x, int x16, int64_t ldx, const void *w,
                            int w16, int64_t ldw, const float *bias, float *y, int64_t ldy) {
	return gemm_bf16(0, 1, m, n, k, 1, x, x16, ldx, w, w16, ldw, 0, y, ldy, bias);
}

int goddp_bf16_native(void) {
	pthread_once(&pool.once, pool_init);
	return blas_core.bf16;
}

#ifndef GODDP_DNNL
// Without oneDNN (-tags nodnnl) there is no bf16 primitive to name.
const char *goddp_bf16_impl(int ta, int tb, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc) {
	(void)ta, (void)tb, (void)m, (void)n, (void)k, (void)lda, (void)ldb, (void)ldc;
	return "";
}
#endif
