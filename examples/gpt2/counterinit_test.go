package main

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/goddp/goddp/nn"
)

// The torch anchor (scripts/torch_gpt2_ddp.py) starts from a counter-based
// init instead of torch's generator, so that this test can build the same
// weights bit for bit without committing them: element i of the tensor whose
// values start at offset o (the running element count over Hugging Face's
// state dict in torch's order) is uniform from splitmix64(seed<<32 + o + i).

func splitmix64(x uint64) uint64 {
	z := x + 0x9E3779B97F4A7C15
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// hfOrder lists GPT-2's Hugging Face state-dict names in torch's order
// (module registration order), without the tied lm_head.weight.
func hfOrder(layers int) []string {
	names := []string{"transformer.wte.weight", "transformer.wpe.weight"}
	for l := range layers {
		for _, s := range []string{"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
			"ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"} {
			names = append(names, "transformer.h."+strconv.Itoa(l)+"."+s)
		}
	}
	return append(names, "transformer.ln_f.weight", "transformer.ln_f.bias")
}

// counterInit overwrites sd's float32 tensors with the anchor's init.
func counterInit(sd *nn.TensorDict, layers int, seed uint64) error {
	var offset uint64
	for _, name := range hfOrder(layers) {
		t, ok := sd.Get(name)
		if !ok {
			return fmt.Errorf("counter init: the model has no %s", name)
		}
		v := t.F32()
		switch {
		case strings.HasSuffix(name, ".bias"):
			clear(v)
		case strings.Contains(name, ".ln_"):
			for i := range v {
				v[i] = 1
			}
		default:
			std := 0.02
			if strings.HasSuffix(name, "c_proj.weight") {
				std = 0.02 / math.Sqrt(float64(2*layers))
			}
			a := std * math.Sqrt(3)
			for i := range v {
				u := float64(splitmix64(seed<<32+offset+uint64(i))>>40) / (1 << 24)
				v[i] = float32((2*u - 1) * a)
			}
		}
		offset += uint64(len(v))
	}
	return nil
}

// initDigest is the anchor's init_digest: SHA-256 over the state dict in
// name order, each tensor as name NUL shape("x"-joined) NUL float32 bytes.
func initDigest(sd *nn.TensorDict, layers int) (string, error) {
	names := hfOrder(layers)
	slices.Sort(names)
	h := sha256.New()
	for _, name := range names {
		t, ok := sd.Get(name)
		if !ok {
			return "", fmt.Errorf("init digest: the model has no %s", name)
		}
		dims := make([]string, len(t.Shape()))
		for i, n := range t.Shape() {
			dims[i] = strconv.Itoa(n)
		}
		h.Write([]byte(name + "\x00" + strings.Join(dims, "x") + "\x00"))
		buf := make([]byte, 4*t.Numel())
		for i, f := range t.F32() {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(f))
		}
		h.Write(buf)
	}
	return fmt.Sprintf("%x", h.Sum(nil)), nil
}
