package cuda

import "github.com/goddp/goddp/tensor"

// The "cuda" kind of goddp/tensor's device registry: a blank import of
// this package lets a program open "cuda:N" by name
// (tensor.OpenDevice("cuda:0")). Without the cuda build tag opening fails
// with ErrNotCompiled, and nothing links CUDA.
func init() { tensor.RegisterDevice("cuda", openTensors) }

// openTensors opens GPU n's Context and returns it as a tensor device.
// The Context lives as long as the program (a device opened by name is
// never closed); open it once and keep the tensor.Device.
func openTensors(n int) (tensor.Device, error) {
	c, err := NewContext(n)
	if err != nil {
		return nil, err
	}
	return c.Tensors(), nil
}
