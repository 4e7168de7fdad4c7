//go:build !cgo

package trainer

import "github.com/goddp/goddp/tensor"

// configureCUDA has no cuda device to configure: goddp/cuda needs cgo.
func configureCUDA(dev tensor.Device, closeDev func()) (func(), error) { return closeDev, nil }
