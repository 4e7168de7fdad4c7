//go:build !cgo || noblas

package tensor

// sgdMomentumF32 is sgd_kernels.c's pass in Go, with the same arithmetic
// (fma32 for each fused multiply-add), so that every build takes the same
// steps.
func sgdMomentumF32(w, g, buf []float32, h sgdHyper, sign float32) {
	lr, m, damp, wd := float32(h.lr), float32(h.momentum), float32(1-h.dampening), float32(h.wd)
	g, buf = g[:len(w)], buf[:len(w)]
	for i, wi := range w {
		d := sign * g[i]
		if wd != 0 {
			d = fma32(wd, wi, d)
		}
		b := d
		if !h.first {
			b = fma32(damp, d, float32(buf[i]*m))
		}
		buf[i] = b
		w[i] = fma32(-lr, b, wi)
	}
}
