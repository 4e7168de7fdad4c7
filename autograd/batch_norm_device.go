package autograd

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

// batchNormDevice is BatchNorm (sum nil) or SyncBatchNorm in training on
// x's device (tensor.BatchNormDevice); nil when the operands are on the
// host. The running statistics must be on that device too (nn.To moves
// them with the module). SyncBatchNorm's sums ([Σx | Σx² | count] in
// forward, [Σgy | Σgy·xhat] in backward: 2C+1 and 2C floats) go through
// host memory to be summed, a copy each way of a few hundred bytes per
// layer, so that every backend (tcp, shm, nccl) can reduce them; the
// forward's checks the count across replicas there, as the CPU op.
func batchNormDevice(name string, x, w, b *Variable, rm, rv *tensor.Tensor, training bool, momentum, eps float64, sum SumAcrossReplicas) *Variable {
	xs := x.Value.Shape()
	c, n := xs[1], xs[0]
	l := x.Value.Numel() / max(n*c, 1)
	var fwd, bwd func(*tensor.Tensor) error
	if sum != nil {
		fwd = stagedSum(sum, func(buf []float64) error {
			if cnt := buf[len(buf)-1]; cnt <= 1 {
				return fmt.Errorf("expected more than 1 value per channel across all replicas when training, got %v (local input %v)", cnt, xs)
			}
			return nil
		})
		bwd = stagedSum(sum, nil)
	}
	y, st, err := tensor.BatchNormDevice(x.Value, value(w), value(b), rm, rv, n, c, l, training, momentum, eps, fwd)
	if err != nil {
		panic(fmt.Errorf("autograd: %s: %w", name, err))
	}
	if y == nil {
		return nil
	}
	return FromOp(y, &batchNormDeviceOp{inputs: ins(x, w, b), name: name, st: st, reduce: bwd})
}

// stagedSum sums a device tensor across replicas in place with sum, through
// a float64 host buffer (as the CPU op's sums are float64), then runs
// check (nil: none) on the sums.
func stagedSum(sum SumAcrossReplicas, check func([]float64) error) func(*tensor.Tensor) error {
	return func(t *tensor.Tensor) error {
		host, err := t.To(tensor.CPU())
		if err != nil {
			return err
		}
		f := host.F32()
		buf := make([]float64, len(f))
		for i, v := range f {
			buf[i] = float64(v)
		}
		if err := sum(buf); err != nil {
			return fmt.Errorf("all-reduce of the batch statistics: %w", err)
		}
		if check != nil {
			if err := check(buf); err != nil {
				return err
			}
		}
		for i, v := range buf {
			f[i] = float32(v)
		}
		return tensor.Copy(t, host)
	}
}

type batchNormDeviceOp struct {
	inputs // x, w (may be nil), b (may be nil)
	name   string
	st     *tensor.BatchNormState
	reduce func(*tensor.Tensor) error // SyncBatchNorm's sum across replicas; nil for BatchNorm
}

func (o *batchNormDeviceOp) Name() string { return o.name }
func (o *batchNormDeviceOp) freshGrads()  {}

// savedTensors: the normalized input goes back to the cache with the graph.
func (o *batchNormDeviceOp) savedTensors() []*tensor.Tensor { return []*tensor.Tensor{o.st.Xhat} }

func (o *batchNormDeviceOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	return o.backwardInto(gy, nil)
}

// backwardInto adds dw and db into the Grad buffers the engine offers
// (dst), else into new zeroed tensors, as the CPU op.
func (o *batchNormDeviceOp) backwardInto(gy *tensor.Tensor, dst []*tensor.Tensor) []*tensor.Tensor {
	x, w, b := o.in(0), o.in(1), o.in(2)
	grads, dw, db := affineGrads(gy, dst, w, b)
	dx, err := tensor.BatchNormBackwardDevice(gy, o.st, value(w), dw, db, needs(x), o.reduce)
	if err != nil {
		panic(fmt.Errorf("autograd: %s backward: %w", o.name, err))
	}
	grads[0] = dx
	return grads
}
