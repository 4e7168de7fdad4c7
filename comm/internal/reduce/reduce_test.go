package reduce

import (
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/commtest"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func refOp(op backend.ReduceOp, a, b float64) float64 {
	switch op {
	case backend.Sum, backend.Avg:
		return a + b
	case backend.Product:
		return a * b
	case backend.Max:
		return math.Max(a, b)
	case backend.Min:
		return math.Min(a, b)
	}
	panic("op")
}

func TestReduceInto(t *testing.T) {
	ops := []backend.ReduceOp{backend.Sum, backend.Avg, backend.Max, backend.Min, backend.Product}
	for _, dt := range []backend.DType{backend.Float32, backend.Float64, backend.Int32, backend.Int64, backend.Float16, backend.BFloat16} {
		for _, op := range ops {
			for _, n := range []int{0, 1, 7, 8, 9, 33} {
				t.Run(dt.String()+"/"+op.String(), func(t *testing.T) {
					a, b := make([]float64, n), make([]float64, n)
					for i := range a {
						a[i] = float64(i%5) - 2
						b[i] = float64(i%3) + 1
					}
					da, db := commtest.MakeBuffer(dt, a), commtest.MakeBuffer(dt, b)
					Into(da, db, op)
					got := commtest.Values(da)
					for i := range a {
						assert.Equal(t, refOp(op, a[i], b[i]), got[i], "i=%d", i)
					}
				})
			}
		}
	}
}

func TestScaleDivide(t *testing.T) {
	for _, dt := range []backend.DType{backend.Float32, backend.Float64, backend.Int32, backend.Int64, backend.Float16, backend.BFloat16} {
		t.Run(dt.String(), func(t *testing.T) {
			b := commtest.MakeBuffer(dt, []float64{4, -6, 8, 0, 7})
			Divide(b, 2)
			want := []float64{2, -3, 4, 0, 3.5}
			if dt == backend.Int32 || dt == backend.Int64 {
				want[4] = 3
			}
			assert.Equal(t, want, commtest.Values(b))
			Scale(b, 0.5)
			for i := range want {
				want[i] *= 0.5
				if dt == backend.Int32 || dt == backend.Int64 {
					want[i] = math.Trunc(want[i])
				}
			}
			assert.Equal(t, want, commtest.Values(b))
		})
	}
}

func TestReduceNaN(t *testing.T) {
	a := []float32{1, float32(math.NaN())}
	b := []float32{float32(math.NaN()), 2}
	Into(backend.Float32s(a), backend.Float32s(b), backend.Max)
	assert.True(t, math.IsNaN(float64(a[0])))
	assert.True(t, math.IsNaN(float64(a[1])))
}

func BenchmarkReduceInto(b *testing.B) {
	for _, dt := range []backend.DType{backend.Float32, backend.Float64, backend.BFloat16, backend.Float16} {
		b.Run(dt.String(), func(b *testing.B) {
			n := (1 << 20) / dt.Size()
			vals := make([]float64, n)
			for i := range vals {
				vals[i] = 1 + float64(i%7)/8
			}
			x := commtest.MakeBuffer(dt, vals)
			y := commtest.MakeBuffer(dt, vals)
			b.SetBytes(1 << 20)
			for b.Loop() {
				Into(x, y, backend.Sum)
			}
		})
	}
}
