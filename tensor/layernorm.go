package tensor

// LayerNorm normalizes x over its trailing d elements (rows of d) and
// applies w and b (each [d] or nil), as torch's layer_norm, by the
// LayerNorm entry of x's device table (the CPU's included). It returns y
// (x's shape) and each row's mean and rstd [rows] in x's dtype: what
// LayerNormBackward takes with x, which recomputes xhat from them (torch's
// choice; keeping xhat cost an activation-sized tensor per LayerNorm until
// the backward).
func LayerNorm(x, w, b *Tensor, d int, eps float64) (y, mean, rstd *Tensor) {
	k := table("LayerNorm", x, w, b)
	need(k.LayerNorm != nil, "LayerNorm", x)
	xc := x.Contiguous()
	rows := xc.Numel() / d
	// y, mean and rstd are written whole.
	y, mean, rstd = EmptyAs(xc, xc.shape...), EmptyAs(xc, rows), EmptyAs(xc, rows)
	if rows > 0 {
		k.LayerNorm(y, mean, rstd, xc, contiguousOrNil(w), contiguousOrNil(b), eps)
	}
	return y, mean, rstd
}

// LayerNormBackward returns LayerNorm's input gradient (nil unless wantDX)
// from gy, the forward's contiguous x and its mean and rstd, and adds the
// weight and bias gradients into dw and db (each nil when not wanted).
func LayerNormBackward(gy, x, mean, rstd, w, dw, db *Tensor, wantDX bool) *Tensor {
	k := table("LayerNorm backward", gy, x, mean, rstd, w, dw, db)
	need(k.LayerNormBackward != nil, "LayerNorm backward", gy)
	for _, p := range []*Tensor{dw, db} {
		if p != nil && !p.IsContiguous() {
			panic(NoKernel("LayerNorm backward into a view", p.Device()))
		}
	}
	g := gy.Contiguous()
	var dx *Tensor
	if wantDX {
		dx = EmptyAs(g, x.shape...) // written whole
	}
	if rstd.Numel() > 0 {
		k.LayerNormBackward(dx, dw, db, g, x, mean, rstd, contiguousOrNil(w))
	}
	return dx
}
