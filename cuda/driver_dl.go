//go:build cuda

package cuda

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "driver_dl.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"github.com/goddp/goddp/cuda/kernels"
	"github.com/goddp/goddp/internal/libfind"
)

// dlDevice is the real device: libcuda.so.1 and cuBLAS through dlopen.
type dlDevice struct {
	l       *C.gcu_lib
	ordinal int
	ctx     unsafe.Pointer // CUcontext: the device's primary context
	strm    unsafe.Pointer // CUstream: non-blocking, all of the Context's work
	mod     unsafe.Pointer // CUmodule: the kernels
	fns     map[string]unsafe.Pointer
	blas    unsafe.Pointer // cublasHandle_t
	inf     Info
	up      *uploader // asynchronous copies to the device
	dnn     dnnState  // cuDNN (cudnn_dl.go)
}

// driverLibrary is the CUDA driver's soname, which never changes.
const driverLibrary = "libcuda.so.1"

// loadDriver opens libcuda.so.1 and initialises it; version and count are
// filled in as far as the driver got.
func loadDriver() (*C.gcu_lib, int, int, error) {
	l := (*C.gcu_lib)(C.calloc(1, C.size_t(unsafe.Sizeof(C.gcu_lib{}))))
	var msg [512]C.char
	cpath := C.CString(driverLibrary)
	defer C.free(unsafe.Pointer(cpath))
	if C.gcu_load_cuda(l, cpath, &msg[0], C.int(len(msg))) != 0 {
		return nil, 0, 0, fmt.Errorf("%w: %s", ErrNoDriver, C.GoString(&msg[0]))
	}
	var version, count C.int
	if rc := C.gcu_init(l, &version, &count); rc != 0 {
		return l, int(version), 0, fmt.Errorf("%w: cuInit: %s (code %d)", ErrNoDevice, C.GoString(C.gcu_error(l, rc)), int(rc))
	}
	if count == 0 {
		return l, int(version), 0, fmt.Errorf("%w: CUDA reports 0 devices (CUDA_VISIBLE_DEVICES=%q)", ErrNoDevice, os.Getenv("CUDA_VISIBLE_DEVICES"))
	}
	return l, int(version), int(count), nil
}

// loadCUBLAS tries the cuBLAS candidates in order (internal/libfind) and
// returns the path that loaded.
func loadCUBLAS(l *C.gcu_lib, driverVersion int) (string, error) {
	cands := libfind.Candidates("GODDP_CUBLAS_LIBRARY", libfind.CUBLASSonames(driverVersion), libfind.Env{})
	var tried []string
	var msg [512]C.char
	for _, p := range cands {
		cp := C.CString(p)
		rc := C.gcu_load_cublas(l, cp, &msg[0], C.int(len(msg)))
		C.free(unsafe.Pointer(cp))
		if rc == 0 {
			return p, nil
		}
		tried = append(tried, C.GoString(&msg[0]))
	}
	return "", fmt.Errorf("%w (driver supports CUDA %s): tried %s; install cuBLAS (pip install nvidia-cublas-cu12, or the CUDA toolkit) or set GODDP_CUBLAS_LIBRARY",
		ErrNoCUBLAS, cudaVersion(driverVersion), strings.Join(tried, "; "))
}

func cudaVersion(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }

// Probe loads the CUDA driver and cuBLAS and describes device 0, without
// creating a context. Its error names what is missing (ErrNoDriver,
// ErrNoDevice, ErrNoCUBLAS); Info holds what was found before that.
func Probe() (Info, error) {
	l, version, count, err := loadDriver()
	inf := Info{DriverVersion: version, DeviceCount: count}
	if l == nil {
		return inf, err
	}
	path, berr := loadCUBLAS(l, version)
	if berr == nil {
		inf.CUBLASPath = path
		var v C.int
		if C.gcu_blas_version(l, &v) == 0 {
			inf.CUBLASVersion = int(v)
		}
	}
	// cuDNN is optional: without it convolutions run goddp's own kernels.
	inf.CUDNNPath, inf.CUDNNVersion, inf.CUDNNError = findCUDNN()
	return inf, errors.Join(err, berr)
}

