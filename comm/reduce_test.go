package comm

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHalfRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name  string
		toF   func(uint16) float32
		fromF func(float32) uint16
		nan   func(uint16) bool
	}{
		{"float16", f16ToF32, f32ToF16, func(h uint16) bool { return h&0x7c00 == 0x7c00 && h&0x3ff != 0 }},
		{"bfloat16", bf16ToF32, f32ToBF16, func(h uint16) bool { return h&0x7f80 == 0x7f80 && h&0x7f != 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for h := 0; h < 1<<16; h++ {
				f := tc.toF(uint16(h))
				if tc.nan(uint16(h)) {
					require.True(t, math.IsNaN(float64(f)), "%#x", h)
					require.True(t, tc.nan(tc.fromF(f)), "%#x", h)
					continue
				}
				require.Equal(t, uint16(h), tc.fromF(f), "%#x -> %v", h, f)
			}
			// Midpoints between neighbours round to the even one.
			for h := 0; h < 0x7bff; h++ {
				a, b := uint16(h), uint16(h+1)
				if tc.nan(a) || tc.nan(b) || (tc.name == "bfloat16" && h >= 0x7f7f) {
					continue
				}
				m := float32((float64(tc.toF(a)) + float64(tc.toF(b))) / 2)
				want := a
				if a&1 == 1 {
					want = b
				}
				require.Equal(t, want, tc.fromF(m), "midpoint of %#x,%#x", a, b)
			}
		})
	}
	assert.Equal(t, uint16(0x7c00), f32ToF16(65520))
	assert.Equal(t, uint16(0x7bff), f32ToF16(65519))
	assert.Equal(t, uint16(0x0001), f32ToF16(float32(math.Ldexp(1, -24))))
	assert.Equal(t, uint16(0x0000), f32ToF16(float32(math.Ldexp(1, -25))))
	assert.Equal(t, uint16(0x0001), f32ToF16(float32(math.Ldexp(1.5, -25))))
}

func refOp(op ReduceOp, a, b float64) float64 {
	switch op {
	case Sum, Avg:
		return a + b
	case Product:
		return a * b
	case Max:
		return math.Max(a, b)
	case Min:
		return math.Min(a, b)
	}
	panic("op")
}

func TestReduceInto(t *testing.T) {
	ops := []ReduceOp{Sum, Avg, Max, Min, Product}
	for _, dt := range []DType{Float32, Float64, Int32, Int64, Float16, BFloat16} {
		for _, op := range ops {
			for _, n := range []int{0, 1, 7, 8, 9, 33} {
				t.Run(dt.String()+"/"+op.String(), func(t *testing.T) {
					a, b := make([]float64, n), make([]float64, n)
					for i := range a {
						a[i] = float64(i%5) - 2
						b[i] = float64(i%3) + 1
					}
					da, db := makeBuf(dt, a), makeBuf(dt, b)
					reduceInto(da, db, op)
					got := bufToF64(da)
					for i := range a {
						assert.Equal(t, refOp(op, a[i], b[i]), got[i], "i=%d", i)
					}
				})
			}
		}
	}
}

func TestScaleDivide(t *testing.T) {
	for _, dt := range []DType{Float32, Float64, Int32, Int64, Float16, BFloat16} {
		t.Run(dt.String(), func(t *testing.T) {
			b := makeBuf(dt, []float64{4, -6, 8, 0, 7})
			divideInto(b, 2)
			want := []float64{2, -3, 4, 0, 3.5}
			if dt == Int32 || dt == Int64 {
				want[4] = 3
			}
			assert.Equal(t, want, bufToF64(b))
			scaleInto(b, 0.5)
			for i := range want {
				want[i] *= 0.5
				if dt == Int32 || dt == Int64 {
					want[i] = math.Trunc(want[i])
				}
			}
			assert.Equal(t, want, bufToF64(b))
		})
	}
}

func TestReduceNaN(t *testing.T) {
	a := []float32{1, float32(math.NaN())}
	b := []float32{float32(math.NaN()), 2}
	reduceInto(Float32s(a), Float32s(b), Max)
	assert.True(t, math.IsNaN(float64(a[0])))
	assert.True(t, math.IsNaN(float64(a[1])))
}

func BenchmarkReduceInto(b *testing.B) {
	for _, dt := range []DType{Float32, Float64, BFloat16, Float16} {
		b.Run(dt.String(), func(b *testing.B) {
			n := (1 << 20) / dt.Size()
			vals := make([]float64, n)
			for i := range vals {
				vals[i] = 1 + float64(i%7)/8
			}
			x := makeBuf(dt, vals)
			y := makeBuf(dt, vals)
			b.SetBytes(1 << 20)
			for b.Loop() {
				reduceInto(x, y, Sum)
			}
		})
	}
}
