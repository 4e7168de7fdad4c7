//go:build cgo && !noblas && !nodnnl

// 2-d convolutions (NCHW, float32) through oneDNN's own convolution
// primitives: forward, backward data and backward weights.
//
// The primitives run on the calling thread alone (one_thread_kernels, as
// for dnnl_sgemm: libgomp keeps one thread team per OS thread, and Go moves
// goroutines between threads); the caller splits a batch over its threads.
// oneDNN picks the memory layouts (format "any": blocked nChw16c and
// OIhw16i16o on AVX-512, where its jit kernels run), and each call reorders
// the caller's plain NCHW/OIHW arrays into them and the result back, as
// torch's mkldnn path does. Those staging arrays live in per-thread buffers
// that grow to the largest call and are reused.
//
// Primitives are created once per shape and kept in a small process-wide
// table (oneDNN's own cache would keep the kernels, but building a primitive
// descriptor costs tens of microseconds per call).

#include "engine.h"

#include <dnnl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void omp_set_num_threads(int);
int omp_get_max_threads(void);

enum { convFwd, convBwdData, convBwdWeights };

// Indices of an entry's arguments: up to four array arguments that may need
// a reorder between the caller's plain layout and the primitive's.
enum { argSrc, argWei, argDst, argBias, nArgs };

typedef struct {
	int kind, bias, relu; // relu: the forward applies max(0, ·) to its output (a post-op)
	goddp_conv_t g;
} conv_key_t;

typedef struct {
	conv_key_t key;
	dnnl_primitive_t prim;
	int dnnl_arg[nArgs];        // DNNL_ARG_* of each argument (0: unused)
	int out[nArgs];             // the argument is written by the primitive
	dnnl_memory_desc_t user[nArgs], inner[nArgs];
	dnnl_primitive_t reorder[nArgs]; // user→inner for inputs, inner→user for outputs; NULL: same layout
	size_t size[nArgs];              // bytes of the inner layout
	dnnl_memory_desc_t scratch;
	size_t scratch_size;
	char impl[64];
} conv_entry_t;

// A model has a few convolution shapes, times three passes, times the batch
// sizes its threads and chunks see; oneDNN's own primitive cache holds 1024.
enum { maxEntries = 1024 };

static struct {
	pthread_once_t once;
	pthread_mutex_t mu;
	dnnl_engine_t eng;
	int n;
	conv_entry_t *e[maxEntries];
} conv = {PTHREAD_ONCE_INIT, PTHREAD_MUTEX_INITIALIZER, NULL, 0, {0}};

static void conv_init(void) {
	if (dnnl_engine_create(&conv.eng, dnnl_cpu, 0) != dnnl_success)
		conv.eng = NULL;
}

// Per-thread staging buffers: one per argument, and the scratchpad.
typedef struct {
	void *p;
	size_t cap;
} buf_t;
static __thread buf_t tls_buf[nArgs + 1];
static __thread dnnl_stream_t tls_stream;

static void *buf(int i, size_t size) {
	buf_t *b = &tls_buf[i];
	if (b->cap < size) {
		free(b->p);
		size = (size + 4095) / 4096 * 4096;
		b->p = aligned_alloc(64, size);
		b->cap = b->p ? size : 0;
	}
	return b->p;
}

static void one_thread(void) {
	if (omp_get_max_threads() != 1)
		omp_set_num_threads(1);
}

static int plain_md(dnnl_memory_desc_t *md, int nd, const dnnl_dim_t *dims, dnnl_format_tag_t tag) {
	return dnnl_memory_desc_init_by_tag(md, nd, dims, dnnl_f32, tag) == dnnl_success ? 0 : -1;
}

static int any_md(dnnl_memory_desc_t *md, int nd, const dnnl_dim_t *dims, dnnl_data_type_t dt) {
	return dnnl_memory_desc_init_by_tag(md, nd, dims, dt, dnnl_format_tag_any) == dnnl_success ? 0 : -1;
}

