package tensor

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestReductionsHand(t *testing.T) {
	x := FromF32([]float32{1, 5, 3, 4, 2, 6}, 2, 3)
	cases := []struct {
		name  string
		got   *Tensor
		shape []int
		want  []float64
	}{
		{"sum all", Sum(x, nil, false), []int{}, []float64{21}},
		{"sum all keep", Sum(x, nil, true), []int{1, 1}, []float64{21}},
		{"sum 0", Sum(x, []int{0}, false), []int{3}, []float64{5, 7, 9}},
		{"sum 1 keep", Sum(x, []int{1}, true), []int{2, 1}, []float64{9, 12}},
		{"sum -1", Sum(x, []int{-1}, false), []int{2}, []float64{9, 12}},
		{"mean 0", Mean(x, []int{0}, false), []int{3}, []float64{2.5, 3.5, 4.5}},
		{"mean all", Mean(x, nil, false), []int{}, []float64{3.5}},
		{"max 1", Max(x, 1, false), []int{2}, []float64{5, 6}},
		{"max 0 keep", Max(x, 0, true), []int{1, 3}, []float64{4, 5, 6}},
		{"sum of view", Sum(x.T(), []int{1}, false), []int{3}, []float64{5, 7, 9}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.shape, tc.got.Shape())
			assert.InDeltaSlice(t, tc.want, values(tc.got), 1e-6)
		})
	}
	assert.Equal(t, []int{1, 2}, ArgMax(x, 1))
	assert.Equal(t, []int{1, 0, 1}, ArgMax(x, 0))
	assert.Equal(t, []int{0}, ArgMax(FromF32([]float32{3, 3, 1}, 3), 0), "first maximum wins")
	assert.Equal(t, 21.0, SumAll(x))
}

func TestSumMeanAgainstReference(t *testing.T) {
	shape := []int{2, 3, 4, 5}
	axesCases := [][]int{{0}, {1}, {3}, {1, 2}, {0, 3}, {0, 1, 2, 3}, {2, 0}, {-1, -3}, nil}
	for _, dt := range dtypes {
		for _, axes := range axesCases {
			for _, keep := range []bool{false, true} {
				t.Run(fmt.Sprintf("%v/%v/keep=%v", dt, axes, keep), func(t *testing.T) {
					x := seqTensor(dt, shape...)
					ax := reduceAxes("test", axes, shape)
					inAx := make([]bool, len(shape))
					cnt := 1
					for _, a := range ax {
						inAx[a] = true
						cnt *= shape[a]
					}
					want := New(Float64, reducedShape(shape, ax, true)...)
					forEachIndex(shape, func(idx []int) {
						o := make([]int, len(idx))
						for i := range idx {
							if !inAx[i] {
								o[i] = idx[i]
							}
						}
						want.Set(want.At(o...)+x.At(idx...), o...)
					})
					sum, mean := Sum(x, axes, keep), Mean(x, axes, keep)
					assert.Equal(t, reducedShape(shape, ax, keep), sum.Shape())
					assert.Equal(t, reducedShape(shape, ax, keep), mean.Shape())
					w := values(want)
					assert.InDeltaSlice(t, w, values(sum), 1e-5)
					for i := range w {
						w[i] /= float64(cnt)
					}
					assert.InDeltaSlice(t, w, values(mean), 1e-5)
				})
			}
		}
	}
}

func TestMaxAgainstReference(t *testing.T) {
	for _, dt := range dtypes {
		for axis := 0; axis < 3; axis++ {
			t.Run(fmt.Sprintf("%v/axis=%d", dt, axis), func(t *testing.T) {
				x := seqTensor(dt, 3, 4, 5)
				v, idx := MaxWithIndex(x, axis, false)
				i := 0
				forEachIndex(v.Shape(), func(o []int) {
					full := append(append(cloneInts(o[:axis]), 0), o[axis:]...)
					best, bi := math.Inf(-1), -1
					for r := 0; r < x.shape[axis]; r++ {
						full[axis] = r
						if e := x.At(full...); e > best {
							best, bi = e, r
						}
					}
					assert.Equal(t, best, v.At(o...))
					assert.Equal(t, bi, idx[i])
					i++
				})
			})
		}
	}
	nan := FromF64([]float64{1, math.NaN(), 3}, 3)
	assert.True(t, math.IsNaN(Max(nan, 0, false).Item()))
}
