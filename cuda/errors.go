package cuda

import "errors"

// ErrNotCompiled: this binary was built without the cuda build tag, so it
// has no device code. Rebuild with `go build -tags cuda` (needs cgo only:
// CUDA is loaded at run time, see doc.go) and run on a machine with an
// NVIDIA GPU.
var ErrNotCompiled = errors.New("cuda: goddp was built without CUDA support: rebuild with -tags cuda (needs cgo; to run, an NVIDIA GPU and driver)")

// Errors of the cuda build. Returned errors wrap them with %w and carry
// the library's own message.
var (
	// ErrNoDriver: libcuda.so.1, which the NVIDIA driver installs, could
	// not be loaded: no NVIDIA driver on this machine.
	ErrNoDriver = errors.New("cuda: CUDA driver library (libcuda.so.1) not available: no NVIDIA driver")
	// ErrNoCUBLAS: no cuBLAS library could be loaded (see doc.go for the
	// search, and GODDP_CUBLAS_LIBRARY).
	ErrNoCUBLAS = errors.New("cuda: cuBLAS library (libcublas.so.13/.12/.11) not available")
	// ErrNoCUDNN: no cuDNN library could be loaded (GODDP_CUDNN_LIBRARY,
	// libcudnn.so.9/.8, the Python wheels' nvidia/cudnn/lib). Not fatal:
	// convolutions run goddp's own kernels.
	ErrNoCUDNN = errors.New("cuda: cuDNN library (libcudnn.so.9/.8) not available")
	// ErrCUDNN: a cuDNN call failed, or cuDNN cannot run a convolution's
	// shape. That convolution runs goddp's own kernels instead.
	ErrCUDNN = errors.New("cuda: cuDNN error")
	// ErrCUDA: a CUDA driver call failed.
	ErrCUDA = errors.New("cuda: CUDA error")
	// ErrCUBLAS: a cuBLAS call failed. Only that call: the next one runs.
	ErrCUBLAS = errors.New("cuda: cuBLAS error")
	// ErrClosed: the Context was closed.
	ErrClosed = errors.New("cuda: context closed")
	// ErrTooLarge: a dimension exceeds what cuBLAS's 32-bit interface takes.
	ErrTooLarge = errors.New("cuda: dimension too large for cuBLAS (over 2^31-1)")
)
