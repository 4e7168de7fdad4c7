package tensor

import (
	"math"
	"slices"
	"testing"
)

// Recycle gives back at once what was freed and is neither kept nor held;
// a held block waits for its last Drop, a kept one is never given back,
// and Flush ends the phase, holds and all.
func TestRecyclerHoldDropRecycle(t *testing.T) {
	var r Recycler
	a, b, c := New(Float32, 1024), New(Float32, 1024), New(Float32, 1024)
	view := b.Reshape(32, 32) // shares b's block
	r.Keep(c)
	r.Hold(view)
	r.Hold(b)
	for _, x := range []*Tensor{a, b, c} {
		r.Free(x)
	}
	if n := r.Recycle(); n != 4096 {
		t.Fatalf("Recycle gave back %d bytes, want a's 4096", n)
	}
	if a.blk != nil && !a.blk.freed.Load() {
		t.Fatal("a was not recycled")
	}
	r.Drop(b)
	if n := r.Recycle(); n != 0 {
		t.Fatalf("Recycle gave back %d bytes while the view still holds b's block", n)
	}
	_ = b.F32() // still readable
	r.Drop(view)
	if n := r.Recycle(); n != 4096 {
		t.Fatalf("Recycle gave back %d bytes after the last Drop, want b's 4096", n)
	}
	if !b.blk.freed.Load() {
		t.Fatal("b was not recycled")
	}
	_ = c.F32() // kept
	d := New(Float32, 1024)
	r.Hold(d)
	r.Free(d)
	if n := r.Flush(); n != 4096 {
		t.Fatalf("Flush gave back %d bytes, want the held d's 4096 (a phase's end drops the holds)", n)
	}
}

// CrossEntropyLossInPlace is CrossEntropyLoss to the bit, loss and saved
// probabilities (which take the logits' storage; ignored rows zero), and
// so are their gradients, both dtypes, with label smoothing and ignored
// targets.
func TestCrossEntropyLossInPlaceMatches(t *testing.T) {
	target := []int{3, 0, -1, 7, 7, 1, -1, 2}
	for _, dt := range []DType{Float32, Float64} {
		for _, eps := range []float64{0, 0.1} {
			for _, red := range []Reduction{ReductionMean, ReductionSum, ReductionNone} {
				x := Randn(NewRNG(2), dt, 8, 300)
				y0, ce0 := CrossEntropyLoss(x, target, -1, eps, red)
				x1 := x.Clone()
				y1, ce1 := CrossEntropyLossInPlace(x1, target, -1, eps, red)
				if !slices.Equal(bitsOf(y0), bitsOf(y1)) {
					t.Fatalf("%v eps %v reduction %v: loss %v, want %v", dt, eps, red, y1, y0)
				}
				if !slices.Equal(bitsOf(ce0.p), bitsOf(x1)) || ce1.p != x1 {
					t.Fatalf("%v eps %v reduction %v: the probabilities differ or are not the logits' storage", dt, eps, red)
				}
				gy := Full(dt, 1.5)
				if red == ReductionNone {
					gy = Randn(NewRNG(3), dt, 8)
				}
				if !slices.Equal(bitsOf(ce0.Backward(gy)), bitsOf(ce1.BackwardInPlace(gy))) {
					t.Fatalf("%v eps %v reduction %v: the in-place gradient differs", dt, eps, red)
				}
			}
		}
	}
}

func bitsOf(t *Tensor) []uint64 {
	var out []uint64
	if t.DType() == Float64 {
		for _, v := range t.Contiguous().F64() {
			out = append(out, math.Float64bits(v))
		}
		return out
	}
	for _, v := range t.Contiguous().F32() {
		out = append(out, uint64(math.Float32bits(v)))
	}
	return out
}
