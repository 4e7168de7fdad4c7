package cuda_test

import (
	"errors"
	"fmt"

	"github.com/goddp/goddp/cuda"
	"github.com/goddp/goddp/tensor"
)

// Moving a tensor to GPU 0 and back, torch's x.to("cuda:0"). Built without
// -tags cuda, NewContext says so; with it, a GPU is required.
func Example() {
	c, err := cuda.NewContext(0)
	if errors.Is(err, cuda.ErrNotCompiled) {
		fmt.Println("CPU only:", err)
		return
	} else if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	x := tensor.FromF32([]float32{1, -2, 3, -4}, 2, 2)
	v, err := c.To(x, cuda.CUDA(0))
	if err != nil {
		fmt.Println(err)
		return
	}
	d := v.(*cuda.Tensor)
	defer d.Free()
	if err := c.ReLU(d, d); err != nil {
		fmt.Println(err)
		return
	}
	back, err := c.To(d, cuda.CPU)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(back.(*tensor.Tensor).F32())
}

func ExampleDevice() {
	fmt.Println(cuda.CPU, cuda.CUDA(1))
	// Output: cpu cuda:1
}
