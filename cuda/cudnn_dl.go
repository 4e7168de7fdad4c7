//go:build cuda

package cuda

/*
#include <stdlib.h>
#include "driver_dl.h"
*/
import "C"

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"github.com/goddp/goddp/internal/libfind"
	"github.com/goddp/goddp/tensor"
)

// dnnWorkspaceMax bounds the scratch a cuDNN algorithm may ask for: an
// algorithm wanting more is passed over for the next the heuristics offer.
const dnnWorkspaceMax = 1 << 30

// cuDNN's math types (cudnnMathType_t). For float32 data DEFAULT_MATH lets
// cuDNN 8 and 9 use TF32 tensor cores on Ampere and later; FMA_MATH keeps
// every product in float32, which is what torch asks for when TF32 is not
// allowed.
const (
	dnnDefaultMath = 0
	dnnFMAMath     = 3
)

// dnnState is a dlDevice's cuDNN: the library, loaded when the device is
// opened (or why none loaded), and a handle and per-shape plans made on
// the first convolution, so a context that runs none pays nothing.
type dnnState struct {
	path    string
	version int
	err     error // why no cuDNN loaded: every convolution runs goddp's own kernels

	mu     sync.Mutex // guards what follows; held across cuDNN calls, which only queue
	h      unsafe.Pointer
	hErr   error // cudnnCreate's failure, kept: it would fail again
	plans  map[dnnKey]*C.gcu_dnn_plan
	bad    map[dnnKey]error // shapes cuDNN refused: not asked again
	closed bool
}

// dnnOpts are a context's settings that choose a plan: whether TF32
// algorithms may run, and whether to time every algorithm (cudnnFind*) or
// trust the heuristics.
type dnnOpts struct {
	tf32, benchmark bool
}

// dnnKey names a plan: the shape (without amp's BF16 flag) and the
// options.
type dnnKey struct {
	s tensor.Conv2dShape
	o dnnOpts
}

// loadCUDNN tries the cuDNN candidates in order: GODDP_CUDNN_LIBRARY, the
// system's libcudnn.so.9 and .8, then the Python wheels' copies.
func loadCUDNN(l *C.gcu_lib) (string, int, error) {
	var tried []string
	var msg [512]C.char
	for _, p := range libfind.CandidatesSystemFirst("GODDP_CUDNN_LIBRARY", libfind.CUDNNSonames(), libfind.Env{}) {
		cp := C.CString(p)
		rc := C.gcu_load_cudnn(l, cp, &msg[0], C.int(len(msg)))
		C.free(unsafe.Pointer(cp))
		if rc == 0 {
			return p, int(C.gcu_dnn_version(l)), nil
		}
		tried = append(tried, C.GoString(&msg[0]))
	}
	return "", 0, fmt.Errorf("%w: tried %s; install cuDNN (pip install nvidia-cudnn-cu12, or the system's package) or set GODDP_CUDNN_LIBRARY",
		ErrNoCUDNN, strings.Join(tried, "; "))
}

// findCUDNN loads cuDNN into a table of its own, for Probe: which file
// loads and its version, or why none does. The table is kept (dlopen's
// handle is never closed: the library stays loaded for the process).
func findCUDNN() (string, int, error) {
	l := (*C.gcu_lib)(C.calloc(1, C.size_t(unsafe.Sizeof(C.gcu_lib{}))))
	return loadCUDNN(l)
}

