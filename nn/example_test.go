package nn_test

import (
	"fmt"
	"math"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

// Build a small classifier, train it for a few steps and save its state.
func Example() {
	rng := tensor.NewRNG(0)
	model := nn.NewSequential(
		nn.NewLinear(rng, 4, 16), nn.NewReLU(),
		nn.NewLinear(rng, 16, 3))
	opt, err := optim.NewSGD(nn.Parameters(model), optim.SGDConfig{LR: 0.1, Momentum: 0.9})
	if err != nil {
		fmt.Println(err)
		return
	}

	x := autograd.Const(tensor.Randn(rng, tensor.Float32, 8, 4))
	y := []int{0, 1, 2, 0, 1, 2, 0, 1}
	var lossFn nn.CrossEntropyLoss
	var first, last float64
	for step := 0; step < 20; step++ {
		opt.ZeroGrad()
		loss := lossFn.Forward(model.Forward(x), y)
		if err := loss.Backward(); err != nil {
			fmt.Println(err)
			return
		}
		if err := opt.Step(); err != nil {
			fmt.Println(err)
			return
		}
		if step == 0 {
			first = loss.Value.Item()
		}
		last = loss.Value.Item()
	}
	fmt.Println("loss went down:", last < first/2)

	sd := nn.StateDict(model)
	for _, k := range sd.Keys() {
		t, _ := sd.Get(k)
		fmt.Println(k, t.Shape())
	}

	// Evaluate without recording gradients.
	nn.Eval(model)
	nn.NoGrad(model, func() {
		fmt.Println("records graph:", model.Forward(x).RequiresGrad())
	})
	// Output:
	// loss went down: true
	// 0.weight [16 4]
	// 0.bias [16]
	// 2.weight [3 16]
	// 2.bias [3]
	// records graph: false
}

// LoadStateDict names every key that does not fit.
func ExampleLoadStateDict() {
	rng := tensor.NewRNG(0)
	src := nn.NewSequential(nn.NewLinear(rng, 4, 8), nn.NewReLU(), nn.NewLinear(rng, 8, 2))
	dst := nn.NewSequential(nn.NewLinear(rng, 4, 8), nn.NewReLU(), nn.NewLinear(rng, 8, 3))
	err := nn.LoadStateDict(dst, nn.StateDict(src))
	fmt.Println(err)
	// Output:
	// nn: state dict does not match the module: mis-shaped keys ["2.weight: state dict [2 8], module [3 8]" "2.bias: state dict [2], module [3]"]
}

func ExampleNewConv2d() {
	rng := tensor.NewRNG(0)
	net := nn.NewSequential(
		nn.NewConv2d(rng, 1, 8, 3, nn.Padding(1)), nn.NewReLU(), nn.NewMaxPool2d(2),
		nn.NewConv2d(rng, 8, 8, 3, nn.Groups(8), nn.PaddingSame()), // depthwise
		nn.NewFlatten(), nn.NewLinear(rng, 8*14*14, 10))
	y := net.Forward(autograd.Const(tensor.New(tensor.Float32, 4, 1, 28, 28)))
	fmt.Println(y.Value.Shape(), nn.StateDict(net).Keys()[:3])
	// Output: [4 10] [0.weight 0.bias 3.weight]
}

// After torch.manual_seed(7), nn.Linear(3, 2) has these weights; goddp
// builds the same from tensor.NewRNG(7).
func ExampleNewLinear_torchInit() {
	rng := tensor.NewRNG(7)
	l := nn.NewLinear(rng, 3, 2)
	fmt.Printf("%.6f\n", l.Weight.Value.F32())
	// Output:
	// [0.040325 -0.347792 0.183842 0.181161 -0.308580 -0.086532]
}

// The torch.nn.init functions draw from an explicit generator; this is
// Conv2d's default weight init, kaiming_uniform_(a=√5) with fan_in = in·kh·kw.
func Example_kaimingUniform() {
	rng := tensor.NewRNG(0)
	w := tensor.New(tensor.Float32, 4, 3, 3, 3) // [out, in, kh, kw]
	nn.KaimingUniform_(rng, w, math.Sqrt(5), nn.FanIn, "leaky_relu")
	fanIn, _ := nn.CalculateFanInAndFanOut(w)
	fmt.Println(fanIn, w.Shape())
	// Output:
	// 27 [4 3 3 3]
}
