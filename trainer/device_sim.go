//go:build cgo

package trainer

import (
	"fmt"
	"os"

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
// GODDP_ALLOW_TF32 and GODDP_CUDNN set the context's switches
// (cudaSettings); which engine runs the convolutions is printed to stderr
// the first time each pass runs.
func openCUDA(localRank int) (tensor.Device, func(), error) {
	tf32, cudnn, err := cudaSettings(os.Getenv)
	if err != nil {
		return nil, nil, err
	}
	c, err := cuda.NewContext(localRank)
	if err != nil {
		return nil, nil, fmt.Errorf("trainer: -device cuda (cuda:%d): %w", localRank, err)
	}
	if err := c.SetAllowTF32(tf32); err != nil {
		_ = c.Close()
		return nil, nil, fmt.Errorf("trainer: -device cuda (cuda:%d): %w", localRank, err)
	}
	c.SetCUDNN(cudnn)
	c.OnConvEngine(func(engine string) { fmt.Fprintln(os.Stderr, "trainer:", engine) })
	return c.Tensors(), func() { _ = c.Close() }, nil
}
