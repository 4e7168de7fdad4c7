//go:build cgo

package tensor

// #include <stdint.h>
// static void goddp_prefetch_rows(const float *x, int64_t n, int64_t rows, int64_t ld, int64_t cols) {
// 	for (int64_t r = 0; r < rows; r++) {
// 		int64_t end = r * ld + cols;
// 		if (end > n)
// 			end = n;
// 		for (int64_t i = r * ld; i < end; i += 16) // a 64-byte line
// 			__builtin_prefetch(x + i, 0, 3);
// 	}
// }
import "C"

import "unsafe"

func prefetchRows(x []float32, rows, ld, cols int) {
	C.goddp_prefetch_rows((*C.float)(unsafe.Pointer(unsafe.SliceData(x))), C.int64_t(len(x)),
		C.int64_t(rows), C.int64_t(ld), C.int64_t(cols))
}
