package tensor

// LayerNorm's entries of the host's table: rownorm.go's row kernels (the
// C engine's AVX-512 loops for float32, the Go loops for float64), with
// the statistics in the operands' dtype.

func cpuLayerNorm(y, mean, rstd, x, w, b *Tensor, eps float64) {
	rows := mean.Numel()
	d := x.Numel() / max(rows, 1)
	if x.dtype == Float64 {
		LayerNormRowsStats(f64s(y), f64s(mean), f64s(rstd), f64s(x), optHostF64(w), optHostF64(b), rows, d, eps)
		return
	}
	LayerNormRowsStats(f32s(y), f32s(mean), f32s(rstd), f32s(x), optHostF32(w), optHostF32(b), rows, d, eps)
}

func cpuLayerNormBackward(dx, dw, db, gy, x, mean, rstd, w *Tensor) {
	rows := mean.Numel()
	d := x.Numel() / max(rows, 1)
	if x.dtype == Float64 {
		LayerNormRowsBackwardFromX(optHostF64(dx), optHostF64(dw), optHostF64(db), f64s(gy), f64s(x), optHostF64(w), f64s(mean), f64s(rstd), rows, d)
		return
	}
	LayerNormRowsBackwardFromX(optHostF32(dx), optHostF32(dw), optHostF32(db), f32s(gy), f32s(x), optHostF32(w), f32s(mean), f32s(rstd), rows, d)
}
