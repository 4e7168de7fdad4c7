//go:build cgo

package tensor

// #include <stdint.h>
// static void goddp_prefetch_rows(const char *x, int64_t n, int64_t rows, int64_t ld, int64_t cols) {
// 	for (int64_t r = 0; r < rows; r++) { // sizes in bytes
// 		int64_t end = r * ld + cols;
// 		if (end > n)
// 			end = n;
// 		for (int64_t i = r * ld; i < end; i += 64) // a 64-byte line
// 			__builtin_prefetch(x + i, 0, 3);
// 	}
// }
import "C"

import "unsafe"

// prefetchRows is PrefetchRows's kernel, every size in bytes (n: x's).
func prefetchRows(x unsafe.Pointer, n, rows, ld, cols int) {
	C.goddp_prefetch_rows((*C.char)(x), C.int64_t(n), C.int64_t(rows), C.int64_t(ld), C.int64_t(cols))
}
