package gpt2

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/tensor"
)

// ErrGenerate is wrapped by Generate's errors.
var ErrGenerate = errors.New("gpt2: cannot generate")

// SampleOptions choose how Generate picks each token (nanoGPT's
// generate: logits / temperature, top-k, softmax, one draw).
type SampleOptions struct {
	// MaxNewTokens is the number of tokens to add to the prompt.
	MaxNewTokens int
	// Temperature divides the logits before the softmax; 0 is greedy
	// decoding (the argmax, no randomness).
	Temperature float64
	// TopK keeps only the K largest logits (and any tied with the K-th)
	// before the softmax, as nanoGPT; 0 keeps the whole vocabulary.
	TopK int
	// Seed seeds the draws (a PCG generator): the same model, prompt and
	// options give the same tokens.
	Seed uint64
}

// Generate extends prompt (token ids, at least one) by opt.MaxNewTokens
// tokens and returns only the new ones. Each step runs the model on the
// last BlockSize tokens (no key/value cache: a step costs a full forward
// of the window) in eval mode without recording gradients, and picks
// among the first VocabSize logits of the last position: the padded
// columns are never a token. The model's training mode is restored on
// return. A model on a device sends each step's last logits to the host.
func (m *Model) Generate(prompt []int, opt SampleOptions) ([]int, error) {
	c := m.Config
	switch {
	case len(prompt) == 0:
		return nil, fmt.Errorf("%w: empty prompt", ErrGenerate)
	case opt.MaxNewTokens < 0 || opt.TopK < 0 || !(opt.Temperature >= 0) || math.IsInf(opt.Temperature, 1):
		return nil, fmt.Errorf("%w: MaxNewTokens %d, TopK %d, Temperature %v (want non-negative and finite)",
			ErrGenerate, opt.MaxNewTokens, opt.TopK, opt.Temperature)
	}
	for i, id := range prompt {
		if id < 0 || id >= c.VocabSize {
			return nil, fmt.Errorf("%w: prompt token %d at position %d outside the vocabulary [0, %d)", ErrGenerate, id, i, c.VocabSize)
		}
	}
	dev, err := nn.DeviceOf(m)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrGenerate, err)
	}
	rng := rand.New(rand.NewPCG(opt.Seed, 0x9e3779b97f4a7c15))
	training := m.Training()
	nn.Eval(m)
	defer m.Train(training)
	ids := slices.Clone(prompt)
	logits := make([]float64, c.VocabSize)
	nn.NoGrad(m, func() {
		for range opt.MaxNewTokens {
			window := ids[max(0, len(ids)-c.BlockSize):]
			x := make([]int64, len(window))
			for i, id := range window {
				x[i] = int64(id)
			}
			out := m.Forward(autograd.Const(tensor.FromI64(x, 1, len(window)))).Value // [1, T, Vp]
			last := tensor.Narrow(out, 1, len(window)-1, 1)
			if !tensor.IsCPU(dev) {
				last = last.MustTo(tensor.CPU())
			}
			row := last.Contiguous().Reshape(-1)
			for i := range logits {
				logits[i] = row.At(i)
			}
			ids = append(ids, pick(logits, opt, rng))
		}
	})
	return ids[len(prompt):], nil
}

// pick chooses a token from logits (overwritten): the argmax at
// temperature 0 (the first of equal maxima), otherwise a draw from
// softmax(logits/T) over the TopK largest.
func pick(logits []float64, opt SampleOptions, rng *rand.Rand) int {
	if opt.Temperature == 0 {
		best := 0
		for i, v := range logits {
			if v > logits[best] {
				best = i
			}
		}
		return best
	}
	for i := range logits {
		logits[i] /= opt.Temperature
	}
	cut := math.Inf(-1)
	if opt.TopK > 0 && opt.TopK < len(logits) {
		sorted := slices.Clone(logits)
		slices.Sort(sorted)
		cut = sorted[len(sorted)-opt.TopK] // nanoGPT keeps every logit >= the K-th largest
	}
	hi := math.Inf(-1)
	for _, v := range logits {
		if v >= cut {
			hi = max(hi, v)
		}
	}
	var sum float64
	for i, v := range logits {
		if v >= cut {
			logits[i] = math.Exp(v - hi)
		} else {
			logits[i] = 0
		}
		sum += logits[i]
	}
	u := rng.Float64() * sum
	last := 0
	for i, p := range logits {
		if p == 0 {
			continue
		}
		if u < p {
			return i
		}
		u -= p
		last = i
	}
	return last // rounding left u at the top: the last candidate
}
