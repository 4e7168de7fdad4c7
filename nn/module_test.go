package nn

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

func names[T any](xs []T, name func(T) string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = name(x)
	}
	return out
}

func paramNames(m Module) []string {
	return names(m.NamedParameters(), func(p NamedParameter) string { return p.Name })
}

func bufferNames(m Module) []string {
	return names(m.NamedBuffers(), func(b NamedBuffer) string { return b.Name })
}

// torchModel is the fixture's Sequential(Linear(3,4), BatchNorm1d(4), ReLU(), Linear(4,2)).
func torchModel(rng *tensor.RNG) *Sequential {
	return NewSequential(NewLinear(rng, 3, 4), NewBatchNorm1d(4), NewReLU(), NewLinear(rng, 4, 2))
}

func TestNamesAndOrderMatchTorch(t *testing.T) {
	var fx struct {
		StateDictKeys []string `json:"state_dict_keys"`
		ParamNames    []string `json:"param_names"`
		BufferNames   []string `json:"buffer_names"`
	}
	loadFixture(t, "module.json", &fx)
	m := torchModel(tensor.NewRNG(0))
	require.Equal(t, fx.ParamNames, paramNames(m))
	require.Equal(t, fx.BufferNames, bufferNames(m))
	require.Equal(t, fx.StateDictKeys, StateDict(m).Keys())
}

// net is a custom module built on Container, nesting a Sequential.
type net struct {
	Container
	emb  *Embedding
	body *Sequential
	head *Linear
}

func newNet(rng *tensor.RNG) *net {
	n := &net{
		emb:  NewEmbedding(rng, 10, 4),
		body: NewSequential(NewLinear(rng, 4, 8), NewGELU(), NewLayerNorm(8)),
		head: NewLinear(rng, 8, 3),
	}
	scale := autograd.Param(tensor.New(tensor.Float32, 1))
	n.RegisterParameter("scale", scale)
	n.RegisterModule("emb", n.emb)
	n.RegisterModule("net", n.body)
	n.RegisterModule("head", n.head)
	return n
}

func TestContainerNames(t *testing.T) {
	n := newNet(tensor.NewRNG(0))
	require.Equal(t, []string{"scale", "emb.weight", "net.0.weight", "net.0.bias", "net.2.weight", "net.2.bias",
		"head.weight", "head.bias"}, paramNames(n))
	require.Equal(t, paramNames(n), StateDict(n).Keys())
	require.Len(t, Parameters(n), 8)

	// Weight tying: the shared parameter is listed once, under its first name,
	// but the state dict has both keys, as in torch.
	tied := &net{}
	a := NewLinear(tensor.NewRNG(1), 2, 2)
	b := NewLinearFrom(a.Weight.Value, nil)
	b.Weight = a.Weight
	tied.RegisterModule("a", a)
	tied.RegisterModule("b", b)
	require.Equal(t, []string{"a.weight", "a.bias"}, paramNames(tied))
	require.Equal(t, []string{"a.weight", "a.bias", "b.weight"}, StateDict(tied).Keys())
}

func TestRegisterPanicsOnBadNames(t *testing.T) {
	tests := []struct {
		name string
		fn   func(c *Container)
	}{
		{"empty", func(c *Container) { c.RegisterModule("", NewReLU()) }},
		{"dotted", func(c *Container) { c.RegisterBuffer("a.b", tensor.New(tensor.Float32, 1)) }},
		{"duplicate", func(c *Container) {
			c.RegisterModule("x", NewReLU())
			c.RegisterParameter("x", autograd.Param(tensor.New(tensor.Float32, 1)))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Panics(t, func() { tc.fn(&Container{}) })
		})
	}
}

func TestTrainEvalPropagates(t *testing.T) {
	n := newNet(tensor.NewRNG(0))
	require.True(t, n.Training())
	Eval(n)
	require.False(t, n.Training())
	require.False(t, n.body.At(2).Training())
	require.False(t, n.head.Training())
	n.Train(true)
	require.True(t, n.body.At(1).Training())

	// A child registered into an eval-mode parent follows its mode.
	s := NewSequential()
	Eval(s)
	r := NewReLU()
	s.Append(r)
	require.False(t, r.Training())
}

func TestLoadStateDictRoundTrip(t *testing.T) {
	src := torchModel(tensor.NewRNG(1))
	dst := torchModel(tensor.NewRNG(2))
	src.At(1).(*BatchNorm1d).RunningMean.F32()[2] = 5
	src.At(1).(*BatchNorm1d).NumBatchesTracked.I64()[0] = 7
	w := dst.At(0).(*Linear).Weight.Value // loading must keep storage identity
	require.NoError(t, LoadStateDict(dst, StateDict(src)))
	require.Same(t, w, dst.At(0).(*Linear).Weight.Value)
	ss, ds := StateDict(src), StateDict(dst)
	for _, k := range ss.Keys() {
		a, _ := ss.Get(k)
		b, _ := ds.Get(k)
		require.Equal(t, a.DType(), b.DType(), k)
		require.Equal(t, a.Shape(), b.Shape(), k)
		require.Equal(t, elems(a), elems(b), k)
	}
	nbt, _ := ds.Get("1.num_batches_tracked")
	require.Equal(t, tensor.Int64, nbt.DType(), "as torch saves it")
	require.Equal(t, []int64{7}, nbt.I64())

	// A state dict from before goddp had int64 tensors holds the counter
	// as float64: it loads into the int64 buffer.
	old := StateDict(src)
	old.Set("1.num_batches_tracked", tensor.FromF64([]float64{9}))
	require.NoError(t, LoadStateDict(dst, old))
	require.Equal(t, []int64{9}, dst.At(1).(*BatchNorm1d).NumBatchesTracked.I64())
}

