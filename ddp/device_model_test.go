//go:build cgo

package ddp

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/cuda/sim"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/tensor"
)

// A model whose parameters live on a device (nn.To) is wrapped with its
// buckets on that device without asking (torch's DDP follows the module):
// the gradients stay in device memory, go into the buckets device to device
// on the compute stream, and come back reduced, equal to DDP on the CPU.
// The compute stream is slowed, so a missing wait would show as stale data.
//
// TensorDevice, the adapter for devices without queues of their own (cuda
// until it has one), gives the same gradients on sim.
func TestWrapDeviceModel(t *testing.T) {
	for _, staged := range []bool{false, true} {
		t.Run(map[bool]string{false: "sim streams", true: "TensorDevice"}[staged], func(t *testing.T) { wrapDeviceModel(t, staged) })
	}
}

func wrapDeviceModel(t *testing.T, staged bool) {
	want := deviceGrads(t, false, false, 0)
	got := make([][][]float32, 2)
	errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
		dev := sim.New(rank)
		defer dev.Close()
		dev.Compute().SetDelay(2 * time.Millisecond)
		net := mlpNet([]int{5, 7, 6, 3}, 1)
		if err := nn.To(net, dev.Tensors()); err != nil {
			return err
		}
		opts := []Option{FirstBucketCapMB(100.0 / (1 << 20)), BucketCapMB(100.0 / (1 << 20))}
		if staged {
			opts = append(opts, OnDevice(TensorDevice(dev.Tensors())))
		}
		d, err := Wrap(context.Background(), net, pg, opts...)
		if err != nil {
			return err
		}
		if _, ok := d.r.dev.dev.(*stagedDevice); ok != staged {
			return fmt.Errorf("buckets on %T", d.r.dev.dev)
		}
		defer d.Close()
		if d.r.dev == nil || d.r.dev.dev.String() != fmt.Sprintf("sim:%d", rank) {
			return fmt.Errorf("buckets on %v, want sim:%d", d.r.dev, rank)
		}
		x, y := batch(rank, 0, 4, 5, 3)
		out, err := d.Forward(autograd.Const(x.Value.MustTo(dev.Tensors())))
		if err != nil {
			return err
		}
		if err := autograd.MSELoss(out, autograd.Const(y.Value.MustTo(dev.Tensors())), autograd.ReductionMean).Backward(); err != nil {
			return err
		}
		for _, np := range net.NamedParameters() {
			if np.Param.Grad.IsCPU() {
				return fmt.Errorf("%s's gradient is on the host", np.Name)
			}
			g, err := np.Param.Grad.To(tensor.CPU())
			if err != nil {
				return err
			}
			got[rank] = append(got[rank], g.F32())
		}
		return nil
	})
	requireNoErrs(t, errs)
	for r := range got {
		require.Len(t, got[r], len(want))
		for i := range want {
			assert.InDeltaSlice(t, want[i], got[r][i], 1e-6, "rank %d parameter %d", r, i)
		}
	}
}

// Parameters on two devices are refused, naming both.
func TestWrapMixedDevices(t *testing.T) {
	errs := runRanks(t, 1, func(rank int, pg comm.ProcessGroup) error {
		dev := sim.New(0)
		defer dev.Close()
		net := mlpNet([]int{2, 3}, 1)
		net.params[0].Value = net.params[0].Value.MustTo(dev.Tensors())
		_, err := Wrap(context.Background(), net, pg)
		if err == nil {
			return fmt.Errorf("Wrap accepted parameters on sim:0 and cpu")
		}
		assert.ErrorContains(t, err, `parameter "0.weight" is on sim:0 but "0.bias" is on cpu`)
		return nil
	})
	requireNoErrs(t, errs)
}
