package ddp

import (
	"github.com/goddp/goddp/comm/commtest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/tensor"
)

// testNet is a minimal nn.Layer: named parameters plus a forward closure.
type testNet struct {
	names   []string
	params  []*autograd.Variable
	bufs    []nn.NamedBuffer
	fwd     func(n *testNet, x *autograd.Variable) *autograd.Variable
	train   bool
	byName  map[string]*autograd.Variable
	scratch any
}

func newTestNet() *testNet { return &testNet{train: true, byName: map[string]*autograd.Variable{}} }

func (n *testNet) add(name string, t *tensor.Tensor) *autograd.Variable {
	v := autograd.Param(t)
	n.names = append(n.names, name)
	n.params = append(n.params, v)
	n.byName[name] = v
	return v
}

func (n *testNet) NamedParameters() []nn.NamedParameter {
	out := make([]nn.NamedParameter, len(n.params))
	for i := range n.params {
		out[i] = nn.NamedParameter{Name: n.names[i], Param: n.params[i]}
	}
	return out
}
func (n *testNet) NamedBuffers() []nn.NamedBuffer { return n.bufs }
func (n *testNet) Train(on bool)                  { n.train = on }
func (n *testNet) Training() bool                 { return n.train }
func (n *testNet) Forward(x *autograd.Variable) *autograd.Variable {
	return n.fwd(n, x)
}
func (n *testNet) p(name string) *autograd.Variable { return n.byName[name] }

// dotOp is sum(p * c) for a constant c: its gradient with respect to p is c,
// which lets tests dictate each parameter's gradient exactly.
type dotOp struct {
	p *autograd.Variable
	c *tensor.Tensor
}

func (o *dotOp) Name() string                 { return "testDot" }
func (o *dotOp) Inputs() []*autograd.Variable { return []*autograd.Variable{o.p} }
func (o *dotOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	g := o.c.Clone()
	s := gy.Item()
	if g.DType() == tensor.Float64 {
		for i := range g.F64() {
			g.F64()[i] *= s
		}
	} else {
		for i := range g.F32() {
			g.F32()[i] *= float32(s)
		}
	}
	return []*tensor.Tensor{g}
}

func dot(p *autograd.Variable, c *tensor.Tensor) *autograd.Variable {
	var s float64
	pv := p.Value.Contiguous()
	if pv.DType() == tensor.Float64 {
		for i, v := range pv.F64() {
			s += v * c.F64()[i]
		}
		return autograd.FromOp(tensor.FromF64([]float64{s}), &dotOp{p, c})
	}
	for i, v := range pv.F32() {
		s += float64(v) * float64(c.F32()[i])
	}
	return autograd.FromOp(tensor.FromF32([]float32{float32(s)}), &dotOp{p, c})
}

// addOp adds scalar variables.
type addOp struct{ in []*autograd.Variable }

func (o *addOp) Name() string                 { return "testAdd" }
func (o *addOp) Inputs() []*autograd.Variable { return o.in }
func (o *addOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	out := make([]*tensor.Tensor, len(o.in))
	for i := range out {
		out[i] = gy.Clone()
	}
	return out
}

func addAll(vs ...*autograd.Variable) *autograd.Variable {
	var s float64
	for _, v := range vs {
		s += v.Value.Item()
	}
	if vs[0].Value.DType() == tensor.Float64 {
		return autograd.FromOp(tensor.FromF64([]float64{s}), &addOp{vs})
	}
	return autograd.FromOp(tensor.FromF32([]float32{float32(s)}), &addOp{vs})
}

// fill returns a float32 tensor of shape filled with f(i).
func fill(f func(i int) float32, shape ...int) *tensor.Tensor {
	t := tensor.New(tensor.Float32, shape...)
	for i := range t.F32() {
		t.F32()[i] = f(i)
	}
	return t
}

func constant(v float32, shape ...int) *tensor.Tensor {
	return fill(func(int) float32 { return v }, shape...)
}

// runRanks runs fn on n in-memory ranks concurrently and returns each rank's error.
func runRanks(t *testing.T, n int, fn func(rank int, pg comm.ProcessGroup) error, opts ...commtest.Option) []error {
	t.Helper()
	opts = append([]commtest.Option{commtest.WithTimeout(20 * time.Second)}, opts...)
	return commtest.Run(commtest.NewGroups(n, opts...), func(pg comm.ProcessGroup) error { return fn(pg.Rank(), pg) })
}

func requireNoErrs(t *testing.T, errs []error) {
	t.Helper()
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}

// recordingGroup snapshots every all-reduce's input at call time.
type recordingGroup struct {
	comm.ProcessGroup
	mu   sync.Mutex
	sent [][]float32
}

func (g *recordingGroup) AllReduce(buf comm.Buffer, op comm.ReduceOp) comm.Work {
	g.mu.Lock()
	if buf.DType == comm.Float32 {
		g.sent = append(g.sent, append([]float32(nil), bufF32(buf)...))
	} else {
		g.sent = append(g.sent, nil)
	}
	g.mu.Unlock()
	return g.ProcessGroup.AllReduce(buf, op)
}

func (g *recordingGroup) snapshot() [][]float32 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([][]float32(nil), g.sent...)
}

// allReduceLens lists the element counts of the all-reduces a rank issued.
func allReduceLens(pg comm.ProcessGroup) []int {
	var out []int
	for _, op := range pg.(*commtest.Group).Ops() {
		if op.Kind == "allreduce" {
			out = append(out, op.Len)
		}
	}
	return out
}

func f32s(t *tensor.Tensor) []float32 { return append([]float32(nil), t.Contiguous().F32()...) }

func nnBuffer(name string, t *tensor.Tensor) nn.NamedBuffer {
	return nn.NamedBuffer{Name: name, Buffer: t}
}
