package tensor

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas/gonum"

	"github.com/goddp/goddp/tensor/internal/simd"
)

// The optimizers' fused updates, as tensor ops so that goddp/optim never
// asks where a parameter lives: on the host the element-wise code below
// (float32 SGD with momentum in one pass with torch's arithmetic,
// sgd_kernels.c), on a device one kernel of its table, the state staying
// there. They return errors
// rather than panic because an optimizer's Step does.

// ErrNoKernel is the error of an update that the parameter's device has no
// kernel for (an option such as AMSGrad on a device).
var ErrNoKernel = errors.New("tensor: no kernel")

// ErrMixedDevices is the error of an update whose tensors live on different
// devices; the message names both.
var ErrMixedDevices = errors.New("tensor: operands on different devices")

// stepKernels is kernelsFor for the updates: errors instead of panics.
func stepKernels(op string, ts ...*Tensor) (*Kernels, error) {
	var first *Tensor
	for _, t := range ts {
		if t == nil {
			continue
		}
		if first == nil {
			first = t
		} else if !sameDevice(first, t) {
			return nil, fmt.Errorf("%w: %s: %v and %v", ErrMixedDevices, op, first.Device(), t.Device())
		}
	}
	k := first.dev.s.Device().Kernels()
	if k == nil {
		return nil, noKernelErr(op, first.Device())
	}
	return k, nil
}

func noKernelErr(what string, d Device) error {
	return fmt.Errorf("%w: %s", ErrNoKernel, NoKernel(what, d))
}

// SGDHyper are one parameter's SGD hyper-parameters, as torch's SGD (First:
// the momentum buffer is fresh, torch's clone of the first d_p).
type SGDHyper struct {
	LR, WeightDecay, Momentum, Dampening float64
	Nesterov, Maximize, First            bool
}

// SGDStep updates w in place from its gradient g with torch's SGD; buf is
// the momentum buffer, nil without momentum. w, g and buf are contiguous
// with equal element counts.
func SGDStep(w, g, buf *Tensor, hy SGDHyper) error {
	h := sgdHyper{lr: hy.LR, wd: hy.WeightDecay, momentum: hy.Momentum, dampening: hy.Dampening,
		nesterov: hy.Nesterov, maximize: hy.Maximize, first: hy.First}
	if onDevice(w, g, buf) {
		return sgdStepDevice(w, g, buf, h)
	}
	if w.dtype == Float64 {
		var b []float64
		if buf != nil {
			b = buf.F64()
		}
		sgdUpdate(w.F64(), g.F64(), b, h)
		return nil
	}
	var b []float32
	if buf != nil {
		b = buf.F32()
	}
	sgdUpdate(w.F32(), g.F32(), b, h)
	return nil
}

// sgdStepDevice is SGDStep on a device: plain SGD as the host's axpy
// passes, momentum as one fused kernel.
func sgdStepDevice(w, g, buf *Tensor, h sgdHyper) error {
	k, err := stepKernels("SGD", w, g, buf)
	if err != nil {
		return err
	}
	dev := w.Device()
	if buf == nil {
		if k.Axpy == nil {
			return noKernelErr("SGD", dev)
		}
		if h.wd != 0 {
			k.Axpy(w, float32(-h.lr*h.wd), w)
		}
		sign := 1.0
		if h.maximize {
			sign = -1
		}
		k.Axpy(w, float32(-h.lr*sign), g)
		return nil
	}
	if k.SGDMomentum == nil {
		return noKernelErr("SGD with momentum", dev)
	}
	if h.maximize {
		return noKernelErr("SGD with momentum and maximize", dev)
	}
	k.SGDMomentum(w, g, buf, float32(h.lr), float32(h.momentum), float32(h.dampening),
		float32(h.wd), h.nesterov, h.first)
	return nil
}

// AdamHyper are one Adam or AdamW step's hyper-parameters (Decoupled: AdamW's
// weight decay); StepSize is lr/(1-β1^t) and BC2Sqrt √(1-β2^t).
type AdamHyper struct {
	LR, WeightDecay, Beta1, Beta2, Eps float64
	StepSize, BC2Sqrt                  float64
	Decoupled, Maximize                bool
}

