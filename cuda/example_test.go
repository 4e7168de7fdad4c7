package cuda_test

import (
	"errors"
	"fmt"

	"github.com/goddp/goddp/cuda"
	"github.com/goddp/goddp/tensor"
)

// Moving a tensor to GPU 0, running an op there and copying the result
// back, torch's x.to("cuda:0").relu().cpu(). Built without -tags cuda,
// opening "cuda:0" says so; with it, a GPU is required.
func Example() {
	dev, err := tensor.OpenDevice("cuda:0")
	if errors.Is(err, cuda.ErrNotCompiled) {
		fmt.Println("CPU only:", err)
		return
	} else if err != nil {
		fmt.Println(err)
		return
	}
	x := tensor.FromF32([]float32{1, -2, 3, -4}, 2, 2)
	y, err := tensor.ReLU(x.MustTo(dev)).To(tensor.CPU())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(y.F32())
}