// openDevice makes ordinal's primary context current, creates the
// compute stream, loads the kernels and a cuBLAS handle on that stream.
func openDevice(ordinal int) (device, error) {
	l, version, count, err := loadDriver()
	if err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= count {
		return nil, fmt.Errorf("%w: device %d asked for, %d visible (CUDA_VISIBLE_DEVICES=%q)", ErrNoDevice, ordinal, count, os.Getenv("CUDA_VISIBLE_DEVICES"))
	}
	path, err := loadCUBLAS(l, version)
	if err != nil {
		return nil, err
	}
	d := &dlDevice{l: l, ordinal: ordinal, fns: map[string]unsafe.Pointer{},
		inf: Info{Ordinal: ordinal, DriverVersion: version, DeviceCount: count, CUBLASPath: path}}
	d.up = &uploader{calls: dlUploads{d}, max: maxPinned}
	var v C.int
	if C.gcu_blas_version(l, &v) == 0 {
		d.inf.CUBLASVersion = int(v)
	}
	var name [256]C.char
	if rc := C.gcu_open(l, C.int(ordinal), &d.ctx, &d.strm, &name[0], C.int(len(name))); rc != 0 {
		return nil, d.cuErr(fmt.Sprintf("opening device %d", ordinal), rc)
	}
	d.inf.Name = C.GoString(&name[0])
	fail := func(err error) (device, error) {
		d.close()
		return nil, err
	}
	var major, minor C.int
	if rc := C.gcu_capability(l, C.int(ordinal), &major, &minor); rc != 0 {
		return fail(d.cuErr(fmt.Sprintf("device %d's compute capability", ordinal), rc))
	}
	d.inf.Capability = [2]int{int(major), int(minor)}
	if err := d.loadKernels(); err != nil {
		return fail(err)
	}
	if rc := C.gcu_blas_create(l, d.ctx, d.strm, &d.blas); rc != 0 {
		return fail(blasErr("cublasCreate with "+path, rc))
	}
	// cuBLAS's default math keeps float32 GEMMs in float32 (no TF32),
	// as torch's allow_tf32 = False; Context.SetAllowTF32 changes it.
	if err := d.setMathMode(false); err != nil {
		return fail(err)
	}
	d.dnn.path, d.dnn.version, d.dnn.err = loadCUDNN(l)
	d.inf.CUDNNPath, d.inf.CUDNNVersion, d.inf.CUDNNError = d.dnn.path, d.dnn.version, d.dnn.err
	return d, nil
}

// loadKernels loads the machine code built for the device's architecture
// when this build has it (kernels.Cubin: sm_80 for A100s, sm_90 for H100s),
// else the PTX, which the driver JIT-compiles, and looks up every kernel.
// A cubin the driver refuses, or that lacks a kernel, gives way to the
// PTX; Info.Kernels says which was loaded.
func (d *dlDevice) loadKernels() error {
	major, minor := d.inf.Capability[0], d.inf.Capability[1]
	image, arch, ok, err := kernels.Cubin(major, minor)
	var why string
	switch {
	case err != nil:
		why = err.Error()
	case !ok:
		why = fmt.Sprintf("no machine code for sm_%d%d in this build (%v)", major, minor, kernels.Arches())
	default:
		cimg := C.CBytes(image)
		err := d.loadModule(cimg)
		C.free(cimg)
		if err == nil {
			d.inf.Kernels = arch + " machine code"
			return nil
		}
		why = fmt.Sprintf("the %s cubin did not load: %v", arch, err)
	}
	ptx := C.CString(kernels.PTX)
	defer C.free(unsafe.Pointer(ptx))
	if err := d.loadModule(unsafe.Pointer(ptx)); err != nil {
		return fmt.Errorf("loading the kernels' PTX (the driver must support CUDA 11.8 or later): %w", err)
	}
	d.inf.Kernels = "PTX, JIT-compiled for sm_" + strconv.Itoa(major) + strconv.Itoa(minor) + ": " + why
	return nil
}

// loadModule loads image and looks up every kernel in it, unloading it
// again when one is missing.
func (d *dlDevice) loadModule(image unsafe.Pointer) error {
	var mod unsafe.Pointer
	if rc := C.gcu_module(d.l, d.ctx, image, &mod); rc != 0 {
		return d.cuErr("cuModuleLoadData", rc)
	}
	fns := map[string]unsafe.Pointer{}
	for _, name := range kernels.Names() {
		cn := C.CString(name)
		var fn unsafe.Pointer
		rc := C.gcu_function(d.l, d.ctx, mod, cn, &fn)
		C.free(unsafe.Pointer(cn))
		if rc != 0 {
			C.gcu_unload(d.l, d.ctx, mod)
			return d.cuErr("kernel "+name, rc)
		}
		fns[name] = fn
	}
	d.mod, d.fns = mod, fns
	return nil
}

