//go:build cgo && linux

package launch

import (
	"fmt"
	"os"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// GPUCount returns the number of NVIDIA GPUs a CUDA program started now
// would see: those NVML lists, narrowed by CUDA_VISIBLE_DEVICES as the
// CUDA driver applies it (see visibleGPUs). Without the NVML library (no
// driver) it returns an error saying so; it never exits the process.
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
	uuids := make([]string, n)
	for i := range uuids {
		if d, ret := lib.DeviceGetHandleByIndex(i); ret == nvml.SUCCESS {
			uuids[i], _ = d.GetUUID()
		}
	}
	v, set := os.LookupEnv("CUDA_VISIBLE_DEVICES")
	return visibleGPUs(v, set, uuids), nil
}
