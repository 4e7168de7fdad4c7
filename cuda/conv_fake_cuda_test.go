//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/cuda/devtensor"
	"github.com/goddp/goddp/tensor"
)

// dnnSim is simGPU with a stand-in cuDNN: it records what the Context asks
// of cuDNN and runs nothing, or refuses as told (a library that did not
// load, a pass it has no algorithm for).
type dnnSim struct {
	*simGPU
	loadErr error        // cudnn(): why no library loaded
	refuse  map[int]bool // passes whose workspace query fails
	ws      int64        // workspace bytes every pass asks for

	mu   sync.Mutex
	runs []dnnRun
}

type dnnRun struct {
	pass      int
	o         dnnOpts
	beta      float32
	ws        uint64
	wsBytes   int64
	out, a, b uint64
}

func (d *dnnSim) cudnn() (string, int, error) {
	if d.loadErr != nil {
		return "", 0, d.loadErr
	}
	return "/fake/libcudnn.so.9", 91900, nil
}

func (d *dnnSim) dnnWorkspace(pass int, s *tensor.Conv2dShape, o dnnOpts) (int64, error) {
	if d.refuse[pass] {
		return 0, fmt.Errorf("%w: choosing an algorithm for conv2d %s: no algorithm (code -3)", ErrCUDNN, passName(pass))
	}
	return d.ws, nil
}

func (d *dnnSim) dnnConv(pass int, s *tensor.Conv2dShape, o dnnOpts, out, a, b uint64, beta float32, ws uint64, wsBytes int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.runs = append(d.runs, dnnRun{pass, o, beta, ws, wsBytes, out, a, b})
	return nil
}

// convNet runs a grouped, strided, dilated, padded convolution forward and
// backward on dev and returns y and the gradients of x, w and b on the host.
func convNet(t *testing.T, dev tensor.Device) []*tensor.Tensor {
	return convNetRuns(t, dev, tensor.PrecisionFloat32, 1)
}

