// A stand-in libcudnn for cudnn_glue_cuda_test.go: it prints every call
// with its arguments and answers the algorithm queries with a fixed list
// (a TF32 algorithm, one wanting too much workspace, one that cannot run,
// then a plain one), so the test sees which driver_dl.c chooses and how it
// calls the passes. Descriptors are small structs of their values.
#include <stdio.h>
#include <stdlib.h>

typedef struct { int v[8]; } desc;
typedef struct {
	int algo, status;
	float time;
	size_t memory;
	int determinism, mathType, reserved[3];
} perf;

static int mk(void **d) { *d = calloc(1, sizeof(desc)); return 0; }
static int rm(void *d) { free(d); return 0; }

size_t cudnnGetVersion(void) { return 91900; }
const char *cudnnGetErrorString(int s) { return s == 3000 ? "CUDNN_STATUS_NOT_SUPPORTED" : "some status"; }
int cudnnCreate(void **h) { *h = (void *)0x4a; printf("create\n"); return 0; }
int cudnnDestroy(void *h) { printf("destroy\n"); return 0; }
int cudnnSetStream(void *h, void *s) { printf("stream %p\n", s); return 0; }
int cudnnCreateTensorDescriptor(void **d) { return mk(d); }
int cudnnDestroyTensorDescriptor(void *d) { return rm(d); }
int cudnnCreateFilterDescriptor(void **d) { return mk(d); }
int cudnnDestroyFilterDescriptor(void *d) { return rm(d); }
int cudnnCreateConvolutionDescriptor(void **d) { return mk(d); }
int cudnnDestroyConvolutionDescriptor(void *d) { return rm(d); }
int cudnnSetTensor4dDescriptor(void *d, int format, int dt, int n, int c, int h, int w) {
	desc *p = d;
	p->v[0] = n, p->v[1] = c, p->v[2] = h, p->v[3] = w;
	printf("tensor format %d dtype %d %d %d %d %d\n", format, dt, n, c, h, w);
	return 0;
}
int cudnnSetFilter4dDescriptor(void *d, int dt, int format, int k, int c, int h, int w) {
	desc *p = d;
	p->v[0] = k, p->v[1] = c, p->v[2] = h, p->v[3] = w;
	printf("filter dtype %d format %d %d %d %d %d\n", dt, format, k, c, h, w);
	return 0;
}
int cudnnSetConvolution2dDescriptor(void *d, int ph, int pw, int sh, int sw, int dh, int dw, int mode, int ct) {
	desc *p = d;
	p->v[0] = ph, p->v[1] = pw, p->v[2] = sh, p->v[3] = sw, p->v[4] = dh, p->v[5] = dw;
	printf("conv pad %d %d stride %d %d dilation %d %d mode %d compute %d\n", ph, pw, sh, sw, dh, dw, mode, ct);
	return 0;
}
int cudnnSetConvolutionGroupCount(void *d, int g) { printf("groups %d\n", g); return 0; }
int cudnnSetConvolutionMathType(void *d, int m) { printf("math %d\n", m); return 0; }
int cudnnGetConvolution2dForwardOutputDim(void *cd, void *xd, void *wd, int *n, int *c, int *h, int *w) {
	desc *cv = cd, *x = xd, *f = wd;
	*n = x->v[0], *c = f->v[0];
	*h = (x->v[2] + 2 * cv->v[0] - cv->v[4] * (f->v[2] - 1) - 1) / cv->v[2] + 1;
	*w = (x->v[3] + 2 * cv->v[1] - cv->v[5] * (f->v[3] - 1) - 1) / cv->v[3] + 1;
	return 0;
}
static int algos(int req, int *got, perf *p) {
	perf list[4] = {{.algo = 1, .mathType = 1}, {.algo = 2, .mathType = 3}, {.algo = 3, .status = 3000, .mathType = 3},
	                {.algo = 4, .mathType = 0}};
	*got = req < 4 ? req : 4;
	for (int i = 0; i < *got; i++) p[i] = list[i];
	return 0;
}
int cudnnGetConvolutionForwardAlgorithm_v7(void *h, void *x, void *w, void *c, void *y, int r, int *g, void *p) { return algos(r, g, p); }
int cudnnGetConvolutionBackwardDataAlgorithm_v7(void *h, void *w, void *y, void *c, void *x, int r, int *g, void *p) { return algos(r, g, p); }
int cudnnGetConvolutionBackwardFilterAlgorithm_v7(void *h, void *x, void *y, void *c, void *w, int r, int *g, void *p) { return algos(r, g, p); }
// cudnnFind*'s timed order differs: algorithm 5 (tensor-op math) is the
// fastest, then 4. With FAKE_FIND_FAIL set it fails as when its scratch
// cannot be allocated (CUDNN_STATUS_ALLOC_FAILED).
static int timed(const char *pass, int req, int *got, perf *p) {
	printf("find %s\n", pass);
	if (getenv("FAKE_FIND_FAIL")) return 2;
	perf list[2] = {{.algo = 5, .mathType = 1}, {.algo = 4, .mathType = 0}};
	*got = req < 2 ? req : 2;
	for (int i = 0; i < *got; i++) p[i] = list[i];
	return 0;
}
int cudnnFindConvolutionForwardAlgorithm(void *h, void *x, void *w, void *c, void *y, int r, int *g, void *p) { return timed("forward", r, g, p); }
int cudnnFindConvolutionBackwardDataAlgorithm(void *h, void *w, void *y, void *c, void *x, int r, int *g, void *p) { return timed("data", r, g, p); }
int cudnnFindConvolutionBackwardFilterAlgorithm(void *h, void *x, void *y, void *c, void *w, int r, int *g, void *p) { return timed("filter", r, g, p); }
// Algorithm 2 wants a gigabyte; the others algo*100 bytes.
static int ws(int algo, size_t *n) { *n = algo == 2 ? (size_t)1 << 30 : (size_t)algo * 100; return 0; }
int cudnnGetConvolutionForwardWorkspaceSize(void *h, void *x, void *w, void *c, void *y, int a, size_t *n) { return ws(a, n); }
int cudnnGetConvolutionBackwardDataWorkspaceSize(void *h, void *w, void *y, void *c, void *x, int a, size_t *n) { return ws(a, n); }
int cudnnGetConvolutionBackwardFilterWorkspaceSize(void *h, void *x, void *y, void *c, void *w, int a, size_t *n) { return ws(a, n); }
static const char *which(void *d, void *x, void *y, void *w) { return d == x ? "x" : d == y ? "y" : d == w ? "w" : "?"; }
static void *X, *Y, *W; // the plan's descriptors, set by the harness
void fake_descs(void *x, void *y, void *w) { X = x, Y = y, W = w; }
int cudnnConvolutionForward(void *h, const float *alpha, void *ad, const void *a, void *bd, const void *b, void *cd, int algo,
                            void *ws, size_t wsn, const float *beta, void *od, void *o) {
	printf("forward %s=%p %s=%p algo %d ws %p %zu alpha %g beta %g %s=%p\n", which(ad, X, Y, W), a, which(bd, X, Y, W), b, algo,
	       ws, wsn, *alpha, *beta, which(od, X, Y, W), o);
	return 0;
}
int cudnnConvolutionBackwardData(void *h, const float *alpha, void *ad, const void *a, void *bd, const void *b, void *cd,
                                 int algo, void *ws, size_t wsn, const float *beta, void *od, void *o) {
	printf("data %s=%p %s=%p algo %d ws %p %zu alpha %g beta %g %s=%p\n", which(ad, X, Y, W), a, which(bd, X, Y, W), b, algo,
	       ws, wsn, *alpha, *beta, which(od, X, Y, W), o);
	return 0;
}
int cudnnConvolutionBackwardFilter(void *h, const float *alpha, void *ad, const void *a, void *bd, const void *b, void *cd,
                                   int algo, void *ws, size_t wsn, const float *beta, void *od, void *o) {
	printf("filter %s=%p %s=%p algo %d ws %p %zu alpha %g beta %g %s=%p\n", which(ad, X, Y, W), a, which(bd, X, Y, W), b,
	       algo, ws, wsn, *alpha, *beta, which(od, X, Y, W), o);
	return 0;
}
