//go:build cgo && linux

package launch

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// GPUCount returns the number of NVIDIA GPUs NVML sees. Without the NVML
// library (no driver) it returns an error saying so; it never exits the
// process, unlike gorgonia.org/cu's init, which is why the launcher checks
// here before starting a cuda-tagged PROGRAM.
func GPUCount() (int, error) {
	lib := nvml.New()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		if ret == nvml.ERROR_LIBRARY_NOT_FOUND {
			return 0, fmt.Errorf("NVML library (libnvidia-ml.so.1) not found: no NVIDIA driver on this machine")
		}
		return 0, fmt.Errorf("NVML init: %v", ret)
	}
	defer lib.Shutdown()
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return 0, fmt.Errorf("NVML device count: %v", ret)
	}
	return n, nil
}