static void free_entry(conv_entry_t *e) {
	if (e->prim)
		dnnl_primitive_destroy(e->prim);
	for (int i = 0; i < nArgs; i++)
		if (e->reorder[i])
			dnnl_primitive_destroy(e->reorder[i]);
	free(e);
}

// set_arg records argument i of e: its DNNL_ARG, direction, the caller's
// layout and the one the primitive chose, with a reorder between them.
static int set_arg(conv_entry_t *e, int i, int dnnl_arg, int out, const dnnl_memory_desc_t *user,
                   const_dnnl_primitive_desc_t pd, dnnl_query_t what) {
	const dnnl_memory_desc_t *inner = dnnl_primitive_desc_query_md(pd, what, 0);
	if (!inner)
		return -1;
	e->dnnl_arg[i] = dnnl_arg;
	e->out[i] = out;
	e->user[i] = *user;
	e->inner[i] = *inner;
	e->size[i] = dnnl_memory_desc_get_size(inner);
	if (dnnl_memory_desc_equal(user, inner))
		return 0;
	dnnl_primitive_desc_t rpd;
	const dnnl_memory_desc_t *from = out ? inner : user, *to = out ? user : inner;
	if (dnnl_reorder_primitive_desc_create(&rpd, from, conv.eng, to, conv.eng, NULL) != dnnl_success)
		return -1;
	dnnl_status_t st = dnnl_primitive_create(&e->reorder[i], rpd);
	dnnl_primitive_desc_destroy(rpd);
	return st == dnnl_success ? 0 : -1;
}

