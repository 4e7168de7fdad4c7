package nn

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

type mhaCase struct {
	Name       string `json:"name"`
	EmbedDim   int    `json:"embed_dim"`
	NumHeads   int    `json:"num_heads"`
	BatchFirst bool   `json:"batch_first"`
	Bias       bool   `json:"bias"`
	Self       bool   `json:"self"`
	Causal     bool   `json:"causal"`
	StateDict  []struct {
		Name  string    `json:"name"`
		Value fixTensor `json:"value"`
	} `json:"state_dict"`
	Grads []struct {
		Name string    `json:"name"`
		Grad fixTensor `json:"grad"`
	} `json:"grads"`
	Query          fixTensor  `json:"query"`
	Key            fixTensor  `json:"key"`
	Value          fixTensor  `json:"value"`
	Out            fixTensor  `json:"out"`
	GradOut        fixTensor  `json:"grad_out"`
	GQ             fixTensor  `json:"grad_query"`
	GK             *fixTensor `json:"grad_key"`
	GV             *fixTensor `json:"grad_value"`
	AttnMask       *fixTensor `json:"attn_mask"`
	AttnMaskBool   bool       `json:"attn_mask_bool"`
	KeyPaddingMask *fixTensor `json:"key_padding_mask"`
}

// TestMultiheadAttentionFixture loads torch's state_dict into a new module
// (so keys, order and shapes must match), then compares the output and every
// gradient with torch's nn.MultiheadAttention. The causal case runs both as
// the torch fixture did (a bool triu mask) and through Causal.
func TestMultiheadAttentionFixture(t *testing.T) {
	var f struct {
		Cases []mhaCase `json:"cases"`
	}
	loadFixture(t, "multihead_attention.json", &f)
	require.NotEmpty(t, f.Cases)
	for _, c := range f.Cases {
		variants := []string{"mask"}
		if c.Causal {
			variants = append(variants, "causal_flag")
		}
		for _, variant := range variants {
			t.Run(c.Name+"/"+variant, func(t *testing.T) {
				m := NewMultiheadAttention(tensor.NewRNG(1), c.EmbedDim, c.NumHeads,
					MultiheadAttentionConfig{NoBias: !c.Bias, BatchFirst: c.BatchFirst})
				sd := NewTensorDict()
				var keys []string
				for _, e := range c.StateDict {
					sd.Set(e.Name, e.Value.f32())
					keys = append(keys, e.Name)
				}
				require.Equal(t, keys, StateDict(m).Keys(), "state_dict keys in torch's order")
				require.NoError(t, LoadStateDict(m, sd))

				q := autograd.Param(c.Query.f32())
				k, v := q, q
				if !c.Self {
					k, v = autograd.Param(c.Key.f32()), autograd.Param(c.Value.f32())
				}
				var o AttendOptions
				if c.AttnMask != nil && variant == "mask" {
					if c.AttnMaskBool {
						o.AttnMaskBool = c.AttnMask.f32()
					} else {
						o.AttnMask = c.AttnMask.f32()
					}
				}
				o.Causal = variant == "causal_flag"
				if c.KeyPaddingMask != nil {
					o.KeyPaddingMask = c.KeyPaddingMask.f32()
				}
				var out *autograd.Variable
				if c.Self && c.AttnMask == nil && c.KeyPaddingMask == nil {
					out = m.Forward(q)
				} else {
					out = m.Attend(q, k, v, o)
				}
				requireClose(t, &c.Out, out.Value, 1e-5, 1e-4, "output")
				require.NoError(t, out.BackwardWith(c.GradOut.f32()))
				requireClose(t, &c.GQ, q.Grad, 1e-5, 1e-4, "grad query")
				if !c.Self {
					requireClose(t, c.GK, k.Grad, 1e-5, 1e-4, "grad key")
					requireClose(t, c.GV, v.Grad, 1e-5, 1e-4, "grad value")
				}
				params := map[string]*autograd.Variable{}
				for _, np := range m.NamedParameters() {
					params[np.Name] = np.Param
				}
				require.Len(t, params, len(c.Grads))
				for _, g := range c.Grads {
					p, ok := params[g.Name]
					require.True(t, ok, "parameter %s", g.Name)
					requireClose(t, &g.Grad, p.Grad, 1e-5, 1e-4, "grad "+g.Name)
				}
			})
		}
	}
}

