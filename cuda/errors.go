package cuda

import "errors"

// ErrNotCompiled: this binary was built without the cuda build tag, so it
// has no CUDA code (gorgonia.org/cu is not linked). Rebuild with
// `go build -tags cuda`; that needs cgo and the CUDA headers and libraries
// (Debian: nvidia-cuda-dev, see scripts/cuda-headers.sh) and a GPU to run.
var ErrNotCompiled = errors.New("cuda: goddp was built without CUDA support: rebuild with -tags cuda (needs cgo, nvidia-cuda-dev and, to run, an NVIDIA GPU)")
