package checkpoint

import (
	"fmt"

	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/tensor"
)

// StateDict returns m's parameters and buffers by name, as torch's
// model.state_dict(), in the map form a Checkpoint stores. It is nn.StateDict
// without the order (safetensors keys are sorted anyway). The tensors alias
// the model's storage (save them before the next optimizer step, or Clone them).
func StateDict(m nn.Module) map[string]*tensor.Tensor {
	td := nn.StateDict(m)
	sd := make(map[string]*tensor.Tensor, td.Len())
	for _, k := range td.Keys() {
		sd[k], _ = td.Get(k)
	}
	return sd
}

// LoadStateDict copies sd into m's parameters and buffers in place through
// nn.LoadStateDict (so optimizers and DDP keep referring to the same tensors,
// float32/float64 converted, nothing changed unless every check passes).
// With strict, sd must hold exactly the model's names, as torch's
// load_state_dict(strict=True); without it, unexpected keys are ignored and
// missing ones keep the model's current values.
func LoadStateDict(m nn.Module, sd map[string]*tensor.Tensor, strict bool) error {
	current := nn.StateDict(m)
	td := nn.NewTensorDict()
	for k, v := range sd {
		if _, ok := current.Get(k); ok || strict {
			td.Set(k, v)
		}
	}
	if !strict {
		for _, k := range current.Keys() {
			if _, ok := td.Get(k); !ok {
				v, _ := current.Get(k)
				td.Set(k, v)
			}
		}
	}
	if err := nn.LoadStateDict(m, td); err != nil {
		return fmt.Errorf("%w: %w", ErrMismatch, err)
	}
	return nil
}
