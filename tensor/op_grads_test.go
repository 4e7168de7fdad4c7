package tensor

import (
	"math"
	"strings"
	"testing"
)

// The axis, indexing and pointwise-gradient ops are on the one-table seam
// (doc.go, "Adding an op"): the host's table has their entries, and a
// device without an entry refuses the op naming both rather than reading
// its memory on the host.
func TestAxisOpsCPUTable(t *testing.T) {
	k := CPU().Kernels()
	for name, ok := range map[string]bool{
		"Gather": k.Gather != nil, "ScatterAdd": k.ScatterAdd != nil,
		"IndexSelect": k.IndexSelect != nil, "IndexAdd": k.IndexAdd != nil,
		"MaxDim": k.MaxDim != nil, "MaxDimBackward": k.MaxDimBackward != nil,
		"CopyBlock": k.CopyBlock != nil, "StridedCopy": k.StridedCopy != nil,
		"Clamp": k.Clamp != nil, "ClampBackward": k.ClampBackward != nil,
		"PowScalar": k.PowScalar != nil, "PowScalarBackward": k.PowScalarBackward != nil,
		"PowBackward": k.PowBackward != nil, "BCEWithLogits": k.BCEWithLogits != nil,
		"BCEWithLogitsBackward": k.BCEWithLogitsBackward != nil,
	} {
		if !ok {
			t.Errorf("the CPU table has no %s entry", name)
		}
	}
}

func TestAxisOpsNoKernel(t *testing.T) {
	d := newHostDevice("fake:0")
	x := MustZerosOn(d, 2, 3)
	for _, c := range []struct {
		op   string
		call func()
	}{
		{"Gather", func() { Gather(x, 1, []int{0, 1}) }},
		{"ScatterAdd", func() { ScatterAdd(x, 1, []int{0, 1}, MustZerosOn(d, 2)) }},
		{"IndexSelect", func() { IndexSelect(x, 0, []int{1}) }},
		{"IndexAdd", func() { IndexAdd(x, 0, []int{1}, MustZerosOn(d, 1, 3)) }},
		{"Concat", func() { Concat(0, x, x) }},
		{"NarrowCopy", func() { NarrowCopy(x, 1, 1, 2) }},
		{"Expand", func() { ExpandContiguous(MustZerosOn(d, 3), 2, 3) }},
		{"Max", func() { MaxDim(x, 1, false) }},
		{"Max backward", func() { MaxDimBackward(MustZerosOn(d, 2), MustZerosOn(d, 2), []int{2, 3}, 1) }},
		{"Clamp", func() { Clamp(x, 0, 1) }},
		{"Clamp backward", func() { ClampBackward(x, x, 0, 1, false) }},
		{"PowScalar", func() { PowScalar(x, 3) }},
		{"PowScalar backward", func() { PowScalarBackward(x, x, 3, false) }},
		{"Pow backward", func() { PowBackward(x, x, x, x, true, true) }},
		{"BCEWithLogits", func() { BCEWithLogits(x, x, true, 6) }},
		{"BCEWithLogits backward", func() { BCEWithLogitsBackward(x, x, x, false, 1, true, false) }},
	} {
		want := c.op + " has no kernel on fake:0"
		if msg := panicOf(c.call); !strings.Contains(msg, want) {
			t.Errorf("%s on fake:0: panic %q, want one containing %q", c.op, msg, want)
		}
	}
}

// StridedCopy, the host's copy of a view by runs, gives what the element
// walk of Contiguous gives, for broadcasts, transposes and narrows.
func TestExpandContiguousMatchesContiguous(t *testing.T) {
	for _, dt := range []DType{Float64, Float32} {
		base := AsType(FromF64([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 3, 4), dt)
		views := map[string]*Tensor{
			"scalar":     Expand(AsType(FromF64([]float64{7}, 1), dt), 3, 4),
			"row":        Expand(Narrow(base, 0, 1, 1), 5, 4),
			"column":     Expand(Narrow(base, 1, 2, 1), 3, 6),
			"lead":       Expand(base, 2, 3, 4),
			"middle":     Expand(Unsqueeze(base, 1), 3, 2, 4),
			"transposed": Transpose(base, 0, 1),
			"narrow":     Narrow(base, 1, 1, 2),
			"expanded-T": Expand(Unsqueeze(Transpose(base, 0, 1), 0), 2, 4, 3),
		}
		for name, v := range views {
			out := New(dt, v.Shape()...)
			CPU().Kernels().StridedCopy(out, v)
			want := AsType(v.Contiguous(), Float64).F64()
			if got := AsType(out, Float64).F64(); !equalF64(got, want) {
				t.Errorf("%s/%v: StridedCopy = %v, want %v", name, dt, got, want)
			}
		}
	}
	if got := ExpandContiguous(FromF64([]float64{1, 2}, 2, 1), 2, 3).F64(); !equalF64(got, []float64{1, 1, 1, 2, 2, 2}) {
		t.Errorf("ExpandContiguous([2 1] -> [2 3]) = %v", got)
	}
}

func equalF64(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] && !(math.IsNaN(a[i]) && math.IsNaN(b[i])) {
			return false
		}
	}
	return true
}

// MaxDim keeps its positions in a float32 tensor (int32 bits) for any
// dtype, the first NaN counting as the maximum; its backward puts gy there.
func TestMaxDimAndBackward(t *testing.T) {
	nan := math.NaN()
	for _, dt := range []DType{Float64, Float32} {
		x := AsType(FromF64([]float64{1, 5, nan, 2, nan, 3, 0, 4, nan}, 3, 3), dt)
		y, arg := MaxDim(x, 0, false)
		if arg.DType() != Float32 || arg.Numel() != 3 {
			t.Fatalf("%v: arg %v %v, want 3 float32 elements", dt, arg.DType(), arg.Shape())
		}
		if got := AsType(y, Float64).F64(); !equalF64(got, []float64{2, nan, nan}) {
			t.Errorf("%v: max along 0 = %v, want [2 NaN NaN]", dt, got)
		}
		gx := MaxDimBackward(AsType(FromF64([]float64{10, 20, 30}, 3), dt), arg, []int{3, 3}, 0)
		if got := AsType(gx, Float64).F64(); !equalF64(got, []float64{0, 0, 30, 10, 20, 0, 0, 0, 0}) {
			t.Errorf("%v: backward = %v", dt, got)
		}
	}
}
