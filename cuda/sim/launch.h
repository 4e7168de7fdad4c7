// launch.h: the simulated device's kernel table and launcher (launch.cc).
#ifndef GODDP_SIM_LAUNCH_H
#define GODDP_SIM_LAUNCH_H

#include <stdint.h>

#ifdef __cplusplus
#include <string.h>
// arg_type<i>(f) has the type of kernel f's i-th parameter (for the
// generated trampolines' casts).
template <int I, typename R, typename A0, typename... As> struct sim_nth { typedef typename sim_nth<I - 1, R, As...>::type type; };
template <typename R, typename A0, typename... As> struct sim_nth<0, R, A0, As...> { typedef A0 type; };
template <int I, typename R, typename... As> typename sim_nth<I, R, As...>::type arg_type(R (*)(As...));

static inline float sim_f32(uint64_t a) {
	uint32_t b = (uint32_t)a;
	float f;
	memcpy(&f, &b, 4);
	return f;
}

typedef struct {
	void (*fn)(const uint64_t *args);
	bool barrier;
} sim_kernel;

extern const sim_kernel sim_kernels[];
extern "C" {
#endif

// sim_launch runs blocks [lo, hi) of a grid of grid blocks of block
// threads of kernel k on the calling thread. It returns 0, or -1 if the
// fibers' stacks could not be allocated.
int sim_launch(int k, uint32_t lo, uint32_t hi, uint32_t grid, uint32_t block, const uint64_t *args);

// sim_index sets the built-in variables as for thread t of block b of a
// grid of grid blocks of block threads and returns kernels.cu's
// global_index() and global_stride() there.
void sim_index(uint32_t b, uint32_t grid, uint32_t block, uint32_t t, int64_t *index, int64_t *stride);

#ifdef __cplusplus
}
#endif
#endif
