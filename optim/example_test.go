package optim_test

import (
	"fmt"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

// Minimise f(x) = sum(x^2) with SGD and momentum, warming the learning rate
// up linearly over the first steps. The gradient 2x is written by hand here;
// in a model it comes from loss.Backward().
func Example() {
	x := autograd.Param(tensor.FromF32([]float32{3, -2}, 2))
	opt, err := optim.NewSGD([]*autograd.Variable{x}, optim.SGDConfig{LR: 0.1, Momentum: 0.5})
	if err != nil {
		fmt.Println(err)
		return
	}
	warmup, err := optim.NewLinearWarmup(opt, 0.5, 2) // torch: LinearLR(opt, 0.5, 1.0, total_iters=2)
	if err != nil {
		fmt.Println(err)
		return
	}
	for step := 0; step < 50; step++ {
		opt.ZeroGrad()
		v := x.Value.F32()
		x.Grad = tensor.FromF32([]float32{2 * v[0], 2 * v[1]}, 2)
		if err := opt.Step(); err != nil {
			fmt.Println(err)
			return
		}
		warmup.Step()
	}
	fmt.Printf("lr %.2f, x %.4f\n", opt.ParamGroups()[0].LR, x.Value.F32())

	// Save and restore the optimizer state (the checkpoint package writes
	// sd.Tensors and sd.Scalars to disk).
	sd := opt.StateDict()
	fmt.Println(sd.Kind, sd.TensorKeys(), sd.Scalars["param_groups.0.lr"])
	// Output:
	// lr 0.10, x [0.0000 -0.0000]
	// SGD [state.0.momentum_buffer] 0.1
}

// Clip the global gradient norm before the optimizer step.
func ExampleClipGradNorm() {
	w := autograd.Param(tensor.New(tensor.Float32, 2))
	w.Grad = tensor.FromF32([]float32{3, 4}, 2)
	norm := optim.ClipGradNorm([]*autograd.Variable{w}, 1)
	fmt.Printf("norm %.1f, clipped %.3f\n", norm, w.Grad.F32())
	// Output: norm 5.0, clipped [0.600 0.800]
}