// build creates the primitive for key, or returns NULL where oneDNN has no
// implementation for it (the caller then falls back to im2col).
static conv_entry_t *build(const conv_key_t *key) {
	const goddp_conv_t *g = &key->g;
	// dnnl_dims_t everywhere: the API's prototypes take arrays of DNNL_MAX_NDIMS.
	dnnl_dims_t xd = {g->n, g->c, g->h, g->w}, yd = {g->n, g->o, g->oh, g->ow}, bd = {g->o};
	dnnl_dims_t wg = {g->groups, g->o / g->groups, g->c / g->groups, g->kh, g->kw}, w1 = {g->o, g->c, g->kh, g->kw};
	int wnd = g->groups > 1 ? 5 : 4;
	const dnnl_dim_t *wdims = g->groups > 1 ? wg : w1;
	dnnl_dims_t strides = {g->sh, g->sw}, dil = {g->dh - 1, g->dw - 1};
	dnnl_dims_t pad_l = {g->pt, g->pl}, pad_r = {g->pb, g->pr};

	// With bf16, the arrays a pass reads (src and weights forward; weights
	// and diff_dst for the data gradient; src and diff_dst for the weight
	// gradient) are bf16 inside the primitive, and what it writes stays
	// float32: the reorder from the caller's float32 array converts as it
	// re-lays out. The forward hint of a backward pass is the bf16 forward.
	dnnl_data_type_t lo = g->bf16 ? dnnl_bf16 : dnnl_f32;
	dnnl_data_type_t tx = lo, tw = lo, ty = lo; // src, weights, dst of this pass's descriptor
	if (key->kind == convFwd)
		ty = dnnl_f32;
	else if (key->kind == convBwdData)
		tx = dnnl_f32;
	else
		tw = dnnl_f32;
	dnnl_memory_desc_t ux, uw, uy, ub, ax, aw, ay, ab, hx, hw, hy;
	if (plain_md(&ux, 4, xd, dnnl_nchw) || plain_md(&uy, 4, yd, dnnl_nchw) ||
	    plain_md(&uw, wnd, wdims, g->groups > 1 ? dnnl_goihw : dnnl_oihw) || plain_md(&ub, 1, bd, dnnl_x) ||
	    any_md(&ax, 4, xd, tx) || any_md(&ay, 4, yd, ty) || any_md(&aw, wnd, wdims, tw) ||
	    plain_md(&ab, 1, bd, dnnl_x) || any_md(&hx, 4, xd, lo) || any_md(&hw, wnd, wdims, lo) ||
	    any_md(&hy, 4, yd, key->kind == convFwd ? dnnl_f32 : lo))
		return NULL;

	dnnl_primitive_attr_t attr;
	if (dnnl_primitive_attr_create(&attr) != dnnl_success)
		return NULL;
	// The scratchpad comes with each call (a per-thread buffer), so that
	// threads can run one primitive at the same time.
	dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
	// A ReLU after the convolution runs as its post-op, on the output while
	// the kernel holds it: no pass of its own over the output in memory.
	if (key->relu && key->kind == convFwd) {
		dnnl_post_ops_t po;
		int pok = dnnl_post_ops_create(&po) == dnnl_success;
		pok = pok && dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f) == dnnl_success &&
		      dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success;
		if (po)
			dnnl_post_ops_destroy(po);
		if (!pok) {
			dnnl_primitive_attr_destroy(attr);
			return NULL;
		}
	}

	conv_entry_t *e = calloc(1, sizeof *e);
	dnnl_primitive_desc_t fpd = NULL, pd = NULL;
	dnnl_convolution_desc_t fd, d;
	int ok = e != NULL;
	// Every kind needs the forward descriptor (the backward ones as a hint).
	ok = ok && dnnl_dilated_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &hx, &hw,
	                                                      key->bias ? &ab : NULL, &hy, strides, dil, pad_l,
	                                                      pad_r) == dnnl_success;
	ok = ok && dnnl_primitive_desc_create(&fpd, &fd, key->kind == convFwd ? attr : NULL, conv.eng, NULL) ==
	               dnnl_success;
	if (ok && key->kind == convFwd) {
		pd = fpd, fpd = NULL;
		ok = set_arg(e, argSrc, DNNL_ARG_SRC, 0, &ux, pd, dnnl_query_src_md) == 0 &&
		     set_arg(e, argWei, DNNL_ARG_WEIGHTS, 0, &uw, pd, dnnl_query_weights_md) == 0 &&
		     set_arg(e, argDst, DNNL_ARG_DST, 1, &uy, pd, dnnl_query_dst_md) == 0 &&
		     set_arg(e, argDst, DNNL_ARG_DST, 1, &uy, pd, dnnl_query_dst_md) == 0;
		if (ok && key->bias) { // the bias is weights #1, always plain
			const dnnl_memory_desc_t *bmd = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 1);
			ok = bmd && dnnl_memory_desc_equal(bmd, &ub);
			e->dnnl_arg[argBias] = DNNL_ARG_BIAS;
			e->user[argBias] = e->inner[argBias] = ub;
			e->size[argBias] = dnnl_memory_desc_get_size(&ub);
		}
	} else if (ok && key->kind == convBwdData) {
		ok = dnnl_dilated_convolution_backward_data_desc_init(&d, dnnl_convolution_direct, &ax, &aw, &ay, strides, dil,
		                                                      pad_l, pad_r) == dnnl_success &&
		     dnnl_primitive_desc_create(&pd, &d, attr, conv.eng, fpd) == dnnl_success;
		ok = ok && set_arg(e, argSrc, DNNL_ARG_DIFF_SRC, 1, &ux, pd, dnnl_query_diff_src_md) == 0 &&
		     set_arg(e, argWei, DNNL_ARG_WEIGHTS, 0, &uw, pd, dnnl_query_weights_md) == 0 &&
		     set_arg(e, argDst, DNNL_ARG_DIFF_DST, 0, &uy, pd, dnnl_query_diff_dst_md) == 0;
	} else if (ok) {
		ok = dnnl_dilated_convolution_backward_weights_desc_init(&d, dnnl_convolution_direct, &ax, &aw,
		                                                         key->bias ? &ab : NULL, &ay, strides, dil, pad_l,
		                                                         pad_r) == dnnl_success &&
		     dnnl_primitive_desc_create(&pd, &d, attr, conv.eng, fpd) == dnnl_success;
		ok = ok && set_arg(e, argSrc, DNNL_ARG_SRC, 0, &ux, pd, dnnl_query_src_md) == 0 &&
		     set_arg(e, argWei, DNNL_ARG_DIFF_WEIGHTS, 1, &uw, pd, dnnl_query_diff_weights_md) == 0 &&
		     set_arg(e, argDst, DNNL_ARG_DIFF_DST, 0, &uy, pd, dnnl_query_diff_dst_md) == 0;
		if (ok && key->bias) {
			const dnnl_memory_desc_t *bmd = dnnl_primitive_desc_query_md(pd, dnnl_query_diff_weights_md, 1);
			ok = bmd && dnnl_memory_desc_equal(bmd, &ub);
			e->dnnl_arg[argBias] = DNNL_ARG_DIFF_BIAS;
			e->out[argBias] = 1;
			e->user[argBias] = e->inner[argBias] = ub;
			e->size[argBias] = dnnl_memory_desc_get_size(&ub);
		}
	}
	if (ok) {
		const char *impl = NULL;
		dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
		snprintf(e->impl, sizeof e->impl, "%s", impl ? impl : "");
		const dnnl_memory_desc_t *s = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
		ok = s != NULL;
		if (ok) {
			e->scratch = *s;
			e->scratch_size = dnnl_memory_desc_get_size(s);
		}
	}
	ok = ok && dnnl_primitive_create(&e->prim, pd) == dnnl_success;
	if (pd)
		dnnl_primitive_desc_destroy(pd);
	if (fpd)
		dnnl_primitive_desc_destroy(fpd);
	dnnl_primitive_attr_destroy(attr);
	if (!ok) {
		if (e)
			free_entry(e);
		return NULL;
	}
	e->key = *key;
	return e;
}

