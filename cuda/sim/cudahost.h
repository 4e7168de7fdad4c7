// cudahost.h lets kernels.cu compile as host C++ for goddp's simulated
// device (package sim): it supplies what nvcc/NVRTC would, namely
// threadIdx, blockIdx, blockDim, gridDim, __shared__, __syncthreads, the
// atomics the kernels use, and the CUDA qualifiers.
//
// Execution model (launch.cc): one host thread runs a whole block, and
// blocks run concurrently on several host threads. Within a block, a
// kernel without __syncthreads runs its threads one after another; a
// kernel with it runs each CUDA thread as a fiber (ucontext) on the
// block's host thread, and __syncthreads switches to the next fiber, so
// every thread of the block reaches barrier k before any passes it: the
// kernel's barrier phases run in the order CUDA guarantees, for any block
// size. The built-in variables and __shared__ arrays are thread_local, so
// each host thread (= block) has its own shared memory, as each CUDA block
// has.
#ifndef GODDP_CUDAHOST_H
#define GODDP_CUDAHOST_H

#include <math.h>
#include <stdint.h>

struct sim_dim3 {
	unsigned int x, y, z;
};

extern thread_local sim_dim3 sim_threadIdx, sim_blockIdx, sim_blockDim, sim_gridDim;

#define threadIdx sim_threadIdx
#define blockIdx sim_blockIdx
#define blockDim sim_blockDim
#define gridDim sim_gridDim

#define __global__
#define __device__ static inline
#define __forceinline__
#define __restrict__ __restrict
#define __shared__ static thread_local

// __syncthreads yields to the block's next fiber; the scheduler resumes
// this one once every live thread of the block has reached the barrier.
void sim_syncthreads(void);
#define __syncthreads() sim_syncthreads()

// Atomics are real atomics: blocks run concurrently on host threads.
static inline float atomicAdd(float *addr, float v) {
	uint32_t *p = (uint32_t *)addr;
	uint32_t old = __atomic_load_n(p, __ATOMIC_RELAXED), nw;
	float f;
	do {
		__builtin_memcpy(&f, &old, 4);
		f += v;
		__builtin_memcpy(&nw, &f, 4);
	} while (!__atomic_compare_exchange_n(p, &old, nw, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
	__builtin_memcpy(&f, &old, 4);
	return f;
}

static inline double atomicAdd(double *addr, double v) {
	uint64_t *p = (uint64_t *)addr;
	uint64_t old = __atomic_load_n(p, __ATOMIC_RELAXED), nw;
	double f;
	do {
		__builtin_memcpy(&f, &old, 8);
		f += v;
		__builtin_memcpy(&nw, &f, 8);
	} while (!__atomic_compare_exchange_n(p, &old, nw, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
	__builtin_memcpy(&f, &old, 8);
	return f;
}

#endif
