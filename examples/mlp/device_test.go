//go:build cgo

package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/internal/proctest"
	"github.com/goddp/goddp/trainer"
)

// TestMain lets a test re-run this binary as one rank of the example
// (internal/proctest); the rank's flags are its arguments.
func TestMain(m *testing.M) {
	proctest.Main(m, map[string]func() error{"rank": func() error {
		if rc := trainer.Main(append([]string{"mlp"}, os.Args[1:]...), os.Stdout, defaults, build); rc != 0 {
			return fmt.Errorf("mlp exited with %d", rc)
		}
		return nil
	}})
}

// stepLosses runs examples/mlp at world 2 on device (with the extra flags)
// and returns rank 0's loss at every step (from -metrics, one record a
// step) and its epoch lines.
func stepLosses(t *testing.T, device string, extra ...string) ([]float64, []string) {
	metrics := filepath.Join(t.TempDir(), "m.jsonl")
	res := proctest.Run(t, proctest.Options{Worker: "rank", World: 2, Timeout: 300 * time.Second,
		Args: append([]string{"-device", device, "-epochs", "1", "-seed", "5", "-metrics", metrics, "-metrics-every", "1"}, extra...),
		Env:  []string{"GODDP_TIMEOUT=120s", "GODDP_NUM_THREADS=1"}})
	proctest.RequireSuccess(t, res)
	f, err := os.Open(metrics)
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
	epochs := regexp.MustCompile(`(?m)^epoch=\d+ loss=\S+$`).FindAllString(res[0].Stdout, -1)
	require.NotEmpty(t, epochs, "rank 0's output:\n%s", res[0].Output())
	require.Contains(t, res[1].Stdout, fmt.Sprintf("[%s] Epoch 0", map[string]string{"cpu": "cpu1", "sim": "sim:1"}[device]),
		"rank 1 names its device")
	return losses, epochs
}

// Issue 15's bar: examples/mlp on the simulated device at world 2 (DDP with
// its buckets on each rank's sim device) prints the losses of the CPU run
// with the same seed, within 1e-5 relative at every step.
func TestSimMatchesCPUAtWorld2(t *testing.T) {
	if testing.Short() {
		t.Skip("trains two 2-rank runs")
	}
	cpu, cpuEpochs := stepLosses(t, "cpu")
	sim, simEpochs := stepLosses(t, "sim")
	require.Len(t, cpu, 64, "8192 samples / 2 ranks / batch 64")
	require.Len(t, sim, len(cpu))
	for i := range cpu {
		require.InEpsilon(t, cpu[i], sim[i], 1e-5, "step %d: cpu %v, sim %v", i+1, cpu[i], sim[i])
	}
	require.Equal(t, cpuEpochs, simEpochs)
	t.Logf("64 steps: first loss cpu %.7f sim %.7f, last cpu %.7f sim %.7f; %s", cpu[0], sim[0], cpu[63], sim[63], strings.Join(simEpochs, " "))
}

// examples/mlp under -amp bf16 on the simulated device at world 2 tracks
// the CPU's bf16 run: the device's bf16 GEMM rounds the operands as the
// CPU does, and only the order of the float32 sums differs (oneDNN's bf16
// kernels against sim's float32 GEMM on the rounded operands). Over the
// first steps, before those differences tip later bf16 roundings, the
// losses agree far more closely than float32's do with either; over all 64
// they stay within 1e-4. (The loss of random labels hardly moves, so the
// float32 run is the yardstick of what bf16 changes.)
func TestSimBF16TracksCPUAtWorld2(t *testing.T) {
	if testing.Short() {
		t.Skip("trains three 2-rank runs")
	}
	cpu, _ := stepLosses(t, "cpu", "-amp", "bf16")
	sim, _ := stepLosses(t, "sim", "-amp", "bf16")
	f32, _ := stepLosses(t, "cpu")
	require.Len(t, cpu, 64)
	require.Len(t, sim, len(cpu))
	require.Len(t, f32, len(cpu))
	const early = 8
	var gap, gapEarly, gap32Early float64
	for i := range cpu {
		d := math.Abs(sim[i]-cpu[i]) / cpu[i]
		gap = max(gap, d)
		if i < early {
			gapEarly = max(gapEarly, d)
			gap32Early = max(gap32Early, math.Abs(f32[i]-cpu[i])/cpu[i])
		}
	}
	t.Logf("largest relative gap to the CPU's bf16 losses: sim bf16 %.2g over 64 steps, %.2g over the first %d, where float32's is %.2g",
		gap, gapEarly, early, gap32Early)
	require.Less(t, gap, 1e-4, "sim bf16 against CPU bf16, every step")
	require.Greater(t, gap32Early, 5*gapEarly, "over the first %d steps sim bf16 should be much closer to CPU bf16 than float32 is", early)
}
