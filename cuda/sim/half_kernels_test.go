package sim_test

import (
	"fmt"
	"math"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/cuda/sim"
	"github.com/goddp/goddp/internal/half"
)

// halfInputs are float32s that exercise every path of the narrowing:
// random values over the whole exponent range (a stride through all bit
// patterns), each half's exact value, the midpoints between neighbouring
// halves (ties, rounded to even) and a bit either side, zeros, half
// subnormals, the overflow boundary, infinities and NaNs with payloads.
func halfInputs(n int) []float32 {
	var xs []float32
	for i := 0; len(xs) < n; i++ {
		xs = append(xs, math.Float32frombits(uint32(i)*2654435761))
	}
	for h := 0; h < 1<<16; h += 7 {
		a, b := float64(half.F16ToF32(uint16(h))), float64(half.F16ToF32(uint16(h+1)))
		mid := float32((a + b) / 2)
		xs = append(xs, float32(a), mid, math.Nextafter32(mid, float32(math.Inf(1))), math.Nextafter32(mid, float32(math.Inf(-1))))
	}
	xs = append(xs, 0, float32(math.Copysign(0, -1)), 65504, 65519.99, 65520, 1e-8, -6e-8, 3e-5,
		float32(math.Inf(1)), float32(math.Inf(-1)), math.Float32frombits(0x7fc00001), math.Float32frombits(0xff812345),
		math.Float32frombits(1), math.Float32frombits(0x80000003))
	return xs
}

func halfBuf(t *testing.T, dev *sim.Device, n int) *sim.Buffer {
	b, err := dev.Alloc(2 * n)
	require.NoError(t, err)
	t.Cleanup(b.Free)
	return b
}

func u16(b *sim.Buffer) []uint16 {
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b.Bytes()[0])), b.Len()/2)
}

// The cast kernels for DDP's compression hooks on a device equal
// goddp/internal/half (the CPU hooks' conversions) bit for bit, NaNs
// included, over odd sizes and launch shapes; the widenings over every
// 16-bit pattern.
func TestHalfCastKernels(t *testing.T) {
	for _, c := range []struct {
		narrow, widen string
		toH           func(float32) uint16
		fromH         func(uint16) float32
	}{
		{"f32_to_f16", "f16_to_f32", half.F32ToF16, half.F16ToF32},
		{"f32_to_bf16", "bf16_to_f32", half.F32ToBF16, half.BF16ToF32},
	} {
		t.Run(c.narrow, func(t *testing.T) {
			e := newEnv(t)
			for _, n := range append(sizes, 70001) {
				xs := halfInputs(n)
				x := e.up(xs)
				forLaunches(t, func(t *testing.T, grid, block int) {
					y := halfBuf(t, e.dev, len(xs))
					e.launch(c.narrow, grid, block, sim.Ptr(y), sim.Ptr(x), sim.I64(len(xs)))
					for i, v := range xs {
						if got, want := u16(y)[i], c.toH(v); got != want {
							t.Fatalf("%s(%#08x = %v): %#04x, want %#04x", c.narrow, math.Float32bits(v), v, got, want)
						}
					}
				})
			}
			hs := halfBuf(t, e.dev, 1<<16+1)
			for i := range 1 << 16 {
				u16(hs)[i] = uint16(i)
			}
			forLaunches(t, func(t *testing.T, grid, block int) {
				y := e.zeros(1 << 16)
				e.launch(c.widen, grid, block, sim.Ptr(y), sim.Ptr(hs), sim.I64(1<<16))
				for i, got := range y.F32() {
					if want := c.fromH(uint16(i)); math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("%s(%#04x): %v (%#08x), want %v (%#08x)", c.widen, i, got, math.Float32bits(got), want, math.Float32bits(want))
					}
				}
			})
			// A launch over n leaves element n alone.
			y := e.zeros(2)
			e.launch(c.widen, 3, 2, sim.Ptr(y), sim.Ptr(hs), sim.I64(1))
			require.Equal(t, float32(0), y.F32()[1], fmt.Sprintf("%s wrote past n", c.widen))
		})
	}
}

// round_bf16_f32 is f32_to_bf16 then bf16_to_f32 in one pass, bit for bit
// internal/half's (NaNs included), and leaves what follows n alone.
func TestRoundBF16Kernel(t *testing.T) {
	e := newEnv(t)
	for _, n := range append(sizes, 70001) {
		xs := halfInputs(n)
		x := e.up(xs)
		forLaunches(t, func(t *testing.T, grid, block int) {
			y := e.zeros(len(xs) + 1)
			e.launch("round_bf16_f32", grid, block, sim.Ptr(y), sim.Ptr(x), sim.I64(len(xs)))
			for i, v := range xs {
				got, want := y.F32()[i], half.BF16ToF32(half.F32ToBF16(v))
				if math.Float32bits(got) != math.Float32bits(want) {
					t.Fatalf("round_bf16_f32(%#08x = %v): %#08x, want %#08x", math.Float32bits(v), v, math.Float32bits(got), math.Float32bits(want))
				}
			}
			require.Equal(t, float32(0), y.F32()[len(xs)], "wrote past n")
		})
	}
}
