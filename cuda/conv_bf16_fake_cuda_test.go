//go:build cuda

package cuda

import (
	"math"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"

	"github.com/goddp/goddp/tensor"
)

// dnnHost is dnnSim whose passes compute, on the host, what cuDNN's
// would: a direct convolution of the float32 operands, result = conv +
// beta*result. It counts the passes with s.BF16 and those of them whose
// operands were not bfloat16 values.
type dnnHost struct {
	*dnnSim
	bf16Runs, unrounded int
}

func (d *dnnHost) dnnConv(pass int, s *tensor.Conv2dShape, o dnnOpts, out, a, b uint64, beta float32, ws uint64, wsBytes int64) error {
	if err := d.dnnSim.dnnConv(pass, s, o, out, a, b, beta, ws, wsBytes); err != nil {
		return err
	}
	nx, nw, ny := s.N*s.C*s.H*s.W, s.O*(s.C/s.Groups)*s.KH*s.KW, s.N*s.O*s.OH*s.OW
	sizes := [3][3]int{{ny, nx, nw}, {nx, ny, nw}, {nw, nx, ny}}[pass] // out, a, b
	av, bv, ov := d.read(a, sizes[1]), d.read(b, sizes[2]), make([]float32, sizes[0])
	if s.BF16 {
		d.bf16Runs++
		for _, v := range append(append([]float32(nil), av...), bv...) {
			if math.Float32bits(v)&0xffff != 0 {
				d.unrounded++
				break
			}
		}
	}
	x, w, y := av, bv, ov // forward
	switch pass {
	case 1:
		x, w, y = ov, bv, av
	case 2:
		x, w, y = av, ov, bv
	}
	directConv(s, pass, x, w, y)
	if beta != 0 {
		old := d.read(out, sizes[0])
		for i := range ov {
			ov[i] += beta * old[i]
		}
	}
	return d.htod(out, unsafe.Pointer(&ov[0]), int64(4*len(ov)))
}

func (d *dnnHost) read(p uint64, n int) []float32 {
	v := make([]float32, n)
	if err := d.dtoh(unsafe.Pointer(&v[0]), p, int64(4*n)); err != nil {
		panic(err)
	}
	return v
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

// Under bf16 autocast all three passes run on cuDNN, on operands rounded
// to bfloat16 values in float32 (which TF32 tensor cores multiply
// exactly), into the float32 result (added to it when a gradient
// accumulates): the CPU's bf16 convolution, up to the order of the sums.
func TestConvBF16RunsOnCUDNN(t *testing.T) {
	want := convNetRuns(t, tensor.CPU(), tensor.PrecisionBFloat16, 2)
	_, g := newSimGPU(t, 0)
	d := &dnnHost{dnnSim: &dnnSim{simGPU: g, ws: 256}}
	c := &Context{dev: d}
	got := convNetRuns(t, c.Tensors(), tensor.PrecisionBFloat16, 2)
	assert.Equal(t, 6, d.bf16Runs, "three passes, twice, on cuDNN")
	assert.Zero(t, d.unrounded, "every operand rounded to bfloat16")
	assert.Zero(t, g.count("launch im2col_f32"), "nothing ran goddp's kernels")
	assert.Equal(t, 12, g.count("launch round_bf16_f32"), "two operands rounded per pass")
	var betas []float32
	for _, r := range d.runs {
		betas = append(betas, r.beta)
	}
	assert.Equal(t, []float32{0, 0, 0, 0, 1, 1}, betas, "the second backward adds to the first's gradients")
	near(t, want[:3], got[:3])
	// The bias gradient sums the float32 output gradient on the device;
	// the CPU's oneDNN sums it in bfloat16 precision.
	for j, w := range want[3].F32() {
		assert.InDelta(t, w, got[3].F32()[j], math.Abs(float64(w))/128, "bias gradient %d", j)
	}
	// The float32 convolution is farther: the rounding is not a no-op.
	f32 := convNet(t, tensor.CPU())
	assert.Greater(t, math.Abs(float64(f32[0].F32()[0]-got[0].F32()[0])), 1e-4)
}
