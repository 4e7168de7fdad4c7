//go:build mpi

// C side of the mpi backend: MPI calls that need MPI's macros (datatype and
// op handles), the float16/bfloat16 reduction functions, and the progress
// loop. Go calls these through cgo (cgo.go).

#include "shim.h"
#include <sched.h>
#include <stdlib.h>
#include <string.h>

// ---- float16 / bfloat16, widened to float32 and rounded back to nearest-even.

static float gdm_f16_to_f32(uint16_t h) {
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, x;
	if (exp == 0) {
		if (man == 0) {
			x = sign;
		} else {
			int e = -1;
			do { e++; man <<= 1; } while (!(man & 0x400));
			man &= 0x3ff;
			x = sign | ((uint32_t)(127 - 15 - e) << 23) | (man << 13);
		}
	} else if (exp == 0x1f) {
		x = sign | 0x7f800000u | (man << 13);
	} else {
		x = sign | ((exp + 112) << 23) | (man << 13);
	}
	float f;
	memcpy(&f, &x, 4);
	return f;
}

static uint16_t gdm_f32_to_f16(float f) {
	uint32_t x;
	memcpy(&x, &f, 4);
	uint32_t sign = (x >> 16) & 0x8000;
	uint32_t exp = (x >> 23) & 0xff, man = x & 0x7fffff;
	if (exp == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
	int e = (int)exp - 127 + 15;
	if (e >= 0x1f) return (uint16_t)(sign | 0x7c00);
	if (e <= 0) {
		if (e < -10) return (uint16_t)sign;
		man |= 0x800000;
		int shift = 14 - e;
		uint32_t half = 1u << (shift - 1);
		uint32_t r = man >> shift, rem = man & ((1u << shift) - 1);
		if (rem > half || (rem == half && (r & 1))) r++;
		return (uint16_t)(sign | r);
	}
	uint32_t h = sign | ((uint32_t)e << 10) | (man >> 13);
	uint32_t rem = man & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
	return (uint16_t)h;
}

static float gdm_bf16_to_f32(uint16_t h) {
	uint32_t x = (uint32_t)h << 16;
	float f;
	memcpy(&f, &x, 4);
	return f;
}

static uint16_t gdm_f32_to_bf16(float f) {
	uint32_t x;
	memcpy(&x, &f, 4);
	if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);
	x += 0x7fff + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

// User reduction functions for the half types: inout[i] = in[i] (op) inout[i].
#define GD_HALF_OP(NAME, TOF, FROMF, EXPR)                                     \
	static void NAME(void *in, void *inout, int *len, MPI_Datatype *dt) {      \
		(void)dt;                                                              \
		const uint16_t *s = (const uint16_t *)in;                              \
		uint16_t *d = (uint16_t *)inout;                                       \
		for (int i = 0; i < *len; i++) {                                       \
			float a = TOF(d[i]), b = TOF(s[i]);                                \
			d[i] = FROMF(EXPR);                                                \
		}                                                                      \
	}
GD_HALF_OP(gdm_f16_sum, gdm_f16_to_f32, gdm_f32_to_f16, a + b)
GD_HALF_OP(gdm_f16_prod, gdm_f16_to_f32, gdm_f32_to_f16, a * b)
GD_HALF_OP(gdm_f16_max, gdm_f16_to_f32, gdm_f32_to_f16, (b > a || b != b) ? b : a)
GD_HALF_OP(gdm_f16_min, gdm_f16_to_f32, gdm_f32_to_f16, (b < a || b != b) ? b : a)
GD_HALF_OP(gdm_bf16_sum, gdm_bf16_to_f32, gdm_f32_to_bf16, a + b)
GD_HALF_OP(gdm_bf16_prod, gdm_bf16_to_f32, gdm_f32_to_bf16, a * b)
GD_HALF_OP(gdm_bf16_max, gdm_bf16_to_f32, gdm_f32_to_bf16, (b > a || b != b) ? b : a)
GD_HALF_OP(gdm_bf16_min, gdm_bf16_to_f32, gdm_f32_to_bf16, (b < a || b != b) ? b : a)

int gdm_ops_create(gdm_ops *o) {
	MPI_User_function *fns[2][5] = {
		{gdm_f16_sum, gdm_f16_sum, gdm_f16_max, gdm_f16_min, gdm_f16_prod},
		{gdm_bf16_sum, gdm_bf16_sum, gdm_bf16_max, gdm_bf16_min, gdm_bf16_prod},
	};
	for (int t = 0; t < 2; t++)
		for (int k = 0; k < 5; k++) o->half[t][k] = MPI_OP_NULL;
	for (int t = 0; t < 2; t++) {
		for (int k = 0; k < 5; k++) {
			if (k == GO_AVG) continue;
			int rc = MPI_Op_create(fns[t][k], 1, &o->half[t][k]);
			if (rc != MPI_SUCCESS) return rc;
		}
		o->half[t][GO_AVG] = o->half[t][GO_SUM];
	}
	return MPI_SUCCESS;
}

void gdm_ops_free(gdm_ops *o) {
	for (int t = 0; t < 2; t++)
		for (int k = 0; k < 5; k++)
			if (k != GO_AVG && o->half[t][k] != MPI_OP_NULL) MPI_Op_free(&o->half[t][k]);
}

static MPI_Datatype gdm_type(int dt) {
	switch (dt) {
	case GD_F32: return MPI_FLOAT;
	case GD_F64: return MPI_DOUBLE;
	case GD_I32: return MPI_INT32_T;
	case GD_I64: return MPI_INT64_T;
	case GD_F16:
	case GD_BF16: return MPI_UINT16_T;
	}
	return MPI_DATATYPE_NULL;
}

static MPI_Op gdm_op(gdm_ops *o, int dt, int op) {
	if (dt == GD_F16) return o->half[0][op];
	if (dt == GD_BF16) return o->half[1][op];
	switch (op) {
	case GO_SUM:
	case GO_AVG: return MPI_SUM;
	case GO_MAX: return MPI_MAX;
	case GO_MIN: return MPI_MIN;
	case GO_PROD: return MPI_PROD;
	}
	return MPI_OP_NULL;
}

// gdm_divide finishes an average: buf[i] /= n (integers truncate toward zero).
void gdm_divide(void *buf, long count, int dt, int n) {
	switch (dt) {
	case GD_F32: { float *x = buf; float d = (float)n; for (long i = 0; i < count; i++) x[i] /= d; break; }
	case GD_F64: { double *x = buf; double d = (double)n; for (long i = 0; i < count; i++) x[i] /= d; break; }
	case GD_I32: { int32_t *x = buf; for (long i = 0; i < count; i++) x[i] /= n; break; }
	case GD_I64: { int64_t *x = buf; for (long i = 0; i < count; i++) x[i] /= n; break; }
	case GD_F16: { uint16_t *x = buf; for (long i = 0; i < count; i++) x[i] = gdm_f32_to_f16(gdm_f16_to_f32(x[i]) / (float)n); break; }
	case GD_BF16: { uint16_t *x = buf; for (long i = 0; i < count; i++) x[i] = gdm_f32_to_bf16(gdm_bf16_to_f32(x[i]) / (float)n); break; }
	}
}

// ---- lifecycle

// gdm_init initialises MPI unless it already is. owner reports whether this
// call did it (and so must finalize). Returns -2 when MPI was finalized.
int gdm_init(int want, int *provided, int *owner) {
	int flag = 0;
	MPI_Finalized(&flag);
	if (flag) return -2;
	MPI_Initialized(&flag);
	*owner = 0;
	if (flag) return MPI_Query_thread(provided);
	*owner = 1;
	return MPI_Init_thread(NULL, NULL, want, provided);
}

int gdm_world(int *rank, int *size) {
	int rc = MPI_Comm_rank(MPI_COMM_WORLD, rank);
	if (rc != MPI_SUCCESS) return rc;
	return MPI_Comm_size(MPI_COMM_WORLD, size);
}

int gdm_idup_world(MPI_Comm *out, MPI_Request *req) {
	return MPI_Comm_idup(MPI_COMM_WORLD, out, req);
}

int gdm_comm_setup(MPI_Comm c) { return MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN); }
int gdm_comm_free(MPI_Comm *c) { return MPI_Comm_free(c); }
MPI_Comm gdm_comm_null(void) { return MPI_COMM_NULL; }
int gdm_finalize(void) { return MPI_Finalize(); }