// preloadSiblings loads the sub-libraries beside a cuDNN opened by path
// (libcudnn_cnn.so.9, libcudnn_ops.so.9, ...; cuDNN 8's libcudnn_*_infer
// and _train): cuDNN opens them by soname when it first needs them, which
// finds a Python wheel's directory only if it is on LD_LIBRARY_PATH. A
// sub-library that fails to load here is left to fail in cuDNN, which
// then names it. A bare soname (the system loader's search) needs nothing.
func preloadSiblings(path string) {
	if !strings.Contains(path, "/") {
		return
	}
	base := filepath.Base(path) // libcudnn.so.9
	major := strings.TrimPrefix(base, "libcudnn.so")
	ents, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return
	}
	var todo []string
	for _, e := range ents {
		if n := e.Name(); strings.HasPrefix(n, "libcudnn_") && strings.HasSuffix(n, ".so"+major) {
			todo = append(todo, filepath.Join(filepath.Dir(path), n))
		}
	}
	// They need one another (cnn needs ops and graph) and are listed by
	// name, not by need: retry those that failed while any loads.
	var msg [512]C.char
	for progress := true; progress && len(todo) > 0; {
		progress = false
		var left []string
		for _, p := range todo {
			cp := C.CString(p)
			if C.gcu_preload(cp, &msg[0], C.int(len(msg))) == 0 {
				progress = true
			} else {
				left = append(left, p)
			}
			C.free(unsafe.Pointer(cp))
		}
		todo = left
	}
}

// dnnVersion renders cudnnGetVersion's value: 91900 is 9.19.0 (cuDNN 9
// counts major*10000), 8907 is 8.9.7 (cuDNN 8, major*1000).
func dnnVersion(v int) string {
	if v >= 90000 {
		return fmt.Sprintf("%d.%d.%d", v/10000, v%10000/100, v%100)
	}
	return fmt.Sprintf("%d.%d.%d", v/1000, v%1000/100, v%100)
}

// dnnErr names a cuDNN status (its own string) or one of goddp's.
func (d *dlDevice) dnnErr(what string, rc C.int) error {
	var msg string
	switch rc {
	case C.GCU_DNN_NO_CONTEXT:
		msg = "cuCtxSetCurrent failed"
	case C.GCU_DNN_SHAPE:
		msg = "cuDNN's output shape differs from the op's (asymmetric padding)"
	case C.GCU_DNN_NO_ALGORITHM:
		msg = fmt.Sprintf("no algorithm without TF32 within a %d MiB workspace", dnnWorkspaceMax>>20)
	default:
		msg = C.GoString(C.gcu_dnn_error(d.l, rc))
	}
	return fmt.Errorf("%w: %s: %s (code %d)", ErrCUDNN, what, msg, int(rc))
}

func (d *dlDevice) cudnn() (string, int, error) { return d.dnn.path, d.dnn.version, d.dnn.err }

var _ dnnDevice = (*dlDevice)(nil)

// plan returns s's plan, making the handle and the plan on first use
// (dnn.mu held).
func (d *dlDevice) plan(s *tensor.Conv2dShape, o dnnOpts) (*C.gcu_dnn_plan, error) {
	if d.dnn.err != nil {
		return nil, d.dnn.err
	}
	if d.dnn.closed {
		return nil, ErrClosed
	}
	if d.dnn.h == nil && d.dnn.hErr == nil {
		preloadSiblings(d.dnn.path)
		if rc := C.gcu_dnn_create(d.l, d.ctx, d.strm, &d.dnn.h); rc != 0 {
			d.dnn.hErr = d.dnnErr("cudnnCreate with "+d.dnn.path, rc)
		}
	}
	if d.dnn.hErr != nil {
		return nil, d.dnn.hErr
	}
	key := dnnKey{*s, o}
	if s.BF16 {
		// The operands hold bfloat16 values (devtensor rounds them), which
		// TF32 tensor cores multiply exactly: the plan is float32's with
		// TF32. cuDNN's own bfloat16 descriptors (PSEUDO_BFLOAT16) ran a
		// convnet step slower on an H200 than float32 (docs/changelog.md,
		// 2026-11-27: b6a62e2, 21a83de), and would round each result to bfloat16.
		key.s.BF16, key.o.tf32 = false, true
	}
	if p, ok := d.dnn.plans[key]; ok {
		return p, nil
	}
	if err, ok := d.dnn.bad[key]; ok {
		return nil, err
	}
	dims := [16]C.int{}
	for i, v := range []int{s.N, s.C, s.H, s.W, s.O, s.KH, s.KW, s.PadTop, s.PadLeft, s.StrideH, s.StrideW,
		s.DilationH, s.DilationW, s.Groups, s.OH, s.OW} {
		if v > 1<<31-1 {
			return nil, fmt.Errorf("%w: conv2d %+v: a dimension exceeds cuDNN's int", ErrCUDNN, *s)
		}
		dims[i] = C.int(v)
	}
	math, t, find := C.int(dnnFMAMath), C.int(0), C.int(0)
	if key.o.tf32 {
		math, t = dnnDefaultMath, 1
	}
	if o.benchmark {
		find = 1
	}
	p := (*C.gcu_dnn_plan)(C.calloc(1, C.size_t(unsafe.Sizeof(C.gcu_dnn_plan{}))))
	if rc := C.gcu_dnn_plan_new(d.l, d.ctx, d.dnn.h, &dims[0], math, t, find, dnnWorkspaceMax, p); rc != 0 {
		C.free(unsafe.Pointer(p))
		err := d.dnnErr(fmt.Sprintf("conv2d %+v", *s), rc)
		if d.dnn.bad == nil {
			d.dnn.bad = map[dnnKey]error{}
		}
		d.dnn.bad[key] = err
		return nil, err
	}
	if d.dnn.plans == nil {
		d.dnn.plans = map[dnnKey]*C.gcu_dnn_plan{}
	}
	d.dnn.plans[key] = p
	return p, nil
}

