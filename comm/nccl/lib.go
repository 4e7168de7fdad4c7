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
	"unsafe"
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
}

// Info is what Probe finds.
type Info struct {
	NCCLVersion int // e.g. 21803 for NCCL 2.18.3
	Devices     int // CUDA devices
}

// Probe loads the CUDA driver and NCCL and counts the GPUs, without
// creating a communicator. Its error lists everything that is missing
// (wrapping ErrNoDriver, ErrNoDevice and/or ErrNoLibrary).
func Probe() (Info, error) { return probe(DefaultLibrary) }

func probe(ncclPath string) (Info, error) {
	lib, err := load(ncclPath)
	if err != nil {
		return Info{}, err
	}
	n, err := lib.devices()
	if err != nil {
		return Info{NCCLVersion: lib.ncclVersion}, err
	}
	return Info{NCCLVersion: lib.ncclVersion, Devices: n}, nil
}

// load opens both libraries and initialises the driver. It tries both
// even when the first fails, so that the error names everything missing.
func load(ncclPath string) (*library, error) {
	if ncclPath == "" {
		ncclPath = DefaultLibrary
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

	npath := C.CString(ncclPath)
	defer C.free(unsafe.Pointer(npath))
	if C.gdn_load_nccl(lib.l, npath, &msg[0], C.int(len(msg))) != 0 {
		errs = append(errs, fmt.Errorf("%w: loading %s: %s (install NCCL, e.g. the libnccl2 package, or set GODDP_NCCL_LIBRARY)", ErrNoLibrary, ncclPath, C.GoString(&msg[0])))
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
