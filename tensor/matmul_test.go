package tensor

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refMatMul computes the batched product with broadcast batch dims by loops.
func refMatMul(a, b *Tensor) ([]int, []float64) {
	ra, rb := a.Dim(), b.Dim()
	m, k, n := a.shape[ra-2], a.shape[ra-1], b.shape[rb-1]
	batch := broadcastShape("ref", a.shape[:ra-2], b.shape[:rb-2])
	shape := append(cloneInts(batch), m, n)
	var out []float64
	forEachIndex(shape, func(idx []int) {
		bi := idx[:len(batch)]
		ai := append(bcastIndex(&Tensor{shape: a.shape[:ra-2]}, bi), idx[len(batch)], 0)
		bj := append(bcastIndex(&Tensor{shape: b.shape[:rb-2]}, bi), 0, idx[len(batch)+1])
		var s float64
		for p := 0; p < k; p++ {
			ai[len(ai)-1] = p
			bj[len(bj)-2] = p
			s += a.At(ai...) * b.At(bj...)
		}
		out = append(out, s)
	})
	return shape, out
}

func TestMatMulHand(t *testing.T) {
	a := FromF32([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	b := FromF32([]float32{7, 8, 9, 10, 11, 12}, 3, 2)
	got := MatMul(a, b)
	assert.Equal(t, []int{2, 2}, got.Shape())
	assert.Equal(t, []float32{58, 64, 139, 154}, got.F32())
	// a @ aᵀ through a transposed view
	assert.Equal(t, []float32{14, 32, 32, 77}, MatMul(a, a.T()).F32())
	// vector cases
	v := FromF32([]float32{1, 1, 1}, 3)
	assert.Equal(t, []int{2}, MatMul(a, v).Shape())
	assert.Equal(t, []float32{6, 15}, MatMul(a, v).F32())
	assert.Equal(t, []int{2}, MatMul(v, b).Shape())
	assert.Equal(t, []float32{27, 30}, MatMul(v, b).F32())
	assert.InDelta(t, 3.0, MatMul(v, v).Item(), 0)
	assert.Equal(t, 0, MatMul(v, v).Dim())
}

func TestMatMulAgainstReference(t *testing.T) {
	cases := []struct {
		name string
		a, b func(dt DType) *Tensor
	}{
		{"2d", func(dt DType) *Tensor { return seqTensor(dt, 5, 7) }, func(dt DType) *Tensor { return seqTensor(dt, 7, 3) }},
		{"2d big", func(dt DType) *Tensor { return seqTensor(dt, 33, 70) }, func(dt DType) *Tensor { return seqTensor(dt, 70, 41) }},
		{"aT", func(dt DType) *Tensor { return seqTensor(dt, 7, 5).T() }, func(dt DType) *Tensor { return seqTensor(dt, 7, 3) }},
		{"bT", func(dt DType) *Tensor { return seqTensor(dt, 5, 7) }, func(dt DType) *Tensor { return seqTensor(dt, 3, 7).T() }},
		{"aT bT big", func(dt DType) *Tensor { return seqTensor(dt, 40, 30).T() }, func(dt DType) *Tensor { return seqTensor(dt, 50, 40).T() }},
		{"narrowed", func(dt DType) *Tensor { return Narrow(seqTensor(dt, 6, 9), 1, 1, 7) }, func(dt DType) *Tensor { return Narrow(seqTensor(dt, 9, 4), 0, 2, 7) }},
		{"permuted copy", func(dt DType) *Tensor { return Permute(seqTensor(dt, 3, 2, 4), 1, 0, 2).Reshape(2, 12) }, func(dt DType) *Tensor { return seqTensor(dt, 12, 2) }},
		{"batched", func(dt DType) *Tensor { return seqTensor(dt, 2, 4, 5) }, func(dt DType) *Tensor { return seqTensor(dt, 2, 5, 3) }},
		{"batch broadcast b", func(dt DType) *Tensor { return seqTensor(dt, 3, 4, 5) }, func(dt DType) *Tensor { return seqTensor(dt, 5, 2) }},
		{"batch broadcast both", func(dt DType) *Tensor { return seqTensor(dt, 2, 1, 4, 5) }, func(dt DType) *Tensor { return seqTensor(dt, 3, 5, 2) }},
		{"batched transposed", func(dt DType) *Tensor { return Transpose(seqTensor(dt, 2, 5, 4), 1, 2) }, func(dt DType) *Tensor { return seqTensor(dt, 2, 5, 3) }},
		{"k=0", func(dt DType) *Tensor { return New(dt, 3, 0) }, func(dt DType) *Tensor { return New(dt, 0, 2) }},
	}
	for _, dt := range dtypes {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%v/%s", dt, tc.name), func(t *testing.T) {
				a, b := tc.a(dt), tc.b(dt)
				shape, want := refMatMul(a, b)
				got := MatMul(a, b)
				require.Equal(t, shape, got.Shape())
				assert.InDeltaSlice(t, want, values(got), 1e-4)

				out := New(dt, shape...)
				Fill(out, 7) // MatMulInto overwrites
				MatMulInto(out, a, b)
				assert.InDeltaSlice(t, want, values(out), 1e-4)
			})
		}
	}
}

func TestMatMulPanics(t *testing.T) {
	cases := []struct {
		name  string
		fn    func()
		parts []string
	}{
		{"inner", func() { MatMul(New(Float32, 2, 3), New(Float32, 4, 2)) }, []string{"MatMul", "[2 3]", "[4 2]"}},
		{"batch", func() { MatMul(New(Float32, 2, 2, 3), New(Float32, 3, 3, 2)) }, []string{"MatMul", "[2]", "[3]"}},
		{"dtype", func() { MatMul(New(Float32, 2, 3), New(Float64, 3, 2)) }, []string{"MatMul", "float32", "float64"}},
		{"into", func() { MatMulInto(New(Float32, 3, 3), New(Float32, 2, 3), New(Float32, 3, 2)) }, []string{"MatMulInto", "[3 3]", "[2 3]", "[3 2]"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { requirePanics(t, tc.fn, tc.parts...) })
	}
}

func TestMatMulIntoAllocatesNothing(t *testing.T) {
	a, b, out := seqTensor(Float32, 16, 32), seqTensor(Float32, 32, 8), New(Float32, 16, 8)
	allocs := testing.AllocsPerRun(10, func() { MatMulInto(out, a, b) })
	assert.Zero(t, allocs)
	bt := seqTensor(Float32, 8, 32).T()
	allocs = testing.AllocsPerRun(10, func() { MatMulInto(out, a, bt) })
	assert.Zero(t, allocs)
}
