//go:build !cuda

package cuda

import (
	"github.com/goddp/goddp/tensor"
)

// Context is a CUDA context on one GPU. Without the cuda build tag it
// cannot be created: NewContext returns ErrNotCompiled.
type Context struct{}

// NewContext returns ErrNotCompiled: this build has no CUDA.
func NewContext(device int) (*Context, error) { return nil, ErrNotCompiled }

// Probe returns ErrNotCompiled: this build has no CUDA.
func Probe() (Info, error) { return Info{}, ErrNotCompiled }

func (c *Context) Ordinal() int       { return -1 }
func (c *Context) String() string     { return "cuda (not compiled)" }
func (c *Context) Info() Info         { return Info{} }
func (c *Context) Stream() uintptr    { return 0 }
func (c *Context) Close() error       { return ErrNotCompiled }
func (c *Context) Synchronize() error { return ErrNotCompiled }

// Of finds no Context: without the cuda build tag none can exist.
func Of(td tensor.Device) (*Context, bool) { return nil, false }

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
