package tensor

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestViews(t *testing.T) {
	base := FromF32([]float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}, 2, 3, 4)
	cases := []struct {
		name    string
		v       *Tensor
		shape   []int
		strides []int
		vals    []float64
	}{
		{"transpose", Transpose(base, 0, 2), []int{4, 3, 2}, []int{1, 4, 12}, nil},
		{"transpose neg", Transpose(base, -1, -2), []int{2, 4, 3}, []int{12, 1, 4}, nil},
		{"permute", Permute(base, 2, 0, 1), []int{4, 2, 3}, []int{1, 12, 4}, nil},
		{"narrow", Narrow(base, 2, 1, 2), []int{2, 3, 2}, []int{12, 4, 1},
			[]float64{1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22}},
		{"unsqueeze 0", Unsqueeze(base, 0), []int{1, 2, 3, 4}, []int{24, 12, 4, 1}, nil},
		{"unsqueeze end", Unsqueeze(base, -1), []int{2, 3, 4, 1}, []int{12, 4, 1, 1}, nil},
		{"squeeze all", Squeeze(Unsqueeze(Unsqueeze(base, 1), 0)), []int{2, 3, 4}, []int{12, 4, 1}, nil},
		{"squeeze one", Squeeze(Unsqueeze(Unsqueeze(base, 1), 0), 0), []int{2, 1, 3, 4}, []int{12, 12, 4, 1}, nil},
		{"T", FromF32([]float32{1, 2, 3, 4, 5, 6}, 2, 3).T(), []int{3, 2}, []int{1, 3}, []float64{1, 4, 2, 5, 3, 6}},
		{"expand", Expand(FromF32([]float32{1, 2}, 2, 1), 2, 3), []int{2, 3}, []int{1, 0}, []float64{1, 1, 1, 2, 2, 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.shape, tc.v.Shape())
			assert.Equal(t, tc.strides, tc.v.Strides())
			if tc.vals != nil {
				assert.Equal(t, tc.vals, values(tc.v))
			}
		})
	}
}

func TestViewsShareStorage(t *testing.T) {
	base := New(Float32, 3, 4)
	Fill(Narrow(base, 1, 1, 2), 5)
	assert.Equal(t, []float32{0, 5, 5, 0, 0, 5, 5, 0, 0, 5, 5, 0}, base.F32())
	tr := base.T()
	tr.Set(9, 3, 0)
	assert.Equal(t, 9.0, base.At(0, 3))
	// Contiguous of a view copies; of a contiguous tensor returns it.
	assert.Same(t, base, base.Contiguous())
	c := tr.Contiguous()
	c.Set(-1, 0, 0)
	assert.Equal(t, 0.0, base.At(0, 0))
}

func TestViewPanics(t *testing.T) {
	x := New(Float32, 2, 3)
	cases := []struct {
		name  string
		fn    func()
		parts []string
	}{
		{"transpose axis", func() { Transpose(x, 0, 2) }, []string{"Transpose", "axis 2", "[2 3]"}},
		{"permute repeat", func() { Permute(x, 0, 0) }, []string{"Permute", "[2 3]"}},
		{"narrow range", func() { Narrow(x, 1, 2, 2) }, []string{"Narrow", "[2 3]"}},
		{"squeeze non-1", func() { Squeeze(x, 0) }, []string{"Squeeze", "[2 3]"}},
		{"T 3d", func() { New(Float32, 1, 2, 3).T() }, []string{"T", "[1 2 3]"}},
		{"expand", func() { Expand(x, 3, 3) }, []string{"Expand", "[2 3]", "[3 3]"}},
		{"reshape", func() { x.Reshape(4, 2) }, []string{"reshape", "[2 3]", "[4 2]"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { requirePanics(t, tc.fn, tc.parts...) })
	}
}
