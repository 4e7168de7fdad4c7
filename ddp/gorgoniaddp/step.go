//go:build !cuda

package gorgoniaddp

import (
	"fmt"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/ddp"
	"github.com/goddp/goddp/tensor"
)

// Step runs one synchronised forward and backward of m under d, which must
// wrap m: the TapeMachine computes the local gradients, the autograd pass
// hands them to ddp's Reducer, whose buckets are all-reduced while the
// pass runs, and Step returns once every parameter's Grad holds the
// average over ranks. It returns this rank's loss. Bind the inputs first;
// then step with a goddp optimizer on d.Parameters(), or call
// m.CopyGradsToGraph and a gorgonia Solver.
func Step(d *ddp.DDP, m *Model) (float64, error) {
	if d.Module() != m {
		return 0, fmt.Errorf("%w: the DDP passed to Step does not wrap this Model", ErrGraph)
	}
	var runErr error
	out, err := d.ForwardFunc(func() *autograd.Variable {
		v, err := m.Loss()
		if err != nil {
			runErr = err
			// A constant keeps ddp's bookkeeping sane; the other ranks'
			// all-reduces will time out, as with any rank that stops.
			return autograd.Const(tensor.Scalar(m.dtype, 0))
		}
		return v
	})
	if err != nil {
		return 0, err
	}
	if runErr != nil {
		return 0, runErr
	}
	if err := out.Backward(); err != nil {
		return 0, err
	}
	return out.Value.Item(), nil
}
