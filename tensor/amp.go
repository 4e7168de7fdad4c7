package tensor

import (
	"fmt"
	"math"
)

// NonFiniteCheckAndUnscale multiplies every gradient in grads by invScale
// in place and reports whether any element was infinite or NaN before the
// multiply (torch's _amp_foreach_non_finite_check_and_unscale_, the core of
// GradScaler.unscale_). An invScale of exactly 1 leaves the values as they
// are, as torch's kernel does. Non-contiguous gradients are handled
// through their elements; a device gradient is checked and scaled on the
// host through a copy (a device kernel for it is future work).
func NonFiniteCheckAndUnscale(grads []*Tensor, invScale float32) (foundInf bool, err error) {
	for i, g := range grads {
		if g == nil {
			continue
		}
		if !g.IsCPU() {
			h, err := g.To(CPU())
			if err != nil {
				return foundInf, fmt.Errorf("tensor: unscale gradient %d: %w", i, err)
			}
			if checkAndScaleHost(h, invScale) {
				foundInf = true
			}
			if err := Copy(g, h); err != nil {
				return foundInf, fmt.Errorf("tensor: unscale gradient %d: %w", i, err)
			}
			continue
		}
		if checkAndScaleHost(g, invScale) {
			foundInf = true
		}
	}
	return foundInf, nil
}

func checkAndScaleHost(g *Tensor, invScale float32) bool {
	found := false
	if g.dtype == Float64 {
		c := g.Contiguous()
		x := c.F64()
		for i, v := range x {
			if math.IsInf(v, 0) || math.IsNaN(v) {
				found = true
			}
			if invScale != 1 {
				x[i] = v * float64(invScale)
			}
		}
		if c != g {
			CopyFrom(g, c)
		}
		return found
	}
	c := g.Contiguous()
	x := c.F32()
	for i, v := range x {
		// v-v is NaN exactly when v is ±Inf or NaN.
		if v-v != 0 {
			found = true
		}
		if invScale != 1 {
			x[i] = v * invScale
		}
	}
	if c != g {
		CopyFrom(g, c)
	}
	return found
}
