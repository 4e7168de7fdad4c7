package reduce

import (
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/commtest"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// The AVX sum must give exactly Into's bits, specials included.
func TestAddFastMatchesInto(t *testing.T) {
	if !HasAVX() {
		t.Skip("no AVX")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	specials := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), 1e-40, 3.4e38, 1e-310, 1.7e308}
	val := func() float64 {
		if rng.IntN(8) == 0 {
			return specials[rng.IntN(len(specials))]
		}
		return rng.NormFloat64() * math.Pow(10, float64(rng.IntN(20)-10))
	}
	for _, dt := range []backend.DType{backend.Float32, backend.Float64} {
		for _, n := range []int{0, 1, 15, 16, 31, 32, 33, 64, 100, 1000, 4099} {
			a, b := make([]float64, n), make([]float64, n)
			for i := range a {
				a[i], b[i] = val(), val()
			}
			want, src := commtest.MakeBuffer(dt, a), commtest.MakeBuffer(dt, b)
			got := commtest.MakeBuffer(dt, a)
			Into(want, src, backend.Sum)
			require.True(t, AddFast(got, src))
			require.Equal(t, want.Bytes, got.Bytes, "%v n=%d", dt, n)
		}
	}
	require.False(t, AddFast(commtest.MakeBuffer(backend.Int32, []float64{1}), commtest.MakeBuffer(backend.Int32, []float64{2})))
}

func BenchmarkAddFast4K(b *testing.B) {
	if !HasAVX() {
		b.Skip("no AVX")
	}
	x := backend.Float32s(make([]float32, 1024))
	y := backend.Float32s(make([]float32, 1024))
	for i := 0; i < b.N; i++ {
		AddFast(x, y)
	}
}
