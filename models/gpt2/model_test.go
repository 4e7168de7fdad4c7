package gpt2

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/tensor"
)

// tinyConfig is the tests' GPT-2: 2 layers, 2 heads, width 16.
var tinyConfig = Config{VocabSize: 50, BlockSize: 8, Layers: 2, Heads: 2, Embd: 16}

func newTiny(t testing.TB, cfg Config, seed uint64) *Model {
	t.Helper()
	m, err := New(tensor.NewRNG(seed), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func ids(rows [][]int) *tensor.Tensor {
	var flat []int64
	for _, r := range rows {
		for _, v := range r {
			flat = append(flat, int64(v))
		}
	}
	return tensor.FromI64(flat, len(rows), len(rows[0]))
}

func TestNumParams(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		want int
	}{
		{"124M", Config124M, 124_439_808},
		{"124M padded", Config124M.Padded(128), 124_475_904},
		{"350M", Config350M, 354_823_168},
		{"774M", Config774M, 774_030_080},
		{"1558M", Config1558M, 1_557_611_200},
	} {
		if got := c.cfg.NumParams(); got != c.want {
			t.Errorf("%s: NumParams %d, want %d", c.name, got, c.want)
		}
	}
	if p := Config124M.Padded(128).PaddedVocab(); p != 50304 {
		t.Errorf("GPT-2's vocabulary padded to 128: %d, want 50304", p)
	}
	// The count is the built model's, tied head once, padded rows in.
	for _, cfg := range []Config{tinyConfig, tinyConfig.Padded(64)} {
		m := newTiny(t, cfg, 1)
		n := 0
		for _, p := range nn.Parameters(m) {
			n += p.Value.Numel()
		}
		if n != cfg.NumParams() {
			t.Errorf("%+v: the model has %d parameters, NumParams says %d", cfg, n, cfg.NumParams())
		}
	}
}

func TestConfigValidate(t *testing.T) {
	bad := map[string]Config{
		"heads":   {VocabSize: 10, BlockSize: 4, Layers: 1, Heads: 3, Embd: 16},
		"padding": {VocabSize: 10, PaddedVocabSize: 8, BlockSize: 4, Layers: 1, Heads: 2, Embd: 16},
		"dropout": {VocabSize: 10, BlockSize: 4, Layers: 1, Heads: 2, Embd: 16, Dropout: 1},
		"layers":  {VocabSize: 10, BlockSize: 4, Heads: 2, Embd: 16},
	}
	for name, cfg := range bad {
		if _, err := New(tensor.NewRNG(0), cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: New gave %v, want ErrConfig", name, err)
		}
	}
	for _, cfg := range []Config{Config124M, Config350M, Config774M, Config1558M, Config124M.Padded(128)} {
		if err := cfg.Validate(); err != nil {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}

// TestStateDictNamesHF checks the complete key list and shapes of a
// 2-layer model against GPT2LMHeadModel.save_pretrained's (which drops
// the tied lm_head.weight and keeps Conv1D weights [in, out]).
func TestStateDictNamesHF(t *testing.T) {
	m := newTiny(t, tinyConfig, 1)
	C, V, T := 16, 50, 8
	want := []string{fmt.Sprint("transformer.wte.weight ", []int{V, C}), fmt.Sprint("transformer.wpe.weight ", []int{T, C})}
	for i := range 2 {
		h := fmt.Sprintf("transformer.h.%d.", i)
		for _, e := range []struct {
			k string
			s []int
		}{
			{"ln_1.weight", []int{C}}, {"ln_1.bias", []int{C}},
			{"attn.c_attn.weight", []int{C, 3 * C}}, {"attn.c_attn.bias", []int{3 * C}},
			{"attn.c_proj.weight", []int{C, C}}, {"attn.c_proj.bias", []int{C}},
			{"ln_2.weight", []int{C}}, {"ln_2.bias", []int{C}},
			{"mlp.c_fc.weight", []int{C, 4 * C}}, {"mlp.c_fc.bias", []int{4 * C}},
			{"mlp.c_proj.weight", []int{4 * C, C}}, {"mlp.c_proj.bias", []int{C}},
		} {
			want = append(want, fmt.Sprint(h+e.k+" ", e.s))
		}
	}
	want = append(want, fmt.Sprint("transformer.ln_f.weight ", []int{C}), fmt.Sprint("transformer.ln_f.bias ", []int{C}))
	sd := nn.StateDict(m)
	var got []string
	for _, k := range sd.Keys() {
		v, _ := sd.Get(k)
		got = append(got, fmt.Sprint(k+" ", v.Shape()))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("state dict:\n%s\nwant (HF's order and shapes):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// NamedParameters is the same list (the optimizer's and DDP's view).
	nps := m.NamedParameters()
	if len(nps) != len(want) {
		t.Fatalf("%d named parameters, want %d", len(nps), len(want))
	}
}

// TestInit checks GPT-2's initialisation statistics: N(0, 0.02) weights
// and embeddings, residual projections at 0.02/√(2·layers), zero biases,
// unit LayerNorms.
func TestInit(t *testing.T) {
	cfg := Config{VocabSize: 500, BlockSize: 64, Layers: 4, Heads: 4, Embd: 128}
	m := newTiny(t, cfg, 7)
	stats := func(x *tensor.Tensor) (mean, std float64) {
		d := x.F32()
		for _, v := range d {
			mean += float64(v)
		}
		mean /= float64(len(d))
		for _, v := range d {
			std += (float64(v) - mean) * (float64(v) - mean)
		}
		return mean, math.Sqrt(std / float64(len(d)))
	}
	resid := 0.02 / math.Sqrt(8)
	check := func(name string, x *tensor.Tensor, want float64) {
		mean, std := stats(x)
		// n ≥ 16384 draws: the sample std is within 2% of σ by far
		// (its own std is σ/√(2n) < 0.6%).
		if math.Abs(std/want-1) > 0.03 || math.Abs(mean) > 4*want/math.Sqrt(float64(x.Numel())) {
			t.Errorf("%s: mean %.3g std %.4g, want N(0, %.4g²)", name, mean, std, want)
		}
	}
	check("wte", m.Transformer.WTE.Weight.Value, 0.02)
	check("wpe", m.Transformer.WPE.Weight.Value, 0.02)
	for l := range cfg.Layers {
		b := m.Block(l)
		check(fmt.Sprintf("h.%d.attn.c_attn", l), b.Attn.CAttn.Weight.Value, 0.02)
		check(fmt.Sprintf("h.%d.attn.c_proj", l), b.Attn.CProj.Weight.Value, resid)
		check(fmt.Sprintf("h.%d.mlp.c_fc", l), b.MLP.CFc.Weight.Value, 0.02)
		check(fmt.Sprintf("h.%d.mlp.c_proj", l), b.MLP.CProj.Weight.Value, resid)
	}
	for _, np := range m.NamedParameters() {
		want := -1.0
		switch {
		case strings.HasSuffix(np.Name, ".bias"):
			want = 0
		case strings.Contains(np.Name, "ln_"):
			want = 1
		}
		if want < 0 {
			continue
		}
		for i, v := range np.Param.Value.F32() {
			if float64(v) != want {
				t.Fatalf("%s[%d] = %v, want %v", np.Name, i, v, want)
			}
		}
	}
}

func TestForwardShapes(t *testing.T) {
	cfg := tinyConfig.Padded(64)
	m := newTiny(t, cfg, 2)
	x := ids([][]int{{1, 2, 3}, {4, 5, 6}})
	logits := m.Forward(autograd.Const(x))
	if !slices.Equal(logits.Shape(), []int{2, 3, 64}) {
		t.Fatalf("logits %v, want [2 3 64] (padded vocabulary)", logits.Shape())
	}
	loss := m.Loss(logits, ids([][]int{{2, 3, 4}, {5, 6, IgnoreIndex}}))
	if l := loss.Value.Item(); !(l > 0) || math.IsInf(l, 0) {
		t.Fatalf("loss %v", l)
	}
	// Near-uniform logits at init: the loss is close to ln(64), the
	// padded columns included (nanoGPT's loss).
	if l := loss.Value.Item(); math.Abs(l-math.Log(64)) > 0.1 {
		t.Errorf("initial loss %.4f, want about ln 64 = %.4f", l, math.Log(64))
	}
	if err := loss.Backward(); err != nil {
		t.Fatal(err)
	}
	for _, np := range m.NamedParameters() {
		if np.Param.Grad == nil {
			t.Errorf("%s got no gradient", np.Name)
		}
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "BlockSize = 8") {
			t.Errorf("a sequence over BlockSize: panic %v, want one naming BlockSize", r)
		}
	}()
	m.Forward(autograd.Const(ids([][]int{make([]int, 9)})))
}

// TestDropoutTrainEval: with dropout the training forward differs from
// the eval one, which is deterministic; the attention-dropout path
// without dropout's effect (p applied, eval) equals the fused kernel.
func TestDropoutTrainEval(t *testing.T) {
	cfg := tinyConfig
	cfg.Dropout = 0.2
	m := newTiny(t, cfg, 3)
	x := autograd.Const(ids([][]int{{1, 2, 3, 4, 5}}))
	nn.Eval(m)
	e1, e2 := m.Forward(x).Value.F32(), m.Forward(x).Value.F32()
	if !slices.Equal(e1, e2) {
		t.Fatal("eval forwards differ")
	}
	m.Train(true)
	tr := m.Forward(x)
	if slices.Equal(tr.Value.F32(), e1) {
		t.Fatal("training forward with dropout 0.2 equals the eval one")
	}
	if err := m.Loss(tr, ids([][]int{{2, 3, 4, 5, 6}})).Backward(); err != nil {
		t.Fatal(err)
	}
	// The unfused attention (taken for attention dropout) at p = 0
	// equals SelfAttention.
	qkv := autograd.Const(tensor.NewRNG(4).Normal(tensor.Float32, 0, 1, 2, 5, 48))
	fused := autograd.SelfAttention(qkv, 2, autograd.AttentionOptions{Causal: true}).Value.F32()
	slow := attentionWithDropout(qkv, 2, nn.NewDropout(tensor.NewRNG(0), 0)).Value.F32()
	for i := range fused {
		if math.Abs(float64(fused[i]-slow[i])) > 1e-5 {
			t.Fatalf("element %d: fused %v, unfused %v", i, fused[i], slow[i])
		}
	}
}
