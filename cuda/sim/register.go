package sim

import "github.com/goddp/goddp/tensor"

// The "sim" kind of goddp/tensor's device registry: a blank import of
// this package lets a program open "sim:N" by name
// (tensor.OpenDevice("sim:0")). Each open makes a new simulated device,
// which lives as long as the program: open it once and keep it.
func init() {
	tensor.RegisterDevice("sim", func(n int) (tensor.Device, error) { return New(n).Tensors(), nil })
}
