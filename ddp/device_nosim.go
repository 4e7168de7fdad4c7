//go:build !cgo

package ddp

import (
	"fmt"

	"goddp/tensor"
)

// deviceFor: without cgo there is no device adapter (sim needs cgo).
func deviceFor(td tensor.Device) (Device, error) {
	return nil, fmt.Errorf("%w: the parameters are on %v, but this build has no ddp.Device adapter for it (goddp/cuda/sim needs cgo); pass OnDevice",
		ErrInvalidOption, td)
}