// lookup returns the entry for key, building it on first use; NULL where
// oneDNN cannot run it. Failures are kept too (an entry without a
// primitive), so an unsupported shape costs one attempt. Past maxEntries
// shapes a new entry is not kept: *owned tells the caller to free it.
static conv_entry_t *find(const conv_key_t *key) {
	for (int i = 0; i < conv.n; i++)
		if (memcmp(&conv.e[i]->key, key, sizeof *key) == 0)
			return conv.e[i];
	return NULL;
}

static conv_entry_t *lookup(const conv_key_t *key, int *owned) {
	*owned = 0;
	pthread_mutex_lock(&conv.mu);
	conv_entry_t *e = find(key);
	pthread_mutex_unlock(&conv.mu);
	if (e)
		return e->prim ? e : NULL;
	e = build(key); // outside the lock: it can take milliseconds
	if (!e) {
		e = calloc(1, sizeof *e);
		if (!e)
			return NULL;
		e->key = *key;
	}
	pthread_mutex_lock(&conv.mu);
	conv_entry_t *had = find(key);
	if (had) { // another thread was first
		free_entry(e);
		e = had;
	} else if (conv.n < maxEntries) {
		conv.e[conv.n++] = e;
	} else {
		*owned = 1;
	}
	pthread_mutex_unlock(&conv.mu);
	if (!e->prim) {
		if (*owned)
			free_entry(e);
		*owned = 0;
		return NULL;
	}
	return e;
}

