package optim

import (
	"fmt"

	"goddp/autograd"
	"goddp/tensor"
)

// The optimizers' steps on a device: the parameter, its gradient and the
// state live on the parameter's device, and the update is one fused kernel
// from tensor.Kernels (no host round trip). Options without a kernel return
// an error naming the device.

func deviceKernels(p *autograd.Variable, idx int, bufs ...*tensor.Tensor) (*tensor.Kernels, error) {
	var k *tensor.Kernels
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%w: parameter %d: %v", ErrBadGrad, idx, r)
			}
		}()
		ts := append([]*tensor.Tensor{p.Value, p.Grad}, bufs...)
		k = tensor.KernelsOf("optim", ts...)
	}()
	return k, err
}

func noKernel(idx int, what string, d tensor.Device) error {
	return fmt.Errorf("%w: parameter %d: %s", ErrInvalidConfig, idx, tensor.NoKernel(what, d))
}

// sgdStepDevice is sgdStep on a device: plain SGD as the CPU's axpy passes,
// momentum as one fused kernel.
func (o *SGD) sgdStepDevice(pg *ParamGroup, p *autograd.Variable, i int, first bool) error {
	k, err := deviceKernels(p, i, o.bufs[i])
	if err != nil {
		return err
	}
	dev := p.Value.Device()
	w, g := p.Value, p.Grad
	if o.bufs[i] == nil {
		if k.Axpy == nil {
			return noKernel(i, "SGD", dev)
		}
		if pg.WeightDecay != 0 {
			k.Axpy(w, float32(-pg.LR*pg.WeightDecay), w)
		}
		sign := 1.0
		if o.cfg.Maximize {
			sign = -1
		}
		k.Axpy(w, float32(-pg.LR*sign), g)
		return nil
	}
	if k.SGDMomentum == nil {
		return noKernel(i, "SGD with momentum", dev)
	}
	if o.cfg.Maximize {
		return noKernel(i, "SGD with momentum and maximize", dev)
	}
	k.SGDMomentum(w, g, o.bufs[i], float32(pg.LR), float32(o.cfg.Momentum), float32(o.cfg.Dampening),
		float32(pg.WeightDecay), o.cfg.Nesterov, first)
	return nil
}

// adamStepDevice is one Adam/AdamW update on a device.
func (o *Adam) adamStepDevice(p *autograd.Variable, i int, st *adamState, h adamHyper) error {
	k, err := deviceKernels(p, i, st.expAvg, st.expSq)
	if err != nil {
		return err
	}
	dev := p.Value.Device()
	switch {
	case k.Adam == nil:
		return noKernel(i, o.kind, dev)
	case o.cfg.AMSGrad:
		return noKernel(i, o.kind+" with AMSGrad", dev)
	case o.cfg.Maximize:
		return noKernel(i, o.kind+" with maximize", dev)
	}
	k.Adam(p.Value, p.Grad, st.expAvg, st.expSq, float32(h.lr), float32(h.beta1), float32(h.beta2), float32(h.eps),
		float32(h.wd), h.decoupled, float32(h.stepSize), float32(1/h.bc2Sqrt))
	return nil
}

// clipGradNormDevice is ClipGradNorm with every gradient on one device.
func clipGradNormDevice(params []*autograd.Variable, maxNorm float64) float64 {
	var grads [8]*tensor.Tensor
	gs := grads[:0]
	for _, p := range params {
		if p.Grad != nil {
			gs = append(gs, p.Grad)
		}
	}
	k := tensor.KernelsOf("optim: ClipGradNorm", gs...)
	dev := gs[0].Device()
	tensor.NeedKernel(k.SumSquares != nil && k.ClipCoef != nil && k.ScaleBy != nil && k.Fill != nil, "ClipGradNorm", dev)
	sumsq, coef, norm := tensor.MustZerosOn(dev), tensor.MustZerosOn(dev), tensor.MustZerosOn(dev)
	k.Fill(sumsq, 0)
	for _, g := range gs {
		k.SumSquares(sumsq, g)
	}
	k.ClipCoef(coef, norm, sumsq, float32(maxNorm))
	for _, g := range gs {
		k.ScaleBy(g, coef)
	}
	return norm.Item()
}
