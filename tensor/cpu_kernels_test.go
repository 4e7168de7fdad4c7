package tensor

import (
	"math"
	"strings"
	"testing"
)

// The CPU is a device with an op table like the others (issue 44): the
// elementwise family's forward and backward entries are there, and the
// generic op runs them on the host in float32 and float64.
func TestCPUKernelTable(t *testing.T) {
	k := CPU().Kernels()
	if k == nil {
		t.Fatal("CPU().Kernels() is nil: the host has no op table")
	}
	for name, ok := range map[string]bool{
		"Exp": k.Exp != nil, "Log": k.Log != nil, "Sqrt": k.Sqrt != nil, "Tanh": k.Tanh != nil,
		"Sigmoid": k.Sigmoid != nil, "ReLU": k.ReLU != nil, "GELU": k.GELU != nil, "Scale": k.Scale != nil,
		"Mul": k.Mul != nil, "Div": k.Div != nil, "ReLUBackward": k.ReLUBackward != nil,
		"GELUBackward": k.GELUBackward != nil, "TanhBackward": k.TanhBackward != nil,
		"SigmoidBackward": k.SigmoidBackward != nil, "SqrtBackward": k.SqrtBackward != nil,
	} {
		if !ok {
			t.Errorf("the CPU table has no %s entry", name)
		}
	}
}

func TestUnaryForwardBackwardOnCPU(t *testing.T) {
	xs := []float64{0.25, 0.5, 1.5, 3}
	cases := []struct {
		fn   UnaryFn
		f, d func(x float64) float64
	}{
		{FnExp, math.Exp, math.Exp},
		{FnLog, math.Log, func(x float64) float64 { return 1 / x }},
		{FnSqrt, math.Sqrt, func(x float64) float64 { return 0.5 / math.Sqrt(x) }},
		{FnTanh, math.Tanh, func(x float64) float64 { return 1 - math.Tanh(x)*math.Tanh(x) }},
		{FnSigmoid, func(x float64) float64 { return 1 / (1 + math.Exp(-x)) },
			func(x float64) float64 { s := 1 / (1 + math.Exp(-x)); return s * (1 - s) }},
		{FnReLU, func(x float64) float64 { return max(x, 0) }, func(float64) float64 { return 1 }},
		{FnNeg, func(x float64) float64 { return -x }, func(float64) float64 { return -1 }},
		{FnGELU, func(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) },
			func(x float64) float64 {
				return 0.5*(1+math.Erf(x/math.Sqrt2)) + x*math.Exp(-x*x/2)/math.Sqrt(2*math.Pi)
			}},
	}
	for _, c := range cases {
		for _, dt := range []DType{Float64, Float32} {
			t.Run(c.fn.String()+"/"+dt.String(), func(t *testing.T) {
				tol := 1e-12
				if dt == Float32 {
					tol = 1e-5
				}
				x := AsType(FromF64(xs, len(xs)), dt)
				y, s := UnaryForward(c.fn, x, true)
				gy := AsType(FromF64([]float64{1, 2, 3, 4}, 4), dt)
				gx := UnaryBackward(s, gy, false)
				for i, v := range xs {
					if got := AsType(y, Float64).F64()[i]; math.Abs(got-c.f(v)) > tol*max(1, math.Abs(c.f(v))) {
						t.Errorf("y[%d] = %v, want %v", i, got, c.f(v))
					}
					want := float64(i+1) * c.d(v)
					if got := AsType(gx, Float64).F64()[i]; math.Abs(got-want) > tol*max(1, math.Abs(want)) {
						t.Errorf("gx[%d] = %v, want %v", i, got, want)
					}
				}
			})
		}
	}
}

// A device whose table lacks an entry refuses the op naming it and the
// device, never falling back to the host.
func TestUnaryForwardNoKernel(t *testing.T) {
	d := newHostDevice("fake:0")
	x := MustZerosOn(d, 3)
	msg := panicOf(func() { UnaryForward(FnTanh, x, true) })
	if !strings.Contains(msg, "Tanh has no kernel on fake:0") {
		t.Fatalf("panic %q, want one naming Tanh and fake:0", msg)
	}
	y, s := UnaryForward(FnReLU, x, true) // the entry it has runs
	if y.Device() != Device(d) {
		t.Fatalf("ReLU's result on %v, want fake:0", y.Device())
	}
	msg = panicOf(func() { UnaryBackward(s, y, false) })
	if !strings.Contains(msg, "ReLU backward has no kernel on fake:0") {
		t.Fatalf("panic %q, want one naming ReLU backward and fake:0", msg)
	}
}
