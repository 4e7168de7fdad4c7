//go:build cgo

package nccl

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/goddp/goddp/internal/libfind"
)

// CUDA and NCCL codes used on the Go side.
const (
	cudaErrorNotReady = 600 // CUDA_ERROR_NOT_READY: an event has not completed
	ncclInProgress    = 7   // ncclInProgress: nonblocking init still running
	// ncclVersionAvgBF16 is NCCL 2.10, which added ncclAvg and ncclBfloat16.
	ncclVersionAvgBF16 = 21000
)

// library is one loading of libcuda.so.1 and libnccl.so.2: a C struct of
// function pointers. dlopen counts references, so loading again is cheap;
// the libraries stay loaded for the life of the process (unloading the
// CUDA driver under live contexts is unsafe).
type library struct {
	l           *C.gdn_lib
	ncclVersion int
	ncclPath    string
}

// Info is what Probe finds.
type Info struct {
	NCCLVersion int    // e.g. 21803 for NCCL 2.18.3
	NCCLPath    string // the file loaded: a soname, or a path in a Python environment
	Devices     int    // CUDA devices (those CUDA_VISIBLE_DEVICES leaves visible)
}

// Probe loads the CUDA driver and NCCL and counts the GPUs, without
// creating a communicator. Its error lists everything that is missing
// (wrapping ErrNoDriver, ErrNoDevice and/or ErrNoLibrary). NCCL is looked
// for as New looks for it (see Candidates).
func Probe() (Info, error) { return probe("") }

// Candidates lists, in order, the NCCL libraries New tries when
// Options.LibraryPath is empty: $GODDP_NCCL_LIBRARY if set (only it),
// else libnccl.so.2 through the system loader, then in the nvidia/*/lib
// directories of the Python environments on the machine, where the
// nvidia-nccl-cu12 and -cu13 wheels put it.
func Candidates() []string {
	return libfind.Candidates("GODDP_NCCL_LIBRARY", []string{DefaultLibrary}, libfind.Env{})
}

func probe(ncclPath string) (Info, error) {
	lib, err := load(ncclPath)
	if err != nil {
		return Info{}, err
	}
	inf := Info{NCCLVersion: lib.ncclVersion, NCCLPath: lib.ncclPath}
	n, err := lib.devices()
	if err != nil {
		return inf, err
	}
	inf.Devices = n
	return inf, nil
}

// load opens both libraries and initialises the driver. It tries both
// even when the first fails, so that the error names everything missing.
// ncclPath "" searches the Candidates.
func load(ncclPath string) (*library, error) {
	cands := []string{ncclPath}
	if ncclPath == "" {
		cands = Candidates()
	}
	lib := &library{l: (*C.gdn_lib)(C.calloc(1, C.size_t(unsafe.Sizeof(C.gdn_lib{}))))}
	var msg [512]C.char
	var errs []error

	cpath := C.CString(DefaultDriverLibrary)
	defer C.free(unsafe.Pointer(cpath))
	cudaOK := C.gdn_load_cuda(lib.l, cpath, &msg[0], C.int(len(msg))) == 0
	if !cudaOK {
		errs = append(errs, fmt.Errorf("%w: %s", ErrNoDriver, C.GoString(&msg[0])))
	} else if rc := C.gdn_cu_init(lib.l); rc != 0 {
		errs = append(errs, fmt.Errorf("%w: cuInit: %s (code %d)", ErrNoDevice, C.GoString(C.gdn_cu_error(lib.l, rc)), int(rc)))
	}

	var tried []string
	for _, p := range cands {
		np := C.CString(p)
		rc := C.gdn_load_nccl(lib.l, np, &msg[0], C.int(len(msg)))
		C.free(unsafe.Pointer(np))
		if rc == 0 {
			lib.ncclPath = p
			break
		}
		tried = append(tried, C.GoString(&msg[0]))
	}
	if lib.ncclPath == "" {
		errs = append(errs, fmt.Errorf("%w: tried %s (install NCCL: the libnccl2 package, or pip install nvidia-nccl-cu12; or set GODDP_NCCL_LIBRARY)", ErrNoLibrary, strings.Join(tried, "; ")))
	} else {
		var v C.int
		if rc := C.gdn_version(lib.l, &v); rc != 0 {
			errs = append(errs, lib.ncclErr("ncclGetVersion", rc))
		}
		lib.ncclVersion = int(v)
	}
	if len(errs) > 0 {
		// The struct is not freed: a half-loaded library keeps its handles.
		return nil, errors.Join(errs...)
	}
	return lib, nil
}

// devices counts the CUDA devices (ErrNoDevice when there are none).
func (lib *library) devices() (int, error) {
	var n C.int
	if rc := C.gdn_device_count(lib.l, &n); rc != 0 {
		return 0, fmt.Errorf("%w: %w", ErrNoDevice, lib.cuErr("cuDeviceGetCount", rc))
	}
	if n == 0 {
		return 0, fmt.Errorf("%w: CUDA reports 0 devices", ErrNoDevice)
	}
	return int(n), nil
}

func (lib *library) cuErr(what string, rc C.int) error {
	return fmt.Errorf("%w: %s: %s (code %d)", ErrCUDA, what, C.GoString(C.gdn_cu_error(lib.l, rc)), int(rc))
}

func (lib *library) ncclErr(what string, rc C.int) error {
	return fmt.Errorf("%w: %s: %s (code %d)", ErrNCCL, what, C.GoString(C.gdn_nccl_error(lib.l, rc)), int(rc))
}
