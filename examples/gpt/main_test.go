package main

import (
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

// The state_dict of torch_models.py's GPT(vocab) (printed from torch 1.13):
// same keys, same order, same shapes, so checkpoints map one to one.
func TestGPTStateDictMatchesAnchor(t *testing.T) {
	want := []string{"tok.weight [90 128]", "pos.weight [64 128]"}
	for b := range 2 {
		for _, k := range []string{"ln1.weight [128]", "ln1.bias [128]", "ln2.weight [128]", "ln2.bias [128]",
			"qkv.weight [384 128]", "qkv.bias [384]", "proj.weight [128 128]", "proj.bias [128]",
			"fc1.weight [512 128]", "fc1.bias [512]", "fc2.weight [128 512]", "fc2.bias [128]"} {
			want = append(want, fmt.Sprintf("blocks.%d.%s", b, k))
		}
	}
	want = append(want, "ln.weight [128]", "ln.bias [128]", "head.weight [90 128]", "head.bias [90]")
	sd := nn.StateDict(NewGPT(tensor.NewRNG(0), 90, ctxLen, dModel, nHeads, nLayers))
	var got []string
	for _, k := range sd.Keys() {
		v, _ := sd.Get(k)
		got = append(got, fmt.Sprintf("%s %v", k, v.Shape()))
	}
	require.Equal(t, want, got)
}

func TestCorpusWindows(t *testing.T) {
	text := []byte("abcabdabcabdabcabdabcabdabcabdabcabdabcabdabcabdabcabdabcabdabcabdabcabdabcabdabcabd") // 84 bytes
	c := newCorpus(text)
	require.Equal(t, []byte("abcd"), c.vocab)
	ds, err := c.dataset()
	require.NoError(t, err)
	// torch.arange(0, 84 - 65, 8) = [0, 8, 16]
	require.Equal(t, 3, ds.Len())
	s, err := ds.Get(2)
	require.NoError(t, err)
	require.Equal(t, float64(c.ids[16]), s.Input.At(0))
	require.Equal(t, float64(c.ids[17]), s.Target.At(0))
	require.Equal(t, float64(c.ids[16+64]), s.Target.At(63))
	require.Equal(t, string(text[:10]), c.decode(c.encode(text[:10])))
}

// A small GPT trained for a few AdamW steps on a repetitive text fits it:
// the causal model must predict the periodic next byte, which it can only
// do by attending to earlier positions.
func TestGPTLearnsPeriodicText(t *testing.T) {
	text := []byte{}
	for len(text) < 400 {
		text = append(text, "the cat sat on the mat. "...)
	}
	c := newCorpus(text)
	rng := tensor.NewRNG(1)
	m := NewGPT(rng, len(c.vocab), 32, 32, 4, 1)
	opt, err := optim.NewAdamW(nn.Parameters(m), optim.AdamConfig{LR: 3e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01})
	require.NoError(t, err)
	const b, tt = 8, 32
	x, y := tensor.New(tensor.Float32, b, tt), make([]int, b*tt)
	var first, last float64
	for step := range 200 {
		for i := range b {
			s := (step*7 + i*13) % (len(c.ids) - tt - 1)
			for j := range tt {
				x.F32()[i*tt+j] = float32(c.ids[s+j])
				y[i*tt+j] = c.ids[s+j+1]
			}
		}
		opt.ZeroGrad()
		logits := m.Forward(autograd.Const(x))
		loss := autograd.CrossEntropy(autograd.Reshape(logits, -1, len(c.vocab)), y, autograd.ReductionMean)
		require.NoError(t, loss.Backward())
		require.NoError(t, opt.Step())
		if step == 0 {
			first = loss.Value.Item()
		}
		last = loss.Value.Item()
	}
	t.Logf("loss %v -> %v", first, last)
	require.Less(t, last, 0.1*first, "loss %v -> %v", first, last)
	prompt := c.encode([]byte("the cat sat on "))
	require.Equal(t, "the mat. the cat", c.decode(generate(m, prompt, 16)))
}

// BenchmarkGPTStep is one training step of the example's model at its batch
// (32 x 64 tokens) in one process: forward, backward and AdamW.
func BenchmarkGPTStep(b *testing.B) {
	text, err := os.ReadFile(textPath)
	if err != nil {
		b.Skip(err)
	}
	c := newCorpus(text)
	m := NewGPT(tensor.NewRNG(0), len(c.vocab), ctxLen, dModel, nHeads, nLayers)
	opt, err := optim.NewAdamW(nn.Parameters(m), optim.AdamConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01})
	require.NoError(b, err)
	const bs = 32
	x, y := tensor.New(tensor.Float32, bs, ctxLen), make([]int, bs*ctxLen)
	for i := range bs {
		for j := range ctxLen {
			x.F32()[i*ctxLen+j] = float32(c.ids[i*8+j])
			y[i*ctxLen+j] = c.ids[i*8+j+1]
		}
	}
	b.ResetTimer()
	for range b.N {
		opt.ZeroGrad()
		loss := autograd.CrossEntropy(autograd.Reshape(m.Forward(autograd.Const(x)), -1, len(c.vocab)), y, autograd.ReductionMean)
		if err := loss.Backward(); err != nil {
			b.Fatal(err)
		}
		loss.FreeGraph() // the step's intermediates go back to the cache
		if err := opt.Step(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(bs*b.N)/b.Elapsed().Seconds(), "seq/s")
}
