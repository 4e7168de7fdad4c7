package tensor

import (
	"os"
	"strconv"
)

// ThreadsFromEnv returns the BLAS thread count requested by the environment:
// GODDP_NUM_THREADS, or else OMP_NUM_THREADS. It returns 0 when neither holds
// a positive integer, which SetThreads treats as "keep the engine's default".
func ThreadsFromEnv() int {
	for _, key := range []string{"GODDP_NUM_THREADS", "OMP_NUM_THREADS"} {
		v, ok := os.LookupEnv(key)
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err == nil && n > 0 {
			return n
		}
	}
	return 0
}

// SetThreads sets the number of threads the BLAS engine uses for one GEMM.
// Call it once from main, typically as SetThreads(ThreadsFromEnv()); n <= 0
// leaves the engine's default. The count lives inside the engine (OpenBLAS
// keeps it process-wide); the pure-Go engine ignores it and runs on the
// calling goroutine's pool of GOMAXPROCS.
func SetThreads(n int) {
	if n <= 0 {
		return
	}
	engineSetThreads(n)
}

// BLASName reports the GEMM engine compiled in, e.g. "openblas" or "go".
func BLASName() string { return engineName }
