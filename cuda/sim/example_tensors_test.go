package sim_test

import (
	"fmt"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/cuda/sim"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/tensor"
)

// A model moved to the simulated device trains there: the forward and
// backward passes run kernels.cu on the device's compute stream, and only
// Item waits for them.
func ExampleDevice_Tensors() {
	d := sim.New(0)
	defer d.Close()
	dev := d.Tensors()
	model := nn.NewLinear(tensor.NewRNG(0), 3, 2)
	if err := nn.To(model, dev); err != nil {
		panic(err)
	}
	x, err := tensor.Ones(tensor.Float32, 4, 3).To(dev)
	if err != nil {
		panic(err)
	}
	loss := autograd.CrossEntropy(model.Forward(autograd.Const(x)), []int{0, 1, 0, 1}, autograd.ReductionMean)
	if err := loss.Backward(); err != nil {
		panic(err)
	}
	fmt.Println(loss.Value.Device(), model.Weight.Grad.Device(), loss.Value.Item() > 0)
	// Output: sim:0 sim:0 true
}
