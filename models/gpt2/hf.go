package gpt2

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/goddp/goddp/checkpoint"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/tensor"
)

// ErrHF is wrapped by the errors of LoadHF and LoadHFStateDict.
var ErrHF = errors.New("gpt2: Hugging Face state dict does not fit the model")

// lmHeadKey is the head's name in GPT2LMHeadModel, tied to wteKey.
const (
	lmHeadKey = "lm_head.weight"
	wteKey    = "transformer.wte.weight"
)

// HFStateDict returns the model's parameters as HF's GPT2LMHeadModel
// save_pretrained writes them: the names of nn.StateDict(m)
// ("transformer.h.0.attn.c_attn.weight", Conv1D weights [in, out]),
// transformer.wte.weight cut to VocabSize rows (HF's vocabulary has no
// padding), and no lm_head.weight (save_pretrained drops a tied weight's
// second name). Tensors alias the model's storage except the cut wte.
func (m *Model) HFStateDict() map[string]*tensor.Tensor {
	sd := checkpoint.StateDict(m)
	if v := m.Config.VocabSize; v != m.Config.PaddedVocab() {
		sd[wteKey] = tensor.Narrow(sd[wteKey], 0, 0, v).Contiguous()
	}
	return sd
}

// SaveHF writes HFStateDict to path as a safetensors file with HF's
// metadata {"format": "pt"}, which GPT2LMHeadModel.from_pretrained (with
// a config.json of the same sizes) and safetensors.torch.load_file read.
func (m *Model) SaveHF(path string) error {
	if err := checkpoint.SaveSafetensors(path, m.HFStateDict(), map[string]string{"format": "pt"}); err != nil {
		return fmt.Errorf("gpt2: saving %s: %w", path, err)
	}
	return nil
}

// LoadHF reads a safetensors file written by HF (model.safetensors of
// gpt2, or of a GPT2LMHeadModel) or by SaveHF into m; see
// LoadHFStateDict.
func (m *Model) LoadHF(path string) error {
	sd, _, err := checkpoint.LoadSafetensors(path)
	if err != nil {
		return fmt.Errorf("gpt2: %w", err)
	}
	if err := m.LoadHFStateDict(sd); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// LoadHFStateDict copies an HF GPT-2 state dict into m in place (the
// parameters keep their Variables, so optimizers and DDP see the values).
// It takes the names with the "transformer." prefix (GPT2LMHeadModel) or
// without it (GPT2Model, the hub's gpt2/model.safetensors), skips the
// causal-mask buffers older HF versions saved (attn.bias,
// attn.masked_bias), and accepts lm_head.weight only equal to wte (the
// tie; a different head is an error, since this model has none of its
// own). wte may have VocabSize rows (HF's; the padded rows become zero,
// as llm.c pads) or PaddedVocab rows. Anything missing, unknown or of
// the wrong shape is an error naming every such key, and m is then left
// unchanged.
func (m *Model) LoadHFStateDict(sd map[string]*tensor.Tensor) error {
	in := make(map[string]*tensor.Tensor, len(sd))
	var head *tensor.Tensor
	for k, t := range sd {
		switch {
		case k == lmHeadKey:
			head = t
			continue
		case strings.HasSuffix(k, ".attn.bias") || strings.HasSuffix(k, ".attn.masked_bias"):
			continue
		case !strings.HasPrefix(k, "transformer."):
			k = "transformer." + k
		}
		if _, dup := in[k]; dup {
			return fmt.Errorf("%w: %q appears with and without the transformer. prefix", ErrHF, k)
		}
		in[k] = t
	}
	cfg := m.Config
	if wte, ok := in[wteKey]; ok && wte.Dim() == 2 && wte.Size(0) == cfg.VocabSize && cfg.VocabSize != cfg.PaddedVocab() {
		in[wteKey] = padRows(wte, cfg.PaddedVocab())
	}
	if head != nil {
		if err := checkTied(head, sd, in[wteKey], cfg.VocabSize); err != nil {
			return err
		}
	}
	want := nn.StateDict(m)
	var missing, unexpected, shapes []string
	for _, k := range want.Keys() {
		got, ok := in[k]
		if !ok {
			missing = append(missing, k)
			continue
		}
		w, _ := want.Get(k)
		if !slices.Equal(got.Shape(), w.Shape()) {
			shapes = append(shapes, fmt.Sprintf("%s: file %v, model %v", k, got.Shape(), w.Shape()))
		}
	}
	for k := range in {
		if _, ok := want.Get(k); !ok {
			unexpected = append(unexpected, k)
		}
	}
	sort.Strings(unexpected)
	if len(missing)+len(unexpected)+len(shapes) > 0 {
		var parts []string
		if len(missing) > 0 {
			parts = append(parts, fmt.Sprintf("missing %q", missing))
		}
		if len(unexpected) > 0 {
			parts = append(parts, fmt.Sprintf("unexpected %q", unexpected))
		}
		if len(shapes) > 0 {
			parts = append(parts, fmt.Sprintf("mis-shaped %q", shapes))
		}
		return fmt.Errorf("%w (%d layers, %d heads, width %d, vocabulary %d, context %d): %s", ErrHF,
			cfg.Layers, cfg.Heads, cfg.Embd, cfg.VocabSize, cfg.BlockSize, strings.Join(parts, "; "))
	}
	td := nn.NewTensorDict()
	for _, k := range want.Keys() {
		td.Set(k, in[k])
	}
	if err := nn.LoadStateDict(m, td); err != nil {
		return fmt.Errorf("%w: %w", ErrHF, err)
	}
	return nil
}

// checkTied accepts an lm_head.weight equal to wte on its first vocab
// rows.
func checkTied(head *tensor.Tensor, sd map[string]*tensor.Tensor, wte *tensor.Tensor, vocab int) error {
	if wte == nil {
		return fmt.Errorf("%w: %s without %s", ErrHF, lmHeadKey, wteKey)
	}
	if head.Dim() != 2 || head.Size(1) != wte.Size(1) || (head.Size(0) != vocab && head.Size(0) != wte.Size(0)) {
		return fmt.Errorf("%w: %s of shape %v does not match %s %v", ErrHF, lmHeadKey, head.Shape(), wteKey, wte.Shape())
	}
	h := tensor.AsType(head.MustTo(tensor.CPU()).Contiguous(), tensor.Float64).F64()
	w := tensor.AsType(tensor.Narrow(wte.MustTo(tensor.CPU()), 0, 0, head.Size(0)).Contiguous(), tensor.Float64).F64()
	for i := range h {
		if h[i] != w[i] {
			return fmt.Errorf("%w: %s differs from %s at element %d (%v vs %v); GPT-2 ties them, this model has no separate head",
				ErrHF, lmHeadKey, wteKey, i, h[i], w[i])
		}
	}
	return nil
}

// padRows returns t [r, c] extended with zero rows to [rows, c], in
// float32 (the model's dtype; a float64 file converts here as
// nn.LoadStateDict would).
func padRows(t *tensor.Tensor, rows int) *tensor.Tensor {
	src := tensor.AsType(t.MustTo(tensor.CPU()).Contiguous(), tensor.Float32)
	out := tensor.New(tensor.Float32, rows, t.Size(1))
	copy(out.F32(), src.F32())
	return out
}
