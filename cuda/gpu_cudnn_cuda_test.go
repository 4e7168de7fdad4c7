//go:build cuda

package cuda_test

import (
	"math"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/cuda"
	"github.com/goddp/goddp/cuda/kernels"
	"github.com/goddp/goddp/tensor"
)

// cudnnOrSkip is newContext for the tests that need cuDNN: without one, the
// GPU kit (which finds the Python wheels' cuDNN) fails, elsewhere it skips.
func cudnnOrSkip(t *testing.T) *cuda.Context {
	t.Helper()
	c := newContext(t)
	inf := c.Info()
	t.Logf("cuDNN: %q version %d (%v); kernels: %s", inf.CUDNNPath, inf.CUDNNVersion, inf.CUDNNError, inf.Kernels)
	if inf.CUDNNError != nil {
		if os.Getenv("GODDP_GPU_KIT") == "1" {
			t.Fatalf("the kit found no cuDNN: %v", inf.CUDNNError)
		}
		t.Skipf("no cuDNN: %v", inf.CUDNNError)
	}
	return c
}

// convTwice runs conv2d(x, w, b) forward and backward on c, with cuDNN on
// or off, twice, so that the second backward accumulates into the first's
// gradients (cuDNN's beta 1); it returns y and the gradients of x, w and b
// on the host, and the engine that ran.
func convTwice(t *testing.T, c *cuda.Context, cudnn bool, x, w, b *tensor.Tensor, p autograd.ConvParams) ([]*tensor.Tensor, string) {
	t.Helper()
	c.SetCUDNN(cudnn)
	dev := c.Tensors()
	vs := []*autograd.Variable{autograd.Param(x.MustTo(dev)), autograd.Param(w.MustTo(dev)), autograd.Param(b.MustTo(dev))}
	var y *autograd.Variable
	for range 2 {
		y = autograd.Conv2d(vs[0], vs[1], vs[2], p)
		dy := tensor.Randn(tensor.NewRNG(5), tensor.Float32, y.Value.Shape()...)
		require.NoError(t, y.BackwardWith(dy.MustTo(dev)))
	}
	out := []*tensor.Tensor{y.Value.MustTo(tensor.CPU())}
	for _, v := range vs {
		out = append(out, v.Grad.MustTo(tensor.CPU()))
	}
	return out, c.ConvEngine()
}

// cuDNN's conv2d forward, backward data and backward filter against
// goddp's own kernels (im2col, cuBLAS, col2im) on the same GPU, over odd
// shapes with stride, padding, dilation and groups, each run twice so that
// the second backward accumulates into the first's gradients (cuDNN's beta
// 1), within 1e-4 relative. TF32 is off, so both are float32 throughout.
// torch's padding="same" with an even kernel pads unevenly, which cuDNN
// cannot express: that shape must run goddp's kernels, and still match.
func TestGPUCudnnConv(t *testing.T) {
	c := cudnnOrSkip(t)
	require.False(t, c.AllowTF32())
	tests := []struct {
		name      string
		x, w      []int
		p         autograd.ConvParams
		wantCUDNN bool
	}{
		{"stride 2x1 pad 1x2 dilation 1x2", []int{3, 5, 17, 13}, []int{7, 5, 3, 3},
			autograd.ConvParams{Stride: [2]int{2, 1}, Padding: [2]int{1, 2}, Dilation: [2]int{1, 2}}, true},
		{"groups 3, 3x2 kernel", []int{2, 6, 11, 9}, []int{9, 2, 3, 2},
			autograd.ConvParams{Stride: [2]int{1, 2}, Padding: [2]int{2, 0}, Dilation: [2]int{2, 1}, Groups: 3}, true},
		{"depthwise 5x5 stride 2", []int{4, 8, 15, 15}, []int{8, 1, 5, 5},
			autograd.ConvParams{Stride: [2]int{2, 2}, Padding: [2]int{2, 2}, Groups: 8}, true},
		{"1x1", []int{5, 7, 6, 10}, []int{3, 7, 1, 1}, autograd.ConvParams{}, true},
		{"convnet layer", []int{16, 32, 28, 28}, []int{64, 32, 3, 3}, autograd.ConvParams{Padding: [2]int{1, 1}}, true},
		{"same padding, even kernel (uneven padding)", []int{2, 3, 8, 7}, []int{4, 3, 4, 2}, autograd.ConvParams{Same: true}, false},
	}
	rng := tensor.NewRNG(27)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := tensor.Randn(rng, tensor.Float32, tc.x...)
			w := tensor.Randn(rng, tensor.Float32, tc.w...)
			b := tensor.Randn(rng, tensor.Float32, tc.w[0])
			mine, own := convTwice(t, c, false, x, w, b, tc.p)
			got, engine := convTwice(t, c, true, x, w, b, tc.p)
			c.SetCUDNN(true)
			t.Logf("engine: %s", engine)
			assert.Contains(t, own, "turned off")
			if tc.wantCUDNN {
				assert.True(t, strings.HasPrefix(engine, "cuDNN "), "every pass on cuDNN: %s", engine)
			} else {
				assert.Contains(t, engine, "goddp's im2col and cuBLAS")
			}
			for i, name := range []string{"y", "dx", "dw", "db"} {
				closeTo(t, mine[i], got[i], 1e-4, name)
			}
		})
	}
}

