package tensor

import "unsafe"

// PrefetchRowsF32 asks the CPU to start loading rows rows of cols elements,
// ld apart, from the start of x into its caches, and returns at once. A
// loop over small products whose operands are strided slices of a large
// buffer (attention's heads in a [B, T, 3E] projection) calls it for the
// next product's operands: strided rows defeat the hardware prefetchers, so
// each product otherwise waits on its operands' cache misses one line
// after another. Rows past x's end are left out. Without cgo it does
// nothing.
func PrefetchRowsF32(x []float32, rows, ld, cols int) { prefetchElems(x, rows, ld, cols) }

// PrefetchRowsBF16 is PrefetchRowsF32 for bfloat16 values (a BF16Matrix's
// Halves): bf16 attention's heads.
func PrefetchRowsBF16(x []uint16, rows, ld, cols int) { prefetchElems(x, rows, ld, cols) }

func prefetchElems[E float32 | uint16](x []E, rows, ld, cols int) {
	if rows <= 0 || cols <= 0 || len(x) == 0 {
		return
	}
	if ld > 0 {
		rows = min(rows, (len(x)-1)/ld+1)
	}
	size := int(unsafe.Sizeof(x[0]))
	prefetchRows(unsafe.Pointer(unsafe.SliceData(x)), size*len(x), rows, size*ld, size*cols)
}
