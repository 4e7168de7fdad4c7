package tensor

import (
	"fmt"
	"strconv"
)

// maxStackDims is the rank up to which index bookkeeping lives in fixed
// arrays on the stack, so the hot paths allocate nothing but their result.
const maxStackDims = 8

// broadcastShape returns the NumPy/torch broadcast of a and b, panicking with
// op's name and both shapes when they are incompatible.
func broadcastShape(op string, a, b []int) []int {
	return broadcastShapeInto(op, a, b, make([]int, max(len(a), len(b))))
}

// broadcastShapeInto is broadcastShape writing into out, which must have
// length max(len(a), len(b)).
func broadcastShapeInto(op string, a, b, out []int) []int {
	n := len(out)
	for i := 0; i < n; i++ {
		da, db := 1, 1
		if j := len(a) - n + i; j >= 0 {
			da = a[j]
		}
		if j := len(b) - n + i; j >= 0 {
			db = b[j]
		}
		switch {
		case da == db, db == 1:
			out[i] = da
		case da == 1:
			out[i] = db
		default:
			panic(fmt.Sprintf("tensor: %s: shapes %s and %s cannot be broadcast (dim %d: %d vs %d)", op, sh(a), sh(b), i, da, db))
		}
	}
	return out
}

// broadcastStrides returns t's strides viewed at shape out (which t must
// broadcast to): size-1 and missing dimensions get stride 0. dst receives the
// result and must have len(out).
func broadcastStrides(t *Tensor, out []int, dst []int) {
	off := len(out) - len(t.shape)
	for i := range out {
		j := i - off
		if j < 0 || t.shape[j] == 1 {
			dst[i] = 0
		} else {
			dst[i] = t.strides[j]
		}
	}
}

// normAxis maps a possibly negative axis into [0, rank), panicking with op.
func normAxis(op string, axis, rank int, shape []int) int {
	a := axis
	if a < 0 {
		a += rank
	}
	if a < 0 || a >= rank {
		panic(fmt.Sprintf("tensor: %s: axis %d out of range for shape %s", op, axis, sh(shape)))
	}
	return a
}

func checkDType(op string, a, b *Tensor) {
	if a.dtype != b.dtype {
		panic(fmt.Sprintf("tensor: %s: dtype mismatch %v%s vs %v%s", op, a.dtype, sh(a.shape), b.dtype, sh(b.shape)))
	}
}

// collapse merges adjacent dimensions that every operand walks contiguously,
// in place, and returns the new rank. strides[k] is operand k's strides.
// Collapsing turns a contiguous same-shape op into a single flat loop and a
// bias add over [N, C] into N rows of C.
func collapse(shape []int, strides ...[]int) int {
	// Drop size-1 dimensions first: their strides are irrelevant.
	r := 0
	for i := range shape {
		if shape[i] == 1 {
			continue
		}
		shape[r] = shape[i]
		for _, s := range strides {
			s[r] = s[i]
		}
		r++
	}
	if r == 0 {
		shape[0] = 1
		for _, s := range strides {
			s[0] = 0
		}
		return 1
	}
	w := 0
	for i := 1; i < r; i++ {
		merge := true
		for _, s := range strides {
			if s[w] != s[i]*shape[i] {
				merge = false
				break
			}
		}
		if merge {
			shape[w] *= shape[i]
			for _, s := range strides {
				s[w] = s[i]
			}
			continue
		}
		w++
		shape[w] = shape[i]
		for _, s := range strides {
			s[w] = s[i]
		}
	}
	return w + 1
}

// ints returns a slice of length n backed by buf when it fits, so callers
// can keep small index vectors on the stack.
func ints(buf *[maxStackDims]int, n int) []int {
	if n <= maxStackDims {
		s := buf[:n]
		clear(s)
		return s
	}
	return make([]int, n)
}

// sh formats a shape as fmt's %v would ("[2 3]") without letting the slice
// escape: shapes passed to panic messages would otherwise force every
// variadic shape argument, and every tensor header, onto the heap.
func sh(s []int) string {
	b := make([]byte, 0, 2+4*len(s))
	b = append(b, '[')
	for i, d := range s {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendInt(b, int64(d), 10)
	}
	return string(append(b, ']'))
}
