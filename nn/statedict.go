package nn

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/goddp/goddp/tensor"
)

// ErrStateDict is wrapped by LoadStateDict's errors.
var ErrStateDict = errors.New("nn: state dict does not match the module")

// TensorDict is an ordered map from torch-style dotted names to tensors,
// what StateDict returns (torch's OrderedDict state_dict).
type TensorDict struct {
	keys []string
	m    map[string]*tensor.Tensor
}

// NewTensorDict returns an empty dict.
func NewTensorDict() *TensorDict { return &TensorDict{m: map[string]*tensor.Tensor{}} }

// Set stores t under key, appending key to the order if it is new.
func (sd *TensorDict) Set(key string, t *tensor.Tensor) {
	if sd.m == nil {
		sd.m = map[string]*tensor.Tensor{}
	}
	if _, ok := sd.m[key]; !ok {
		sd.keys = append(sd.keys, key)
	}
	sd.m[key] = t
}

// Get returns the tensor stored under key.
func (sd *TensorDict) Get(key string) (*tensor.Tensor, bool) {
	t, ok := sd.m[key]
	return t, ok
}

// Delete removes key.
func (sd *TensorDict) Delete(key string) {
	if _, ok := sd.m[key]; !ok {
		return
	}
	delete(sd.m, key)
	for i, k := range sd.keys {
		if k == key {
			sd.keys = append(sd.keys[:i], sd.keys[i+1:]...)
			break
		}
	}
}

// Keys returns the keys in order (a copy).
func (sd *TensorDict) Keys() []string { return append([]string(nil), sd.keys...) }

// Len returns the number of entries.
func (sd *TensorDict) Len() int { return len(sd.keys) }

// StateDict returns m's parameters and buffers under their dotted names, in
// torch's order (see Parent). The tensors alias the module's storage, as
// torch's state_dict does: serialize or Clone them before changing the model
// if a snapshot is needed.
func StateDict(m Module) *TensorDict {
	sd := NewTensorDict()
	collectState(m, "", sd)
	return sd
}

func collectState(m Module, prefix string, sd *TensorDict) {
	p, ok := m.(Parent)
	for _, np := range m.NamedParameters() {
		if !ok || !strings.Contains(np.Name, ".") {
			sd.Set(prefix+np.Name, np.Param.Value)
		}
	}
	for _, nb := range m.NamedBuffers() {
		if !ok || !strings.Contains(nb.Name, ".") {
			sd.Set(prefix+nb.Name, nb.Buffer)
		}
	}
	if !ok {
		return
	}
	for _, ch := range p.NamedChildren() {
		collectState(ch.Module, prefix+ch.Name+".", sd)
	}
}

// StateDictError lists every key that kept a state dict from loading.
// It wraps ErrStateDict.
type StateDictError struct {
	Missing    []string // in the module, not in the state dict
	Unexpected []string // in the state dict, not in the module
	Mismatched []string // "name: state dict [2 3], module [3 2]"
}

func (e *StateDictError) Error() string {
	var parts []string
	if len(e.Missing) > 0 {
		parts = append(parts, fmt.Sprintf("missing keys %q", e.Missing))
	}
	if len(e.Unexpected) > 0 {
		parts = append(parts, fmt.Sprintf("unexpected keys %q", e.Unexpected))
	}
	if len(e.Mismatched) > 0 {
		parts = append(parts, fmt.Sprintf("mis-shaped keys %q", e.Mismatched))
	}
	return ErrStateDict.Error() + ": " + strings.Join(parts, "; ")
}

func (e *StateDictError) Unwrap() error { return ErrStateDict }

// LoadStateDict copies sd's tensors into m's parameters and buffers, in
// place, so optimizers and DDP keep pointing at the same storage (torch's
// load_state_dict(strict=True)). Every key of m must be present with the same
// shape and no other key may be present; otherwise it returns a
// *StateDictError naming the missing, unexpected and mis-shaped keys, and m is
// left unchanged. Values are converted between float32 and float64 as needed.
func LoadStateDict(m Module, sd *TensorDict) error {
	if sd == nil {
		return fmt.Errorf("%w: nil state dict", ErrStateDict)
	}
	want := StateDict(m)
	var e StateDictError
	for _, k := range want.keys {
		src, ok := sd.m[k]
		if !ok || src == nil {
			e.Missing = append(e.Missing, k)
			continue
		}
		dst := want.m[k]
		if !slices.Equal(src.Shape(), dst.Shape()) {
			e.Mismatched = append(e.Mismatched, fmt.Sprintf("%s: state dict %v, module %v", k, src.Shape(), dst.Shape()))
		}
	}
	for _, k := range sd.keys {
		if _, ok := want.m[k]; !ok {
			e.Unexpected = append(e.Unexpected, k)
		}
	}
	if len(e.Missing)+len(e.Unexpected)+len(e.Mismatched) > 0 {
		return &e
	}
	for _, k := range want.keys {
		copyConvert(want.m[k], sd.m[k])
	}
	return nil
}

// copyConvert copies src's elements into dst (same shape), converting
// dtype, wherever each lives (tensor.CopyConvert: a device parameter is
// written through the host in float32, the dtype devices hold). A counter
// such as num_batches_tracked saved as int64 (torch) or as float64 (goddp
// before it had int64 tensors) loads into either, floats truncated as by
// torch's .long().
func copyConvert(dst, src *tensor.Tensor) {
	if err := tensor.CopyConvert(dst, src); err != nil {
		panic(fmt.Sprintf("nn: loading a state dict into a tensor on %v: %v", dst.Device(), err))
	}
}
