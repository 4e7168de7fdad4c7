//go:build cuda

package cuda

import "unsafe"

// device is one GPU's primary context, compute stream, kernels and cuBLAS
// handle, as the Context drives them. driver_dl.go implements it over the
// real libraries; the tests drive the Context's logic (shapes, scratch,
// argument packing, closing, error handling) with a fake.
type device interface {
	alloc(bytes int64) (uint64, error)
	free(p uint64) error
	zero(p uint64, bytes int64) error // async on the stream
	htod(dst uint64, src unsafe.Pointer, bytes int64) error
	dtoh(dst unsafe.Pointer, src uint64, bytes int64) error
	sync() error
	// launch runs kernel with grid blocks of block threads on the
	// stream; every argument is 8 bytes (pointers, int64s, float32 bits).
	launch(kernel string, grid, block uint32, args []uint64) error
	// Column-major cuBLAS on the stream. Each call reports its own
	// status: an error does not make later calls fail.
	sgemm(ta, tb bool, m, n, k int, alpha float32, a uint64, lda int, b uint64, ldb int, beta float32, c uint64, ldc int) error
	sgemv(t bool, m, n int, alpha float32, a uint64, lda int, x uint64, beta float32, y uint64) error
	sasum(n int, x uint64) (float32, error)
	sscal(n int, alpha float32, x uint64) error
	// setMathMode sets the cuBLAS handle's math mode: TF32 tensor cores
	// for float32 GEMMs, or float32 throughout (the default).
	setMathMode(tf32 bool) error
	stream() uintptr
	info() Info
	close() error
}