void gdm_error_string(int code, char *buf, int cap) {
	int n = 0;
	if (MPI_Error_string(code, buf, &n) != MPI_SUCCESS || n >= cap) { buf[0] = 0; return; }
	buf[n] = 0;
}

// ---- nonblocking ops. Every one starts exactly one request.

int gdm_iallreduce(gdm_ops *o, MPI_Comm c, void *buf, int n, int dt, int op, MPI_Request *r) {
	return MPI_Iallreduce(MPI_IN_PLACE, buf, n, gdm_type(dt), gdm_op(o, dt, op), c, r);
}
int gdm_ibcast(MPI_Comm c, void *buf, int n, int dt, int root, MPI_Request *r) {
	return MPI_Ibcast(buf, n, gdm_type(dt), root, c, r);
}
int gdm_iallgather(MPI_Comm c, void *out, void *in, int n, int dt, MPI_Request *r) {
	return MPI_Iallgather(in, n, gdm_type(dt), out, n, gdm_type(dt), c, r);
}
int gdm_ireduce_scatter(gdm_ops *o, MPI_Comm c, void *out, void *in, int n, int dt, int op, MPI_Request *r) {
	return MPI_Ireduce_scatter_block(in, out, n, gdm_type(dt), gdm_op(o, dt, op), c, r);
}
int gdm_ireduce(gdm_ops *o, MPI_Comm c, void *buf, int n, int dt, int op, int root, int me, MPI_Request *r) {
	// In place on the root; elsewhere buf is only read.
	if (me == root) return MPI_Ireduce(MPI_IN_PLACE, buf, n, gdm_type(dt), gdm_op(o, dt, op), root, c, r);
	return MPI_Ireduce(buf, NULL, n, gdm_type(dt), gdm_op(o, dt, op), root, c, r);
}
int gdm_igather(MPI_Comm c, void *out, void *in, int n, int dt, int root, MPI_Request *r) {
	return MPI_Igather(in, n, gdm_type(dt), out, n, gdm_type(dt), root, c, r);
}
int gdm_iscatter(MPI_Comm c, void *out, void *in, int n, int dt, int root, MPI_Request *r) {
	return MPI_Iscatter(in, n, gdm_type(dt), out, n, gdm_type(dt), root, c, r);
}
int gdm_ialltoall(MPI_Comm c, void *out, void *in, int n, int dt, MPI_Request *r) {
	return MPI_Ialltoall(in, n, gdm_type(dt), out, n, gdm_type(dt), c, r);
}
int gdm_isend(MPI_Comm c, void *buf, int n, int dt, int dst, int tag, MPI_Request *r) {
	return MPI_Isend(buf, n, gdm_type(dt), dst, tag, c, r);
}
int gdm_irecv(MPI_Comm c, void *buf, int n, int dt, int src, int tag, MPI_Request *r) {
	return MPI_Irecv(buf, n, gdm_type(dt), src, tag, c, r);
}
int gdm_ibarrier(MPI_Comm c, MPI_Request *r) { return MPI_Ibarrier(c, r); }

// gdm_testsome drives MPI's progress engine until at least one of the n
// requests completes or slice seconds pass. Completed requests become
// MPI_REQUEST_NULL; their indices go to idx and their error codes to errs.
// After the first millisecond it yields the CPU between polls so that a
// rank waiting on a slow peer does not starve the process's other threads.
int gdm_testsome(MPI_Request *reqs, int n, double slice, int *idx, int *errs, int *done) {
	MPI_Status *st = malloc(sizeof(MPI_Status) * (size_t)(n > 0 ? n : 1));
	if (!st) return MPI_ERR_NO_MEM;
	double t0 = MPI_Wtime();
	int rc;
	for (;;) {
		rc = MPI_Testsome(n, reqs, done, idx, st);
		if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) break;
		if (*done == MPI_UNDEFINED) { *done = 0; break; }
		if (*done > 0) break;
		double dt = MPI_Wtime() - t0;
		if (dt > slice) break;
		if (dt > 1e-3) sched_yield();
	}
	for (int i = 0; i < *done; i++) errs[i] = rc == MPI_ERR_IN_STATUS ? st[i].MPI_ERROR : MPI_SUCCESS;
	free(st);
	return rc == MPI_ERR_IN_STATUS ? MPI_SUCCESS : rc;
}
