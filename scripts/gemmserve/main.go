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

/*
#cgo LDFLAGS: -lopenblas
#include <cblas.h>
static void sgemm_loop(int reps, int n, const float *a, const float *b, float *c) {
	for (int i = 0; i < reps; i++)
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
}
*/
import "C"

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"time"

	"goddp/tensor"
)

func main() {
	if err := serve(); err != nil {
		fmt.Fprintln(os.Stderr, "gemmserve:", err)
		os.Exit(1)
	}
}

func serve() error {
	tensor.SetThreads(tensor.ThreadsFromEnv())
	rng := tensor.NewRNG(0)
	type mats struct{ x, y, out *tensor.Tensor }
	cache := map[int]mats{}
	in := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	for in.Scan() {
		var n, reps int
		f := strings.Fields(in.Text())
		mode := "matmul"
		if len(f) == 3 {
			mode = f[2]
		}
		if len(f) < 2 || len(f) > 3 {
			return fmt.Errorf("bad request %q: want \"N REPS [MODE]\"", in.Text())
		}
		if _, err := fmt.Sscan(f[0]+" "+f[1], &n, &reps); err != nil || n <= 0 || reps <= 0 {
			return fmt.Errorf("bad request %q: want N and REPS positive", in.Text())
		}
		m, ok := cache[n]
		if !ok {
			m = mats{tensor.Rand(rng, tensor.Float32, n, n), tensor.Rand(rng, tensor.Float32, n, n), tensor.New(tensor.Float32, n, n)}
			tensor.MatMulInto(m.out, m.x, m.y) // warm up
			cache[n] = m
		}
		a, b, c := m.x.F32(), m.y.F32(), m.out.F32()
		start := time.Now()
		switch mode {
		case "matmul":
			for range reps {
				tensor.MatMulInto(m.out, m.x, m.y)
			}
		case "cgo":
			for range reps {
				C.cblas_sgemm(C.CblasRowMajor, C.CblasNoTrans, C.CblasNoTrans, C.blasint(n), C.blasint(n), C.blasint(n), 1,
					(*C.float)(&a[0]), C.blasint(n), (*C.float)(&b[0]), C.blasint(n), 0, (*C.float)(&c[0]), C.blasint(n))
			}
		case "cloop":
			C.sgemm_loop(C.int(reps), C.int(n), (*C.float)(&a[0]), (*C.float)(&b[0]), (*C.float)(&c[0]))
		default:
			return fmt.Errorf("bad request %q: unknown mode %q (matmul, cgo, cloop)", in.Text(), mode)
		}
		fmt.Fprintf(out, "%.9f\n", time.Since(start).Seconds())
		if err := out.Flush(); err != nil {
			return err
		}
	}
	return in.Err()
}
