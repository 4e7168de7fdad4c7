package gpt2

import (
	"testing"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

func randn64(rng *tensor.RNG, std float64, shape ...int) *tensor.Tensor {
	return rng.Normal(tensor.Float64, 0, std, shape...)
}

func TestGELUTanhGradCheck(t *testing.T) {
	x := randn64(tensor.NewRNG(1), 2, 3, 7)
	if err := autograd.GradCheck(func(xs []*autograd.Variable) *autograd.Variable { return GELUTanh(xs[0]) },
		[]*tensor.Tensor{x}, autograd.GradCheckOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestGELUTanhFloat32 checks the float32 path (the host's vectorised
// kernel, in parallel chunks, and its kept derivative) against float64
// (math.Tanh), over lengths past the kernels' thread split.
func TestGELUTanhFloat32(t *testing.T) {
	x32 := tensor.NewRNG(2).Normal(tensor.Float32, 0, 3, 3*parallelMin+5)
	x64 := tensor.AsType(x32, tensor.Float64)
	v, v64 := autograd.Param(x32), autograd.Param(x64)
	y, y64 := GELUTanh(v), GELUTanh(v64)
	for _, l := range []*autograd.Variable{y, y64} {
		if err := autograd.SumAll(l).Backward(); err != nil {
			t.Fatal(err)
		}
	}
	for i, got := range y.Value.F32() {
		w := y64.Value.F64()[i]
		if d := float64(got) - w; d > 2e-7*(1+abs(w)) || -d > 2e-7*(1+abs(w)) {
			t.Fatalf("GELU(%v) = %v, float64 %v", x32.F32()[i], got, w)
		}
		w = v64.Grad.F64()[i]
		if d := float64(v.Grad.F32()[i]) - w; d > 2e-7*(1+abs(w)) || -d > 2e-7*(1+abs(w)) {
			t.Fatalf("GELU'(%v) = %v, float64 %v", x32.F32()[i], v.Grad.F32()[i], w)
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func TestConv1DGradCheck(t *testing.T) {
	rng := tensor.NewRNG(3)
	x, w, b := randn64(rng, 1, 2, 3, 5), randn64(rng, 1, 5, 4), randn64(rng, 1, 4)
	f := func(xs []*autograd.Variable) *autograd.Variable {
		c := &Conv1D{Weight: xs[1], Bias: xs[2]}
		return c.Forward(xs[0])
	}
	if err := autograd.GradCheck(f, []*tensor.Tensor{x, w, b}, autograd.GradCheckOptions{}); err != nil {
		t.Fatal(err)
	}
	// y = x·W + b with W [in, out]: HF's Conv1D, not a Linear.
	y := f([]*autograd.Variable{autograd.Const(x), autograd.Const(w), autograd.Const(b)}).Value
	want := b.F64()[1]
	for i := range 5 {
		want += x.F64()[i] * w.F64()[i*4+1]
	}
	if got := y.At(0, 0, 1); abs(got-want) > 1e-12 {
		t.Fatalf("y[0,0,1] = %v, x·W+b gives %v", got, want)
	}
}

// paramSlots lists the model's parameter fields, to swap in GradCheck's
// variables.
func paramSlots(m *Model) []**autograd.Variable {
	tr := m.Transformer
	s := []**autograd.Variable{&tr.WTE.Weight, &tr.WPE.Weight}
	for l := range m.Config.Layers {
		b := m.Block(l)
		s = append(s, &b.Ln1.Weight, &b.Ln1.Bias, &b.Attn.CAttn.Weight, &b.Attn.CAttn.Bias, &b.Attn.CProj.Weight, &b.Attn.CProj.Bias,
			&b.Ln2.Weight, &b.Ln2.Bias, &b.MLP.CFc.Weight, &b.MLP.CFc.Bias, &b.MLP.CProj.Weight, &b.MLP.CProj.Bias)
	}
	return append(s, &tr.LnF.Weight, &tr.LnF.Bias)
}

// TestModelGradCheck checks the whole model's gradient (tied head and
// padded vocabulary included) against finite differences of its loss,
// in float64, on a 2-layer, 2-head config.
func TestModelGradCheck(t *testing.T) {
	cfg := Config{VocabSize: 11, PaddedVocabSize: 13, BlockSize: 4, Layers: 2, Heads: 2, Embd: 8}
	m := newTiny(t, cfg, 5)
	rng := tensor.NewRNG(6)
	slots := paramSlots(m)
	inputs := make([]*tensor.Tensor, len(slots))
	for i, s := range slots {
		// Wider than the init, so every path carries a visible gradient.
		inputs[i] = tensor.AsType((*s).Value, tensor.Float64)
		d := inputs[i].F64()
		for j := range d {
			d[j] += 0.3 * rng.NormFloat64()
		}
	}
	x, y := ids([][]int{{1, 5, 10, 3}, {7, 7, 0, 2}}), ids([][]int{{5, 10, 3, 4}, {7, 0, IgnoreIndex, 9}})
	f := func(xs []*autograd.Variable) *autograd.Variable {
		for i, s := range slots {
			*s = xs[i]
		}
		return m.Loss(m.Forward(autograd.Const(x)), y)
	}
	if err := autograd.GradCheck(f, inputs, autograd.GradCheckOptions{}); err != nil {
		t.Fatal(err)
	}
}
