package autograd

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

// fixTensor is a tensor in a fixture file: shape and row-major float64 data.
type fixTensor struct {
	Shape []int     `json:"shape"`
	Data  []float64 `json:"data"`
}

// fixCase is one case of testdata/ops/<op>.json, written by
// scripts/gen_fixtures_ops.py.
type fixCase struct {
	Name     string               `json:"name"`
	Inputs   []fixTensor          `json:"inputs"`
	Args     map[string]any       `json:"args"`
	Out      fixTensor            `json:"out"`
	Upstream fixTensor            `json:"upstream"`
	Grads    []*fixTensor         `json:"grads"`
	Extra    map[string]fixTensor `json:"extra"`
}

type fixFile struct {
	Op    string    `json:"op"`
	Torch string    `json:"torch"`
	Cases []fixCase `json:"cases"`
}

func loadFixture(t *testing.T, op string) fixFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "ops", op+".json"))
	require.NoError(t, err, "run /usr/bin/python3 scripts/gen_fixtures_ops.py")
	var f fixFile
	require.NoError(t, json.Unmarshal(b, &f))
	require.NotEmpty(t, f.Cases)
	return f
}

func (f fixTensor) tensor(dt tensor.DType) *tensor.Tensor {
	if dt == tensor.Float64 {
		return tensor.FromF64(append([]float64(nil), f.Data...), f.Shape...)
	}
	d := make([]float32, len(f.Data))
	for i, v := range f.Data {
		d[i] = float32(v)
	}
	return tensor.FromF32(d, f.Shape...)
}

func (c *fixCase) int(k string) int       { return int(c.Args[k].(float64)) }
func (c *fixCase) float(k string) float64 { return c.Args[k].(float64) }
func (c *fixCase) bool(k string) bool     { return c.Args[k].(bool) }
func (c *fixCase) has(k string) bool      { v, ok := c.Args[k]; return ok && v != nil }
func (c *fixCase) ints(k string) []int {
	raw, _ := c.Args[k].([]any)
	out := make([]int, len(raw))
	for i, v := range raw {
		out[i] = int(v.(float64))
	}
	return out
}
func (c *fixCase) floats(k string) []float64 {
	raw, _ := c.Args[k].([]any)
	out := make([]float64, len(raw))
	for i, v := range raw {
		out[i] = v.(float64)
	}
	return out
}
func (c *fixCase) reduction() Reduction {
	switch c.Args["reduction"] {
	case "sum":
		return ReductionSum
	case "none":
		return ReductionNone
	}
	return ReductionMean
}

// fixtureFn builds the op under test for one case. extra returns tensors the
// op updated that the fixture also records (BatchNorm's running stats).
type fixtureFn func(c *fixCase, dt tensor.DType, in []*Variable) (out *Variable, extra map[string]*tensor.Tensor)

// plain adapts an op without extra outputs.
func plain(f func(c *fixCase, in []*Variable) *Variable) fixtureFn {
	return func(c *fixCase, _ tensor.DType, in []*Variable) (*Variable, map[string]*tensor.Tensor) {
		return f(c, in), nil
	}
}

// runFixture checks an op's forward value and input gradients against the
// PyTorch fixture, in float64 (tight) and float32 (loose).
func runFixture(t *testing.T, op string, fn fixtureFn) {
	f := loadFixture(t, op)
	for _, dt := range []tensor.DType{tensor.Float64, tensor.Float32} {
		atol, rtol := 1e-9, 1e-7
		if dt == tensor.Float32 {
			atol, rtol = 2e-4, 2e-4
		}
		for i := range f.Cases {
			c := &f.Cases[i]
			t.Run(fmt.Sprintf("%s/%s/%v", op, c.Name, dt), func(t *testing.T) {
				in := make([]*Variable, len(c.Inputs))
				for k, x := range c.Inputs {
					in[k] = NewVariable(x.tensor(dt), k < len(c.Grads) && c.Grads[k] != nil)
				}
				out, extra := fn(c, dt, in)
				requireClose(t, c.Out, out.Value, atol, rtol, "forward")
				for k, v := range c.Extra {
					got, ok := extra[k]
					require.True(t, ok, "op did not report extra %q", k)
					requireClose(t, v, got, atol, rtol, k)
				}
				if !out.RequiresGrad() {
					return
				}
				require.NoError(t, out.BackwardWith(c.Upstream.tensor(dt)))
				for k, g := range c.Grads {
					if g == nil {
						continue
					}
					require.NotNil(t, in[k].Grad, "input %d got no gradient", k)
					requireClose(t, *g, in[k].Grad, atol, rtol, fmt.Sprintf("grad of input %d", k))
				}
			})
		}
	}
}

