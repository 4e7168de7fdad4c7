package checkpoint

import (
	"fmt"
	"slices"
	"strings"

	"goddp/nn"
	"goddp/tensor"
)

// StateDict returns m's parameters and buffers by name, as torch's
// model.state_dict(). The tensors alias the model's storage (save them before
// the next optimizer step, or Clone them).
func StateDict(m nn.Module) map[string]*tensor.Tensor {
	sd := map[string]*tensor.Tensor{}
	for _, p := range m.NamedParameters() {
		sd[p.Name] = p.Param.Value
	}
	for _, b := range m.NamedBuffers() {
		sd[b.Name] = b.Buffer
	}
	return sd
}

// LoadStateDict copies sd into m's parameters and buffers in place (so
// optimizers and DDP keep referring to the same tensors), converting between
// float32 and float64 if needed. Every named entry must have the model's
// shape. With strict, sd must hold exactly the model's names, as torch's
// load_state_dict(strict=True). Nothing is modified unless every check passes.
func LoadStateDict(m nn.Module, sd map[string]*tensor.Tensor, strict bool) error {
	targets := map[string]*tensor.Tensor{}
	for _, p := range m.NamedParameters() {
		targets[p.Name] = p.Param.Value
	}
	for _, b := range m.NamedBuffers() {
		targets[b.Name] = b.Buffer
	}
	var missing, unexpected []string
	for name := range targets {
		if _, ok := sd[name]; !ok {
			missing = append(missing, name)
		}
	}
	for name := range sd {
		if _, ok := targets[name]; !ok {
			unexpected = append(unexpected, name)
		}
	}
	slices.Sort(missing)
	slices.Sort(unexpected)
	if strict && (len(missing) > 0 || len(unexpected) > 0) {
		return fmt.Errorf("%w: missing keys [%s], unexpected keys [%s]", ErrMismatch,
			strings.Join(missing, ", "), strings.Join(unexpected, ", "))
	}
	for _, name := range sortedKeys(targets) {
		src, ok := sd[name]
		if !ok {
			continue
		}
		if src == nil || !slices.Equal(src.Shape(), targets[name].Shape()) {
			var shape []int
			if src != nil {
				shape = src.Shape()
			}
			return fmt.Errorf("%w: size mismatch for %s: copying a param with shape %v from checkpoint, the shape in current model is %v",
				ErrMismatch, name, shape, targets[name].Shape())
		}
		if !targets[name].IsContiguous() {
			return fmt.Errorf("%w: %s is a non-contiguous view and cannot be loaded in place", ErrMismatch, name)
		}
	}
	for name, dst := range targets {
		if src, ok := sd[name]; ok {
			copyInto(dst, src)
		}
	}
	return nil
}

// copyInto copies src's elements into dst (same shape), converting dtype.
func copyInto(dst, src *tensor.Tensor) {
	src = src.Contiguous()
	switch {
	case dst.DType() == tensor.Float32 && src.DType() == tensor.Float32:
		copy(dst.F32(), src.F32())
	case dst.DType() == tensor.Float64 && src.DType() == tensor.Float64:
		copy(dst.F64(), src.F64())
	case dst.DType() == tensor.Float32:
		d := dst.F32()
		for i, v := range src.F64() {
			d[i] = float32(v)
		}
	default:
		d := dst.F64()
		for i, v := range src.F32() {
			d[i] = float64(v)
		}
	}
}