func TestLoadStateDictErrors(t *testing.T) {
	good := StateDict(torchModel(tensor.NewRNG(1)))
	bad := NewTensorDict()
	for _, k := range good.Keys() {
		v, _ := good.Get(k)
		switch k {
		case "0.bias":
			continue // missing
		case "3.weight":
			v = tensor.New(tensor.Float32, 4, 2) // transposed
		}
		bad.Set(k, v)
	}
	bad.Set("4.weight", tensor.New(tensor.Float32, 1))

	m := torchModel(tensor.NewRNG(2))
	before := append([]float32(nil), m.At(0).(*Linear).Weight.Value.F32()...)
	err := LoadStateDict(m, bad)
	require.ErrorIs(t, err, ErrStateDict)
	var se *StateDictError
	require.ErrorAs(t, err, &se)
	require.Equal(t, []string{"0.bias"}, se.Missing)
	require.Equal(t, []string{"4.weight"}, se.Unexpected)
	require.Equal(t, []string{"3.weight: state dict [4 2], module [2 4]"}, se.Mismatched)
	require.ErrorContains(t, err, `missing keys ["0.bias"]`)
	require.ErrorContains(t, err, `unexpected keys ["4.weight"]`)
	require.Equal(t, before, m.At(0).(*Linear).Weight.Value.F32(), "a failed load changes nothing")

	require.ErrorIs(t, LoadStateDict(m, nil), ErrStateDict)
}

func TestLoadStateDictConvertsDType(t *testing.T) {
	m := NewLinearFrom(tensor.New(tensor.Float32, 1, 2), nil)
	sd := NewTensorDict()
	sd.Set("weight", tensor.FromF64([]float64{1.5, -2}, 1, 2))
	require.NoError(t, LoadStateDict(m, sd))
	require.Equal(t, []float32{1.5, -2}, m.Weight.Value.F32())
}

func TestTensorDict(t *testing.T) {
	sd := NewTensorDict()
	a, b := tensor.New(tensor.Float32, 1), tensor.New(tensor.Float32, 2)
	sd.Set("b", a)
	sd.Set("a", b)
	sd.Set("b", b)
	require.Equal(t, []string{"b", "a"}, sd.Keys())
	got, ok := sd.Get("b")
	require.True(t, ok)
	require.Same(t, b, got)
	sd.Delete("b")
	require.Equal(t, []string{"a"}, sd.Keys())
	require.Equal(t, 1, sd.Len())
}

func TestNoGradAndZeroGrad(t *testing.T) {
	l := NewLinear(tensor.NewRNG(0), 3, 2)
	x := autograd.Const(tensor.New(tensor.Float32, 4, 3))
	NoGrad(l, func() {
		require.False(t, l.Forward(x).RequiresGrad())
	})
	require.True(t, l.Weight.RequiresGrad())
	y := l.Forward(x)
	require.True(t, y.RequiresGrad())
	require.NoError(t, autograd.SumAll(y).Backward())
	require.NotNil(t, l.Bias.Grad)
	ZeroGrad(l)
	require.Equal(t, []float32{0, 0}, l.Bias.Grad.F32())
}

// TestTrainMLPMatchesTorch runs the fixture's 5 SGD-momentum steps of a
// 4-8-3 MLP with cross-entropy: nn, autograd and optim end to end.
func TestTrainMLPMatchesTorch(t *testing.T) {
	var fx struct {
		TrainMLP struct {
			Init        map[string]fixTensor `json:"init"`
			Xs          []fixTensor          `json:"xs"`
			Ys          [][]int              `json:"ys"`
			Losses      []float64            `json:"losses"`
			Final       map[string]fixTensor `json:"final"`
			LR          float64              `json:"lr"`
			Momentum    float64              `json:"momentum"`
			WeightDecay float64              `json:"weight_decay"`
		} `json:"train_mlp"`
	}
	loadFixture(t, "module.json", &fx)
	f := fx.TrainMLP
	rng := tensor.NewRNG(0)
	m := NewSequential(NewLinear(rng, 4, 8), NewReLU(), NewLinear(rng, 8, 3))
	sd := NewTensorDict()
	for k, v := range f.Init {
		sd.Set(k, v.f32())
	}
	require.NoError(t, LoadStateDict(m, sd))
	opt := newTestSGD(t, Parameters(m), f.LR, f.Momentum, f.WeightDecay)
	var lossFn CrossEntropyLoss
	for s := range f.Xs {
		opt.ZeroGrad()
		loss := lossFn.Forward(m.Forward(autograd.Const(f.Xs[s].f32())), f.Ys[s])
		require.InDelta(t, f.Losses[s], loss.Value.Item(), 1e-5)
		require.NoError(t, loss.Backward())
		require.NoError(t, opt.Step())
	}
	got := StateDict(m)
	for k, want := range f.Final {
		v, ok := got.Get(k)
		require.True(t, ok, k)
		requireClose(t, &want, v, 1e-5, 1e-4, k)
	}
}

// elems is x's elements in C order, in x's own element type (so int64
// values compare exactly).
func elems(x *tensor.Tensor) any {
	c := x.Contiguous()
	switch c.DType() {
	case tensor.Float64:
		return c.F64()
	case tensor.Int64:
		return c.I64()
	}
	return c.F32()
}
