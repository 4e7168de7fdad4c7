package amp_test

import (
	"context"
	"fmt"

	"github.com/goddp/goddp/amp"
	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

// A float16-style training step with dynamic loss scaling: scale the loss,
// backpropagate, let the scaler unscale and step, then update the scale.
func ExampleGradScaler() {
	w := autograd.Param(tensor.FromF32([]float32{1, -2}, 2))
	opt, _ := optim.NewSGD([]*autograd.Variable{w}, optim.SGDConfig{LR: 0.1})
	scaler, _ := amp.NewGradScaler(amp.GradScalerConfig{}) // torch's defaults
	ctx := context.Background()

	opt.ZeroGrad()
	loss := autograd.SumAll(autograd.Mul(w, w))
	if err := scaler.ScaleLoss(loss).Backward(); err != nil {
		panic(err)
	}
	fmt.Println("scaled gradient:", w.Grad.F32())
	skipped, err := scaler.Step(ctx, opt)
	if err != nil {
		panic(err)
	}
	scaler.Update()
	fmt.Println("skipped:", skipped, "weights:", w.Value.F32(), "scale:", scaler.Scale())
	// Output:
	// scaled gradient: [131072 -262144]
	// skipped: false weights: [0.8 -1.6] scale: 65536
}
