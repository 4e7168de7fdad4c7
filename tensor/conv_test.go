package tensor

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// naiveConv2d is the definition, for Conv2dShape s with one group.
func naiveConv2d(s *Conv2dShape, x, w, b []float32) []float32 {
	y := make([]float32, s.N*s.O*s.OH*s.OW)
	for n := range s.N {
		for o := range s.O {
			for oy := range s.OH {
				for ox := range s.OW {
					var acc float32
					if b != nil {
						acc = b[o]
					}
					for c := range s.C {
						for ky := range s.KH {
							for kx := range s.KW {
								iy := oy*s.StrideH - s.PadTop + ky*s.DilationH
								ix := ox*s.StrideW - s.PadLeft + kx*s.DilationW
								if iy < 0 || iy >= s.H || ix < 0 || ix >= s.W {
									continue
								}
								acc += x[((n*s.C+c)*s.H+iy)*s.W+ix] * w[((o*s.C+c)*s.KH+ky)*s.KW+kx]
							}
						}
					}
					y[((n*s.O+o)*s.OH+oy)*s.OW+ox] = acc
				}
			}
		}
	}
	return y
}

// TestConv2dForwardEngine checks the engine's forward convolution against
// the definition where the build has one (oneDNN), and that it reports
// false and writes nothing where it has none.
func TestConv2dForwardEngine(t *testing.T) {
	s := Conv2dShape{N: 3, C: 2, H: 7, W: 6, O: 5, KH: 3, KW: 2, StrideH: 2, StrideW: 1,
		PadTop: 1, PadLeft: 1, PadBottom: 1, PadRight: 1, DilationH: 1, DilationW: 2, Groups: 1, OH: 4, OW: 6}
	rng := NewRNG(5)
	x, w, b := Rand(rng, Float32, 3*2*7*6).F32(), Rand(rng, Float32, 5*2*3*2).F32(), Rand(rng, Float32, 5).F32()
	y := make([]float32, 3*5*4*6)
	ran := Conv2dForward(&s, y, x, w, b)
	if !strings.Contains(BLASName(), "onednn") {
		require.False(t, ran)
		assert.Equal(t, make([]float32, len(y)), y, "nothing written")
		return
	}
	require.True(t, ran, "oneDNN ran no kernel (%q)", Conv2dKernel(&s, "fwd", true))
	want := naiveConv2d(&s, x, w, b)
	for i := range want {
		assert.InDelta(t, want[i], y[i], 1e-5, "y[%d]", i)
	}
}

func TestConv2dBadLengthsPanic(t *testing.T) {
	s := Conv2dShape{N: 1, C: 1, H: 3, W: 3, O: 1, KH: 3, KW: 3, StrideH: 1, StrideW: 1, DilationH: 1, DilationW: 1, Groups: 1, OH: 1, OW: 1}
	ok := func() []float32 { return make([]float32, 9) }
	assert.PanicsWithValue(t, "tensor: Conv2dForward: y has 2 elements, shape "+
		"{N:1 C:1 H:3 W:3 O:1 KH:3 KW:3 StrideH:1 StrideW:1 PadTop:0 PadLeft:0 PadBottom:0 PadRight:0 DilationH:1 DilationW:1 Groups:1 OH:1 OW:1 BF16:false} needs 1",
		func() { Conv2dForward(&s, make([]float32, 2), ok(), ok(), nil) })
	assert.Panics(t, func() { Conv2dBackwardData(&s, make([]float32, 8), ok(), make([]float32, 1)) }, "dx")
	assert.Panics(t, func() { Conv2dBackwardWeights(&s, ok(), make([]float32, 2), ok(), make([]float32, 1)) }, "db")
	bad := s
	bad.Groups = 0
	assert.Panics(t, func() { Conv2dForward(&bad, make([]float32, 1), ok(), ok(), nil) }, "groups 0")
	assert.Panics(t, func() { Conv2dKernel(&s, "sideways", false) })
}
