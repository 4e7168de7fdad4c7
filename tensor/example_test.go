package tensor_test

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

func Example() {
	tensor.SetThreads(tensor.ThreadsFromEnv()) // once, from main

	x := tensor.FromF32([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	w := tensor.FromF32([]float32{1, 0, -1, 0.5, 0.5, 0.5}, 2, 3)
	b := tensor.FromF32([]float32{10, 20}, 2)

	// A linear layer: x @ wᵀ + b, with b broadcast over the batch.
	y := tensor.Add(tensor.MatMul(x, w.T()), b)
	fmt.Println(y.Shape(), y.F32())

	p := tensor.Softmax(y, 1)
	fmt.Printf("%.3f\n", p.F32())
	fmt.Println(tensor.ArgMax(y, 1))

	rng := tensor.NewRNG(0)
	r := tensor.Randn(rng, tensor.Float32, 2, 3)
	fmt.Println(r.Shape(), r.DType())
	// Output:
	// [2 2] [8 23 8 27.5]
	// [0.000 1.000 0.000 1.000]
	// [1 1]
	// [2 3] float32
}

func ExampleGemm() {
	// C = A·Bᵀ for row-major A[2,3] and B[2,3].
	a := []float32{1, 2, 3, 4, 5, 6}
	b := []float32{1, 1, 1, 0, 1, 0}
	c := make([]float32, 4)
	tensor.Gemm(false, true, 2, 2, 3, 1, a, 3, b, 3, 0, c, 2)
	fmt.Println(c)
	// Output: [6 2 15 5]
}

func ExampleMatMul_batched() {
	a := tensor.Ones(tensor.Float32, 4, 2, 3) // a batch of 4 matrices
	b := tensor.Ones(tensor.Float32, 3, 5)    // broadcast over the batch
	fmt.Println(tensor.MatMul(a, b).Shape())
	// Output: [4 2 5]
}

// NewRNG(s) is torch.Generator().manual_seed(s): the same draws, bit for bit.
func ExampleNewRNG() {
	rng := tensor.NewRNG(0)
	fmt.Printf("%.4f\n", tensor.Rand(rng, tensor.Float32, 3).F32()) // torch.rand(3, generator=g)
	fmt.Println(rng.Perm(5))                                        // torch.randperm(5, generator=g)
	// Output:
	// [0.4963 0.7682 0.0885]
	// [0 4 2 1 3]
}
