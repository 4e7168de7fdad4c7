//go:build cuda

package cuda

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/comm/nccl"
	"github.com/goddp/goddp/tensor"
)

// Tensor is a dense row-major tensor in GPU memory, owned by a Context.
// Free it when done (Close frees the context's memory too).
type Tensor struct {
	ctx   *Context
	ptr   uint64 // CUdeviceptr; 0 when empty or freed
	shape []int
	dtype tensor.DType
	n     int
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		if d < 0 {
			panic(fmt.Sprintf("cuda: negative dimension in shape %v", shape))
		}
		n *= d
	}
	return n
}

// Alloc returns a zeroed device tensor.
func (c *Context) Alloc(dt tensor.DType, shape ...int) (*Tensor, error) {
	t := &Tensor{ctx: c, shape: append([]int(nil), shape...), dtype: dt, n: numel(shape)}
	bytes := t.bytes()
	err := c.do(func() error {
		if bytes == 0 {
			return nil
		}
		p, err := c.dev.alloc(bytes)
		if err != nil {
			return fmt.Errorf("cuda: Alloc %v%v: %w", dt, shape, err)
		}
		if err := c.dev.zero(p, bytes); err != nil {
			c.dev.free(p)
			return fmt.Errorf("cuda: Alloc %v%v: %w", dt, shape, err)
		}
		t.ptr = p
		return nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// ToDevice copies a host tensor to the context's GPU.
func (c *Context) ToDevice(h *tensor.Tensor) (*Tensor, error) {
	t, err := c.Alloc(h.DType(), h.Shape()...)
	if err != nil {
		return nil, err
	}
	if err := t.CopyFromHost(h); err != nil {
		t.Free()
		return nil, err
	}
	return t, nil
}

// To is torch's x.to(device): a host *tensor.Tensor or a device *Tensor
// in, the same values on dev out (a *tensor.Tensor for CPU, a *Tensor for
// this context's GPU). It copies, except when x already is on dev, which
// is returned as is.
func (c *Context) To(x Value, dev Device) (Value, error) {
	switch v := x.(type) {
	case *tensor.Tensor:
		if dev.IsCPU() {
			return v, nil
		}
		if dev != c.Device() {
			return nil, fmt.Errorf("cuda: this context is on %v, not %v", c.Device(), dev)
		}
		return c.ToDevice(v)
	case *Tensor:
		if dev.IsCPU() {
			return v.ToHost()
		}
		if dev == v.Device() {
			return v, nil
		}
		return nil, fmt.Errorf("cuda: copying from %v to %v is not supported (go through the host)", v.Device(), dev)
	}
	return nil, fmt.Errorf("cuda: To: unsupported value %T", x)
}

// Shape returns the dimensions (do not modify).
func (t *Tensor) Shape() []int { return t.shape }

// DType is the element type.
func (t *Tensor) DType() tensor.DType { return t.dtype }

// Numel is the number of elements.
func (t *Tensor) Numel() int { return t.n }

// Device is the GPU holding t.
func (t *Tensor) Device() Device { return t.ctx.Device() }

// Ptr is the CUDA device pointer (CUdeviceptr) in the device's primary
// context, which the CUDA runtime, cuBLAS, NCCL and gorgonia.org/cu (as
// cu.DevicePtr) use too.
func (t *Tensor) Ptr() uintptr { return uintptr(t.ptr) }

func (t *Tensor) bytes() int64 { return int64(t.n) * int64(t.dtype.Size()) }

// CommBuffer views t for the nccl backend's device collectives
// (nccl.AsDevice(pg).AllReduceDevice(t.CommBuffer(), comm.Avg)). The
// buffer names the context's compute stream, so the collective waits for
// the work queued there before it and work queued there after it waits
// for the collective (see doc.go).
func (t *Tensor) CommBuffer() nccl.DeviceBuffer {
	dt := comm.Float32
	if t.dtype == tensor.Float64 {
		dt = comm.Float64
	}
	return nccl.DeviceBuffer{DType: dt, Ptr: uintptr(t.ptr), Count: t.n, Stream: t.ctx.Stream()}
}

// Free releases the device memory; t must not be used afterwards. Freeing
// twice is a no-op; after the Context's Close it returns ErrClosed (Close
// released the memory).
func (t *Tensor) Free() error {
	return t.ctx.do(func() error {
		// Calls no longer run one at a time: of two Frees, one frees.
		p := atomic.SwapUint64(&t.ptr, 0)
		if p == 0 {
			return nil
		}
		return t.ctx.dev.free(p)
	})
}

// hostBytes is a contiguous host tensor's storage as bytes.
func hostBytes(h *tensor.Tensor) unsafe.Pointer {
	if h.DType() == tensor.Float64 {
		return unsafe.Pointer(&h.F64()[0])
	}
	return unsafe.Pointer(&h.F32()[0])
}

func (t *Tensor) checkHost(h *tensor.Tensor, op string) {
	if h.DType() != t.dtype || h.Numel() != t.n {
		panic(fmt.Sprintf("cuda: %s: host %v%v and device %v%v differ", op, h.DType(), h.Shape(), t.dtype, t.shape))
	}
}

// CopyFromHost copies h (same dtype and element count) into t.
func (t *Tensor) CopyFromHost(h *tensor.Tensor) error {
	t.checkHost(h, "CopyFromHost")
	h = h.Contiguous()
	return t.ctx.do(func() error {
		if t.n == 0 {
			return nil
		}
		return t.ctx.dev.htod(t.ptr, hostBytes(h), t.bytes())
	})
}

// CopyToHost copies t into h (same dtype and element count). It waits
// for the work queued before it on the compute stream.
func (t *Tensor) CopyToHost(h *tensor.Tensor) error {
	t.checkHost(h, "CopyToHost")
	if !h.IsContiguous() {
		panic("cuda: CopyToHost into a non-contiguous tensor")
	}
	return t.ctx.do(func() error {
		if t.n == 0 {
			return nil
		}
		return t.ctx.dev.dtoh(hostBytes(h), t.ptr, t.bytes())
	})
}

// ToHost returns a host copy of t.
func (t *Tensor) ToHost() (*tensor.Tensor, error) {
	h := tensor.New(t.dtype, t.shape...)
	if err := t.CopyToHost(h); err != nil {
		return nil, err
	}
	return h, nil
}
