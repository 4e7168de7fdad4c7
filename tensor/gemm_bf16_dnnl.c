//go:build cgo && !noblas && !nodnnl

// bfloat16 GEMM slices through oneDNN's matmul primitive: A and B as bf16,
// C as float32, products accumulated in float32. This is what torch's CPU
// autocast runs for linear and matmul (oneDNN underneath), and what the
// AVX512-BF16 instructions (vdpbf16ps) and AMX compute natively: two bf16
// products per float32 lane per instruction, twice float32's rate.
//
// The same table serves float32 Linear forwards with their bias
// (goddp_linear_f32): oneDNN's matmul adds the bias in its epilogue, where
// sgemm needed the output rows filled with the bias first and then read
// back (beta = 1), a pass over the output that cost 10-20% of the product
// at a GPT's 2048-row Linears.
//
// engine.c cuts a product into slices over its threads as for float32, and
// each slice runs here on its thread alone. Primitives are built once per
// slice shape and kept in a table (building one costs tens of
// microseconds); the scratchpad is the caller's per-thread buffer, so that
// threads can run one primitive at the same time.

#include "engine.h"

#include <dnnl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void omp_set_num_threads(int);
int omp_get_max_threads(void);

typedef struct {
	int ta, tb;
	int f32;  // A and B float32 (else bfloat16)
	int bias; // a bias row added to every row of C (goddp_matmul_slice)
	int64_t m, n, k, lda, ldb, ldc;
	float alpha, beta;
} mm_key_t;

typedef struct {
	mm_key_t key;
	dnnl_primitive_t prim; // NULL: oneDNN has no implementation (kept, so one attempt per shape)
	dnnl_memory_desc_t a, b, c, bias, scratch;
	char impl[64];
} mm_entry_t;

// A model has a few GEMM shapes, times three passes, times the slices its
// threads cut.
enum { maxMM = 1024 };

static struct {
	pthread_once_t once;
	pthread_mutex_t mu;
	dnnl_engine_t eng;
	int n;
	mm_entry_t *e[maxMM];
} mm = {PTHREAD_ONCE_INIT, PTHREAD_MUTEX_INITIALIZER, NULL, 0, {0}};

static void mm_init(void) {
	if (dnnl_engine_create(&mm.eng, dnnl_cpu, 0) != dnnl_success)
		mm.eng = NULL;
}

static __thread void *tls_scratch;
static __thread size_t tls_scratch_cap;
static __thread dnnl_stream_t tls_mm_stream;

static void *scratch(size_t size) {
	if (tls_scratch_cap < size) {
		free(tls_scratch);
		size = (size + 4095) / 4096 * 4096;
		tls_scratch = aligned_alloc(64, size);
		tls_scratch_cap = tls_scratch ? size : 0;
	}
	return tls_scratch;
}

static mm_entry_t *mm_build(const mm_key_t *key) {
	mm_entry_t *e = calloc(1, sizeof *e);
	if (!e)
		return NULL;
	e->key = *key;
	// Row-major op(A) m×k, op(B) k×n and C m×n; a transposed operand is the
	// same array read with swapped strides.
	dnnl_dims_t ad = {key->m, key->k}, bd = {key->k, key->n}, cd = {key->m, key->n};
	dnnl_dims_t as = {key->ta ? 1 : key->lda, key->ta ? key->lda : 1};
	dnnl_dims_t bs = {key->tb ? 1 : key->ldb, key->tb ? key->ldb : 1};
	dnnl_dims_t cs = {key->ldc, 1};
	dnnl_dims_t biasd = {1, key->n}, biass = {key->n, 1};
	dnnl_data_type_t ab = key->f32 ? dnnl_f32 : dnnl_bf16;
	if (dnnl_memory_desc_init_by_strides(&e->a, 2, ad, ab, as) != dnnl_success ||
	    dnnl_memory_desc_init_by_strides(&e->b, 2, bd, ab, bs) != dnnl_success ||
	    dnnl_memory_desc_init_by_strides(&e->c, 2, cd, dnnl_f32, cs) != dnnl_success ||
	    (key->bias && dnnl_memory_desc_init_by_strides(&e->bias, 2, biasd, dnnl_f32, biass) != dnnl_success))
		return e;
	dnnl_primitive_attr_t attr = NULL;
	dnnl_post_ops_t ops = NULL;
	dnnl_primitive_desc_t pd = NULL;
	dnnl_matmul_desc_t md;
	int ok = dnnl_primitive_attr_create(&attr) == dnnl_success;
	ok = ok && dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success;
	if (ok && key->alpha != 1)
		ok = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &key->alpha) == dnnl_success;
	if (ok && key->beta != 0) {
		// C = alpha*op(A)op(B) + beta*C: oneDNN's sum post-op.
		ok = dnnl_post_ops_create(&ops) == dnnl_success &&
		     dnnl_post_ops_append_sum(ops, key->beta) == dnnl_success &&
		     dnnl_primitive_attr_set_post_ops(attr, ops) == dnnl_success;
	}
	ok = ok && dnnl_matmul_desc_init(&md, &e->a, &e->b, key->bias ? &e->bias : NULL, &e->c) == dnnl_success;
	ok = ok && dnnl_primitive_desc_create(&pd, &md, attr, mm.eng, NULL) == dnnl_success;
	if (ok) {
		const char *impl = NULL;
		dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
		snprintf(e->impl, sizeof e->impl, "%s", impl ? impl : "");
		const dnnl_memory_desc_t *s = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
		ok = s != NULL;
		if (ok)
			e->scratch = *s;
	}
	if (ok && dnnl_primitive_create(&e->prim, pd) != dnnl_success)
		e->prim = NULL;
	if (pd)
		dnnl_primitive_desc_destroy(pd);
	if (ops)
		dnnl_post_ops_destroy(ops);
	if (attr)
		dnnl_primitive_attr_destroy(attr);
	return e;
}