// convNetRuns is convNet in precision prec, run runs times, each backward
// accumulating into the gradients of the ones before (cuDNN's beta 1).
func convNetRuns(t *testing.T, dev tensor.Device, prec tensor.Precision, runs int) []*tensor.Tensor {
	t.Helper()
	rng := tensor.NewRNG(3)
	x := autograd.Param(tensor.Randn(rng, tensor.Float32, 3, 4, 9, 7).MustTo(dev))
	w := autograd.Param(tensor.Randn(rng, tensor.Float32, 6, 2, 3, 2).MustTo(dev))
	b := autograd.Param(tensor.Randn(rng, tensor.Float32, 6).MustTo(dev))
	p := autograd.ConvParams{Stride: [2]int{2, 1}, Padding: [2]int{1, 2}, Dilation: [2]int{1, 2}, Groups: 2, Precision: prec}
	var y *autograd.Variable
	for range runs {
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

func near(t *testing.T, want, got []*tensor.Tensor) {
	t.Helper()
	for i := range want {
		w, g := want[i].F32(), got[i].F32()
		require.Len(t, g, len(w))
		for j := range w {
			if math.Abs(float64(w[j]-g[j])) > 1e-4*max(1, math.Abs(float64(w[j]))) {
				t.Fatalf("result %d element %d: %v, want %v", i, j, g[j], w[j])
			}
		}
	}
}

// Without cuDNN (a device with none, or a library that did not load, or
// cuDNN turned off) convolutions run goddp's own kernels and give the CPU's
// numbers, and ConvEngine says so and why.
func TestConvWithoutCUDNNRunsOwnKernels(t *testing.T) {
	want := convNet(t, tensor.CPU())
	tests := []struct {
		name string
		dev  func(*simGPU) device
		off  bool
		why  string
	}{
		{"no binding", func(g *simGPU) device { return g }, false, "no cuDNN binding"},
		{"library absent", func(g *simGPU) device {
			return &dnnSim{simGPU: g, loadErr: fmt.Errorf("%w: tried libcudnn.so.9: cannot open shared object file", ErrNoCUDNN)}
		}, false, "libcudnn.so.9: cannot open"},
		{"turned off", func(g *simGPU) device { return &dnnSim{simGPU: g} }, true, "turned off"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, g := newSimGPU(t, 0)
			c := &Context{dev: tc.dev(g)}
			c.SetCUDNN(!tc.off)
			before := c.ConvEngine()
			assert.Contains(t, before, "goddp's im2col and cuBLAS")
			assert.Contains(t, before, tc.why)
			var logged []string
			c.OnConvEngine(func(s string) { logged = append(logged, s) })
			near(t, want, convNet(t, c.Tensors()))
			assert.Positive(t, g.count("launch im2col_f32"))
			assert.Equal(t, before, c.ConvEngine(), "every pass ran goddp's kernels")
			assert.Len(t, logged, 3, "one line per pass, the first time: %q", logged)
			if d, ok := c.dev.(*dnnSim); ok {
				assert.Empty(t, d.runs)
			}
		})
	}
}

// With cuDNN, all three passes go to it, with a workspace from the
// caching allocator; a pass cuDNN refuses runs goddp's kernels, and
// ConvEngine names the engine of each pass.
func TestConvRunsOnCUDNN(t *testing.T) {
	_, g := newSimGPU(t, 0)
	d := &dnnSim{simGPU: g, ws: 1000, refuse: map[int]bool{2: true}}
	c := &Context{dev: d}
	assert.Equal(t, "cuDNN 9.19.0 (/fake/libcudnn.so.9)", c.ConvEngine())
	dev := c.Tensors()
	rng := tensor.NewRNG(1)
	x := tensor.Randn(rng, tensor.Float32, 2, 4, 5, 5).MustTo(dev)
	w := tensor.Randn(rng, tensor.Float32, 6, 2, 3, 3).MustTo(dev)
	s := &tensor.Conv2dShape{N: 2, C: 4, H: 5, W: 5, O: 6, KH: 3, KW: 3, StrideH: 1, StrideW: 1, PadTop: 1, PadLeft: 1,
		PadBottom: 1, PadRight: 1, DilationH: 1, DilationW: 1, Groups: 2, OH: 5, OW: 5}
	y := tensor.Conv2d(x, w, nil, s)
	dw := tensor.MustZerosOn(dev, 6, 2, 3, 3)
	grads := tensor.Conv2dBackward(y, x, w, [3]bool{true, true, false}, [3]*tensor.Tensor{nil, dw, nil}, s)
	require.NotNil(t, grads[0])
	require.NoError(t, dev.Synchronize())

	require.Len(t, d.runs, 2, "forward and backward data on cuDNN")
	fwd, data := d.runs[0], d.runs[1]
	assert.Equal(t, 0, fwd.pass)
	assert.Equal(t, float32(0), fwd.beta)
	assert.Equal(t, 1, data.pass)
	assert.Equal(t, float32(0), data.beta, "a fresh dx is overwritten")
	for _, r := range d.runs {
		assert.NotZero(t, r.ws, "a workspace from the caching allocator")
		assert.Equal(t, int64(1000), r.wsBytes)
		assert.Equal(t, dnnOpts{}, r.o)
	}
	xm, _, _ := devtensor.MemOf(x)
	wm, _, _ := devtensor.MemOf(w)
	assert.Equal(t, xm.Ptr(), fwd.a)
	assert.Equal(t, wm.Ptr(), fwd.b)
	assert.Equal(t, wm.Ptr(), data.b)
	assert.Positive(t, g.count("launch im2col_f32"), "backward filter, refused, ran im2col")
	assert.Zero(t, g.count("launch col2im_f32"), "backward data ran on cuDNN")
	e := c.ConvEngine()
	assert.True(t, strings.HasPrefix(e, "forward: cuDNN 9.19.0"), e)
	assert.Contains(t, e, "backward data: cuDNN 9.19.0")
	assert.Contains(t, e, "backward filter: goddp's im2col and cuBLAS (cuda: cuDNN error: choosing an algorithm")

	// A gradient accumulated in place is cuDNN's beta 1; TF32, once
	// allowed, and timing the algorithms reach cuDNN's plans.
	require.NoError(t, c.SetAllowTF32(true))
	c.SetCUDNNBenchmark(true)
	d.refuse = nil
	d.runs = nil
	tensor.Conv2dBackward(y, x, w, [3]bool{true, true, false}, [3]*tensor.Tensor{grads[0], dw, nil}, s)
	require.Len(t, d.runs, 2)
	for _, r := range d.runs {
		assert.Equal(t, float32(1), r.beta, "pass %d", r.pass)
		assert.Equal(t, dnnOpts{tf32: true, benchmark: true}, r.o, "pass %d", r.pass)
	}
	assert.Equal(t, []int{2, 1}, []int{d.runs[0].pass, d.runs[1].pass})
}

// The cuDNN search at the dlopen level: GODDP_CUDNN_LIBRARY is the one
// candidate when set, and a file that is missing, or is not cuDNN, leaves
// the device without one (ErrNoCUDNN, naming what was tried), which only
// sends convolutions to goddp's kernels.
// On cuDNN the forward's bias is the channel-bias kernel after the
// library's pass, and Conv2dReLU, whose ReLU the library does not fuse,
// runs the pass once (the fused request queues nothing) and then ReLU in
// place; the backward's bias gradient goes with the filter pass.
func TestConvOnCUDNNAddsBiasAndReLU(t *testing.T) {
	_, g := newSimGPU(t, 0)
	d := &dnnSim{simGPU: g}
	dev := (&Context{dev: d}).Tensors()
	rng := tensor.NewRNG(2)
	x := tensor.Randn(rng, tensor.Float32, 2, 3, 5, 5).MustTo(dev)
	w := tensor.Randn(rng, tensor.Float32, 4, 3, 3, 3).MustTo(dev)
	b := tensor.Randn(rng, tensor.Float32, 4).MustTo(dev)
	s := &tensor.Conv2dShape{N: 2, C: 3, H: 5, W: 5, O: 4, KH: 3, KW: 3, StrideH: 1, StrideW: 1, PadTop: 1, PadLeft: 1,
		PadBottom: 1, PadRight: 1, DilationH: 1, DilationW: 1, Groups: 1, OH: 5, OW: 5}
	tensor.Conv2d(x, w, b, s)
	tensor.Conv2dReLU(x, w, b, s)
	y := tensor.Conv2dReLU(x, w, nil, s)
	grads := tensor.Conv2dBackward(y, x, w, [3]bool{false, true, true}, [3]*tensor.Tensor{}, s)
	require.NoError(t, dev.Synchronize())
	require.Len(t, d.runs, 4, "three forwards and the filter pass on cuDNN")
	assert.Equal(t, []int{0, 0, 0, 2}, []int{d.runs[0].pass, d.runs[1].pass, d.runs[2].pass, d.runs[3].pass})
	assert.Equal(t, 2, g.count("launch add_channel_bias_f32"), "the two forwards with a bias")
	assert.Equal(t, 2, g.count("launch relu_f32"), "the two Conv2dReLU")
	assert.Equal(t, 1, g.count("launch sum_channels_part_f32"), "db with the filter pass")
	assert.Zero(t, g.count("launch im2col_f32"))
	require.NotNil(t, grads[1])
	require.NotNil(t, grads[2])
	assert.Nil(t, grads[0])
}

func TestCUDNNLoadFailures(t *testing.T) {
	t.Setenv("GODDP_CUDNN_LIBRARY", "/nonexistent/libcudnn.so.9")
	_, _, err := findCUDNN()
	require.ErrorIs(t, err, ErrNoCUDNN)
	assert.Contains(t, err.Error(), "/nonexistent/libcudnn.so.9")

	t.Setenv("GODDP_CUDNN_LIBRARY", "libm.so.6") // loads, but has no cuDNN symbols
	_, _, err = findCUDNN()
	require.ErrorIs(t, err, ErrNoCUDNN)
	assert.Contains(t, err.Error(), "symbol cudnnGetVersion missing")
}

func TestCUDNNVersion(t *testing.T) {
	assert.Equal(t, "9.19.0", dnnVersion(91900))
	assert.Equal(t, "8.9.7", dnnVersion(8907))
}

var (
	_ dnnDevice = (*dnnSim)(nil)
	_ dnnDevice = (*dnnHost)(nil)
)
