package tensor

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// LinearBF16 and LinearBackwardBF16 round each operand once and keep the
// rounding; LinearWith and LinearBackwardWith at PrecisionBFloat16 round
// their own, so every output must match theirs to the bit: the fused bias
// path, the transposed product of few rows against a wide weight
// (linearSwapped), no bias, an odd element count (the halves' last slot),
// and the gradients overwritten or accumulated. Independently of that
// shared code, the forward matches float64 sums over the rounded operands,
// and the backward GemmBF16's products and AddRows's sums to the bit.
func TestLinearBF16MatchesLinearWith(t *testing.T) {
	rng := NewRNG(11)
	for _, sh := range []struct {
		n, in, out int
		bias       bool
	}{
		{2048, 128, 384, true}, {64, 1024, 512, true}, {33, 17, 9, true}, {33, 17, 9, false}, {5, 1, 3, true},
	} {
		t.Run(fmt.Sprintf("%dx%dx%d bias=%v", sh.n, sh.in, sh.out, sh.bias), func(t *testing.T) {
			w := Randn(rng, Float32, sh.out, sh.in)
			x := Randn(rng, Float32, sh.n, sh.in)
			var b *Tensor
			if sh.bias {
				b = Randn(rng, Float32, sh.out)
			}
			y, xh, wh := LinearBF16(x, w, b)
			want := LinearWith(x, w, b, PrecisionBFloat16)
			requireSameBits(t, want.F32(), y.F32(), "y")
			for i := range sh.n {
				for j := range sh.out {
					ref, mag := 0.0, 1.0
					if sh.bias {
						ref = float64(b.F32()[j])
					}
					for k := range sh.in {
						term := float64(RoundBF16(x.F32()[i*sh.in+k])) * float64(RoundBF16(w.F32()[j*sh.in+k]))
						ref += term
						mag += math.Abs(term)
					}
					// float32 sums: within a few 2**-24 of the terms' size
					require.InDelta(t, ref, float64(y.F32()[i*sh.out+j]), 1e-6*mag, "y[%d][%d] against float64", i, j)
				}
			}
			require.Equal(t, sh.n, xh.Rows())
			require.Equal(t, sh.in, xh.Cols())
			for i := 0; i < sh.n*sh.in; i += 1 + sh.n*sh.in/97 {
				r, c := i/sh.in, i%sh.in
				require.Equal(t, RoundBF16(x.F32()[i]), xh.At(r, c), "xh[%d][%d]", r, c)
			}
			for i := 0; i < sh.out*sh.in; i += 1 + sh.out*sh.in/97 {
				r, c := i/sh.in, i%sh.in
				require.Equal(t, RoundBF16(w.F32()[i]), wh.At(r, c), "wh[%d][%d]", r, c)
			}
			gy := Randn(rng, Float32, sh.n, sh.out)
			for _, acc := range []bool{false, true} {
				grads := func() (dx, dw, db *Tensor) {
					dx, dw = Randn(NewRNG(3), Float32, sh.n, sh.in), Randn(NewRNG(4), Float32, sh.out, sh.in)
					if sh.bias {
						db = Randn(NewRNG(5), Float32, sh.out)
					}
					return
				}
				dx, dw, db := grads()
				LinearBackwardBF16(gy, nil, xh, wh, w, dx, dw, db, acc, acc, acc)
				wx, ww, wb := grads()
				LinearBackwardWith(gy, x, w, wx, ww, wb, acc, acc, acc, PrecisionBFloat16)
				requireSameBits(t, wx.F32(), dx.F32(), "dx acc=%v", acc)
				requireSameBits(t, ww.F32(), dw.F32(), "dw acc=%v", acc)
				if sh.bias {
					requireSameBits(t, wb.F32(), db.F32(), "db acc=%v", acc)
				}
				rx, rw, rb := grads()
				beta := float32(0)
				if acc {
					beta = 1
				} else if sh.bias {
					clear(rb.F32())
				}
				GemmBF16(false, false, sh.n, sh.in, sh.out, 1, gy.F32(), sh.out, w.F32(), sh.in, beta, rx.F32(), sh.in)
				GemmBF16(true, false, sh.out, sh.in, sh.n, 1, gy.F32(), sh.out, x.F32(), sh.in, beta, rw.F32(), sh.in)
				requireSameBits(t, rx.F32(), dx.F32(), "dx acc=%v against GemmBF16", acc)
				requireSameBits(t, rw.F32(), dw.F32(), "dw acc=%v against GemmBF16", acc)
				if sh.bias {
					AddRows(rb.F32(), gy.F32(), sh.n, sh.out)
					requireSameBits(t, rb.F32(), db.F32(), "db acc=%v against AddRows", acc)
				}
			}
		})
	}
	require.Panics(t, func() {
		LinearBackwardBF16(New(Float32, 4, 3), nil, RoundToBF16(make([]float32, 10), 5, 2), nil, New(Float32, 3, 2), nil, nil, nil, false, false, false)
	}, "a rounded input of another row count")
	require.Panics(t, func() {
		LinearBackwardBF16(New(Float32, 4, 3), nil, RoundToBF16(make([]float32, 8), 4, 2), RoundToBF16(make([]float32, 6), 2, 3),
			New(Float32, 3, 2), New(Float32, 4, 2), nil, nil, false, false, false)
	}, "a rounded weight of another shape")
}

func requireSameBits(t *testing.T, want, got []float32, msg string, args ...any) {
	t.Helper()
	what := fmt.Sprintf(msg, args...)
	require.Equal(t, len(want), len(got), what)
	for i := range want {
		if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
			require.Failf(t, "bits differ", "%s: [%d] %v, want %v", what, i, got[i], want[i])
		}
	}
}
