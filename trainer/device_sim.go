//go:build cgo

package trainer

import (
	"fmt"

	"github.com/goddp/goddp/cuda"
	"github.com/goddp/goddp/cuda/sim"
	"github.com/goddp/goddp/tensor"
)

func openSim(localRank int) (tensor.Device, func(), error) {
	d := sim.New(localRank)
	return d.Tensors(), func() { _ = d.Close() }, nil
}

// openCUDA is -device cuda: cuda:LOCAL_RANK's context as a tensor device.
// Without a usable GPU, NewContext's error names what is missing (the cuda
// build tag, the driver, a device, cuBLAS).
func openCUDA(localRank int) (tensor.Device, func(), error) {
	c, err := cuda.NewContext(localRank)
	if err != nil {
		return nil, nil, fmt.Errorf("trainer: -device cuda (cuda:%d): %w", localRank, err)
	}
	return c.Tensors(), func() { _ = c.Close() }, nil
}
