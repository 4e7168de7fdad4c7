//go:build !cgo || noblas || nodnnl

package tensor

// Without oneDNN the engine has no convolution kernels: the Conv2d*
// functions report false and autograd runs im2col through Gemm.

func engineConvFwd(*Conv2dShape, []float32, []float32, []float32, []float32) bool { return false }

func engineConvFwdReLU(*Conv2dShape, []float32, []float32, []float32, []float32) bool { return false }

func engineConvBwdData(*Conv2dShape, []float32, []float32, []float32) bool { return false }

func engineConvBwdWeights(*Conv2dShape, []float32, []float32, []float32, []float32) bool {
	return false
}

func engineConvKernel(*Conv2dShape, int, bool) string { return "" }
