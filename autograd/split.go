package autograd

import "fmt"

// Split cuts a along axis into pieces of size (the last one smaller when size
// does not divide the axis), as torch.split(a, size, dim). Each piece is a
// Narrow view of a.
func Split(a *Variable, size, axis int) []*Variable {
	if size <= 0 {
		panic(fmt.Sprintf("autograd: Split: size %d must be positive", size))
	}
	n := a.Value.Size(normAxis("Split", axis, a.Value.Dim()))
	sizes := make([]int, 0, (n+size-1)/size)
	for off := 0; off < n; off += size {
		sizes = append(sizes, min(size, n-off))
	}
	return SplitSizes(a, sizes, axis)
}

// SplitSizes cuts a along axis into pieces of the given sizes, which must sum
// to the axis's extent, as torch.split(a, [s0, s1, ...], dim).
func SplitSizes(a *Variable, sizes []int, axis int) []*Variable {
	axis = normAxis("Split", axis, a.Value.Dim())
	n, total := a.Value.Size(axis), 0
	for _, s := range sizes {
		if s < 0 {
			panic(fmt.Sprintf("autograd: Split: negative size in %v", sizes))
		}
		total += s
	}
	if total != n {
		panic(fmt.Sprintf("autograd: Split: sizes %v sum to %d, not the %d of axis %d of shape %v", sizes, total, n, axis, a.Value.Shape()))
	}
	out := make([]*Variable, len(sizes))
	off := 0
	for i, s := range sizes {
		out[i] = Narrow(a, axis, off, s)
		off += s
	}
	return out
}

// Chunk cuts a along axis into at most chunks pieces of ceil(n/chunks)
// elements each (the last may be smaller, and fewer pieces come back when
// the pieces run out first), as torch.chunk.
func Chunk(a *Variable, chunks, axis int) []*Variable {
	if chunks <= 0 {
		panic(fmt.Sprintf("autograd: Chunk: %d chunks must be positive", chunks))
	}
	n := a.Value.Size(normAxis("Chunk", axis, a.Value.Dim()))
	if n == 0 {
		return SplitSizes(a, []int{0}, axis)
	}
	return Split(a, (n+chunks-1)/chunks, axis)
}
