//go:build cuda

package cuda

import (
	"fmt"
	"sync"

	"goddp/tensor"
)

// Context is one GPU's primary CUDA context with goddp's kernels loaded,
// a cuBLAS handle, and one non-blocking compute stream on which all its
// work runs, in call order. Its methods are safe for concurrent use and
// run one at a time. After Close every method returns ErrClosed.
type Context struct {
	ordinal int
	dev     device

	mu     sync.Mutex // serialises calls; protects everything below
	closed bool
	ones   uint64 // fill_f32(1) scratch for SumRows
	onesN  int
	scr    uint64 // per-element loss terms
	scrN   int
	labels uint64 // int32 class labels
	labN   int

	tmu     sync.Mutex    // guards tensors and queues (neither is made inside do)
	tensors tensor.Device // Tensors' device, made on first use
	queues  *queueDevice  // Queues' device, made on first use
}

// NewContext opens GPU device (a CUDA ordinal: the device-th of those
// CUDA_VISIBLE_DEVICES leaves visible; LocalDevice gives this rank's):
// it loads libcuda.so.1 and cuBLAS, retains the device's primary context,
// creates the compute stream, loads the kernels and a cuBLAS handle. On a
// machine without what it needs it returns an error naming it
// (ErrNoDriver, ErrNoDevice, ErrNoCUBLAS).
func NewContext(device int) (*Context, error) {
	d, err := openDevice(device)
	if err != nil {
		return nil, err
	}
	return &Context{ordinal: device, dev: d}, nil
}

// do runs fn under the lock unless the context is closed.
func (c *Context) do(fn func() error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	return fn()
}

// Device is the GPU the context runs on.
func (c *Context) Device() Device { return CUDA(c.ordinal) }

// Info describes the GPU and the libraries loaded for it.
func (c *Context) Info() Info { return c.dev.info() }

// Stream is the compute stream (a CUstream). Work on other streams,
// such as the nccl backend's, is ordered against it with events; see
// doc.go.
func (c *Context) Stream() uintptr { return c.dev.stream() }

// Synchronize waits for all work queued on the context.
func (c *Context) Synchronize() error {
	return c.do(c.dev.sync)
}

// Close waits for queued work, then frees the scratch memory, the
// kernels, the cuBLAS handle and the stream, and releases the primary
// context. Tensors allocated on it become invalid; their Free returns
// ErrClosed. Close is idempotent.
func (c *Context) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	// Wait for queued work before freeing memory it may still use.
	first := c.dev.sync()
	for _, p := range []uint64{c.ones, c.scr, c.labels} {
		if p != 0 {
			if err := c.dev.free(p); err != nil && first == nil {
				first = err
			}
		}
	}
	c.tmu.Lock()
	qs := c.queues
	c.tmu.Unlock()
	if qs != nil {
		if err := qs.closeQueues(); err != nil && first == nil {
			first = fmt.Errorf("cuda: closing device %d's streams: %w", c.ordinal, err)
		}
	}
	if err := c.dev.close(); err != nil && first == nil {
		first = fmt.Errorf("cuda: closing device %d: %w", c.ordinal, err)
	}
	return first
}