// run executes e on the caller's arrays (indexed as e's arguments).
static int run(conv_entry_t *e, void *user[nArgs]) {
	if (!tls_stream && dnnl_stream_create(&tls_stream, conv.eng, dnnl_stream_default_flags) != dnnl_success) {
		tls_stream = NULL;
		return -1;
	}
	dnnl_memory_t um[nArgs] = {0}, im[nArgs] = {0}, sm = NULL;
	dnnl_exec_arg_t args[nArgs + 1];
	int nargs = 0, rc = 0;
	for (int i = 0; i < nArgs && rc == 0; i++) {
		if (!e->dnnl_arg[i])
			continue;
		void *inner = user[i];
		if (e->reorder[i]) {
			inner = buf(i, e->size[i]);
			if (!inner ||
			    dnnl_memory_create(&um[i], &e->user[i], conv.eng, user[i]) != dnnl_success)
				rc = -1;
		}
		if (rc == 0 && dnnl_memory_create(&im[i], &e->inner[i], conv.eng, inner) != dnnl_success)
			rc = -1;
		args[nargs++] = (dnnl_exec_arg_t){e->dnnl_arg[i], im[i]};
	}
	if (rc == 0 && e->scratch_size > 0) {
		void *s = buf(nArgs, e->scratch_size);
		if (!s || dnnl_memory_create(&sm, &e->scratch, conv.eng, s) != dnnl_success)
			rc = -1;
		else
			args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, sm};
	}
	for (int i = 0; i < nArgs && rc == 0; i++)
		if (e->reorder[i] && !e->out[i]) {
			dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, um[i]}, {DNNL_ARG_TO, im[i]}};
			if (dnnl_primitive_execute(e->reorder[i], tls_stream, 2, ra) != dnnl_success)
				rc = -1;
		}
	if (rc == 0 && dnnl_primitive_execute(e->prim, tls_stream, nargs, args) != dnnl_success)
		rc = -1;
	for (int i = 0; i < nArgs && rc == 0; i++)
		if (e->reorder[i] && e->out[i]) {
			dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, im[i]}, {DNNL_ARG_TO, um[i]}};
			if (dnnl_primitive_execute(e->reorder[i], tls_stream, 2, ra) != dnnl_success)
				rc = -1;
		}
	if (rc == 0 && dnnl_stream_wait(tls_stream) != dnnl_success)
		rc = -1;
	for (int i = 0; i < nArgs; i++) {
		if (um[i])
			dnnl_memory_destroy(um[i]);
		if (im[i])
			dnnl_memory_destroy(im[i]);
	}
	if (sm)
		dnnl_memory_destroy(sm);
	return rc;
}

static int conv_call(int kind, int bias, int relu, const goddp_conv_t *g, void *a0, void *a1, void *a2, void *a3) {
	pthread_once(&conv.once, conv_init);
	if (!conv.eng)
		return 1;
	// Before the lookup: oneDNN sizes a primitive's work split from the
	// thread count when it is created, and runs that many threads (an
	// explicit num_threads) whatever the ICV says later.
	one_thread();
	conv_key_t key;
	memset(&key, 0, sizeof key); // padding bytes take part in memcmp
	key.kind = kind;
	key.bias = bias;
	key.relu = relu;
	key.g = *g;
	int owned;
	conv_entry_t *e = lookup(&key, &owned);
	if (!e)
		return 1;
	void *user[nArgs] = {a0, a1, a2, a3};
	int rc = run(e, user);
	if (owned)
		free_entry(e);
	return rc;
}

int goddp_conv_fwd(const goddp_conv_t *g, const float *x, const float *w, const float *b, float *y) {
	return conv_call(convFwd, b != NULL, 0, g, (void *)x, (void *)w, y, (void *)b);
}

int goddp_conv_fwd_relu(const goddp_conv_t *g, const float *x, const float *w, const float *b, float *y) {
	return conv_call(convFwd, b != NULL, 1, g, (void *)x, (void *)w, y, (void *)b);
}

int goddp_conv_bwd_data(const goddp_conv_t *g, const float *w, const float *dy, float *dx) {
	return conv_call(convBwdData, 0, 0, g, dx, (void *)w, (void *)dy, NULL);
}

int goddp_conv_bwd_weights(const goddp_conv_t *g, const float *x, const float *dy, float *dw, float *db) {
	return conv_call(convBwdWeights, db != NULL, 0, g, (void *)x, dw, (void *)dy, db);
}

const char *goddp_conv_impl(int kind, int bias, const goddp_conv_t *g) {
	pthread_once(&conv.once, conv_init);
	if (!conv.eng)
		return "";
	one_thread();
	conv_key_t key;
	memset(&key, 0, sizeof key);
	key.kind = kind;
	key.bias = bias;
	key.g = *g;
	int owned;
	conv_entry_t *e = lookup(&key, &owned);
	static __thread char name[sizeof e->impl];
	snprintf(name, sizeof name, "%s", e ? e->impl : "");
	if (owned)
		free_entry(e);
	return name;
}