// AdamStep updates w in place from its gradient g with torch's Adam or
// AdamW, m and v being the moment estimates and vmax AMSGrad's running
// maximum (nil without AMSGrad). All contiguous with equal element counts.
func AdamStep(w, g, m, v, vmax *Tensor, hy AdamHyper) error {
	h := adamHyper{lr: hy.LR, wd: hy.WeightDecay, beta1: hy.Beta1, beta2: hy.Beta2, eps: hy.Eps,
		stepSize: hy.StepSize, bc2Sqrt: hy.BC2Sqrt, decoupled: hy.Decoupled, maximize: hy.Maximize}
	if onDevice(w, g, m, v, vmax) {
		return adamStepDevice(w, g, m, v, vmax, h)
	}
	if w.dtype == Float64 {
		var mx []float64
		if vmax != nil {
			mx = vmax.F64()
		}
		adamUpdate(w.F64(), g.F64(), m.F64(), v.F64(), mx, h)
		return nil
	}
	var mx []float32
	if vmax != nil {
		mx = vmax.F32()
	}
	adamUpdate(w.F32(), g.F32(), m.F32(), v.F32(), mx, h)
	return nil
}

func adamStepDevice(w, g, m, v, vmax *Tensor, h adamHyper) error {
	kind := "Adam"
	if h.decoupled {
		kind = "AdamW"
	}
	k, err := stepKernels(kind, w, g, m, v, vmax)
	if err != nil {
		return err
	}
	dev := w.Device()
	switch {
	case k.Adam == nil:
		return noKernelErr(kind, dev)
	case vmax != nil:
		return noKernelErr(kind+" with AMSGrad", dev)
	case h.maximize:
		return noKernelErr(kind+" with maximize", dev)
	}
	k.Adam(w, g, m, v, float32(h.lr), float32(h.beta1), float32(h.beta2), float32(h.eps),
		float32(h.wd), h.decoupled, float32(h.stepSize), float32(1/h.bc2Sqrt))
	return nil
}

// AdamStepMulti is AdamStep over parallel lists of tensors that share one
// step's hyper-parameters (every parameter of a group at the same step):
// the multi-tensor update of torch's AdamW(fused=True) and foreach, its
// device's AdamMulti entry, which on a GPU is one launch however many
// tensors. Element by element the arithmetic is AdamStep's, so the results
// are bit for bit those of AdamStep on each. vmaxs is nil without AMSGrad.
// It returns an error wrapping ErrNoKernel, having changed nothing, when
// the tensors' device has no such entry or none for AMSGrad or Maximize
// (the caller then falls back to AdamStep), and ErrMixedDevices, or an
// error naming the index, for operands that do not go together.
func AdamStepMulti(ws, gs, ms, vs, vmaxs []*Tensor, hy AdamHyper) error {
	kind := "Adam"
	if hy.Decoupled {
		kind = "AdamW"
	}
	k, err := multiKernels(kind, ws, gs, ms, vs, vmaxs)
	if k == nil || err != nil {
		return err
	}
	dev := ws[0].Device()
	switch {
	case k.AdamMulti == nil:
		return noKernelErr(kind+" over many tensors", dev)
	case IsCPU(dev):
	case vmaxs != nil:
		return noKernelErr(kind+" over many tensors with AMSGrad", dev)
	case hy.Maximize:
		return noKernelErr(kind+" over many tensors with maximize", dev)
	}
	k.AdamMulti(ws, gs, ms, vs, vmaxs, hy)
	return nil
}

// SGDStepMulti is SGDStep over parallel lists of tensors that share one
// step's hyper-parameters (First included): torch's SGD(foreach=True) as
// its device's SGDMulti entry, bit for bit SGDStep on each. bufs is nil
// without momentum. Errors as AdamStepMulti's.
func SGDStepMulti(ws, gs, bufs []*Tensor, hy SGDHyper) error {
	k, err := multiKernels("SGD", ws, gs, bufs)
	if k == nil || err != nil {
		return err
	}
	dev := ws[0].Device()
	switch {
	case k.SGDMulti == nil:
		return noKernelErr("SGD over many tensors", dev)
	case IsCPU(dev):
	case bufs != nil && hy.Maximize:
		return noKernelErr("SGD over many tensors with momentum and maximize", dev)
	}
	k.SGDMulti(ws, gs, bufs, hy)
	return nil
}

