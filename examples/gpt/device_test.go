//go:build cgo

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/trainer"
)

// stepLosses trains examples/gpt in this process for 10 steps on device
// and returns the loss of every step (from -metrics) and the output.
func stepLosses(t *testing.T, text []byte, device string) ([]float64, string) {
	metrics := filepath.Join(t.TempDir(), "m.jsonl")
	var out strings.Builder
	code := run([]string{"gpt", "-device", device, "-epochs", "1", "-max-steps", "10", "-seed", "3", "-ckpt-dir", "",
		"-metrics", metrics, "-metrics-every", "1"}, &out, text)
	require.Equal(t, 0, code, "gpt on %s:\n%s", device, out.String())
	return readLosses(t, metrics), out.String()
}

// readLosses returns the loss of every training record of a -metrics file.
func readLosses(t *testing.T, path string) []float64 {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	recs, err := trainer.ReadJSONLines(f)
	require.NoError(t, err)
	var losses []float64
	for _, r := range recs {
		if r.Kind == trainer.KindTrain {
			losses = append(losses, r.Loss)
		}
	}
	return losses
}

// examples/gpt on the simulated device (embedding, layer norm, causal
// self-attention, GELU, the position embedding's broadcast add, AdamW with
// weight decay, all through kernels.cu) takes the steps of the CPU run with
// the same seed: every step's loss within 1e-3 relative. From step 2 on a
// loss depends on every gradient of the steps before it, so a wrong
// gradient kernel fails here (an attention backward without the softmax's
// gradient is off by 6e-3 at step 2). AdamW normalizes each parameter's
// gradient, so a gradient that is only off by a constant factor for a
// whole tensor is not seen here: the sim op tests in goddp/cuda/sim compare
// every gradient directly. The sample is generated from the host copy of
// the trained model.
func TestSimMatchesCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("trains two 10-step runs")
	}
	text, err := os.ReadFile(textPath)
	if err != nil {
		t.Skipf("%v (the file comes with Debian's base-files package)", err)
	}
	cpu, _ := stepLosses(t, text, "cpu")
	sim, simOut := stepLosses(t, text, "sim")
	require.Len(t, cpu, 10)
	require.Len(t, sim, len(cpu))
	for i := range cpu {
		require.InEpsilon(t, cpu[i], sim[i], 1e-3, "step %d: cpu %v, sim %v", i+1, cpu, sim)
	}
	require.Less(t, sim[9], sim[0]-0.5, "the loss falls: %v", sim)
	sample := regexp.MustCompile(`(?m)^sample: .*$`)
	require.Regexp(t, sample, simOut)
	t.Logf("cpu %v\nsim %v\n%s", cpu, sim, sample.FindString(simOut))
}
