package nn

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// newConvNet is examples/cnn's network.
func newConvNet(rng *tensor.RNG) *Sequential {
	return NewSequential(
		NewConv2d(rng, 1, 32, 5, Padding(2)), NewReLU(), NewMaxPool2d(2),
		NewConv2d(rng, 32, 64, 5, Padding(2)), NewReLU(), NewMaxPool2d(2),
		NewFlatten(), NewLinear(rng, 3136, 1024), NewReLU(), NewDropout(rng, 0.4), NewLinear(rng, 1024, 10))
}

// TestConvNetMatchesTorch runs the whole convnet of examples/cnn against
// torch (testdata/nn/convnet.json from scripts/gen_fixtures_conv.py): the
// state dict's keys and shapes in torch's order, the loss, and every
// parameter's gradient (sums and 257 sampled elements).
func TestConvNetMatchesTorch(t *testing.T) {
	var fx struct {
		Labels    []int   `json:"labels"`
		Loss      float64 `json:"loss"`
		StateDict []struct {
			Key   string `json:"key"`
			Shape []int  `json:"shape"`
		} `json:"state_dict"`
		Grads []struct {
			Key       string    `json:"key"`
			Sum       float64   `json:"sum"`
			AbsSum    float64   `json:"abs_sum"`
			Positions []int     `json:"positions"`
			Values    []float64 `json:"values"`
		} `json:"grads"`
	}
	loadFixture(t, "convnet.json", &fx)
	model := newConvNet(tensor.NewRNG(1))
	sd := StateDict(model)
	require.Len(t, sd.Keys(), len(fx.StateDict))
	for i, e := range fx.StateDict {
		require.Equal(t, e.Key, sd.Keys()[i])
		v, _ := sd.Get(e.Key)
		require.Equal(t, e.Shape, v.Shape(), e.Key)
	}
	fan := map[string]float64{"0": 25, "3": 800, "7": 3136, "10": 1024}
	for k, np := range model.NamedParameters() {
		d := np.Param.Value.F32()
		layer, _, _ := strings.Cut(np.Name, ".")
		f := fan[layer]
		for i := range d {
			d[i] = float32(math.Sin(0.7*float64(i)+float64(k)) / math.Sqrt(f))
		}
	}
	x := tensor.New(tensor.Float32, 3, 1, 28, 28)
	for i := range x.F32() {
		x.F32()[i] = float32(float64(i*7919%1000) / 1000)
	}
	Eval(model)
	loss := autograd.CrossEntropy(model.Forward(autograd.Const(x)), fx.Labels, autograd.ReductionMean)
	require.InDelta(t, fx.Loss, loss.Value.Item(), 1e-4*math.Max(1, math.Abs(fx.Loss)))
	require.NoError(t, loss.Backward())
	params := model.NamedParameters()
	for i, g := range fx.Grads {
		require.Equal(t, g.Key, params[i].Name)
		got := params[i].Param.Grad.F32()
		var sum, abs float64
		for _, v := range got {
			sum += float64(v)
			abs += math.Abs(float64(v))
		}
		require.InDelta(t, g.AbsSum, abs, 1e-3*g.AbsSum+1e-6, "%s: sum of |grad|", g.Key)
		require.InDelta(t, g.Sum, sum, 1e-3*g.AbsSum+1e-6, "%s: sum of grad", g.Key)
		scale := g.AbsSum / float64(len(got))
		for j, pos := range g.Positions {
			require.InDelta(t, g.Values[j], float64(got[pos]), 1e-3*math.Abs(g.Values[j])+1e-3*scale, "%s element %d", g.Key, pos)
		}
	}
}

func TestConv2dLayerInit(t *testing.T) {
	c := NewConv2d(tensor.NewRNG(3), 8, 6, 3, Groups(2), Stride(2, 1))
	require.Equal(t, []int{6, 4, 3, 3}, c.Weight.Value.Shape())
	require.Equal(t, []int{6}, c.Bias.Value.Shape())
	require.Equal(t, 8, c.InChannels())
	bound := 1 / math.Sqrt(4*9)
	var maxAbs float64
	for _, v := range append(append([]float32(nil), c.Weight.Value.F32()...), c.Bias.Value.F32()...) {
		maxAbs = math.Max(maxAbs, math.Abs(float64(v)))
	}
	require.LessOrEqual(t, maxAbs, bound)
	require.Greater(t, maxAbs, 0.8*bound, "kaiming_uniform(a=√5) spans U(-1/√fan_in, 1/√fan_in)")
	nb := NewConv2d(tensor.NewRNG(3), 3, 4, 1, NoBias(), KernelSize(1, 3))
	require.Nil(t, nb.Bias)
	require.Equal(t, []int{4, 3, 1, 3}, nb.Weight.Value.Shape())
	names := []string{}
	for _, np := range c.NamedParameters() {
		names = append(names, np.Name)
	}
	require.Equal(t, []string{"weight", "bias"}, names)

	y := NewConv2d(tensor.NewRNG(1), 2, 3, 4, PaddingSame(), Dilation(2)).Forward(autograd.Const(tensor.New(tensor.Float32, 1, 2, 7, 6)))
	require.Equal(t, []int{1, 3, 7, 6}, y.Value.Shape(), "padding same keeps H, W")

	require.Panics(t, func() { NewConv2d(tensor.NewRNG(1), 3, 4, 3, Groups(2)) })
	require.Panics(t, func() { NewConv2d(tensor.NewRNG(1), 3, 4, 3, CountIncludePad(false)) }, "not a Conv2d option")
	require.Panics(t, func() { NewConv2d(tensor.NewRNG(1), 3, 4, 3, PaddingSame(), Stride(2)) })
	require.Panics(t, func() { NewMaxPool2d(2, Groups(2)) })
}

