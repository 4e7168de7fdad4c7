// Command gemmserve is the Go side of scripts/gemm_pingpong.py: it runs
// goddp/tensor float32 GEMMs on request, so that the driver can alternate
// short slices of Go and torch work many times over. Both then sample the
// same moments of a shared, noisy host.
//
// Each request is a line "N REPS [MODE]" on stdin: the server runs REPS
// square N×N float32 products into a reused output (the shape of
// BenchmarkMatMul) and answers with one line, the elapsed seconds. MODE
// says which path, to tell the library's cost from the Go runtime's:
//
//	matmul  tensor.MatMulInto, what goddp code calls (the default)
//	cgo     one cgo call to cblas_sgemm per product, bypassing goddp/tensor
//	cloop   one cgo call that runs all REPS products in C
//
// Threads come from GODDP_NUM_THREADS / OMP_NUM_THREADS, as in every goddp
// program (OpenBLAS keeps one process-wide count).
package main
