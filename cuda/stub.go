//go:build !cuda

package cuda

import (
	"github.com/goddp/goddp/comm/nccl"
	"github.com/goddp/goddp/tensor"
)

// Context is a CUDA context on one GPU. Without the cuda build tag it
// cannot be created: NewContext returns ErrNotCompiled.
type Context struct{}

// Tensor is a dense row-major tensor in GPU memory. Without the cuda
// build tag none can exist.
type Tensor struct{}

// NewContext returns ErrNotCompiled: this build has no CUDA.
func NewContext(device int) (*Context, error) { return nil, ErrNotCompiled }

// Probe returns ErrNotCompiled: this build has no CUDA.
func Probe() (Info, error) { return Info{}, ErrNotCompiled }

func (c *Context) Device() Device                                       { return CPU }
func (c *Context) Info() Info                                           { return Info{} }
func (c *Context) Stream() uintptr                                      { return 0 }
func (c *Context) Close() error                                         { return ErrNotCompiled }
func (c *Context) Synchronize() error                                   { return ErrNotCompiled }
func (c *Context) Alloc(dt tensor.DType, shape ...int) (*Tensor, error) { return nil, ErrNotCompiled }
func (c *Context) ToDevice(t *tensor.Tensor) (*Tensor, error)           { return nil, ErrNotCompiled }
func (c *Context) To(v Value, dev Device) (Value, error)                { return nil, ErrNotCompiled }
func (c *Context) MatMul(out, a, b *Tensor, transA, transB bool, alpha, beta float32) error {
	return ErrNotCompiled
}
func (c *Context) AddBias(y, b *Tensor) error                      { return ErrNotCompiled }
func (c *Context) SumRows(out, x *Tensor) error                    { return ErrNotCompiled }
func (c *Context) ReLU(y, x *Tensor) error                         { return ErrNotCompiled }
func (c *Context) ReLUBackward(dx, dy, x *Tensor) error            { return ErrNotCompiled }
func (c *Context) SGD(w, g *Tensor, lr float32) error              { return ErrNotCompiled }
func (c *Context) Fill(x *Tensor, v float32) error                 { return ErrNotCompiled }
func (c *Context) MSE(grad, pred, target *Tensor) (float64, error) { return 0, ErrNotCompiled }
func (c *Context) SoftmaxCrossEntropy(grad, logits *Tensor, labels []int) (float64, error) {
	return 0, ErrNotCompiled
}

func (t *Tensor) Shape() []int                        { return nil }
func (t *Tensor) DType() tensor.DType                 { return tensor.Float32 }
func (t *Tensor) Numel() int                          { return 0 }
func (t *Tensor) Device() Device                      { return CPU }
func (t *Tensor) Ptr() uintptr                        { return 0 }
func (t *Tensor) Free() error                         { return ErrNotCompiled }
func (t *Tensor) ToHost() (*tensor.Tensor, error)     { return nil, ErrNotCompiled }
func (t *Tensor) CopyFromHost(h *tensor.Tensor) error { return ErrNotCompiled }
func (t *Tensor) CopyToHost(h *tensor.Tensor) error   { return ErrNotCompiled }
func (t *Tensor) CommBuffer() nccl.DeviceBuffer       { return nccl.DeviceBuffer{} }

// Tensors is nil: without the cuda build tag no Context can be made, so
// there is no device to return.
func (c *Context) Tensors() tensor.Device { return nil }

// SetAllowTF32 returns ErrNotCompiled: this build has no CUDA.
func (c *Context) SetAllowTF32(on bool) error   { return ErrNotCompiled }
func (c *Context) AllowTF32() bool              { return false }
func (c *Context) SetCUDNN(on bool)             {}
func (c *Context) SetCUDNNBenchmark(on bool)    {}
func (c *Context) OnConvEngine(fn func(string)) {}

// ConvEngine says that this build runs no convolution on a GPU.
func (c *Context) ConvEngine() string { return ErrNotCompiled.Error() }

// StartOpTimes times nothing: this build has no CUDA.
func (c *Context) StartOpTimes() (stop func() []OpTime) { return func() []OpTime { return nil } }
