//go:build mpi

package mpi

/*
#cgo pkg-config: ompi
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/goddp/goddp/comm/backend"
)

// mpiError turns an MPI return code into an error (nil for MPI_SUCCESS).
func mpiError(what string, rc C.int) error {
	if rc == C.MPI_SUCCESS {
		return nil
	}
	var buf [C.MPI_MAX_ERROR_STRING + 1]C.char
	C.gdm_error_string(rc, &buf[0], C.int(len(buf)))
	msg := C.GoString(&buf[0])
	if msg == "" {
		msg = fmt.Sprintf("error code %d", int(rc))
	}
	return fmt.Errorf("%w: %s: %s", ErrMPI, what, msg)
}

// bufPtr is the address of a buffer's first byte, or nil when it is empty
// (MPI accepts NULL with a zero count).
func bufPtr(b backend.Buffer) unsafe.Pointer {
	if len(b.Bytes) == 0 {
		return nil
	}
	return unsafe.Pointer(&b.Bytes[0])
}

var errFinalized = errors.New("MPI was already finalized in this process (MPI can be initialised only once per process)")