// multiKernels checks the lists of a multi-tensor update (ws first; a nil
// list is an operand the update does without) and returns their device's
// table, nil for empty lists. Every tensor is on ws[0]'s device, of its
// dtype, contiguous, and of the element count of the tensors of its index
// in the other lists.
func multiKernels(op string, ws []*Tensor, lists ...[]*Tensor) (*Kernels, error) {
	if len(ws) == 0 {
		return nil, nil
	}
	for _, l := range lists {
		if l != nil && len(l) != len(ws) {
			return nil, fmt.Errorf("tensor: %s: lists of %d and %d tensors", op, len(ws), len(l))
		}
	}
	for i, w := range ws {
		if w == nil || !w.IsContiguous() {
			return nil, fmt.Errorf("tensor: %s: tensor %d is nil or not contiguous", op, i)
		}
		for _, l := range lists {
			if l == nil {
				continue
			}
			t := l[i]
			switch {
			case t == nil || !t.IsContiguous():
				return nil, fmt.Errorf("tensor: %s: an operand of tensor %d is nil or not contiguous", op, i)
			case !sameDevice(ws[0], t):
				return nil, fmt.Errorf("%w: %s: tensor %d on %v, tensor 0 on %v", ErrMixedDevices, op, i, t.Device(), ws[0].Device())
			case t.Numel() != w.Numel() || t.dtype != w.dtype:
				return nil, fmt.Errorf("tensor: %s: tensor %d is %v of %d elements, its operand %v of %d", op, i,
					w.dtype, w.Numel(), t.dtype, t.Numel())
			}
		}
		if !sameDevice(ws[0], w) {
			return nil, fmt.Errorf("%w: %s: tensor %d on %v, tensor 0 on %v", ErrMixedDevices, op, i, w.Device(), ws[0].Device())
		}
	}
	k := ws[0].Device().Kernels()
	if k == nil {
		return nil, noKernelErr(op, ws[0].Device())
	}
	return k, nil
}

// ClipGradNorm scales the gradients grads in place so that their total
// L2 norm is at most maxNorm, as torch's clip_grad_norm_, and returns the
// norm before clipping. On the host the norm is accumulated in float64 and
// a coefficient of 1 or more scales nothing; on a device the norm, the
// coefficient and the scaling stay there (with the multi-tensor entries
// four launches whatever the number of gradients: two for the sum of
// squares, one for the coefficient, one scaling them all; without, a
// kernel for the squares of each gradient, one for the coefficient, one
// scaling each gradient), and reading the returned norm waits for them. Gradients on different
// devices panic naming both.
func ClipGradNorm(grads []*Tensor, maxNorm float64) float64 {
	if len(grads) == 0 {
		return 0
	}
	if onDevice(grads...) {
		return clipGradNormDevice(grads, maxNorm)
	}
	var sumSq float64
	for _, g := range grads {
		if g.dtype == Float64 {
			for _, x := range g.Contiguous().F64() {
				sumSq += x * x
			}
			continue
		}
		sumSq += sumSquares32(g.Contiguous().F32())
	}
	norm := math.Sqrt(sumSq)
	coef := maxNorm / (norm + 1e-6)
	if coef >= 1 {
		return norm // multiplying by 1 is a no-op
	}
	for _, g := range grads {
		scaleInPlace(g, coef)
	}
	return norm
}