// cuBLAS's math modes (cublasMath_t).
const (
	blasDefaultMath = 0
	blasTF32Math    = 3
)

// setMathMode lets cuBLAS use TF32 tensor cores for float32 GEMMs, or not.
func (d *dlDevice) setMathMode(tf32 bool) error {
	mode := C.int(blasDefaultMath)
	if tf32 {
		mode = blasTF32Math
	}
	return d.blasStatus(fmt.Sprintf("cublasSetMathMode(%d)", int(mode)), C.gcu_blas_math(d.l, d.ctx, d.blas, mode))
}

func (d *dlDevice) cuErr(what string, rc C.int) error {
	return fmt.Errorf("%w: %s: %s (code %d)", ErrCUDA, what, C.GoString(C.gcu_error(d.l, rc)), int(rc))
}

// blasErr names a cublasStatus_t.
func blasErr(what string, rc C.int) error {
	names := map[C.int]string{1: "NOT_INITIALIZED", 3: "ALLOC_FAILED", 7: "INVALID_VALUE", 8: "ARCH_MISMATCH",
		11: "MAPPING_ERROR", 13: "EXECUTION_FAILED", 14: "INTERNAL_ERROR", 15: "NOT_SUPPORTED", 16: "LICENSE_ERROR"}
	n, ok := names[rc]
	if !ok {
		n = "unknown"
	}
	return fmt.Errorf("%w: %s: CUBLAS_STATUS_%s (code %d)", ErrCUBLAS, what, n, int(rc))
}

func (d *dlDevice) cu(what string, rc C.int) error {
	if rc != 0 {
		return d.cuErr(what, rc)
	}
	return nil
}

func (d *dlDevice) alloc(bytes int64) (uint64, error) {
	var p C.gcu_devptr
	if rc := C.gcu_alloc(d.l, d.ctx, C.size_t(bytes), &p); rc != 0 {
		return 0, d.cuErr(fmt.Sprintf("allocating %d bytes on device %d", bytes, d.ordinal), rc)
	}
	return uint64(p), nil
}

func (d *dlDevice) free(p uint64) error {
	return d.cu("cuMemFree", C.gcu_free(d.l, d.ctx, C.gcu_devptr(p)))
}

func (d *dlDevice) zero(p uint64, bytes int64) error {
	return d.cu("cuMemsetD8Async", C.gcu_zero(d.l, d.ctx, C.gcu_devptr(p), C.size_t(bytes), d.strm))
}

// htod stages src in pinned memory and returns without waiting for the
// copy (uploader).
func (d *dlDevice) htod(dst uint64, src unsafe.Pointer, bytes int64) error {
	return d.up.htod(dst, src, bytes)
}

// dlUploads is the uploader's view of the device.
type dlUploads struct{ *dlDevice }

func (d dlUploads) recordCompute(e unsafe.Pointer) error { return d.recordEvent(e, d.strm) }

func (d dlUploads) htodCompute(dst uint64, src unsafe.Pointer, n int64) error {
	return d.htodOn(d.strm, dst, src, n)
}

func (d dlUploads) queryEvent(e unsafe.Pointer) (bool, error) {
	switch rc := C.gcu_event_query(d.l, d.ctx, e); rc {
	case 0:
		return true, nil
	case 600: // CUDA_ERROR_NOT_READY
		return false, nil
	default:
		return false, d.cuErr("cuEventQuery", rc)
	}
}

func (d *dlDevice) dtoh(dst unsafe.Pointer, src uint64, bytes int64) error {
	return d.cu("copying to the host", C.gcu_dtoh(d.l, d.ctx, dst, C.gcu_devptr(src), C.size_t(bytes), d.strm))
}

func (d *dlDevice) sync() error {
	return d.cu("cuStreamSynchronize", C.gcu_sync(d.l, d.ctx, d.strm))
}

