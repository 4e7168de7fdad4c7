// launch.cc runs kernels.cu's kernels on the host (see cudahost.h for the
// model). A block runs on the calling thread; kernels with barriers run
// each CUDA thread as a ucontext fiber, switched at __syncthreads, in a
// round-robin that resumes every live fiber once per round: every thread
// reaches barrier k before any thread passes it, for any block size.
#include <stdlib.h>
#include <ucontext.h>

#include "cudahost.h"
#include "launch.h"

thread_local sim_dim3 sim_threadIdx, sim_blockIdx, sim_blockDim, sim_gridDim;

namespace {

// Fiber stacks: kernels keep little on the stack (shared arrays are
// thread_local statics), but libm may use a few KiB.
const size_t kStack = 64 * 1024;

struct fiber {
	ucontext_t ctx;
	bool done;
};

struct sched {
	ucontext_t main;
	fiber *f;
	uint32_t cur;
	void (*fn)(const uint64_t *);
	const uint64_t *args;
};

thread_local sched *cur_sched;

void fiber_main() {
	sched *s = cur_sched;
	s->fn(s->args);
	s->f[s->cur].done = true; // uc_link returns to the scheduler
}

} // namespace

void sim_syncthreads(void) {
	sched *s = cur_sched;
	if (s != nullptr) swapcontext(&s->f[s->cur].ctx, &s->main);
}

extern "C" int sim_launch(int k, uint32_t lo, uint32_t hi, uint32_t grid, uint32_t block, const uint64_t *args) {
	const sim_kernel &kn = sim_kernels[k];
	sim_gridDim = {grid, 1, 1};
	sim_blockDim = {block, 1, 1};
	if (!kn.barrier) {
		for (uint32_t b = lo; b < hi; b++) {
			sim_blockIdx = {b, 0, 0};
			for (uint32_t t = 0; t < block; t++) {
				sim_threadIdx = {t, 0, 0};
				kn.fn(args);
			}
		}
		return 0;
	}
	sched s;
	s.fn = kn.fn;
	s.args = args;
	s.f = (fiber *)calloc(block, sizeof(fiber));
	char *stacks = (char *)malloc(kStack * block);
	if (s.f == nullptr || stacks == nullptr) {
		free(s.f);
		free(stacks);
		return -1;
	}
	cur_sched = &s;
	for (uint32_t b = lo; b < hi; b++) {
		sim_blockIdx = {b, 0, 0};
		for (uint32_t t = 0; t < block; t++) {
			fiber &f = s.f[t];
			f.done = false;
			getcontext(&f.ctx);
			f.ctx.uc_stack.ss_sp = stacks + kStack * t;
			f.ctx.uc_stack.ss_size = kStack;
			f.ctx.uc_link = &s.main;
			makecontext(&f.ctx, fiber_main, 0);
		}
		for (uint32_t live = block; live > 0;) {
			for (uint32_t t = 0; t < block; t++) {
				if (s.f[t].done) continue;
				s.cur = t;
				sim_threadIdx = {t, 0, 0};
				swapcontext(&s.main, &s.f[t].ctx);
				if (s.f[t].done) live--;
			}
		}
	}
	cur_sched = nullptr;
	free(stacks);
	free(s.f);
	return 0;
}
