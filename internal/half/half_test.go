package half

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func isNaN16(h uint16) bool   { return h&0x7c00 == 0x7c00 && h&0x3ff != 0 }
func isNaNBF(h uint16) bool   { return h&0x7f80 == 0x7f80 && h&0x7f != 0 }
func isQuiet16(h uint16) bool { return h&0x0200 != 0 }
func isQuietBF(h uint16) bool { return h&0x0040 != 0 }

// Every 16-bit pattern survives widening and narrowing: exactly for numbers,
// as a quiet NaN for NaNs.
func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name         string
		toF          func(uint16) float32
		fromF        func(float32) uint16
		nan, isQuiet func(uint16) bool
	}{
		{"float16", F16ToF32, F32ToF16, isNaN16, isQuiet16},
		{"bfloat16", BF16ToF32, F32ToBF16, isNaNBF, isQuietBF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for h := 0; h < 1<<16; h++ {
				f := tc.toF(uint16(h))
				if tc.nan(uint16(h)) {
					require.True(t, math.IsNaN(float64(f)), "%#x", h)
					back := tc.fromF(f)
					require.True(t, tc.nan(back), "%#x", h)
					require.True(t, tc.isQuiet(back), "%#x narrows to a quiet NaN", h)
					require.Equal(t, uint16(h)&0x8000, back&0x8000, "%#x keeps its sign", h)
					if tc.isQuiet(uint16(h)) {
						require.Equal(t, uint16(h), back, "quiet NaN %#x keeps its payload", h)
					}
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
}

func TestEdges(t *testing.T) {
	assert.Equal(t, uint16(0x7c00), F32ToF16(65520))
	assert.Equal(t, uint16(0x7bff), F32ToF16(65519))
	assert.Equal(t, uint16(0x7c00), F32ToF16(70000))
	assert.Equal(t, uint16(0xfc00), F32ToF16(float32(math.Inf(-1))))
	assert.Equal(t, uint16(0x0001), F32ToF16(float32(math.Ldexp(1, -24))))
	assert.Equal(t, uint16(0x0000), F32ToF16(float32(math.Ldexp(1, -25))))
	assert.Equal(t, uint16(0x0001), F32ToF16(float32(math.Ldexp(1.5, -25))))
	assert.Equal(t, uint16(0x3c00), F32ToF16(1+1.0/2048)) // 1 + half ulp -> 1 (even)
	assert.Equal(t, uint16(0x3c02), F32ToF16(1+3.0/2048)) // -> 1+2ulp (even)
	assert.Equal(t, uint16(0x3f80), F32ToBF16(1+1.0/256)) // bf16 tie -> even
	// A signalling float32 NaN narrows to a quiet one in both formats.
	snan := math.Float32frombits(0x7f800001)
	assert.True(t, isNaN16(F32ToF16(snan)) && isQuiet16(F32ToF16(snan)))
	assert.True(t, isNaNBF(F32ToBF16(snan)) && isQuietBF(F32ToBF16(snan)))
}

// checkNearest checks that h is a nearest representable value of x, with
// ties going to the even encoding.
func checkNearest(t *testing.T, x float32, h uint16, widen func(uint16) float32, name string) {
	t.Helper()
	got := float64(widen(h))
	if math.IsInf(got, 0) {
		return // overflow is TestEdges'
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

func TestRoundsToNearestEven(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 0))
	for i := 0; i < 50000; i++ {
		// Magnitudes from 1e-9 (half subnormals) to 6e4 (near half's max).
		x := float32(math.Exp(rng.Float64()*math.Log(6e4/1e-9)) * 1e-9)
		if i%2 == 1 {
			x = -x
		}
		checkNearest(t, x, F32ToF16(x), F16ToF32, "f16")
		checkNearest(t, x, F32ToBF16(x), BF16ToF32, "bf16")
	}
}