func clipGradNormDevice(gs []*Tensor, maxNorm float64) float64 {
	k := kernelsFor("ClipGradNorm", gs...)
	dev := gs[0].Device()
	if k.SumSquaresMulti != nil && k.ScaleByMulti != nil && k.ClipCoef != nil {
		// The kernels write all three whole.
		sumsq, coef, norm := MustEmptyOn(dev), MustEmptyOn(dev), MustEmptyOn(dev)
		k.SumSquaresMulti(sumsq, gs)
		k.ClipCoef(coef, norm, sumsq, float32(maxNorm))
		k.ScaleByMulti(gs, coef)
		return norm.Item()
	}
	NeedKernel(k.SumSquares != nil && k.ClipCoef != nil && k.ScaleBy != nil && k.Fill != nil, "ClipGradNorm", dev)
	sumsq, coef, norm := MustZerosOn(dev), MustZerosOn(dev), MustZerosOn(dev)
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

// sumSquares32 is the float64-accumulated dot product of x with itself,
// in SumAll's sixteen lanes (sum_kernels.c's vector loop from sumCMin
// elements; gonum's Dsdot, one sequential sum, ran GPT-2 124M's 124M
// gradients at about 1.2 G elements a second, 0.1 s of each clipped step).
func sumSquares32(x []float32) float64 {
	if len(x) >= sumCMin {
		return sumSquaresC(x)
	}
	return sumSquaresGo(x)
}

// sumSquaresGo is sumSquares32 in Go, sum_kernels.c's order (the squares
// are exact in float64, so the bits are the same).
func sumSquaresGo(x []float32) float64 {
	var acc [16]float64
	i := 0
	for ; i+16 <= len(x); i += 16 {
		b := x[i : i+16 : i+16]
		for j := range acc {
			v := float64(b[j])
			acc[j] += v * v
		}
	}
	for w := 8; w >= 1; w /= 2 {
		for j := range w {
			acc[j] += acc[j+w]
		}
	}
	s := acc[0]
	for ; i < len(x); i++ {
		v := float64(x[i])
		s += v * v
	}
	return s
}

// scaleInPlace multiplies t's elements by s. Gradients are always contiguous
// (the engine allocates them); a view would be a programmer error.
func scaleInPlace(t *Tensor, s float64) {
	if t.DType() == Float64 {
		d := t.F64()
		for i := range d {
			d[i] *= s
		}
		return
	}
	d := t.F32()
	stepAxpy(float32(s-1), d, d) // d += (s-1)*d, SIMD

}

type sgdHyper struct {
	lr, wd, momentum, dampening float64
	nesterov, maximize, first   bool
}

// sgdUpdate applies one SGD step to p in place. buf is nil without momentum.
//
// float32 with momentum (not Nesterov) is one pass with torch's arithmetic,
// operation by operation (sgdMomentumF32). Otherwise, except for Nesterov,
// the update is split into whole-vector axpy passes (SIMD kernels) instead
// of one scalar loop; the arithmetic is torch's, regrouped, so results
// agree with torch to rounding:
//
//	p += -lr*wd * p                      (weight decay, no momentum)
//	buf = m*buf + (1-dampening)*(±g + wd*p)
//	p += -lr * (buf or ±g)
func sgdUpdate[T float32 | float64](p, g, buf []T, h sgdHyper) {
	g = g[:len(p)]
	sign := 1.0
	if h.maximize {
		sign = -1
	}
	if buf == nil {
		if h.wd != 0 {
			stepAxpy(T(-h.lr*h.wd), p, p)
		}
		stepAxpy(T(-h.lr*sign), g, p)
		return
	}
	buf = buf[:len(p)]
	if h.nesterov {
		sgdNesterov(p, g, buf, h, T(sign))
		return
	}
	if p32, ok := any(p).([]float32); ok {
		sgdMomentumF32(p32, any(g).([]float32), any(buf).([]float32), h, float32(sign))
		return
	}
	if h.first {
		// buf = ±g + wd*p, torch's clone of the first d_p.
		copy(buf, g)
		if h.maximize {
			stepAxpy(T(-2), buf, buf)
		}
		if h.wd != 0 {
			stepAxpy(T(h.wd), p, buf)
		}
	} else {
		damp := 1 - h.dampening
		stepAxpy(T(h.momentum-1), buf, buf)
		stepAxpy(T(sign*damp), g, buf)
		if h.wd != 0 {
			stepAxpy(T(damp*h.wd), p, buf)
		}
	}
	stepAxpy(T(-h.lr), buf, p)
}

// sgdNesterov is the fused scalar loop for Nesterov momentum, whose update
// needs d and buf together.
func sgdNesterov[T float32 | float64](p, g, buf []T, h sgdHyper, sign T) {
	lr, wd, m, damp := T(h.lr), T(h.wd), T(h.momentum), T(1-h.dampening)
	for j := range p {
		d := sign*g[j] + wd*p[j]
		b := d
		if !h.first {
			b = m*buf[j] + damp*d
		}
		buf[j] = b
		p[j] -= lr * (d + m*b)
	}
}

type adamHyper struct {
	lr, wd, beta1, beta2, eps float64
	stepSize, bc2Sqrt         float64
	beta1Sign                 float64 // -1 when maximizing
	decoupled, maximize       bool
}

func adamUpdate[T float32 | float64](p, g, m, v, vmax []T, h adamHyper) {
	n := len(p)
	g, m, v = g[:n], m[:n], v[:n]
	if h.maximize {
		// Flip the gradient's sign by folding it into the moment updates:
		// m uses -g, and v's g*g is unchanged.
		h.beta1Sign = -1
	} else {
		h.beta1Sign = 1
	}
	decay := h.decoupled && h.wd != 0
	general := !h.decoupled && h.wd != 0 || vmax != nil
	// The common case (AdamW, or Adam without L2 and AMSGrad) in one tight
	// loop with no branches.
	b1, b2 := T(h.beta1), T(h.beta2)
	omb1, omb2 := T((1-h.beta1)*h.beta1Sign), T(1-h.beta2)
	invBc2, eps, stepSize := T(1/h.bc2Sqrt), T(h.eps), T(h.stepSize)
	c32 := simd.AdamConsts{B1: float32(b1), Omb1: float32(omb1), B2: float32(b2), Omb2: float32(omb2),
		InvBc2: float32(invBc2), Eps: float32(eps), Step: float32(stepSize)}
	if p32, ok := any(p).([]float32); ok && !general &&
		adamFusedF32(p32, any(g).([]float32), any(m).([]float32), any(v).([]float32), decay, float32(-h.lr*h.wd), c32) {
		// Decay and update in one pass (adam_kernels.c), the bits of the
		// two passes below.
		return
	}
	if decay {
		stepAxpy(T(-h.lr*h.wd), p, p) // p *= 1 - lr*wd
	}
	if general {
		adamGeneral(p, g, m, v, vmax, h)
		return
	}
	start := 0
	if p32, ok := any(p).([]float32); ok {
		// SSE2 kernel in this loop's exact order of operations (bit-identical).
		start = simd.AdamF32(p32, any(g).([]float32), any(m).([]float32), any(v).([]float32), c32)
	}
	for j := start; j < len(p); j++ {
		gj := g[j]
		mj := b1*m[j] + omb1*gj
		vj := b2*v[j] + omb2*gj*gj
		m[j], v[j] = mj, vj
		p[j] -= stepSize * mj / (T(math.Sqrt(float64(vj)))*invBc2 + eps)
	}
}

// adamGeneral handles Adam's L2 term (added to the gradient) and AMSGrad.
func adamGeneral[T float32 | float64](p, g, m, v, vmax []T, h adamHyper) {
	b1, b2 := T(h.beta1), T(h.beta2)
	omb1, omb2 := T(1-h.beta1), T(1-h.beta2)
	wd := T(h.wd)
	if h.decoupled {
		wd = 0 // already applied to p
	}
	sign := T(h.beta1Sign)
	invBc2, eps, stepSize := T(1/h.bc2Sqrt), T(h.eps), T(h.stepSize)
	for j := range p {
		gj := sign*g[j] + wd*p[j]
		mj := b1*m[j] + omb1*gj
		vj := b2*v[j] + omb2*gj*gj
		m[j], v[j] = mj, vj
		if vmax != nil {
			if vj > vmax[j] {
				vmax[j] = vj
			}
			vj = vmax[j]
		}
		p[j] -= stepSize * mj / (T(math.Sqrt(float64(vj)))*invBc2 + eps)
	}
}

// stepAxpy does y += a*x over the whole of y (x may alias y, which scales y by
// 1+a). It is optim's axpy, kept apart from the GEMM helper axpy.
//
// The optimizers' element-wise updates run on gonum's Level-1 kernels, whose
// amd64 versions are SIMD assembly (pure Go elsewhere and under
// CGO_ENABLED=0): about 5x faster than a plain Go loop, which the compiler
// does not vectorize. This is vector arithmetic, not the GEMM engine package
// tensor chooses.
func stepAxpy[T float32 | float64](a T, x, y []T) {
	switch yy := any(y).(type) {
	case []float32:
		xx := any(x).([]float32)
		gonum.Implementation{}.Saxpy(len(yy), float32(a), xx[:len(yy)], 1, yy, 1)
	case []float64:
		xx := any(x).([]float64)
		gonum.Implementation{}.Daxpy(len(yy), float64(a), xx[:len(yy)], 1, yy, 1)
	}
}
