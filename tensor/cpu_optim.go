package tensor

// The host's multi-tensor optimizer entries (Kernels.AdamMulti, SGDMulti):
// the per-tensor updates of optimstep.go (the SSE2 Adam kernel, the C SGD
// kernel, gonum's SIMD axpy) in a loop, so that goddp/optim's multi-tensor
// path is the per-tensor one on the host, at its speed and bit for bit.

func cpuAdamMulti(ws, gs, ms, vs, vmaxs []*Tensor, hy AdamHyper) {
	for i, w := range ws {
		var vmax *Tensor
		if vmaxs != nil {
			vmax = vmaxs[i]
		}
		// AdamStep fails only on operands AdamStepMulti checked.
		if err := AdamStep(w, gs[i], ms[i], vs[i], vmax, hy); err != nil {
			panic(err.Error())
		}
	}
}

func cpuSGDMulti(ws, gs, bufs []*Tensor, hy SGDHyper) {
	for i, w := range ws {
		var buf *Tensor
		if bufs != nil {
			buf = bufs[i]
		}
		if err := SGDStep(w, gs[i], buf, hy); err != nil {
			panic(err.Error())
		}
	}
}
