package tensor

import "github.com/goddp/goddp/internal/threadenv"

// ThreadsFromEnv returns the BLAS thread count requested by the environment:
// GODDP_NUM_THREADS, or else OMP_NUM_THREADS. It returns 0 when neither holds
// a positive integer, which SetThreads treats as "keep the engine's default".
func ThreadsFromEnv() int { return threadenv.FromEnv() }

// SetThreads sets the number of threads the BLAS engine may use for one GEMM.
// Call it once from main, typically as SetThreads(ThreadsFromEnv()); n <= 0
// leaves the engine's default. The count lives inside the engine, process-wide
// (engine.c's pool); the pure-Go engine ignores it and spreads a product over
// GOMAXPROCS goroutines.
func SetThreads(n int) {
	if n <= 0 {
		return
	}
	engineSetThreads(n)
}

// Threads reports how many threads one GEMM may use, as torch's
// get_num_threads does: the count SetThreads last set, or the engine's
// default (the CPUs this process may run on; GOMAXPROCS for the pure-Go
// engine).
func Threads() int { return engineThreads() }

// BLASCore names the kernel set OpenBLAS runs on this CPU, such as
// "SkylakeX" or "Haswell", with a note when the engine had to correct
// OpenBLAS's own choice (see the package doc, BLAS); "" for the pure-Go
// engine. Benchmarks print it beside their figures.
func BLASCore() string { return engineBLASCore() }

// BLASName reports the GEMM engine compiled in, e.g. "openblas" or "go".
func BLASName() string { return engineName }