func TestPoolAndFlattenLayers(t *testing.T) {
	x := autograd.Const(tensor.Arange(tensor.Float32, 0, 2*3*5*4, 1).Reshape(2, 3, 5, 4))
	require.Equal(t, []int{2, 3, 2, 2}, NewMaxPool2d(2).Forward(x).Value.Shape())
	require.Equal(t, []int{2, 3, 3, 2}, NewMaxPool2d(3, Stride(2), Padding(1)).Forward(x).Value.Shape())
	mp := NewMaxPool2d(2).Forward(x).Value.F32()
	require.Equal(t, float32(5), mp[0], "max of the first 2x2 window {0,1,4,5}")
	avg := NewAvgPool2d(2, Stride(2, 1)).Forward(x)
	require.Equal(t, []int{2, 3, 2, 3}, avg.Value.Shape())
	require.InDelta(t, 2.5, float64(avg.Value.F32()[0]), 1e-6)
	excl := NewAvgPool2d(3, Stride(2), Padding(1), CountIncludePad(false)).Forward(x).Value.F32()
	incl := NewAvgPool2d(3, Stride(2), Padding(1)).Forward(x).Value.F32()
	require.InDelta(t, (0+1+4+5)/4.0, float64(excl[0]), 1e-6)
	require.InDelta(t, (0+1+4+5)/9.0, float64(incl[0]), 1e-6)
	require.Equal(t, []int{2, 3, 1, 1}, NewAdaptiveAvgPool2d(1).Forward(x).Value.Shape())
	require.Equal(t, []int{2, 3, 2, 3}, NewAdaptiveAvgPool2d(2, 3).Forward(x).Value.Shape())
	require.Equal(t, []int{2, 60}, NewFlatten().Forward(x).Value.Shape())
	require.Equal(t, []int{2, 15, 4}, (&Flatten{StartDim: 1, EndDim: 2}).Forward(x).Value.Shape())
	require.Equal(t, []int{120}, (&Flatten{StartDim: 0, EndDim: -1}).Forward(x).Value.Shape())
}

func TestBatchNorm2dLayer(t *testing.T) {
	bn := NewBatchNorm2d(3)
	keys := StateDict(bn).Keys()
	require.Equal(t, []string{"weight", "bias", "running_mean", "running_var", "num_batches_tracked"}, keys)
	x := tensor.Randn(tensor.NewRNG(2), tensor.Float32, 4, 3, 5, 5)
	y := bn.Forward(autograd.Const(x))
	require.Equal(t, 1.0, bn.NumBatchesTracked.Item())
	// Each channel of the output has mean ~0 and (biased) variance ~1.
	yd := y.Value.F32()
	for ch := 0; ch < 3; ch++ {
		var s, ss float64
		for n := 0; n < 4; n++ {
			for _, v := range yd[(n*3+ch)*25 : (n*3+ch+1)*25] {
				s += float64(v)
				ss += float64(v) * float64(v)
			}
		}
		require.InDelta(t, 0, s/100, 1e-5)
		require.InDelta(t, 1, ss/100, 1e-3)
	}
	require.NotEqual(t, float32(0), bn.RunningMean.F32()[0], "running mean updated")
	Eval(bn)
	bn.Forward(autograd.Const(x))
	require.Equal(t, 1.0, bn.NumBatchesTracked.Item(), "eval does not count batches")
	require.Panics(t, func() { bn.Forward(autograd.Const(tensor.New(tensor.Float32, 4, 3))) }, "BatchNorm2d wants 4-d input")
}

// A Sequential runs Conv2d+ReLU+MaxPool2d as one op
// (autograd.Conv2dReLUMaxPool2d, where the engine fuses the ReLU into the
// convolution) with the outputs and gradients of the layers one by one.
func TestSequentialFusesConvReLU(t *testing.T) {
	rng := tensor.NewRNG(11)
	conv, pool := NewConv2d(rng, 2, 4, 3, Padding(1)), NewMaxPool2d(2)
	seq := NewSequential(conv, NewReLU(), pool)
	x := tensor.Randn(tensor.NewRNG(12), tensor.Float32, 3, 2, 8, 8)
	gy := tensor.Randn(tensor.NewRNG(13), tensor.Float32, 3, 4, 4, 4)

	out := seq.Forward(autograd.Const(x))
	require.NoError(t, out.BackwardWith(gy))
	fusedW, fusedB := conv.Weight.Grad.Clone(), conv.Bias.Grad.Clone()
	conv.Weight.Grad, conv.Bias.Grad = nil, nil

	ref := pool.Forward(autograd.ReLU(conv.Forward(autograd.Const(x))))
	require.NoError(t, ref.BackwardWith(gy))
	require.Equal(t, ref.Value.F32(), out.Value.F32())
	require.Equal(t, conv.Weight.Grad.F32(), fusedW.F32())
	require.Equal(t, conv.Bias.Grad.F32(), fusedB.F32())
	if autograd.Conv2dReLU(autograd.Const(x), conv.Weight, conv.Bias, conv.Params).Creator().Name() == "Conv2dReLU" {
		require.Equal(t, "Conv2dReLUMaxPool2d", out.Creator().Name())
	}
}
