package cuda

import (
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// ErrNoNVML is returned when the NVIDIA management library (libnvidia-ml.so.1,
// shipped with the driver) cannot be loaded: no driver, so no usable GPU.
var ErrNoNVML = errors.New("cuda: NVML (libnvidia-ml.so.1) not available: no NVIDIA driver on this machine")

// ErrNoDevice: NVML or the CUDA driver loaded but there is no usable GPU
// (none, none visible through CUDA_VISIBLE_DEVICES, or not the ordinal
// asked for).
var ErrNoDevice = errors.New("cuda: no usable CUDA device")

// DeviceInfo describes one GPU as NVML reports it.
type DeviceInfo struct {
	Index       int
	Name        string
	UUID        string
	MemoryTotal uint64 // bytes
	MemoryFree  uint64 // bytes
}

// Discover lists the GPUs through go-nvml. It never touches the CUDA driver
// API, so it is safe in the default (non-cuda) build and is what the launcher
// uses before starting a `cuda` binary (gorgonia.org/cu's init exits the
// process when no GPU is present).
func Discover() ([]DeviceInfo, error) {
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		if ret == nvml.ERROR_LIBRARY_NOT_FOUND {
			return nil, ErrNoNVML
		}
		return nil, fmt.Errorf("cuda: nvml init: %s: %w", nvml.ErrorString(ret), ErrNoNVML)
	}
	defer nvml.Shutdown()
	n, ret := nvml.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("cuda: nvml device count: %s", nvml.ErrorString(ret))
	}
	out := make([]DeviceInfo, 0, n)
	for i := 0; i < n; i++ {
		d, ret := nvml.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("cuda: nvml device %d: %s", i, nvml.ErrorString(ret))
		}
		info := DeviceInfo{Index: i}
		if name, ret := d.GetName(); ret == nvml.SUCCESS {
			info.Name = name
		}
		if uuid, ret := d.GetUUID(); ret == nvml.SUCCESS {
			info.UUID = uuid
		}
		if mem, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
			info.MemoryTotal, info.MemoryFree = mem.Total, mem.Free
		}
		out = append(out, info)
	}
	return out, nil
}

// DeviceCount returns the number of GPUs, or an error wrapping ErrNoNVML or
// ErrNoDevice when there is none.
func DeviceCount() (int, error) {
	devs, err := Discover()
	if err != nil {
		return 0, err
	}
	if len(devs) == 0 {
		return 0, ErrNoDevice
	}
	return len(devs), nil
}