static mm_entry_t *mm_find(const mm_key_t *key) {
	for (int i = 0; i < mm.n; i++)
		if (memcmp(&mm.e[i]->key, key, sizeof *key) == 0)
			return mm.e[i];
	return NULL;
}

// mm_lookup returns the entry for key, built on first use outside the lock;
// *owned says the table was full and the caller must free it.
static mm_entry_t *mm_lookup(const mm_key_t *key, int *owned) {
	*owned = 0;
	pthread_mutex_lock(&mm.mu);
	mm_entry_t *e = mm_find(key);
	pthread_mutex_unlock(&mm.mu);
	if (e)
		return e;
	e = mm_build(key);
	if (!e)
		return NULL;
	pthread_mutex_lock(&mm.mu);
	mm_entry_t *had = mm_find(key);
	if (had) {
		if (e->prim)
			dnnl_primitive_destroy(e->prim);
		free(e);
		e = had;
	} else if (mm.n < maxMM) {
		mm.e[mm.n++] = e;
	} else {
		*owned = 1;
	}
	pthread_mutex_unlock(&mm.mu);
	return e;
}

static void mm_free(mm_entry_t *e) {
	if (e->prim)
		dnnl_primitive_destroy(e->prim);
	free(e);
}

int goddp_bf16_slice(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t *a, int64_t lda,
                     const uint16_t *b, int64_t ldb, float beta, float *c, int64_t ldc) {
	return goddp_matmul_slice(0, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, NULL);
}

int goddp_matmul_slice(int f32, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const void *a,
                       int64_t lda, const void *b, int64_t ldb, float beta, float *c, int64_t ldc, const float *bias) {
	pthread_once(&mm.once, mm_init);
	if (!mm.eng)
		return -1;
	if (omp_get_max_threads() != 1)
		omp_set_num_threads(1);
	mm_key_t key;
	memset(&key, 0, sizeof key); // padding takes part in memcmp
	key.ta = ta, key.tb = tb, key.f32 = f32, key.bias = bias != NULL, key.m = m, key.n = n, key.k = k;
	key.lda = lda, key.ldb = ldb, key.ldc = ldc, key.alpha = alpha, key.beta = beta;
	int owned;
	mm_entry_t *e = mm_lookup(&key, &owned);
	if (!e)
		return -1;
	if (!e->prim) {
		if (owned)
			mm_free(e);
		return 1;
	}
	if (!tls_mm_stream && dnnl_stream_create(&tls_mm_stream, mm.eng, dnnl_stream_default_flags) != dnnl_success) {
		tls_mm_stream = NULL;
		return -1;
	}
	size_t ss = dnnl_memory_desc_get_size(&e->scratch);
	void *sp = ss ? scratch(ss) : NULL;
	dnnl_memory_t am = NULL, bm = NULL, cm = NULL, sm = NULL, biasm = NULL;
	int rc = 0;
	if (dnnl_memory_create(&am, &e->a, mm.eng, (void *)a) != dnnl_success ||
	    dnnl_memory_create(&bm, &e->b, mm.eng, (void *)b) != dnnl_success ||
	    dnnl_memory_create(&cm, &e->c, mm.eng, c) != dnnl_success || (ss && !sp) ||
	    dnnl_memory_create(&sm, &e->scratch, mm.eng, sp) != dnnl_success ||
	    (bias && dnnl_memory_create(&biasm, &e->bias, mm.eng, (void *)bias) != dnnl_success))
		rc = -1;
	if (rc == 0) {
		dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm},
		                          {DNNL_ARG_SCRATCHPAD, sm}, {DNNL_ARG_BIAS, biasm}};
		if (dnnl_primitive_execute(e->prim, tls_mm_stream, bias ? 5 : 4, args) != dnnl_success ||
		    dnnl_stream_wait(tls_mm_stream) != dnnl_success)
			rc = -1;
	}
	if (am)
		dnnl_memory_destroy(am);
	if (bm)
		dnnl_memory_destroy(bm);
	if (cm)
		dnnl_memory_destroy(cm);
	if (sm)
		dnnl_memory_destroy(sm);
	if (biasm)
		dnnl_memory_destroy(biasm);
	if (owned)
		mm_free(e);
	return rc;
}

const char *goddp_bf16_impl(int ta, int tb, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc) {
	pthread_once(&mm.once, mm_init);
	if (!mm.eng)
		return "";
	mm_key_t key;
	memset(&key, 0, sizeof key);
	key.ta = ta, key.tb = tb, key.m = m, key.n = n, key.k = k;
	key.lda = lda, key.ldb = ldb, key.ldc = ldc, key.alpha = 1, key.beta = 0;
	int owned;
	mm_entry_t *e = mm_lookup(&key, &owned);
	if (!e)
		return "";
	const char *impl = e->prim ? e->impl : "";
	static __thread char out[64];
	snprintf(out, sizeof out, "%s", impl);
	if (owned)
		mm_free(e);
	return out;
}
