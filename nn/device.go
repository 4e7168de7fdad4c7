package nn

import (
	"fmt"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// To moves m's parameters and float32 buffers to dev in place, as torch's
// module.to(device): each parameter keeps its Variable (so optimizers and
// DDP built afterwards, or holding the same Variables, see the moved
// values) and gets its value, and any gradient, on dev; each buffer keeps
// its *tensor.Tensor (tensor.Tensor.SetData), so the layer that holds it (BatchNorm's
// running statistics) and anything else holding it see it on dev.
// Integer buffers (BatchNorm's num_batches_tracked, a 0-d int64 counter
// that only host code reads and increments) stay on the host. Moving to
// the device m is on is a no-op; every tensor is copied before any
// moves, so a failed copy leaves m where it was.
func To(m Module, dev tensor.Device) error {
	type move struct {
		t, to *tensor.Tensor
	}
	var moves []move
	for _, nb := range m.NamedBuffers() {
		b := nb.Buffer
		if b == nil || b.DType() != tensor.Float32 {
			continue
		}
		to, err := b.Contiguous().To(dev)
		if err != nil {
			return fmt.Errorf("nn: To(%v): buffer %q: %w", dev, nb.Name, err)
		}
		moves = append(moves, move{b, to})
	}
	type pmove struct {
		v        *autograd.Variable
		val, grd *tensor.Tensor
	}
	var pmoves []pmove
	for _, np := range m.NamedParameters() {
		v := np.Param
		val, err := v.Value.To(dev)
		if err != nil {
			return fmt.Errorf("nn: To(%v): parameter %q: %w", dev, np.Name, err)
		}
		g := v.Grad
		if g != nil {
			if g, err = g.To(dev); err != nil {
				return fmt.Errorf("nn: To(%v): gradient of %q: %w", dev, np.Name, err)
			}
		}
		pmoves = append(pmoves, pmove{v, val, g})
	}
	for _, mv := range moves {
		mv.t.SetData(mv.to)
	}
	for _, pm := range pmoves {
		pm.v.Value, pm.v.Grad = pm.val, pm.grd
	}
	return nil
}

// DeviceOf returns the device of m's parameters, or an error naming two
// parameters on different devices. A module without parameters is on the
// CPU.
func DeviceOf(m Module) (tensor.Device, error) {
	var dev tensor.Device = tensor.CPU()
	first := ""
	for _, np := range m.NamedParameters() {
		d := np.Param.Value.Device()
		if first == "" {
			dev, first = d, np.Name
			continue
		}
		if d.String() != dev.String() { // torch's device equality: by name
			return nil, fmt.Errorf("nn: parameter %q is on %v but %q is on %v", first, dev, np.Name, d)
		}
	}
	return dev, nil
}
