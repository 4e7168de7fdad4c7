//go:build cuda

package cuda

import "fmt"

// SetAllowTF32 lets float32 matrix products and convolutions on this
// context use TF32 tensor cores (Ampere and later): cuBLAS's
// CUBLAS_TF32_TENSOR_OP_MATH and cuDNN's default math, about 10 bits of
// mantissa in the products, for speed. Off by default, as torch's
// torch.backends.cuda.matmul.allow_tf32: cuBLAS's CUBLAS_DEFAULT_MATH and
// cuDNN's CUDNN_FMA_MATH keep every product float32. The trainer sets it
// from GODDP_ALLOW_TF32.
func (c *Context) SetAllowTF32(on bool) error {
	c.setMu.Lock()
	defer c.setMu.Unlock()
	if err := c.do(func() error { return c.dev.setMathMode(on) }); err != nil {
		return fmt.Errorf("cuda: %v: allowing TF32 = %v: %w", c, on, err)
	}
	c.tf32 = on
	return nil
}

// AllowTF32 reports SetAllowTF32's setting.
func (c *Context) AllowTF32() bool {
	c.setMu.Lock()
	defer c.setMu.Unlock()
	return c.tf32
}
