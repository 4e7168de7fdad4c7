//go:build cuda

package cuda

import (
	"math"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/internal/half"
	"github.com/goddp/goddp/tensor"
)

// dnnHost is dnnSim whose passes compute, on the host, what cuDNN's
// would: a direct convolution of the operands in the descriptors' type
// (float32, or bfloat16 under s.BF16 with a result rounded to bfloat16),
// result = conv + beta*result.
type dnnHost struct {
	*dnnSim
	bf16Runs int
}

func (d *dnnHost) dnnConv(pass int, s *tensor.Conv2dShape, o dnnOpts, out, a, b uint64, beta float32, ws uint64, wsBytes int64) error {
	if err := d.dnnSim.dnnConv(pass, s, o, out, a, b, beta, ws, wsBytes); err != nil {
		return err
	}
	if s.BF16 {
		d.bf16Runs++
	}
	nx, nw, ny := s.N*s.C*s.H*s.W, s.O*(s.C/s.Groups)*s.KH*s.KW, s.N*s.O*s.OH*s.OW
	sizes := [3][3]int{{ny, nx, nw}, {nx, ny, nw}, {nw, nx, ny}}[pass] // out, a, b
	av, bv, ov := d.read(a, sizes[1], s.BF16), d.read(b, sizes[2], s.BF16), make([]float32, sizes[0])
	x, w, y := av, bv, ov // forward
	switch pass {
	case 1:
		x, w, y = ov, bv, av
	case 2:
		x, w, y = av, ov, bv
	}
	directConv(s, pass, x, w, y)
	if beta != 0 {
		old := d.read(out, sizes[0], s.BF16)
		for i := range ov {
			ov[i] += beta * old[i]
		}
	}
	return d.write(out, ov, s.BF16)
}

func (d *dnnHost) read(p uint64, n int, bf16 bool) []float32 {
	v := make([]float32, n)
	if !bf16 {
		if err := d.dtoh(unsafe.Pointer(&v[0]), p, int64(4*n)); err != nil {
			panic(err)
		}
		return v
	}
	h := make([]uint16, n)
	if err := d.dtoh(unsafe.Pointer(&h[0]), p, int64(2*n)); err != nil {
		panic(err)
	}
	for i, b := range h {
		v[i] = half.BF16ToF32(b)
	}
	return v
}

func (d *dnnHost) write(p uint64, v []float32, bf16 bool) error {
	if !bf16 {
		return d.htod(p, unsafe.Pointer(&v[0]), int64(4*len(v)))
	}
	h := make([]uint16, len(v))
	for i, f := range v {
		h[i] = half.F32ToBF16(f)
	}
	return d.htod(p, unsafe.Pointer(&h[0]), int64(2*len(h)))
}

// directConv is conv2d by its definition: pass 0 adds into y, pass 1 into
// x (the input gradient from y, the output gradient), pass 2 into w.
func directConv(s *tensor.Conv2dShape, pass int, x, w, y []float32) {
	cg, og := s.C/s.Groups, s.O/s.Groups
	for n := range s.N {
		for o := range s.O {
			g := o / og
			for oy := range s.OH {
				for ox := range s.OW {
					yi := ((n*s.O+o)*s.OH+oy)*s.OW + ox
					for c := range cg {
						for ky := range s.KH {
							iy := oy*s.StrideH - s.PadTop + ky*s.DilationH
							if iy < 0 || iy >= s.H {
								continue
							}
							for kx := range s.KW {
								ix := ox*s.StrideW - s.PadLeft + kx*s.DilationW
								if ix < 0 || ix >= s.W {
									continue
								}
								xi := ((n*s.C+g*cg+c)*s.H+iy)*s.W + ix
								wi := ((o*cg+c)*s.KH+ky)*s.KW + kx
								switch pass {
								case 0:
									y[yi] += x[xi] * w[wi]
								case 1:
									x[xi] += y[yi] * w[wi]
								default:
									w[wi] += x[xi] * y[yi]
								}
							}
						}
					}
				}
			}
		}
	}
}

// convNetBF16 is convNet under bf16 autocast, run twice so that the second
// backward accumulates into the first's gradients (cuDNN's beta 1).
func convNetBF16(t *testing.T, dev tensor.Device) []*tensor.Tensor {
	t.Helper()
	rng := tensor.NewRNG(3)
	x := autograd.Param(tensor.Randn(rng, tensor.Float32, 3, 4, 9, 7).MustTo(dev))
	w := autograd.Param(tensor.Randn(rng, tensor.Float32, 6, 2, 3, 2).MustTo(dev))
	b := autograd.Param(tensor.Randn(rng, tensor.Float32, 6).MustTo(dev))
	p := autograd.ConvParams{Stride: [2]int{2, 1}, Padding: [2]int{1, 2}, Dilation: [2]int{1, 2}, Groups: 2,
		Precision: tensor.PrecisionBFloat16}
	var y *autograd.Variable
	for range 2 {
		y = autograd.Conv2d(x, w, b, p)
		dy := tensor.Randn(rng, tensor.Float32, y.Value.Shape()...)
		require.NoError(t, y.BackwardWith(dy.MustTo(dev)))
	}
	out := []*tensor.Tensor{y.Value, x.Grad, w.Grad, b.Grad}
	for i, v := range out {
		out[i] = v.MustTo(tensor.CPU())
	}
	return out
}

// Under bf16 autocast all three passes run on cuDNN in bfloat16, as
// torch's autocast runs them: narrowed operands, a bfloat16 result widened
// into the float32 tensor (added to it when a gradient accumulates). The
// results are the CPU's (bfloat16 products, float32 sums) up to the one
// rounding of each result to bfloat16.
func TestConvBF16RunsOnCUDNN(t *testing.T) {
	want := convNetBF16(t, tensor.CPU())
	_, g := newSimGPU(t, 0)
	d := &dnnHost{dnnSim: &dnnSim{simGPU: g, ws: 256}}
	c := &Context{dev: d}
	got := convNetBF16(t, c.Tensors())
	assert.Equal(t, 6, d.bf16Runs, "three passes, twice, all in bfloat16")
	assert.Zero(t, g.count("launch im2col_f32"), "nothing ran goddp's kernels")
	assert.Equal(t, 12, g.count("launch f32_to_bf16"), "two operands narrowed per pass")
	betas := map[int][]float32{}
	for _, r := range d.runs {
		assert.Zero(t, r.beta, "cuDNN writes a fresh bfloat16 result; the accumulation is in float32")
		betas[r.pass] = append(betas[r.pass], r.beta)
	}
	assert.Len(t, betas, 3)
	assert.Positive(t, g.count("launch axpy_f32"), "the second backward adds to the first's gradients")
	for i := range want {
		w, gv := want[i].F32(), got[i].F32()
		require.Len(t, gv, len(w))
		var worst, scale float64
		for j := range w {
			scale = max(scale, math.Abs(float64(w[j])))
		}
		for j := range w {
			// One rounding to bfloat16 (relative 2^-9) of each pass's
			// result, before the bias is added and two passes are
			// summed: bounded by the tensor's scale, not the element's.
			d := math.Abs(float64(w[j] - gv[j]))
			worst = max(worst, d)
			require.LessOrEqual(t, d, scale/128,
				"result %d element %d: %v, want %v", i, j, gv[j], w[j])
		}
		if i < 3 {
			assert.Positive(t, worst, "result %d: bfloat16's rounding shows", i)
		}
	}
}
