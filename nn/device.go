package nn

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

// To moves m's parameters to dev in place, as torch's module.to(device): each
// parameter keeps its Variable (so optimizers and DDP built afterwards, or
// holding the same Variables, see the moved values) and gets its value, and
// any gradient, on dev. Buffers cannot move yet (no module with buffers has
// device kernels), so a module with buffers is refused before anything
// moves. Moving to the device the parameters are on is a no-op.
func To(m Module, dev tensor.Device) error {
	if !tensor.IsCPU(dev) {
		for _, nb := range m.NamedBuffers() {
			if nb.Buffer != nil {
				return fmt.Errorf("nn: To(%v): buffer %q cannot move to a device yet (no layer with buffers has device kernels)", dev, nb.Name)
			}
		}
	}
	for _, np := range m.NamedParameters() {
		v := np.Param
		val, err := v.Value.To(dev)
		if err != nil {
			return fmt.Errorf("nn: To(%v): parameter %q: %w", dev, np.Name, err)
		}
		if v.Grad != nil {
			g, err := v.Grad.To(dev)
			if err != nil {
				return fmt.Errorf("nn: To(%v): gradient of %q: %w", dev, np.Name, err)
			}
			v.Grad = g
		}
		v.Value = val
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
		if d != dev && !(tensor.IsCPU(d) && tensor.IsCPU(dev)) {
			return nil, fmt.Errorf("nn: parameter %q is on %v but %q is on %v", first, dev, np.Name, d)
		}
	}
	return dev, nil
}
