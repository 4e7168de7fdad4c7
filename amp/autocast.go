package amp

import (
	"fmt"

	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/tensor"
)

// DType names a lower precision for Autocast.
type DType string

const (
	// BFloat16 runs products with bfloat16 operands and float32
	// accumulation (torch.autocast(dtype=torch.bfloat16)).
	BFloat16 DType = "bf16"
	// Float32 turns autocast off.
	Float32 DType = "fp32"
	// Float16 is float16 training's loss scaling: a run with it trains
	// through a GradScaler. float16 products are not implemented, so
	// Autocast lowers nothing for it: the products stay float32 and only
	// the loss scaling (and its state in checkpoints) is float16's.
	Float16 DType = "fp16"
)

// ParseDType reads a -amp flag value: "bf16" (or "bfloat16"), "fp16" (or
// "float16"), "fp32" (or "float32", "" and "off").
func ParseDType(s string) (DType, error) {
	switch s {
	case "bf16", "bfloat16":
		return BFloat16, nil
	case "fp16", "float16":
		return Float16, nil
	case "", "off", "fp32", "float32":
		return Float32, nil
	}
	return "", fmt.Errorf("%w: -amp %q: want bf16, fp16 or fp32", ErrConfig, s)
}

// precisionSetter is a layer whose products autocast can lower.
type precisionSetter interface {
	SetPrecision(tensor.Precision) tensor.Precision
}

// Autocast lowers the products of every layer in m's tree that torch's
// autocast lowers, and returns a function that restores what each had. It
// is Go's form of `with torch.autocast(device, dtype)`:
//
//	defer amp.Autocast(model, amp.BFloat16)()
//
// or, for a whole run, call it once after building the model. As in torch,
// the layers on the lower-precision list run their matrix products in
// bfloat16 (today: nn.Linear, nn.Conv2d, and nn.MultiheadAttention's
// projections and its two attention products, torch's bmm; a model that
// calls autograd.SelfAttention itself passes its projection's Precision in
// AttentionOptions, as examples/gpt does); everything else (norms, softmax, losses,
// activations, the optimizer) stays float32, and so do the parameters and
// their gradients ("master weights"), so DDP and checkpoints are unchanged.
//
// Unlike torch, whose bf16 linear also returns a bf16 tensor, a lowered
// layer's output is float32 (the accumulator, not rounded): the same
// products, one rounding fewer. Without AVX512-BF16 (tensor.BF16Native)
// the values are the same but run at float32 speed.
func Autocast(m nn.Module, dt DType) (restore func()) {
	p := tensor.PrecisionFloat32
	if dt == BFloat16 {
		p = tensor.PrecisionBFloat16
	}
	type was struct {
		s precisionSetter
		p tensor.Precision
	}
	var undo []was
	walk(m, func(m nn.Module) {
		if s, ok := m.(precisionSetter); ok {
			undo = append(undo, was{s, s.SetPrecision(p)})
		}
	})
	return func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i].s.SetPrecision(undo[i].p)
		}
	}
}

// walk calls fn on m and every module below it, once each.
func walk(m nn.Module, fn func(nn.Module)) {
	seen := map[nn.Module]bool{}
	var visit func(nn.Module)
	visit = func(m nn.Module) {
		if m == nil || seen[m] {
			return
		}
		seen[m] = true
		fn(m)
		if par, ok := m.(nn.Parent); ok {
			for _, c := range par.NamedChildren() {
				visit(c.Module)
			}
		}
	}
	visit(m)
}

// Lowered counts the layers in m's tree whose products run in bfloat16.
func Lowered(m nn.Module) int {
	n := 0
	walk(m, func(m nn.Module) {
		switch l := m.(type) {
		case *nn.Linear:
			if l.Precision == tensor.PrecisionBFloat16 {
				n++
			}
		case *nn.Conv2d:
			if l.Params.Precision == tensor.PrecisionBFloat16 {
				n++
			}
		}
	})
	return n
}
