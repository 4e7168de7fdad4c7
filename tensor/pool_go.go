//go:build !cgo || noblas

package tensor

// MaxPool2x2F32 is the 2x2, stride-2, unpadded max pool of planes planes
// of x [planes, h, w] into y [planes, h/2, w/2]: each output is its
// window's first maximum in row-major order, the last NaN winning, and idx gets
// that element's offset in its [h, w] plane.
func MaxPool2x2F32(y []float32, idx []int64, x []float32, planes, h, w int) {
	oh, ow := h/2, w/2
	for p := range planes {
		xp, yp, ip := x[p*h*w:(p+1)*h*w], y[p*oh*ow:(p+1)*oh*ow], idx[p*oh*ow:(p+1)*oh*ow]
		for oy := range oh {
			for ox := range ow {
				best, bi := xp[2*oy*w+2*ox], 2*oy*w+2*ox
				for _, o := range [3]int{2*oy*w + 2*ox + 1, (2*oy+1)*w + 2*ox, (2*oy+1)*w + 2*ox + 1} {
					if v := xp[o]; v > best || v != v {
						best, bi = v, o
					}
				}
				yp[oy*ow+ox], ip[oy*ow+ox] = best, int64(bi)
			}
		}
	}
}

// MaxPool2x2BackwardF32 is MaxPool2x2F32's backward: gx [planes, h, w]
// gets, in every window, gy's value at the offset idx names and 0 at the
// window's other three elements; the last row or column of an odd size,
// in no window, gets 0. Every element of gx is written.
func MaxPool2x2BackwardF32(gx, gy []float32, idx []int64, planes, h, w int) {
	oh, ow := h/2, w/2
	for p := range planes {
		gp := gx[p*h*w : (p+1)*h*w]
		clear(gp)
		for j, v := range gy[p*oh*ow : (p+1)*oh*ow] {
			gp[idx[p*oh*ow+j]] = v
		}
	}
}