// Under bf16 autocast cuDNN runs all three passes on operands rounded to
// bfloat16 values, with TF32 allowed (a bfloat16 value is exact in TF32),
// whatever the context's TF32 switch: against goddp's own bf16 kernels
// (im2col and cuBLAS's bf16 GEMM) on the same GPU, which compute the same
// products, within 1e-4 relative; and the float32 convolution differs
// from both (the rounding happened).
func TestGPUCudnnConvBF16(t *testing.T) {
	c := cudnnOrSkip(t)
	require.False(t, c.AllowTF32())
	tests := []struct {
		name string
		x, w []int
		p    autograd.ConvParams
	}{
		{"stride 2x1 pad 1x2 dilation 1x2", []int{3, 5, 17, 13}, []int{7, 5, 3, 3},
			autograd.ConvParams{Stride: [2]int{2, 1}, Padding: [2]int{1, 2}, Dilation: [2]int{1, 2}}},
		{"groups 3, 3x2 kernel", []int{2, 6, 11, 9}, []int{9, 2, 3, 2},
			autograd.ConvParams{Stride: [2]int{1, 2}, Padding: [2]int{2, 0}, Dilation: [2]int{2, 1}, Groups: 3}},
		{"convnet layer 1", []int{64, 1, 28, 28}, []int{32, 1, 5, 5}, autograd.ConvParams{Padding: [2]int{2, 2}}},
		{"convnet layer 2", []int{64, 32, 14, 14}, []int{64, 32, 5, 5}, autograd.ConvParams{Padding: [2]int{2, 2}}},
	}
	rng := tensor.NewRNG(29)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := tensor.Randn(rng, tensor.Float32, tc.x...)
			w := tensor.Randn(rng, tensor.Float32, tc.w...)
			b := tensor.Randn(rng, tensor.Float32, tc.w[0])
			bf := tc.p
			bf.Precision = tensor.PrecisionBFloat16
			mine, _ := convTwice(t, c, false, x, w, b, bf)
			got, engine := convTwice(t, c, true, x, w, b, bf)
			f32, _ := convTwice(t, c, true, x, w, b, tc.p)
			c.SetCUDNN(true)
			t.Logf("engine: %s", engine)
			assert.True(t, strings.HasPrefix(engine, "cuDNN "), "every pass on cuDNN: %s", engine)
			for i, name := range []string{"y", "dx", "dw", "db"} {
				closeTo(t, mine[i], got[i], 1e-4, name)
			}
			var far float64
			for i, v := range f32[0].F32() {
				far = max(far, math.Abs(float64(v-got[0].F32()[i])))
			}
			assert.Greater(t, far, 1e-3, "y in float32 should differ from bf16's")
		})
	}
}

// The TF32 switch reaches cuBLAS: with it off a 512×512×512 product
// matches float64 on the host to float32's precision (errors about 1e-6 of
// the sums' scale, √n); allowed, it runs on TF32 tensor cores (Ampere and
// later), about 1e-3 off.
func TestGPUTF32Switch(t *testing.T) {
	c := newContext(t)
	const n = 512
	rng := tensor.NewRNG(3)
	a, b := tensor.Randn(rng, tensor.Float32, n, n), tensor.Randn(rng, tensor.Float32, n, n)
	af, bf := a.F32(), b.F32()
	want := make([]float64, n*n)
	for i := range n {
		for k := range n {
			aik := float64(af[i*n+k])
			for j := range n {
				want[i*n+j] += aik * float64(bf[k*n+j])
			}
		}
	}
	worst := func() float64 {
		out := tensor.MatMul(onGPU(t, c, a), onGPU(t, c, b))
		var w float64
		for i, v := range host(t, out) {
			w = max(w, math.Abs(float64(v)-want[i])/math.Sqrt(n)) // the sum's scale: √n
		}
		return w
	}
	off := worst()
	require.NoError(t, c.SetAllowTF32(true))
	on := worst()
	require.NoError(t, c.SetAllowTF32(false))
	again := worst()
	t.Logf("worst error / √n: TF32 off %.2e, on %.2e, off again %.2e (%s)", off, on, again, c.Info().Name)
	assert.Less(t, off, 3e-5)
	assert.Less(t, again, 3e-5)
	assert.Greater(t, on, 1e-4, "TF32 allowed but the product is float32-exact: the math mode did not reach cuBLAS")
}

// goddp's kernels load as the machine code built for the GPU when this
// build has it (sm_90 on an H100, sm_80 on an A100), else as PTX for the
// driver's JIT, and Info says which.
func TestGPUKernelImage(t *testing.T) {
	c := newContext(t)
	inf := c.Info()
	t.Logf("compute capability %d.%d, cubins for %v: %s", inf.Capability[0], inf.Capability[1], kernels.Arches(), inf.Kernels)
	_, arch, ok, err := kernels.Cubin(inf.Capability[0], inf.Capability[1])
	require.NoError(t, err)
	if ok {
		assert.Equal(t, arch+" machine code", inf.Kernels)
	} else {
		assert.True(t, strings.HasPrefix(inf.Kernels, "PTX, JIT-compiled"), inf.Kernels)
	}
}
