// Drives driver_dl.c's cuDNN glue against fake_cudnn.c without a GPU (see
// cudnn_glue_cuda_test.go): argv[1] the fake library, argv[2] the
// plan goddp's Go side asks for (0 float32, 1 float32 with TF32, 2
// float32 timed, 3 TF32 timed), argv[3..18] the 16 dims of
// gcu_dnn_plan_new.
#include "driver_dl.c"
#include <stdlib.h>
#include <dlfcn.h>

void goddpCUDAHostFunc(size_t h) { (void)h; }
static int set_current(void *ctx) { return ctx == (void *)0xc0 ? 0 : 201; }

int main(int argc, char **argv) {
	if (argc != 19) return 2;
	gcu_lib l = {0};
	char err[256];
	l.cuCtxSetCurrent = set_current;
	if (gcu_load_cudnn(&l, argv[1], err, sizeof err)) {
		printf("load: %s\n", err);
		return 1;
	}
	printf("version %zu\n", gcu_dnn_version(&l));
	void *h = NULL;
	if (gcu_dnn_create(&l, (void *)0xc0, (void *)0x5eed, &h)) return 1;
	int dims[16];
	for (int i = 0; i < 16; i++) dims[i] = atoi(argv[3 + i]);
	int prec = atoi(argv[2]), tf32 = prec == 1 || prec == 3;
	gcu_dnn_plan p = {0};
	int rc = gcu_dnn_plan_new(&l, (void *)0xc0, h, dims, tf32 ? 0 : 3, tf32, prec >= 2, 1 << 20, &p);
	printf("plan %d\n", rc);
	if (rc) return 0;
	for (int i = 0; i < 3; i++) printf("pass %d status %d algo %d ws %zu\n", i, p.status[i], p.algo[i], p.ws[i]);
	void (*descs)(void *, void *, void *) = (void (*)(void *, void *, void *))dlsym(l.dnn_handle, "fake_descs");
	descs(p.x, p.y, p.w);
	for (int i = 0; i < 3; i++)
		printf("run %d\n", gcu_dnn_conv(&l, (void *)0xc0, h, &p, i, 0x100, 0x200, 0x300, i == 2 ? 1.0f : 0.0f, 0x400, p.ws[i]));
	gcu_dnn_plan_free(&l, &p);
	printf("destroy %d\n", gcu_dnn_destroy(&l, (void *)0xc0, h));
	return 0;
}