func (d *dlDevice) launch(kernel string, grid, block uint32, args []uint64) error {
	fn, ok := d.fns[kernel]
	if !ok {
		return fmt.Errorf("%w: no kernel %s", ErrCUDA, kernel)
	}
	cargs := make([]C.ulonglong, len(args))
	for i, a := range args {
		cargs[i] = C.ulonglong(a)
	}
	return d.cu("kernel "+kernel, C.gcu_launch(d.l, d.ctx, fn, C.uint(grid), C.uint(block), d.strm, &cargs[0], C.int(len(cargs))))
}

func op(t bool) C.int {
	if t {
		return 1
	}
	return 0
}

func (d *dlDevice) blasStatus(what string, rc C.int) error {
	if rc != 0 {
		return blasErr(what, rc)
	}
	return nil
}

func (d *dlDevice) sgemm(ta, tb bool, m, n, k int, alpha float32, a uint64, lda int, b uint64, ldb int, beta float32, c uint64, ldc int) error {
	return d.blasStatus("cublasSgemm", C.gcu_sgemm(d.l, d.ctx, d.blasH(), op(ta), op(tb), C.int(m), C.int(n), C.int(k), C.float(alpha),
		C.gcu_devptr(a), C.int(lda), C.gcu_devptr(b), C.int(ldb), C.float(beta), C.gcu_devptr(c), C.int(ldc)))
}

func (d *dlDevice) sgemmStridedBatched(ta, tb bool, m, n, k int, alpha float32, a uint64, lda, sa int, b uint64, ldb, sb int,
	beta float32, c uint64, ldc, sc, batch int) error {
	return d.blasStatus("cublasSgemmStridedBatched", C.gcu_sgemm_strided_batched(d.l, d.ctx, d.blasH(), op(ta), op(tb),
		C.int(m), C.int(n), C.int(k), C.float(alpha), C.gcu_devptr(a), C.int(lda), C.longlong(sa), C.gcu_devptr(b), C.int(ldb), C.longlong(sb),
		C.float(beta), C.gcu_devptr(c), C.int(ldc), C.longlong(sc), C.int(batch)))
}

func (d *dlDevice) sgemv(t bool, m, n int, alpha float32, a uint64, lda int, x uint64, beta float32, y uint64) error {
	return d.blasStatus("cublasSgemv", C.gcu_sgemv(d.l, d.ctx, d.blasH(), op(t), C.int(m), C.int(n), C.float(alpha),
		C.gcu_devptr(a), C.int(lda), C.gcu_devptr(x), C.float(beta), C.gcu_devptr(y)))
}

func (d *dlDevice) sasum(n int, x uint64) (float32, error) {
	var out C.float
	err := d.blasStatus("cublasSasum", C.gcu_sasum(d.l, d.ctx, d.blasH(), C.int(n), C.gcu_devptr(x), &out))
	return float32(out), err
}

func (d *dlDevice) sscal(n int, alpha float32, x uint64) error {
	return d.blasStatus("cublasSscal", C.gcu_sscal(d.l, d.ctx, d.blasH(), C.int(n), C.float(alpha), C.gcu_devptr(x)))
}

func (d *dlDevice) blasH() unsafe.Pointer { return d.blas }

func (d *dlDevice) stream() uintptr { return uintptr(d.strm) }
func (d *dlDevice) info() Info      { return d.inf }

// close frees what openDevice made (the primary context is released, not
// destroyed: other users of the device keep theirs).
func (d *dlDevice) close() error {
	var errs []error
	if d.ctx != nil {
		if err := d.sync(); err != nil {
			errs = append(errs, err)
		}
		if d.up != nil {
			errs = append(errs, d.up.close())
		}
	}
	if d.ctx != nil {
		errs = append(errs, d.closeDNN())
	}
	if d.blas != nil {
		if rc := C.gcu_blas_destroy(d.l, d.ctx, d.blas); rc != 0 {
			errs = append(errs, blasErr("cublasDestroy", rc))
		}
		d.blas = nil
	}
	if d.mod != nil {
		errs = append(errs, d.cu("cuModuleUnload", C.gcu_unload(d.l, d.ctx, d.mod)))
		d.mod = nil
	}
	if d.ctx != nil {
		errs = append(errs, d.cu("releasing the context", C.gcu_close(d.l, C.int(d.ordinal), d.ctx, d.strm)))
		d.ctx, d.strm = nil, nil
	}
	return errors.Join(errs...)
}
