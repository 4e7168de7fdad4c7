//go:build cgo

package trainer

import (
	"fmt"

	"goddp/cuda"
	"goddp/cuda/sim"
	"goddp/tensor"
)

func openSim(localRank int) (tensor.Device, func(), error) {
	d := sim.New(localRank)
	return d.Tensors(), func() { _ = d.Close() }, nil
}

// openCUDA is -device cuda: cuda.Probe names what is missing (the cuda
// build tag, the driver, a device, cuBLAS).
func openCUDA(localRank int) (tensor.Device, func(), error) {
	if _, err := cuda.Probe(); err != nil {
		return nil, nil, fmt.Errorf("trainer: -device cuda (cuda:%d): %w", localRank, err)
	}
	return nil, nil, fmt.Errorf("trainer: -device cuda (cuda:%d): a GPU is usable, but goddp's tensor layer has no CUDA device yet: "+
		"goddp/cuda/devtensor needs a Launcher over cuda.Context (kernels and cuBLAS are there; see cuda/doc.go); use -device sim to run the same kernels on the host", localRank)
}
