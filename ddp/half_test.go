package ddp

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"goddp/tensor"
)

func TestHalfRoundTripIsExact(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := f16ToF32(uint16(h))
		if f != f {
			assert.True(t, math.IsNaN(float64(f16ToF32(f32ToF16(f)))))
			continue
		}
		require.Equal(t, uint16(h), f32ToF16(f), "half %#04x (%v)", h, f)
		bf := bf16ToF32(uint16(h))
		if bf == bf {
			require.Equal(t, uint16(h), f32ToBF16(bf), "bfloat16 %#04x", h)
		}
	}
}

// nearest checks that conv(x) is a nearest representable value, with ties
// going to the even encoding.
func checkNearest(t *testing.T, x float32, h uint16, widen func(uint16) float32, name string) {
	t.Helper()
	got := float64(widen(h))
	if math.IsInf(got, 0) {
		return // overflow handling is tested separately
	}
	e := math.Abs(float64(x) - got)
	for _, nb := range []uint16{h - 1, h + 1} {
		v := float64(widen(nb))
		if math.IsNaN(v) || math.IsInf(v, 0) || (v < 0) != (got < 0) && got != 0 {
			continue
		}
		en := math.Abs(float64(x) - v)
		require.LessOrEqual(t, e, en, "%s(%v) = %v, neighbour %v is nearer", name, x, got, v)
		if e == en {
			require.Zero(t, h&1, "%s(%v): tie not rounded to even", name, x)
		}
	}
}

func TestHalfRoundsToNearestEven(t *testing.T) {
	rng := tensor.NewRNG(7)
	for i := 0; i < 50000; i++ {
		// Magnitudes from 1e-9 (half subnormals) to 6e4 (near half's max).
		x := float32(math.Exp(rng.Float64()*math.Log(6e4/1e-9)) * 1e-9)
		if i%2 == 1 {
			x = -x
		}
		checkNearest(t, x, f32ToF16(x), f16ToF32, "f16")
		checkNearest(t, x, f32ToBF16(x), bf16ToF32, "bf16")
	}
	// Exact ties.
	assert.Equal(t, uint16(0x3c00), f32ToF16(1+1.0/2048))                  // 1 + half ulp -> 1 (even)
	assert.Equal(t, uint16(0x3c02), f32ToF16(1+3.0/2048))                  // -> 1+2ulp (even)
	assert.Equal(t, uint16(0x3f80), f32ToBF16(1+1.0/256))                  // bf16 tie -> even
	assert.Equal(t, uint16(0x7c00), f32ToF16(70000))                       // overflow -> +Inf
	assert.Equal(t, uint16(0xfc00), f32ToF16(-70000))                      // -> -Inf
	assert.Equal(t, uint16(0x0001), f32ToF16(float32(math.Ldexp(1, -24)))) // smallest subnormal
	assert.Equal(t, uint16(0x0000), f32ToF16(float32(math.Ldexp(1, -26))))
	assert.True(t, math.IsNaN(float64(f16ToF32(f32ToF16(float32(math.NaN()))))))
	assert.True(t, math.IsNaN(float64(bf16ToF32(f32ToBF16(float32(math.NaN()))))))
}
