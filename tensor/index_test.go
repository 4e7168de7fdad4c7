package tensor

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestGatherScatter(t *testing.T) {
	x := FromF32([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	g := Gather(x, 1, []int{2, 0})
	assert.Equal(t, []int{2}, g.Shape())
	assert.Equal(t, []float32{3, 4}, g.F32())
	g0 := Gather(x, 0, []int{1, 0, 1})
	assert.Equal(t, []float32{4, 2, 6}, g0.F32())

	d := New(Float32, 2, 3)
	ScatterAdd(d, 1, []int{2, 0}, FromF32([]float32{10, 20}, 2))
	ScatterAdd(d, 1, []int{2, 2}, FromF32([]float32{1, 1}, 2))
	assert.Equal(t, []float32{0, 0, 11, 20, 0, 1}, d.F32())

	requirePanics(t, func() { Gather(x, 1, []int{3, 0}) }, "Gather", "index 3", "[2 3]")
	requirePanics(t, func() { Gather(x, 1, []int{0}) }, "Gather", "[2 3]")
}

func TestIndexSelectAdd(t *testing.T) {
	x := FromF64([]float64{1, 2, 3, 4, 5, 6}, 3, 2)
	s := IndexSelect(x, 0, []int{2, 0, 2})
	assert.Equal(t, []int{3, 2}, s.Shape())
	assert.Equal(t, []float64{5, 6, 1, 2, 5, 6}, s.F64())
	c := IndexSelect(x, 1, []int{1})
	assert.Equal(t, []float64{2, 4, 6}, c.F64())

	d := New(Float64, 3, 2)
	IndexAdd(d, 0, []int{2, 0, 2}, s)
	assert.Equal(t, []float64{1, 2, 0, 0, 10, 12}, d.F64())
	requirePanics(t, func() { IndexSelect(x, 0, []int{3}) }, "IndexSelect", "index 3", "[3 2]")
}

func TestConcatStack(t *testing.T) {
	a := FromF32([]float32{1, 2, 3, 4}, 2, 2)
	b := FromF32([]float32{5, 6}, 1, 2)
	c0 := Concat(0, a, b)
	assert.Equal(t, []int{3, 2}, c0.Shape())
	assert.Equal(t, []float32{1, 2, 3, 4, 5, 6}, c0.F32())
	c1 := Concat(1, a, b.Reshape(2, 1))
	assert.Equal(t, []float32{1, 2, 5, 3, 4, 6}, c1.F32())
	c2 := Concat(-1, a.T(), a)
	assert.Equal(t, []float32{1, 3, 1, 2, 2, 4, 3, 4}, c2.F32())

	s0 := Stack(0, a, a)
	assert.Equal(t, []int{2, 2, 2}, s0.Shape())
	s2 := Stack(2, a, MulScalar(a, 10))
	assert.Equal(t, []int{2, 2, 2}, s2.Shape())
	assert.Equal(t, []float32{1, 10, 2, 20, 3, 30, 4, 40}, s2.F32())

	requirePanics(t, func() { Concat(0, a, FromF32([]float32{1, 2, 3}, 1, 3)) }, "Concat", "[2 2]", "[1 3]")
	requirePanics(t, func() { Stack(0, a, b) }, "Stack", "[2 2]", "[1 2]")
	requirePanics(t, func() { Concat(0, a, New(Float64, 1, 2)) }, "Concat", "float32", "float64")
}
