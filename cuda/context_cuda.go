//go:build cuda

package cuda

import (
	"fmt"
	"sync"

	"github.com/goddp/goddp/tensor"
)

// Context is one GPU's primary CUDA context with goddp's kernels loaded,
// a cuBLAS handle, and one non-blocking compute stream on which all its
// work runs, in call order. Its methods are safe for concurrent use. After
// Close every method returns ErrClosed.
//
// No lock is held across a driver call that can block (a stream or event
// synchronisation, cuMemFree): the driver is thread-safe, and a lock held
// there is what deadlocked the comm stream's host functions against the
// goroutine that waited for them. mu guards only the open/closed state and
// the count of calls in flight, which Close waits to drain.
type Context struct {
	ordinal int
	dev     device

	mu      sync.Mutex
	closed  bool
	active  int        // calls inside do
	drained *sync.Cond // signalled when active drops to 0 after Close began

	// setMu guards the per-context settings (SetAllowTF32, SetCUDNN,
	// SetCUDNNBenchmark) and the record of which engine ran each
	// convolution pass (ConvEngine).
	setMu    sync.Mutex
	tf32     bool
	noDNN    bool
	dnnBench bool
	engines  [3]string
	onEngine func(string)

	tmu      sync.Mutex    // guards tensors and queues (neither is made inside do)
	tensors  tensor.Device // Tensors' device, made on first use
	launcher *launcher     // its launcher
	queues   *queueDevice  // Queues' device, made on first use
}

// NewContext opens GPU device (a CUDA ordinal: the device-th of those
// CUDA_VISIBLE_DEVICES leaves visible; LocalOrdinal gives this rank's):
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

// do runs fn unless the context is closed; Close waits for it. No lock is
// held while fn runs.
func (c *Context) do(fn func() error) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.active++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.active--
		if c.active == 0 && c.drained != nil {
			c.drained.Broadcast()
		}
		c.mu.Unlock()
	}()
	return fn()
}

// Ordinal is the CUDA ordinal of the context's GPU.
func (c *Context) Ordinal() int { return c.ordinal }

// String names the GPU as torch does, "cuda:N".
func (c *Context) String() string { return fmt.Sprintf("cuda:%d", c.ordinal) }

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

// Close waits for queued work, then frees the kernels, the cuBLAS handle
// and the streams, and releases the primary context. Tensors on its
// device (Tensors) become invalid. Close is idempotent.
func (c *Context) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	// Calls in flight finish first (new ones see ErrClosed); a host
	// function that calls in now fails instead of waiting for Close.
	c.drained = sync.NewCond(&c.mu)
	for c.active > 0 {
		c.drained.Wait()
	}
	c.mu.Unlock()
	// Wait for queued work before freeing memory it may still use.
	first := c.dev.sync()
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
