//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"strings"

	"github.com/goddp/goddp/cuda/devtensor"
	"github.com/goddp/goddp/tensor"
)

// dnnDevice is a device with cuDNN's convolutions (dlDevice; it reports
// ErrNoCUDNN when no cuDNN loaded). pass is 0 forward, 1 backward data, 2
// backward filter (devtensor.ConvPass); o the context's settings.
type dnnDevice interface {
	cudnn() (path string, version int, err error)
	dnnWorkspace(pass int, s *tensor.Conv2dShape, o dnnOpts) (int64, error)
	dnnConv(pass int, s *tensor.Conv2dShape, o dnnOpts, out, a, b uint64, beta float32, ws uint64, wsBytes int64) error
}

var errCUDNNOff = errors.New("cuDNN turned off for this context (SetCUDNN(false))")

// SetCUDNN turns cuDNN off (or back on) for this context's convolutions,
// as torch.backends.cudnn.enabled: off, they run goddp's own kernels
// (im2col, cuBLAS, col2im). On by default wherever cuDNN loaded.
func (c *Context) SetCUDNN(on bool) {
	c.setMu.Lock()
	defer c.setMu.Unlock()
	c.noDNN = !on
}

// SetCUDNNBenchmark has cuDNN time every algorithm for each convolution
// shape, on its first use, and keep the fastest, as
// torch.backends.cudnn.benchmark: the first step of each shape is slower,
// the others may be faster than with cuDNN's heuristics, which choose
// otherwise. Off by default, as torch's.
func (c *Context) SetCUDNNBenchmark(on bool) {
	c.setMu.Lock()
	defer c.setMu.Unlock()
	c.dnnBench = on
}

// OnConvEngine calls fn with a description of the engine (ConvEngine's
// words) each time a convolution pass runs on another engine than the
// last time, the first time included: so a caller that logs it logs
// once, and again only if cuDNN declines a later shape. fn must not call
// back into the context; nil stops the calls.
func (c *Context) OnConvEngine(fn func(engine string)) {
	c.setMu.Lock()
	defer c.setMu.Unlock()
	c.onEngine = fn
}

// ConvEngine says what runs this context's convolutions: cuDNN (its
// version and file), or goddp's own kernels and why (no cuDNN found,
// turned off, a shape or call cuDNN refused), per pass when they differ.
// Before any convolution ran, it says what would.
func (c *Context) ConvEngine() string {
	c.setMu.Lock()
	e := c.engines
	c.setMu.Unlock()
	if e == [3]string{} {
		_, _, err := c.convLibrary()
		return c.engineName(err)
	}
	if e[0] == e[1] && e[1] == e[2] {
		return e[0]
	}
	var parts []string
	for i, s := range e {
		if s == "" {
			s = "not run yet"
		}
		parts = append(parts, devtensor.ConvPass(i).String()+": "+s)
	}
	return strings.Join(parts, "; ")
}

// engineName names cuDNN (err nil) or goddp's kernels and why.
func (c *Context) engineName(err error) string {
	if err != nil {
		return "goddp's im2col and cuBLAS (" + err.Error() + ")"
	}
	path, version, _ := c.dev.(dnnDevice).cudnn()
	return fmt.Sprintf("cuDNN %s (%s)", dnnVersion(version), path)
}

// convLibrary returns the device's cuDNN and the settings that choose its
// plans, or why convolutions cannot use it.
func (c *Context) convLibrary() (dnnDevice, dnnOpts, error) {
	dd, ok := c.dev.(dnnDevice)
	if !ok {
		return nil, dnnOpts{}, fmt.Errorf("%w: this device has no cuDNN binding", ErrNoCUDNN)
	}
	c.setMu.Lock()
	off, o := c.noDNN, dnnOpts{tf32: c.tf32, benchmark: c.dnnBench}
	c.setMu.Unlock()
	if off {
		return nil, o, errCUDNNOff
	}
	if _, _, err := dd.cudnn(); err != nil {
		return nil, o, err
	}
	return dd, o, nil
}

// noteConv records which engine ran pass: cuDNN when err is nil, else
// goddp's kernels because of err.
func (c *Context) noteConv(pass devtensor.ConvPass, err error) {
	name := c.engineName(err)
	c.setMu.Lock()
	changed := c.engines[pass] != name
	c.engines[pass] = name
	fn := c.onEngine
	c.setMu.Unlock()
	if changed && fn != nil {
		fn(fmt.Sprintf("%v: conv2d %v: %s", c, pass, name))
	}
}

// ConvWorkspace implements devtensor.ConvLauncher with cuDNN; its error
// (no cuDNN, turned off, a shape cuDNN refuses) sends the pass to goddp's
// own kernels, and is what ConvEngine reports.
func (l *launcher) ConvWorkspace(pass devtensor.ConvPass, s *tensor.Conv2dShape) (int, error) {
	dd, o, err := l.c.convLibrary()
	var n int64
	if err == nil {
		err = l.c.do(func() error {
			var err error
			n, err = dd.dnnWorkspace(int(pass), s, o)
			return err
		})
	}
	if err != nil {
		l.c.noteConv(pass, err)
		return 0, err
	}
	return int(n), nil
}

// Conv implements devtensor.ConvLauncher: pass on cuDNN, on the compute
// stream.
func (l *launcher) Conv(pass devtensor.ConvPass, s *tensor.Conv2dShape, out devtensor.Mem, outOff int, a devtensor.Mem, aOff int,
	b devtensor.Mem, bOff int, beta float32, ws devtensor.Mem, wsBytes int) error {
	dd, o, err := l.c.convLibrary()
	if k := l.clock.Load(); k != nil && err == nil {
		dt := ""
		if s.BF16 {
			dt = " bf16"
		}
		defer l.timed(k, fmt.Sprintf("cudnn%s %v N%d C%d H%d W%d O%d K%dx%d", dt, pass, s.N, s.C, s.H, s.W, s.O, s.KH, s.KW)+
			aligns(out.Ptr()+uint64(outOff), a.Ptr()+uint64(aOff), b.Ptr()+uint64(bOff)))()
	}
	if err == nil {
		var wp uint64
		if ws != nil {
			wp = ws.Ptr()
		}
		err = l.c.do(func() error {
			return dd.dnnConv(int(pass), s, o, out.Ptr()+uint64(outOff), a.Ptr()+uint64(aOff), b.Ptr()+uint64(bOff),
				beta, wp, int64(wsBytes))
		})
	}
	l.c.noteConv(pass, err)
	return err
}
