package tensor

import (
	"fmt"

	"github.com/goddp/goddp/tensor/internal/simd"
)

// ReLUF32 sets dst[i] = max(src[i], 0). NaN and -0 pass through, as in
// torch. It is
// the slice kernel behind ReLU and autograd's ReLU; dst and src may be the
// same slice. Lengths must match.
func ReLUF32(dst, src []float32) {
	if len(dst) != len(src) {
		panic(fmt.Sprintf("tensor: ReLUF32: length mismatch %d vs %d", len(dst), len(src)))
	}
	for i := simd.ReLUF32(dst, src); i < len(src); i++ {
		if v := src[i]; v < 0 {
			dst[i] = 0
		} else {
			dst[i] = v
		}
	}
}

// ReLUBackwardF32 sets gx[i] = gy[i] where y[i] > 0 and 0 elsewhere, y
// being ReLU's output (torch's threshold_backward). gx may alias gy.
// Lengths must match.
func ReLUBackwardF32(gx, gy, y []float32) {
	if len(gy) != len(gx) || len(y) != len(gx) {
		panic(fmt.Sprintf("tensor: ReLUBackwardF32: length mismatch gx %d, gy %d, y %d", len(gx), len(gy), len(y)))
	}
	for i := simd.ReLUBwdF32(gx, gy, y); i < len(gx); i++ {
		if y[i] > 0 {
			gx[i] = gy[i]
		} else {
			gx[i] = 0
		}
	}
}

// ReLUBackward writes ReLU's input gradient into gx: gy where y > 0, else 0,
// y being ReLU's output (torch's threshold_backward). gx, gy and y are
// contiguous with equal element counts; gx may be gy.
func ReLUBackward(gx, gy, y *Tensor) {
	if onDevice(gx, gy, y) {
		k := kernelsFor("ReLUBackward", gx, gy, y)
		NeedKernel(k.ReLUBackward != nil, "ReLUBackward", gx.Device())
		k.ReLUBackward(gx, gy, y)
		return
	}
	if gy.dtype == Float64 {
		reluBwd64(gx.F64(), gy.F64(), y.F64())
		return
	}
	ReLUBackwardF32(gx.F32(), gy.F32(), y.F32())
}

// reluBwd64 serves float64 (gradient checks); float32 has the vector kernel.
func reluBwd64(gx, gy, y []float64) {
	gy, y = gy[:len(gx)], y[:len(gx)]
	for i, v := range y {
		if v > 0 {
			gx[i] = gy[i]
		} else {
			gx[i] = 0
		}
	}
}
