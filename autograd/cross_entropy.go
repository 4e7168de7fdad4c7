package autograd

import (
	"fmt"
	"math"

	"goddp/tensor"
)

// CrossEntropy returns the cross-entropy loss of logits [N, C] against class
// indices target (len N, each in [0, C)), fused as log_softmax + nll_loss like
// torch.nn.functional.cross_entropy. ReductionMean and ReductionSum give a 0-d
// loss, ReductionNone the N per-sample losses. A target out of range panics.
//
// Forward keeps the softmax probabilities; backward is (p - onehot) * gy,
// scaled by 1/N for the mean.
func CrossEntropy(logits *Variable, target []int, reduction Reduction) *Variable {
	reduction.check("CrossEntropy")
	s := logits.Value.Shape()
	if len(s) != 2 || len(target) != s[0] {
		panic(fmt.Sprintf("autograd: CrossEntropy: logits shape %v does not match %d targets (want [N, C])", s, len(target)))
	}
	n, c := s[0], s[1]
	for i, t := range target {
		if t < 0 || t >= c {
			panic(fmt.Sprintf("autograd: CrossEntropy: target[%d] = %d out of range for %d classes", i, t, c))
		}
	}
	x := logits.Value.Contiguous()
	p := tensor.New(x.DType(), n, c)
	var y *tensor.Tensor
	if reduction == ReductionNone {
		y = tensor.New(x.DType(), n)
	} else {
		y = tensor.New(x.DType())
	}
	if x.DType() == tensor.Float64 {
		crossEntropyFwd(y.F64(), p.F64(), x.F64(), target, n, c, reduction)
	} else {
		crossEntropyFwd(y.F32(), p.F32(), x.F32(), target, n, c, reduction)
	}
	return FromOp(y, &crossEntropyOp{inputs: ins(logits), p: p, target: target, reduction: reduction})
}

func crossEntropyFwd[T float](y, p, x []T, target []int, n, c int, r Reduction) {
	total := 0.0
	for i := 0; i < n; i++ {
		row, pr := x[i*c:(i+1)*c], p[i*c:(i+1)*c]
		m := math.Inf(-1)
		for _, v := range row {
			m = math.Max(m, float64(v))
		}
		s := 0.0
		for j, v := range row {
			e := math.Exp(float64(v) - m)
			pr[j] = T(e)
			s += e
		}
		inv := 1 / s
		for j := range pr {
			pr[j] = T(float64(pr[j]) * inv)
		}
		loss := m + math.Log(s) - float64(row[target[i]])
		if r == ReductionNone {
			y[i] = T(loss)
		}
		total += loss
	}
	switch r {
	case ReductionMean:
		y[0] = T(total / float64(n))
	case ReductionSum:
		y[0] = T(total)
	}
}

type crossEntropyOp struct {
	inputs
	p         *tensor.Tensor // softmax of the logits
	target    []int
	reduction Reduction
}

func (o *crossEntropyOp) Name() string { return "CrossEntropy" }
func (o *crossEntropyOp) freshGrads()  {}

func (o *crossEntropyOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	gy = gy.Contiguous()
	gx := tensor.New(o.p.DType(), o.p.Shape()...)
	if gx.DType() == tensor.Float64 {
		crossEntropyBwd(gx.F64(), o.p.F64(), gy.F64(), o.target, o.reduction)
	} else {
		crossEntropyBwd(gx.F32(), o.p.F32(), gy.F32(), o.target, o.reduction)
	}
	return []*tensor.Tensor{gx}
}

func crossEntropyBwd[T float](gx, p, gy []T, target []int, r Reduction) {
	n := len(target)
	if n == 0 {
		return
	}
	c := len(p) / n
	g := gy[0]
	if r == ReductionMean {
		g /= T(n)
	}
	for i := 0; i < n; i++ {
		if r == ReductionNone {
			g = gy[i]
		}
		row, pr := gx[i*c:(i+1)*c], p[i*c:(i+1)*c]
		for j, v := range pr {
			row[j] = v * g
		}
		row[target[i]] -= g
	}
}
