package gpt2

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// TestGenerateGreedy: temperature 0 picks the argmax of the last
// position's logits over the real vocabulary, step by step, cropping the
// context to BlockSize; the model's training mode comes back.
func TestGenerateGreedy(t *testing.T) {
	cfg := tinyConfig.Padded(64)
	m := newTiny(t, cfg, 30)
	// Make a padded column the largest everywhere: Generate must not pick it.
	w := m.Transformer.WTE.Weight.Value.F32()
	for j := range cfg.Embd {
		w[(cfg.PaddedVocab()-1)*cfg.Embd+j] = 0
	}
	m.Transformer.LnF.Bias.Value.F32()[0] = 5
	w[(cfg.PaddedVocab()-1)*cfg.Embd] = 10
	prompt := []int{3, 1, 4}
	got, err := m.Generate(prompt, SampleOptions{MaxNewTokens: 10})
	if err != nil {
		t.Fatal(err)
	}
	if !m.Training() {
		t.Error("Generate left the model in eval mode")
	}
	ids := slices.Clone(prompt)
	for range 10 {
		window := ids[max(0, len(ids)-cfg.BlockSize):]
		x := make([]int64, len(window))
		for i, v := range window {
			x[i] = int64(v)
		}
		m.Train(false)
		logits := m.Forward(autograd.Const(tensor.FromI64(x, 1, len(window)))).Value
		best := 0
		for v := range cfg.VocabSize {
			if logits.At(0, len(window)-1, v) > logits.At(0, len(window)-1, best) {
				best = v
			}
		}
		if logits.At(0, len(window)-1, cfg.PaddedVocab()-1) <= logits.At(0, len(window)-1, best) {
			t.Fatal("the test's padded column is not the largest logit")
		}
		ids = append(ids, best)
	}
	if !slices.Equal(got, ids[len(prompt):]) {
		t.Fatalf("greedy %v, argmax by hand %v", got, ids[len(prompt):])
	}
	again, _ := m.Generate(prompt, SampleOptions{MaxNewTokens: 10, TopK: 5, Seed: 9})
	if len(again) != 10 {
		t.Fatalf("%d tokens", len(again))
	}
}

// TestGenerateSampling: the same seed gives the same tokens, another
// seed others; top-k 1 is greedy; every token is in the real vocabulary.
func TestGenerateSampling(t *testing.T) {
	m := newTiny(t, tinyConfig.Padded(64), 31)
	opt := SampleOptions{MaxNewTokens: 20, Temperature: 1.5, TopK: 10, Seed: 1}
	a, err := m.Generate([]int{7}, opt)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := m.Generate([]int{7}, opt)
	if !slices.Equal(a, b) {
		t.Fatalf("seed 1 twice: %v and %v", a, b)
	}
	opt.Seed = 2
	if c, _ := m.Generate([]int{7}, opt); slices.Equal(a, c) {
		t.Fatalf("seeds 1 and 2 both gave %v", a)
	}
	for _, v := range a {
		if v < 0 || v >= tinyConfig.VocabSize {
			t.Fatalf("token %d outside the vocabulary", v)
		}
	}
	greedy, _ := m.Generate([]int{7}, SampleOptions{MaxNewTokens: 20})
	top1, _ := m.Generate([]int{7}, SampleOptions{MaxNewTokens: 20, Temperature: 1, TopK: 1, Seed: 5})
	if !slices.Equal(greedy, top1) {
		t.Fatalf("top-1 sampling %v, greedy %v", top1, greedy)
	}
	for _, bad := range []struct {
		prompt []int
		opt    SampleOptions
	}{{nil, SampleOptions{}}, {[]int{50}, SampleOptions{}}, {[]int{1}, SampleOptions{Temperature: -1}}} {
		if _, err := m.Generate(bad.prompt, bad.opt); !errors.Is(err, ErrGenerate) {
			t.Errorf("%v %+v: %v, want ErrGenerate", bad.prompt, bad.opt, err)
		}
	}
}

// TestPickTopK: draws fall only on the top k and in proportion to
// softmax(logits/T) over them.
func TestPickTopK(t *testing.T) {
	logits := []float64{0, 3, 1, 2, -1}
	rng := rand.New(rand.NewPCG(1, 2))
	counts := make([]int, len(logits))
	const n = 20000
	for range n {
		counts[pick(slices.Clone(logits), SampleOptions{Temperature: 1, TopK: 2}, rng)]++
	}
	if counts[0]+counts[2]+counts[4] != 0 {
		t.Fatalf("draws outside the top 2: %v", counts)
	}
	// p(1) = e³/(e³+e²) = 0.731; 4σ of the binomial is 0.013.
	if p := float64(counts[1]) / n; p < 0.718 || p > 0.744 {
		t.Fatalf("token 1 drawn %.3f of the time, want 0.731", p)
	}
}
