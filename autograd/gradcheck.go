package autograd

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/goddp/goddp/tensor"
)

// ErrGradCheck is returned by GradCheck when analytic and numeric gradients disagree.
var ErrGradCheck = errors.New("autograd: gradient check failed")

// GradCheckOptions tunes GradCheck; zero fields take the defaults.
type GradCheckOptions struct {
	Eps    float64 // central-difference step, default 1e-6
	AbsTol float64 // default 1e-6
	RelTol float64 // relative to max(|analytic|, |numeric|), default 1e-5
	Seed   uint64  // seeds the random upstream gradient, default 1
}

// GradCheck compares the gradients that Backward computes for f against
// central finite differences, in float64, like torch.autograd.gradcheck.
// It reads and perturbs host elements (.F64()) by design: finite
// differences are a test of the ops, not an op, so it is one of the few
// files here that touch host memory.
//
// Every input must be a float64 tensor; GradCheck wraps each in a Param, calls
// f, seeds backward with a fixed random upstream gradient w and checks
// d(sum(w * f(x)))/dx element by element: |analytic - numeric| <= AbsTol +
// RelTol * max(|analytic|, |numeric|). The inputs are perturbed in place and
// restored. f must be deterministic (reseed any RNG inside it) and smooth near
// the inputs (keep ReLU, Clamp or Max away from their kinks).
func GradCheck(f func(xs []*Variable) *Variable, inputs []*tensor.Tensor, opt GradCheckOptions) error {
	if opt.Eps == 0 {
		opt.Eps = 1e-6
	}
	if opt.AbsTol == 0 {
		opt.AbsTol = 1e-6
	}
	if opt.RelTol == 0 {
		opt.RelTol = 1e-5
	}
	if opt.Seed == 0 {
		opt.Seed = 1
	}
	vars := make([]*Variable, len(inputs))
	for i, x := range inputs {
		if x.DType() != tensor.Float64 || !x.IsContiguous() {
			return fmt.Errorf("%w: input %d must be a contiguous float64 tensor, got %v %v", ErrGradCheck, i, x.DType(), x.Shape())
		}
		vars[i] = Param(x)
	}
	out := f(vars)
	if out.Value.DType() != tensor.Float64 {
		return fmt.Errorf("%w: output dtype %v, want float64", ErrGradCheck, out.Value.DType())
	}
	rng := rand.New(rand.NewPCG(opt.Seed, 0x9e3779b97f4a7c15))
	w := tensor.New(tensor.Float64, out.Value.Shape()...)
	wd := w.F64()
	for i := range wd {
		wd[i] = rng.Float64()*2 - 1
	}
	if out.RequiresGrad() {
		if err := out.BackwardWith(w); err != nil {
			return fmt.Errorf("%w: backward: %w", ErrGradCheck, err)
		}
	}
	objective := func() float64 {
		var y *Variable
		NoGrad(vars, func() { y = f(vars) })
		yd := y.Value.Contiguous().F64()
		s := 0.0
		for i, v := range yd {
			s += v * wd[i]
		}
		return s
	}
	var bad []string
	worst := 0.0
	for i, v := range vars {
		x := v.Value.F64()
		var ana []float64
		if v.Grad != nil {
			ana = v.Grad.Contiguous().F64()
		}
		for j := range x {
			orig := x[j]
			x[j] = orig + opt.Eps
			fp := objective()
			x[j] = orig - opt.Eps
			fm := objective()
			x[j] = orig
			num := (fp - fm) / (2 * opt.Eps)
			a := 0.0
			if ana != nil {
				a = ana[j]
			}
			diff := math.Abs(a - num)
			tol := opt.AbsTol + opt.RelTol*math.Max(math.Abs(a), math.Abs(num))
			if !(diff <= tol) {
				worst = math.Max(worst, diff)
				if len(bad) < 6 {
					bad = append(bad, fmt.Sprintf("input %d %v element %d: analytic %.10g numeric %.10g", i, v.Value.Shape(), j, a, num))
				}
			}
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w (max abs diff %.3g): %s", ErrGradCheck, worst, strings.Join(bad, "; "))
	}
	return nil
}