// dnnWorkspace returns the scratch bytes pass (0 forward, 1 backward data,
// 2 backward filter) of s needs with cuDNN, or why cuDNN cannot run it.
func (d *dlDevice) dnnWorkspace(pass int, s *tensor.Conv2dShape, o dnnOpts) (int64, error) {
	d.dnn.mu.Lock()
	defer d.dnn.mu.Unlock()
	p, err := d.plan(s, o)
	if err != nil {
		return 0, err
	}
	if rc := p.status[pass]; rc != 0 {
		return 0, d.dnnErr(fmt.Sprintf("choosing an algorithm for conv2d %s %+v", passName(pass), *s), rc)
	}
	return int64(p.ws[pass]), nil
}

// dnnConv queues pass of s on the compute stream (see gcu_dnn_conv for
// which operand is which).
func (d *dlDevice) dnnConv(pass int, s *tensor.Conv2dShape, o dnnOpts, out, a, b uint64, beta float32, ws uint64, wsBytes int64) error {
	d.dnn.mu.Lock()
	defer d.dnn.mu.Unlock()
	p, err := d.plan(s, o)
	if err != nil {
		return err
	}
	if rc := C.gcu_dnn_conv(d.l, d.ctx, d.dnn.h, p, C.int(pass), C.gcu_devptr(out), C.gcu_devptr(a), C.gcu_devptr(b),
		C.float(beta), C.gcu_devptr(ws), C.size_t(wsBytes)); rc != 0 {
		return d.dnnErr(fmt.Sprintf("conv2d %s %+v", passName(pass), *s), rc)
	}
	return nil
}

func passName(pass int) string {
	return [...]string{"forward", "backward data", "backward filter"}[pass]
}

// closeDNN frees the plans and the handle (after the stream drained).
func (d *dlDevice) closeDNN() error {
	d.dnn.mu.Lock()
	defer d.dnn.mu.Unlock()
	d.dnn.closed = true
	for k, p := range d.dnn.plans {
		C.gcu_dnn_plan_free(d.l, p)
		C.free(unsafe.Pointer(p))
		delete(d.dnn.plans, k)
	}
	if d.dnn.h == nil {
		return nil
	}
	rc := C.gcu_dnn_destroy(d.l, d.ctx, d.dnn.h)
	d.dnn.h = nil
	if rc != 0 {
		return d.dnnErr("cudnnDestroy", rc)
	}
	return nil
}
