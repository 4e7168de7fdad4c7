//go:build cgo

package trainer

import (
	"os"
	"strconv"
	"strings"

	"github.com/goddp/goddp/cuda"
	"github.com/goddp/goddp/tensor"
)

// deviceName is the name of a cuda device's GPU as NVML gives it
// (cuda.Discover, which needs no CUDA context), "" for other devices or
// when NVML cannot say.
func deviceName(dev tensor.Device) string {
	if dev == nil {
		return ""
	}
	kind, num, ok := strings.Cut(dev.String(), ":")
	if !ok || kind != "cuda" {
		return ""
	}
	ordinal, err := strconv.Atoi(num)
	if err != nil {
		return ""
	}
	infos, err := cuda.Discover()
	if err != nil {
		return ""
	}
	gpus := make([]gpu, len(infos))
	for i, d := range infos {
		gpus[i] = gpu{index: d.Index, name: d.Name, uuid: d.UUID}
	}
	return pickGPU(gpus, ordinal, os.Getenv("CUDA_VISIBLE_DEVICES"))
}
