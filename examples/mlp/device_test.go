//go:build cgo

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
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

// stepLosses runs examples/mlp at world 2 on device and returns rank 0's
// loss at every step (from -metrics, one record a step) and its epoch lines.
func stepLosses(t *testing.T, device string) ([]float64, []string) {
	metrics := filepath.Join(t.TempDir(), "m.jsonl")
	res := proctest.Run(t, proctest.Options{Worker: "rank", World: 2, Timeout: 300 * time.Second,
		Args: []string{"-device", device, "-epochs", "1", "-seed", "5", "-metrics", metrics, "-metrics-every", "1"},
		Env:  []string{"GODDP_TIMEOUT=120s", "GODDP_NUM_THREADS=1"}})
	proctest.RequireSuccess(t, res)
	var losses []float64
	f, err := os.Open(metrics)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r trainer.Record
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
		if r.Kind == trainer.KindTrain {
			losses = append(losses, r.Loss)
		}
	}
	require.NoError(t, sc.Err())
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
