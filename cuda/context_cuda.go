//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"gorgonia.org/cu"
	cublas "gorgonia.org/cu/blas"

	"goddp/cuda/kernels"
)

// Context is a GPU's primary CUDA context, with goddp's kernels loaded and
// a cuBLAS handle. A CUDA context is current on one OS thread at a time, so
// every call runs on the Context's own goroutine, locked to its thread;
// methods are safe for concurrent use and run one at a time. All work goes
// to the legacy default stream, so it is ordered, and ordered with the
// nccl backend's (blocking) stream.
type Context struct {
	device int
	work   chan func()
	done   chan struct{}
	once   sync.Once

	// Owned by the Context's goroutine.
	dev     cu.Device
	cuctx   cu.CUContext
	mod     cu.Module
	fns     map[string]cu.Function
	blas    *cublas.Standard
	ones    cu.DevicePtr // fill_f32(1) scratch for SumRows
	onesN   int
	scratch cu.DevicePtr // loss terms
	scrN    int
	labels  cu.DevicePtr // int32 class labels
	labN    int
}

// NewContext creates a context on GPU device, loads the kernels (PTX, JIT
// compiled by the driver) and creates a cuBLAS handle.
func NewContext(device int) (*Context, error) {
	c := &Context{device: device, work: make(chan func()), done: make(chan struct{})}
	ready := make(chan error)
	go c.loop(ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Context) loop(ready chan<- error) {
	runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
	defer close(c.done)
	if err := c.start(); err != nil {
		c.release()
		ready <- err
		return
	}
	ready <- nil
	for fn := range c.work {
		fn()
	}
	c.release()
}

func (c *Context) start() error {
	d, err := cu.GetDevice(c.device)
	if err != nil {
		return fmt.Errorf("cuda: device %d: %w", c.device, err)
	}
	// The device's primary context, which the CUDA runtime (and so NCCL)
	// uses too: device pointers are shared with the nccl backend.
	if c.cuctx, err = d.RetainPrimaryCtx(); err != nil {
		return fmt.Errorf("cuda: retaining device %d's primary context: %w", c.device, err)
	}
	c.dev = d
	if err := cu.SetCurrentContext(c.cuctx); err != nil {
		return fmt.Errorf("cuda: making device %d's context current: %w", c.device, err)
	}
	if c.mod, err = cu.LoadData(kernels.PTX); err != nil {
		return fmt.Errorf("cuda: loading the kernels' PTX (needs a driver for CUDA 11.8 or later): %w", err)
	}
	c.fns = map[string]cu.Function{}
	for _, name := range kernels.Names() {
		fn, err := c.mod.Function(name)
		if err != nil {
			return fmt.Errorf("cuda: kernel %s: %w", name, err)
		}
		c.fns[name] = fn
	}
	c.blas = &cublas.Standard{}
	if err := c.blas.Init(); err != nil {
		c.blas = nil
		return fmt.Errorf("cuda: cuBLAS: %w", err)
	}
	return nil
}

// release frees what start made, on the Context's thread.
func (c *Context) release() {
	for _, p := range []cu.DevicePtr{c.ones, c.scratch, c.labels} {
		if p != 0 {
			cu.MemFree(p)
		}
	}
	if c.blas != nil {
		c.blas.Close()
	}
	if c.mod != (cu.Module{}) {
		c.mod.Unload()
	}
	if c.cuctx != (cu.CUContext{}) {
		c.dev.ReleasePrimaryCtx()
	}
}

// do runs fn on the Context's thread and returns its error.
func (c *Context) do(fn func() error) error {
	reply := make(chan error, 1)
	select {
	case c.work <- func() { reply <- fn() }:
	case <-c.done:
		return errClosed
	}
	return <-reply
}

var errClosed = errors.New("cuda: context closed")

// Device is the GPU the context runs on.
func (c *Context) Device() Device { return CUDA(c.device) }

// Synchronize waits for all work queued on the context.
func (c *Context) Synchronize() error {
	return c.do(func() error { return cu.Synchronize() })
}

// Close waits for queued work, then frees the context and everything it
// made. Tensors allocated on it become invalid.
func (c *Context) Close() error {
	var err error
	c.once.Do(func() {
		err = c.do(func() error { return cu.Synchronize() })
		close(c.work)
		<-c.done
	})
	return err
}
