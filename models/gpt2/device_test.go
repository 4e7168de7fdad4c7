//go:build cgo

package gpt2

import (
	"math"
	"slices"
	"testing"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/cuda/sim"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/tensor"
)

// TestSimMatchesTorchFixture runs the torch fixture on goddp/cuda/sim,
// the simulated device that runs the CUDA kernels' code on the host: the
// device paths of this package (the Conv1D weight's transpose, GELUTanh's
// device kernels) give torch's logits and the CPU's loss and
// gradients. The device's cross-entropy kernel takes no ignored target,
// so the fixture's one IgnoreIndex becomes token 0 for both runs.
func TestSimMatchesTorchFixture(t *testing.T) {
	f, m := loadTinyFixture(t)
	_, host := loadTinyFixture(t)
	targets := ids(f.Targets)
	for i, v := range targets.I64() {
		if v == IgnoreIndex {
			targets.I64()[i] = 0
		}
	}
	dev := sim.New(0).Tensors()
	if err := nn.To(m, dev); err != nil {
		t.Fatal(err)
	}
	logits := m.Forward(autograd.Const(ids(f.IDs)))
	if logits.Value.IsCPU() {
		t.Fatal("logits on the host")
	}
	closeTo(t, "logits", logits.Value.MustTo(tensor.CPU()).F32(), f.Logits)
	loss := m.Loss(logits, targets)
	if err := loss.Backward(); err != nil {
		t.Fatal(err)
	}
	hostLoss := host.Loss(host.Forward(autograd.Const(ids(f.IDs))), targets)
	if err := hostLoss.Backward(); err != nil {
		t.Fatal(err)
	}
	if l, w := loss.Value.MustTo(tensor.CPU()).Item(), hostLoss.Value.Item(); math.Abs(l/w-1) > 1e-5 {
		t.Errorf("loss on sim %v, on the host %v", l, w)
	}
	hp := host.NamedParameters()
	for i, np := range m.NamedParameters() {
		want := make([]float64, hp[i].Param.Grad.Numel())
		for j, v := range hp[i].Param.Grad.F32() {
			want[j] = float64(v)
		}
		closeTo(t, np.Name+" grad", np.Param.Grad.MustTo(tensor.CPU()).F32(), want)
	}
	// Sampling from the device model.
	opt := SampleOptions{MaxNewTokens: 4, Temperature: 1, TopK: 10, Seed: 3}
	a, err := m.Generate([]int{1, 2}, opt)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := host.Generate([]int{1, 2}, opt)
	if !slices.Equal(a, b) || len(a) != 4 {
		t.Fatalf("sampled on sim %v, on the host %v", a, b)
	}
}
