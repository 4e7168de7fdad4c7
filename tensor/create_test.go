package tensor

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCreation(t *testing.T) {
	for _, dt := range dtypes {
		t.Run(dt.String(), func(t *testing.T) {
			assert.Equal(t, []float64{1, 1, 1, 1, 1, 1}, values(Ones(dt, 2, 3)))
			assert.Equal(t, []float64{2.5, 2.5}, values(Full(dt, 2.5, 2)))
			assert.Equal(t, []float64{0, 0}, values(Zeros(dt, 1, 2)))
			assert.Equal(t, []float64{0, 1, 2, 3}, values(Arange(dt, 0, 4, 1)))
			assert.Equal(t, []float64{1, 1.5, 2, 2.5}, values(Arange(dt, 1, 3, 0.5)))
			assert.Equal(t, []float64{5, 3}, values(Arange(dt, 5, 1, -2)))
			assert.Equal(t, 0, Arange(dt, 3, 1, 1).Numel())
			s := Scalar(dt, 4)
			assert.Equal(t, 0, s.Dim())
			assert.Equal(t, 4.0, s.Item())
			assert.Equal(t, dt, OnesLike(s).DType())
		})
	}
	x := FromF32([]float32{1.5, -2}, 2)
	assert.Equal(t, []float64{1.5, -2}, AsType(x, Float64).F64())
	assert.Equal(t, []float32{1.5, -2}, AsType(AsType(x, Float64), Float32).F32())
	requirePanics(t, func() { Arange(Float32, 0, 1, 0) }, "Arange")
}
