package tensor

import "fmt"

// checkRows panics unless every length is at least rows·d (the row
// kernels' buffers).
func checkRows(op string, rows, d int, lens ...int) {
	for _, n := range lens {
		if rows < 0 || d < 0 || n < rows*d {
			panic(fmt.Sprintf("tensor: %s: buffer of %d elements for %d rows of %d", op, n, rows, d))
		}
	}
}

// checkAffine panics unless every non-nil per-column slice has d elements.
func checkAffine(op string, d int, s ...[]float32) {
	for _, v := range s {
		if v != nil && len(v) != d {
			panic(fmt.Sprintf("tensor: %s: per-column buffer of %d elements for rows of %d", op, len(v), d))
		}
	}
}
