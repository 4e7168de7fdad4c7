//go:build !cgo

package trainer

import "github.com/goddp/goddp/tensor"

// deviceName needs NVML, which goddp/cuda reaches through cgo.
func deviceName(tensor.Device) string { return "" }
