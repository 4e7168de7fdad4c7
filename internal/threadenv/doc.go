// Package threadenv reads the compute thread count a goddp process is asked
// to use: GODDP_NUM_THREADS, else OMP_NUM_THREADS, as torch reads
// OMP_NUM_THREADS. tensor sizes its GEMM engine from it, comm's shm backend
// decides whether its ranks leave a core free, and the launcher sets it for
// its workers when the user has not. It lives here, apart from tensor, so
// that comm and launch need not link the BLAS engine to read two variables.
package threadenv
