package tensor

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestInPlace(t *testing.T) {
	for _, dt := range dtypes {
		t.Run(dt.String(), func(t *testing.T) {
			dst := New(dt, 2, 3)
			CopyFrom(dst, Arange(dt, 0, 6, 1).Reshape(2, 3))
			assert.Equal(t, []float64{0, 1, 2, 3, 4, 5}, values(dst))

			AddInto(dst, Full(dt, 10, 3)) // row broadcast
			assert.Equal(t, []float64{10, 11, 12, 13, 14, 15}, values(dst))

			Axpy(dst, -2, Ones(dt, 2, 3))
			assert.Equal(t, []float64{8, 9, 10, 11, 12, 13}, values(dst))

			ScaleInto(dst, 0.5)
			assert.Equal(t, []float64{4, 4.5, 5, 5.5, 6, 6.5}, values(dst))

			// Into a strided view: only the view's elements change.
			col := Narrow(dst, 1, 1, 1)
			CopyFrom(col, Full(dt, -1, 2, 1))
			Axpy(col, 3, Full(dt, 1, 1))
			ScaleInto(dst.T(), 2)
			assert.Equal(t, []float64{8, 4, 10, 11, 4, 13}, values(dst))

			Fill(dst.T(), 7)
			assert.Equal(t, []float64{7, 7, 7, 7, 7, 7}, values(dst))
			Fill(dst, 0)
			assert.Equal(t, []float64{0, 0, 0, 0, 0, 0}, values(dst))
		})
	}
	requirePanics(t, func() { AddInto(New(Float32, 2, 3), New(Float32, 3, 3)) }, "Axpy", "[3 3]", "[2 3]")
	requirePanics(t, func() { CopyFrom(New(Float32, 2), New(Float64, 2)) }, "CopyFrom", "float32", "float64")
}

func TestInPlaceAllocatesNothing(t *testing.T) {
	p, g := New(Float32, 512, 512), Ones(Float32, 512, 512)
	b := Ones(Float32, 512)
	cases := map[string]func(){
		"Axpy":      func() { Axpy(p, -0.01, g) },
		"AddInto":   func() { AddInto(p, g) },
		"ScaleInto": func() { ScaleInto(p, 0.9) },
		"Fill":      func() { Fill(p, 0) },
		"CopyFrom":  func() { CopyFrom(p, g) },
		"bias add":  func() { AddInto(p, b) },
	}
	for name, fn := range cases {
		t.Run(name, func(t *testing.T) { assert.Zero(t, testing.AllocsPerRun(5, fn)) })
	}
}
