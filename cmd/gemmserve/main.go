package main

/*
#cgo LDFLAGS: -lopenblas
#include <cblas.h>
void openblas_set_num_threads(int);
static void sgemm_loop(int reps, int n, const float *a, const float *b, float *c) {
	for (int i = 0; i < reps; i++)
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
}
*/
import "C"

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/goddp/goddp/tensor"
)

func main() {
	if err := serve(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "gemmserve:", err)
		os.Exit(1)
	}
}

// serve answers requests from r on w until r ends.
func serve(r io.Reader, w io.Writer) error {
	tensor.SetThreads(tensor.ThreadsFromEnv())
	rng := tensor.NewRNG(0)
	type mats struct{ x, y, out *tensor.Tensor }
	cache := map[int]mats{}
	in := bufio.NewScanner(r)
	out := bufio.NewWriter(w)
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
		if mode == "cgo" || mode == "cloop" {
			// OpenBLAS's own threads, as before goddp's engine ran its own
			// pool over single-threaded kernels (the engine sets OpenBLAS to
			// one thread; it gets that back below).
			C.openblas_set_num_threads(C.int(tensor.Threads()))
		}
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
		elapsed := time.Since(start)
		C.openblas_set_num_threads(1)
		fmt.Fprintf(out, "%.9f\n", elapsed.Seconds())
		if err := out.Flush(); err != nil {
			return err
		}
	}
	return in.Err()
}
