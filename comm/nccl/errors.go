package nccl

import "errors"

// Sentinel errors. Returned errors wrap them with %w and carry the
// library's own message.
var (
	// ErrNoLibrary: libnccl.so.2 could not be loaded (NCCL is not installed,
	// or not on the loader's path: set LD_LIBRARY_PATH or GODDP_NCCL_LIBRARY).
	ErrNoLibrary = errors.New("nccl: NCCL library (libnccl.so.2) not available")
	// ErrNoDriver: libcuda.so.1, which the NVIDIA driver installs, could not
	// be loaded: there is no usable GPU driver on this machine.
	ErrNoDriver = errors.New("nccl: CUDA driver library (libcuda.so.1) not available: no NVIDIA driver")
	// ErrNoDevice: the driver library loaded but CUDA finds no GPU (or not
	// the one asked for).
	ErrNoDevice = errors.New("nccl: no usable CUDA device")
	// ErrNCCL: an NCCL call failed.
	ErrNCCL = errors.New("nccl: NCCL error")
	// ErrCUDA: a CUDA driver call failed.
	ErrCUDA = errors.New("nccl: CUDA error")
	// ErrNoCgo: this binary was built without cgo, which loading NCCL needs.
	ErrNoCgo = errors.New("nccl: built without cgo (CGO_ENABLED=0): the nccl backend needs cgo to load libnccl.so.2")
)
