package main

import (
	"runtime"
	"time"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/tensor"
)

// profileModel holds exactly a profile's parameters (float32, zeros) and
// computes sum_i (p_i * x).sum() for a scalar x, as torch_grad_sync.py's
// Profile module does: backward is one cheap elementwise pass per parameter,
// and the gradients become ready in reverse registration order, as in a
// real backward. With compute times set, parameter i's backward first spins
// for compute[i] (the layer's backward FLOPs at the chosen rate) before its
// gradient becomes ready, so communication can overlap it.
type profileModel struct {
	names   []string
	params  []*autograd.Variable
	compute []time.Duration
}

var _ nn.Layer = (*profileModel)(nil)

func newProfileModel(p *profile, compute []time.Duration) *profileModel {
	m := &profileModel{compute: compute}
	for _, q := range p.Params {
		m.names = append(m.names, q.Name)
		m.params = append(m.params, autograd.Param(tensor.New(tensor.Float32, q.Shape...)))
	}
	return m
}

// NamedParameters implements nn.Module.
func (m *profileModel) NamedParameters() []nn.NamedParameter {
	out := make([]nn.NamedParameter, len(m.params))
	for i, p := range m.params {
		out[i] = nn.NamedParameter{Name: m.names[i], Param: p}
	}
	return out
}

// Train implements nn.Module (the model has no mode).
func (m *profileModel) Train(bool) {}

// Training implements nn.Module.
func (m *profileModel) Training() bool { return true }

// NamedBuffers implements nn.Module (none).
func (m *profileModel) NamedBuffers() []nn.NamedBuffer { return nil }

// Forward returns sum_i (p_i * x).sum(); x is a scalar.
func (m *profileModel) Forward(x *autograd.Variable) *autograd.Variable {
	var loss *autograd.Variable
	for i, p := range m.params {
		y := autograd.Mul(p, x)
		if m.compute != nil && m.compute[i] > 0 {
			y = autograd.FromOp(y.Value, &spinOp{in: []*autograd.Variable{y}, d: m.compute[i]})
		}
		t := autograd.SumAll(y)
		if loss == nil {
			loss = t
		} else {
			loss = autograd.Add(loss, t)
		}
	}
	return loss
}

// spinOp is the identity whose backward first burns d of CPU time: the
// stand-in for a layer's backward compute.
type spinOp struct {
	in []*autograd.Variable
	d  time.Duration
}

func (o *spinOp) Name() string                 { return "Spin" }
func (o *spinOp) Inputs() []*autograd.Variable { return o.in }
func (o *spinOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	spin(o.d)
	return []*tensor.Tensor{gy}
}

// spin busy-waits until it has been on the CPU for d. It yields to other
// goroutines (DDP's watchers, the backend's progress) every spinYield, as
// the tensor engine's GEMMs let the scheduler in, and does not count the
// time they take: gaps longer than spinGap between two clock reads mean this
// goroutine was off the CPU, so compute that shares a core with
// communication is delayed by it, as real compute would be.
func spin(d time.Duration) {
	const (
		spinYield = 50 * time.Microsecond
		spinGap   = 20 * time.Microsecond
	)
	last := time.Now()
	var done, sinceYield time.Duration
	x := 1.0
	for done < d {
		for i := 0; i < 64; i++ { // a little arithmetic between clock reads
			x = x*1.0000001 + 1e-9
		}
		now := time.Now()
		if gap := now.Sub(last); gap < spinGap {
			done += gap
			sinceYield += gap
		}
		last = now
		if sinceYield >= spinYield {
			sinceYield = 0
			runtime.Gosched()
			last = time.Now()
		}
	}
	spinSink = x
}

// spinSink keeps the compiler from dropping spin's arithmetic.
var spinSink float64
