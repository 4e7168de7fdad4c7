package autograd

import "fmt"

// View returns a with a new shape (one dimension may be -1) sharing its
// storage, as torch's Tensor.view. Unlike Reshape it never copies: a
// non-contiguous a (a transposed or permuted view) panics, naming the shape,
// where torch raises "view size is not compatible"; call Reshape there.
func View(a *Variable, shape ...int) *Variable {
	if !a.Value.IsContiguous() {
		panic(fmt.Sprintf("autograd: View: input of shape %v with strides %v is not contiguous; use Reshape",
			a.Value.Shape(), a.Value.Strides()))
	}
	return FromOp(a.Value.Reshape(shape...), &reshapeOp{inputs: ins(a), name: "View"})
}