func TestMultiheadAttentionInit(t *testing.T) {
	m := NewMultiheadAttention(tensor.NewRNG(3), 64, 4, MultiheadAttentionConfig{BatchFirst: true})
	names := []string{}
	for _, np := range m.NamedParameters() {
		names = append(names, np.Name)
	}
	require.Equal(t, []string{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"}, names)
	bound := math.Sqrt(6.0 / (64 + 3*64))
	w := m.InProjWeight.Value.F32()
	lo, hi := float32(0), float32(0)
	for _, x := range w {
		lo, hi = min(lo, x), max(hi, x)
	}
	require.Less(t, float64(hi), bound)
	require.Greater(t, float64(lo), -bound)
	require.Greater(t, float64(hi), 0.9*bound, "xavier_uniform fills its range")
	for _, x := range m.InProjBias.Value.F32() {
		require.Zero(t, x)
	}
	for _, x := range m.OutProj.Bias.Value.F32() {
		require.Zero(t, x)
	}
	require.Equal(t, []int{64, 64}, m.OutProj.Weight.Shape())
	require.Panics(t, func() { NewMultiheadAttention(tensor.NewRNG(1), 10, 3, MultiheadAttentionConfig{}) })
	nb := NewMultiheadAttention(tensor.NewRNG(3), 8, 2, MultiheadAttentionConfig{NoBias: true})
	require.Len(t, nb.NamedParameters(), 2)
}

// GradCheck in float64 through the module, for the self-attention and the
// cross-attention paths with every kind of mask.
func TestMultiheadAttentionGradCheck(t *testing.T) {
	rng := tensor.NewRNG(5)
	const e, h = 6, 3
	w := rng.Normal(tensor.Float64, 0, 0.5, 3*e, e)
	b := rng.Normal(tensor.Float64, 0, 0.1, 3*e)
	ow, ob := rng.Normal(tensor.Float64, 0, 0.5, e, e), rng.Normal(tensor.Float64, 0, 0.1, e)
	build := func(xs []*autograd.Variable, batchFirst bool) *MultiheadAttention {
		m := NewMultiheadAttentionFrom(h, xs[0].Value, xs[1].Value, NewLinearFrom(xs[2].Value, xs[3].Value), batchFirst)
		// Use the checked variables themselves as the parameters.
		m.InProjWeight, m.InProjBias, m.OutProj.Weight, m.OutProj.Bias = xs[0], xs[1], xs[2], xs[3]
		return m
	}
	pad := tensor.FromF64([]float64{0, 0, 0, 1, 0, 0, 0, 0}, 2, 4)
	causal := tensor.Triu(tensor.Ones(tensor.Float64, 4, 4), 1)
	x := rng.Normal(tensor.Float64, 0, 1, 2, 4, e)
	kv := rng.Normal(tensor.Float64, 0, 1, 4, 2, e)
	for _, tc := range []struct {
		name string
		f    func(xs []*autograd.Variable) *autograd.Variable
		in   []*tensor.Tensor
	}{
		{"self_causal", func(xs []*autograd.Variable) *autograd.Variable {
			return build(xs, true).Attend(xs[4], xs[4], xs[4], AttendOptions{Causal: true, KeyPaddingMask: pad})
		}, []*tensor.Tensor{w, b, ow, ob, x}},
		{"cross_seq_first", func(xs []*autograd.Variable) *autograd.Variable {
			q := autograd.Transpose(xs[4], 0, 1)
			return build(xs, false).Attend(q, xs[5], xs[5], AttendOptions{AttnMaskBool: causal})
		}, []*tensor.Tensor{w, b, ow, ob, x, kv}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := make([]*tensor.Tensor, len(tc.in))
			for i, x := range tc.in {
				in[i] = x.Clone()
			}
			require.NoError(t, autograd.GradCheck(tc.f, in, autograd.GradCheckOptions{}))
		})
	}
}
