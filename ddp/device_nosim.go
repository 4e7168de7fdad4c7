//go:build !cgo

package ddp

import (
	"goddp/tensor"
)

// deviceFor: without cgo (and so without sim) every device is staged.
func deviceFor(td tensor.Device) (Device, error) {
	if d, ok, err := providedDevice(td); ok {
		return d, err
	}
	return TensorDevice(td), nil
}
