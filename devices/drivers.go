//go:build cgo

package devices

import (
	_ "github.com/goddp/goddp/cuda"     // "cuda"
	_ "github.com/goddp/goddp/cuda/sim" // "sim"
)
