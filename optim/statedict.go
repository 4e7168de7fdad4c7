package optim

import (
	"errors"
	"fmt"
	"sort"

	"github.com/goddp/goddp/tensor"
)

// ErrStateDict is wrapped by LoadStateDict errors.
var ErrStateDict = errors.New("optim: bad state dict")

// StateDict is a serializable snapshot of an optimizer or scheduler: named
// tensors plus named float64 scalars, both flat maps so that the checkpoint
// package can write them without knowing any optimizer.
//
// Keys follow torch's state_dict layout, flattened with dots. Parameters are
// numbered across groups in order, as torch does:
//
//	Kind                            "SGD", "Adam", "AdamW", or a scheduler name
//	Tensors["state.<i>.momentum_buffer"]  SGD with momentum, once created
//	Tensors["state.<i>.exp_avg"]          Adam/AdamW first moment
//	Tensors["state.<i>.exp_avg_sq"]       Adam/AdamW second moment
//	Tensors["state.<i>.max_exp_avg_sq"]   Adam/AdamW with AMSGrad
//	Scalars["state.<i>.step"]             Adam/AdamW step count of parameter i
//	Scalars["param_groups.<g>.lr"]        group learning rate
//	Scalars["param_groups.<g>.initial_lr"]
//	Scalars["param_groups.<g>.weight_decay"]
//	Scalars["param_groups.<g>.num_params"] checked on load
//	Scalars["num_groups"]                  checked on load
//	Scalars["<hyperparameter>"]            e.g. "momentum", "nesterov" (0/1), "beta1", "eps"
//
// Schedulers use Scalars only: "last_epoch", "step_count", "base_lrs.<g>",
// "last_lr.<g>" and their own hyperparameters.
//
// Booleans are stored as 0 or 1. A parameter with no state yet (it never had
// a gradient) has no state.<i> keys, as in torch.
type StateDict struct {
	Kind    string
	Tensors map[string]*tensor.Tensor
	Scalars map[string]float64
}

// NewStateDict returns an empty state dict of the given kind.
func NewStateDict(kind string) *StateDict {
	return &StateDict{Kind: kind, Tensors: map[string]*tensor.Tensor{}, Scalars: map[string]float64{}}
}

// TensorKeys returns the tensor keys sorted, for deterministic serialization.
func (sd *StateDict) TensorKeys() []string { return sortedKeys(sd.Tensors) }

// ScalarKeys returns the scalar keys sorted, for deterministic serialization.
func (sd *StateDict) ScalarKeys() []string { return sortedKeys(sd.Scalars) }

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func (sd *StateDict) scalar(key string) (float64, error) {
	v, ok := sd.Scalars[key]
	if !ok {
		return 0, fmt.Errorf("%w: %s: missing scalar %q", ErrStateDict, sd.Kind, key)
	}
	return v, nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// saveGroups writes the group scalars shared by every optimizer.
func (g *groups) save(sd *StateDict) {
	sd.Scalars["num_groups"] = float64(len(g.list))
	for i, pg := range g.list {
		p := fmt.Sprintf("param_groups.%d.", i)
		sd.Scalars[p+"lr"] = pg.LR
		sd.Scalars[p+"initial_lr"] = pg.InitialLR
		sd.Scalars[p+"weight_decay"] = pg.WeightDecay
		sd.Scalars[p+"num_params"] = float64(len(pg.Params))
	}
}

// checkGroups verifies that sd was saved from groups of the same sizes.
func (g *groups) check(sd *StateDict, kind string) error {
	if sd == nil {
		return fmt.Errorf("%w: nil state dict", ErrStateDict)
	}
	if sd.Kind != kind {
		return fmt.Errorf("%w: state dict of kind %q loaded into %s", ErrStateDict, sd.Kind, kind)
	}
	n, err := sd.scalar("num_groups")
	if err != nil {
		return err
	}
	if int(n) != len(g.list) {
		return fmt.Errorf("%w: %s: state dict has %d parameter groups, optimizer has %d", ErrStateDict, kind, int(n), len(g.list))
	}
	for i, pg := range g.list {
		p := fmt.Sprintf("param_groups.%d.", i)
		for _, k := range []string{"lr", "initial_lr", "weight_decay", "num_params"} {
			if _, err := sd.scalar(p + k); err != nil {
				return err
			}
		}
		if np := int(sd.Scalars[p+"num_params"]); np != len(pg.Params) {
			return fmt.Errorf("%w: %s: group %d has %d parameters in the state dict, %d in the optimizer", ErrStateDict, kind, i, np, len(pg.Params))
		}
		if lr := sd.Scalars[p+"lr"]; lr < 0 {
			return fmt.Errorf("%w: %s: group %d learning rate %v < 0", ErrStateDict, kind, i, lr)
		}
	}
	return nil
}

// loadGroups restores group scalars; call after check and after every other
// validation, so that a failed load changes nothing.
func (g *groups) load(sd *StateDict) {
	for i, pg := range g.list {
		p := fmt.Sprintf("param_groups.%d.", i)
		pg.LR = sd.Scalars[p+"lr"]
		pg.InitialLR = sd.Scalars[p+"initial_lr"]
		pg.WeightDecay = sd.Scalars[p+"weight_decay"]
	}
}

// stateTensor fetches and validates the optional per-parameter tensor key for
// parameter i, which must match like's dtype and element count.
func stateTensor(sd *StateDict, i int, name string, like *tensor.Tensor) (*tensor.Tensor, bool, error) {
	key := fmt.Sprintf("state.%d.%s", i, name)
	t, ok := sd.Tensors[key]
	if !ok || t == nil {
		return nil, false, nil
	}
	if t.DType() != like.DType() || t.Numel() != like.Numel() {
		return nil, false, fmt.Errorf("%w: %s is %v %v, parameter %d is %v %v", ErrStateDict, key,
			t.DType(), t.Shape(), i, like.DType(), like.Shape())
	}
	return t, true, nil
}

// cloneAs returns a private copy of src with like's shape, on like's
// device (a checkpoint's host tensors load onto a device model's device).
func cloneAs(src, like *tensor.Tensor) *tensor.Tensor {
	// To returns c itself when it is on like's device already.
	return src.Clone().Reshape(like.Shape()...).MustTo(like.Device())
}
