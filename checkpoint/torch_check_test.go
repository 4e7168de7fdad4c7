package checkpoint

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/data"
	"github.com/goddp/goddp/tensor"
)

// mlpForward computes Sequential(Linear(20,16), ReLU, Linear(16,1)) on x
// [n,20] from a torch-style state dict, in float32 with float64 sums.
func mlpForward(sd map[string]*tensor.Tensor, x []float32, n int) []float32 {
	lin := func(in []float32, rows, inF, outF int, w, b []float32) []float32 {
		out := make([]float32, rows*outF)
		for r := range rows {
			for o := range outF {
				s := float64(b[o])
				for i := range inF {
					s += float64(in[r*inF+i]) * float64(w[o*inF+i])
				}
				out[r*outF+o] = float32(s)
			}
		}
		return out
	}
	h := lin(x, n, 20, 16, sd["0.weight"].F32(), sd["0.bias"].F32())
	for i, v := range h {
		h[i] = max(v, 0)
	}
	return lin(h, n, 16, 1, sd["2.weight"].F32(), sd["2.bias"].F32())
}

// TestTorchReadsGoCheckpoint writes a checkpoint of a small MLP and the
// model's outputs, runs scripts/check_safetensors_torch.py, which loads the
// checkpoint into torch.nn.Sequential and compares outputs, and reads back
// the safetensors file torch wrote. Set GODDP_TORCH_CHECK=1 to run it.
func TestTorchReadsGoCheckpoint(t *testing.T) {
	if os.Getenv("GODDP_TORCH_CHECK") != "1" {
		t.Skip("set GODDP_TORCH_CHECK=1 to compare with /usr/bin/python3 + torch")
	}
	const py = "/usr/bin/python3"
	if out, err := exec.Command(py, "-c", "import torch").CombinedOutput(); err != nil {
		t.Skipf("%s cannot import torch: %v %s", py, err, out)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	randT := func(shape ...int) *tensor.Tensor {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * 0.5)
		}
		return tensor.FromF32(v, shape...)
	}
	sd := map[string]*tensor.Tensor{
		"0.weight": randT(16, 20), "0.bias": randT(16),
		"2.weight": randT(1, 16), "2.bias": randT(1),
	}
	const n = 8
	x := randT(n, 20)
	y := mlpForward(sd, x.F32(), n)

	dir := t.TempDir()
	m, err := NewManager(dir)
	require.NoError(t, err)
	ckpt, err := m.Save(&Checkpoint{Epoch: 5, Step: 320, Model: sd,
		Sampler: &data.SamplerState{Epoch: 5, NumReplicas: 2, DatasetLen: 2048, Shuffle: true}})
	require.NoError(t, err)
	ioPath := filepath.Join(dir, "io.safetensors")
	require.NoError(t, SaveSafetensors(ioPath, map[string]*tensor.Tensor{"inputs": x, "outputs": tensor.FromF32(y, n, 1)}, nil))
	back := filepath.Join(dir, "torch.safetensors")

	script := filepath.Join("..", "scripts", "check_safetensors_torch.py")
	out, err := exec.Command(py, script, ckpt, ioPath, back).CombinedOutput()
	t.Logf("%s", out)
	require.NoError(t, err, "torch disagrees with the Go model")
	assert.Contains(t, string(out), "checksum=verified")
	assert.Contains(t, string(out), "OK")

	// The other direction: Go reads the file torch wrote.
	ts, meta, err := LoadSafetensors(back)
	require.NoError(t, err)
	assert.Contains(t, meta["writer"], "torch")
	for k, v := range sd {
		assert.Equal(t, v.F32(), ts[k].F32(), k)
	}
	got := ts["outputs"].F32()
	for i := range y {
		assert.InDelta(t, y[i], got[i], 1e-5)
	}
}
