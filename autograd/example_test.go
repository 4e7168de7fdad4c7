package autograd_test

import (
	"fmt"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// A forward pass, a backward pass and a grad-ready hook: the hook fires while
// backward is still running, once per leaf, last layer first; a callback
// queued on the pass runs after every gradient is computed, before Backward
// returns.
func Example() {
	x := autograd.Const(tensor.FromF32([]float32{1, 2, 3, 4, 5, 6}, 2, 3)) // batch of 2
	w1 := autograd.Param(tensor.FromF32([]float32{0.1, 0.2, 0.3, -0.1, -0.2, 0.1}, 2, 3))
	b1 := autograd.Param(tensor.FromF32([]float32{0, 0.1}, 2))
	w2 := autograd.Param(tensor.FromF32([]float32{1, -1, 0.5, 0.5}, 2, 2))

	names := map[*autograd.Variable]string{w1: "w1", b1: "b1", w2: "w2"}
	for _, p := range []*autograd.Variable{w1, b1, w2} {
		p.RegisterGradReadyHook(func(leaf *autograd.Variable, pass *autograd.Pass) {
			fmt.Printf("hook %s: grad %v ready\n", names[leaf], leaf.Grad.Shape())
			if leaf == w2 {
				pass.QueueCallback(func() error { fmt.Println("callback: all gradients done"); return nil })
			}
		})
	}

	h := autograd.ReLU(autograd.Linear(x, w1, b1))
	logits := autograd.Linear(h, w2, nil)
	loss := autograd.CrossEntropy(logits, []int{0, 1}, autograd.ReductionMean)
	fmt.Printf("loss %.4f\n", loss.Value.Item())

	if err := loss.Backward(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("dL/db1 %.4f\n", b1.Grad.F32())
	// Output:
	// loss 1.0935
	// hook w2: grad [2 2] ready
	// hook w1: grad [2 3] ready
	// hook b1: grad [2] ready
	// callback: all gradients done
	// dL/db1 [0.1251 0.0000]
}

// Backward on a non-scalar output needs a seed gradient.
func ExampleVariable_BackwardWith() {
	x := autograd.Param(tensor.FromF64([]float64{1, 2, 3}, 3))
	y := autograd.Mul(x, x)
	fmt.Println(y.Backward())
	_ = y.BackwardWith(tensor.FromF64([]float64{1, 1, 1}, 3))
	fmt.Println(x.Grad.F64())
	// Output:
	// autograd: backward on a non-scalar output needs a seed gradient: shape [3]
	// [2 4 6]
}

// GradCheck compares an op's gradients with finite differences.
func ExampleGradCheck() {
	x := tensor.FromF64([]float64{0.5, -1, 2}, 3)
	err := autograd.GradCheck(func(xs []*autograd.Variable) *autograd.Variable {
		return autograd.Tanh(autograd.Mul(xs[0], xs[0]))
	}, []*tensor.Tensor{x}, autograd.GradCheckOptions{})
	fmt.Println(err)
	// Output:
	// <nil>
}
