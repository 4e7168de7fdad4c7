//go:build !cgo || !linux

package launch

import "errors"

// GPUCount needs NVML, which go-nvml loads through cgo; this build has none.
func GPUCount() (int, error) {
	return 0, errors.New("GPU counting needs NVML, and this ddprun was built without cgo")
}