// requireClose compares got against want elementwise with |got-want| <= atol + rtol*|want|.
func requireClose(t *testing.T, want fixTensor, got *tensor.Tensor, atol, rtol float64, what string) {
	t.Helper()
	require.Equal(t, want.Shape, nonNilShape(got.Shape()), "%s: shape", what)
	g := toF64(got)
	require.Len(t, g, len(want.Data), "%s: length", what)
	for i, w := range want.Data {
		if d := math.Abs(g[i] - w); !(d <= atol+rtol*math.Abs(w)) {
			require.Failf(t, "mismatch", "%s: element %d: got %.10g want %.10g (diff %.3g)", what, i, g[i], w, d)
		}
	}
}

func nonNilShape(s []int) []int {
	if s == nil {
		return []int{}
	}
	return s
}

func toF64(t *tensor.Tensor) []float64 {
	c := t.Contiguous()
	if c.DType() == tensor.Float64 {
		return append([]float64(nil), c.F64()...)
	}
	out := make([]float64, c.Numel())
	for i, v := range c.F32() {
		out[i] = float64(v)
	}
	return out
}

// randT returns a float64 tensor of N(0,1)*scale + shift values from a seeded local RNG.
func randT(seed uint64, scale, shift float64, shape ...int) *tensor.Tensor {
	r := rand.New(rand.NewPCG(seed, 7))
	t := tensor.New(tensor.Float64, shape...)
	d := t.F64()
	for i := range d {
		d[i] = r.NormFloat64()*scale + shift
	}
	return t
}

// awayFrom pushes every element of t at least gap away from each kink point.
func awayFrom(t *tensor.Tensor, gap float64, kinks ...float64) *tensor.Tensor {
	d := t.F64()
	for i := range d {
		for _, k := range kinks {
			if math.Abs(d[i]-k) < gap {
				if d[i] >= k {
					d[i] = k + 2*gap
				} else {
					d[i] = k - 2*gap
				}
			}
		}
	}
	return t
}

// gradCheck runs GradCheck and fails the test on a mismatch.
func gradCheck(t *testing.T, f func(xs []*Variable) *Variable, inputs ...*tensor.Tensor) {
	t.Helper()
	require.NoError(t, GradCheck(f, inputs, GradCheckOptions{}))
}

// binaryShapes are the same-shape and broadcast cases every binary op is
// gradient-checked on.
var binaryShapes = []struct {
	name string
	a, b []int
}{
	{"same", []int{3, 4}, []int{3, 4}},
	{"row", []int{3, 4}, []int{4}},
	{"col", []int{3, 4}, []int{3, 1}},
	{"both", []int{2, 1, 4}, []int{3, 1}},
	{"scalar_b", []int{2, 3}, []int{1}},
	{"scalar_0d", []int{2, 3}, []int{}},
	{"lower_rank_a", []int{4}, []int{2, 3, 4}},
}

// absShift replaces t by |t| + shift (positive inputs for Pow, Log, Sqrt).
func absShift(t *tensor.Tensor, shift float64) *tensor.Tensor {
	d := t.F64()
	for i, v := range d {
		d[i] = math.Abs(v) + shift
	}
	return t
}
