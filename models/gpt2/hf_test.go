package gpt2

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/goddp/goddp/checkpoint"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/tensor"
)

func sameParams(t *testing.T, a, b *Model) {
	t.Helper()
	pa, pb := a.NamedParameters(), b.NamedParameters()
	if len(pa) != len(pb) {
		t.Fatalf("%d vs %d parameters", len(pa), len(pb))
	}
	for i := range pa {
		if !slices.Equal(pa[i].Param.Value.F32(), pb[i].Param.Value.F32()) {
			t.Fatalf("%s differs", pa[i].Name)
		}
	}
}

// TestHFRoundTrip: SaveHF then LoadHF into a fresh model restores every
// parameter; with a padded vocabulary the file holds HF's VocabSize rows
// and the padded rows load as zeros.
func TestHFRoundTrip(t *testing.T) {
	for _, cfg := range []Config{tinyConfig, tinyConfig.Padded(64)} {
		m := newTiny(t, cfg, 10)
		path := filepath.Join(t.TempDir(), "model.safetensors")
		if err := m.SaveHF(path); err != nil {
			t.Fatal(err)
		}
		sd, meta, err := checkpoint.LoadSafetensors(path)
		if err != nil {
			t.Fatal(err)
		}
		if meta["format"] != "pt" {
			t.Errorf("metadata %v, want HF's format=pt", meta)
		}
		if _, ok := sd[lmHeadKey]; ok {
			t.Error("the file has lm_head.weight; HF's save_pretrained omits the tied head")
		}
		if s := sd[wteKey].Shape(); !slices.Equal(s, []int{cfg.VocabSize, cfg.Embd}) {
			t.Errorf("wte in the file is %v, want [%d %d] (HF's unpadded vocabulary)", s, cfg.VocabSize, cfg.Embd)
		}
		if len(sd) != len(nn.StateDict(m).Keys()) {
			t.Errorf("%d tensors in the file, the model has %d", len(sd), len(nn.StateDict(m).Keys()))
		}
		m2 := newTiny(t, cfg, 11)
		if err := m2.LoadHF(path); err != nil {
			t.Fatal(err)
		}
		if cfg.PaddedVocab() == cfg.VocabSize {
			sameParams(t, m, m2)
			continue
		}
		// Padded: the real rows equal, the padded ones zero.
		w, w2 := m.Transformer.WTE.Weight.Value.F32(), m2.Transformer.WTE.Weight.Value.F32()
		n := cfg.VocabSize * cfg.Embd
		if !slices.Equal(w[:n], w2[:n]) {
			t.Error("wte's real rows differ after the round trip")
		}
		for i, v := range w2[n:] {
			if v != 0 {
				t.Fatalf("padded wte element %d is %v, want 0", i, v)
			}
		}
	}
}

// TestLoadHFVariants: the hub's GPT2Model names (no transformer.
// prefix) with the causal-mask buffers, and an lm_head.weight equal to
// wte, load; a different head, a missing key or a wrong shape fail
// naming the key.
func TestLoadHFVariants(t *testing.T) {
	m := newTiny(t, tinyConfig, 12)
	base := m.HFStateDict()
	hub := map[string]*tensor.Tensor{}
	for k, v := range base {
		hub[strings.TrimPrefix(k, "transformer.")] = v
	}
	hub["h.0.attn.bias"] = tensor.Ones(tensor.Float32, 1, 1, 8, 8)
	hub["h.1.attn.masked_bias"] = tensor.Scalar(tensor.Float32, -1e4)
	hub[lmHeadKey] = base[wteKey].Clone()
	m2 := newTiny(t, tinyConfig, 13)
	if err := m2.LoadHFStateDict(hub); err != nil {
		t.Fatal(err)
	}
	sameParams(t, m, m2)

	for name, c := range map[string]struct {
		edit func(sd map[string]*tensor.Tensor)
		want string
	}{
		"untied head": {func(sd map[string]*tensor.Tensor) {
			h := sd[wteKey].Clone()
			h.F32()[3] += 1
			sd[lmHeadKey] = h
		}, "lm_head.weight differs"},
		"missing": {func(sd map[string]*tensor.Tensor) { delete(sd, "transformer.h.1.mlp.c_fc.bias") }, "transformer.h.1.mlp.c_fc.bias"},
		"linear layout": {func(sd map[string]*tensor.Tensor) {
			sd["transformer.h.0.attn.c_attn.weight"] = tensor.New(tensor.Float32, 48, 16)
		}, "transformer.h.0.attn.c_attn.weight: file [48 16], model [16 48]"},
		"extra layer": {func(sd map[string]*tensor.Tensor) { sd["transformer.h.2.ln_1.weight"] = tensor.New(tensor.Float32, 16) }, "unexpected"},
	} {
		sd := map[string]*tensor.Tensor{}
		for k, v := range base {
			sd[k] = v
		}
		c.edit(sd)
		m3 := newTiny(t, tinyConfig, 14)
		before := slices.Clone(m3.Transformer.WTE.Weight.Value.F32())
		err := m3.LoadHFStateDict(sd)
		if !errors.Is(err, ErrHF) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrHF naming %q", name, err, c.want)
		}
		if !slices.Equal(before, m3.Transformer.WTE.Weight.Value.F32()) {
			t.Errorf("%s: a failed load changed the model", name)
		}
	}
}

// TestTrainerCheckpointIsHF: what the trainer saves (checkpoint.StateDict
// of the model) has HF's names and layouts, so SaveHF's file and it agree
// on every tensor of an unpadded model.
func TestTrainerCheckpointIsHF(t *testing.T) {
	m := newTiny(t, tinyConfig, 15)
	ck, hf := checkpoint.StateDict(m), m.HFStateDict()
	if len(ck) != len(hf) {
		t.Fatalf("%d vs %d keys", len(ck), len(hf))
	}
	for k, v := range hf {
		if c, ok := ck[k]; !ok || !slices.Equal(c.Shape(), v.Shape()) || !slices.Equal(c.F32(), v.F32()) {
			t.Errorf("%s differs between the trainer's state dict and HF's", k)
		}
	}
}
