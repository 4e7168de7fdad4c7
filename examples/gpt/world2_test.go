//go:build cgo

package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/internal/proctest"
)

// TestMain lets a test re-run this binary as one rank of the example
// (internal/proctest); the rank's flags are its arguments.
func TestMain(m *testing.M) {
	proctest.Main(m, map[string]func() error{"rank": func() error {
		text, err := os.ReadFile(textPath)
		if err != nil {
			return err
		}
		if rc := run(append([]string{"gpt"}, os.Args[1:]...), os.Stdout, text); rc != 0 {
			return fmt.Errorf("gpt exited with %d", rc)
		}
		return nil
	}})
}

// worldLosses runs examples/gpt at world 2 on device for steps steps and
// returns rank 0's loss at every step (from -metrics).
func worldLosses(t *testing.T, device string, steps int) []float64 {
	metrics := filepath.Join(t.TempDir(), "m.jsonl")
	res := proctest.Run(t, proctest.Options{Worker: "rank", World: 2, Timeout: 300 * time.Second,
		Args: []string{"-device", device, "-epochs", "1", "-max-steps", fmt.Sprint(steps), "-seed", "3", "-ckpt-dir", "",
			"-metrics", metrics, "-metrics-every", "1"},
		Env: []string{"GODDP_TIMEOUT=120s", "GODDP_NUM_THREADS=1"}})
	proctest.RequireSuccess(t, res)
	return readLosses(t, metrics)
}

// Issue 27's bar: examples/gpt at world 2 (DDP over each rank's device)
// with -device sim logs rank 0's loss at every one of 20 steps within
// 1e-5 relative of the same run with -device cpu.
func TestSimMatchesCPUAtWorld2(t *testing.T) {
	if testing.Short() {
		t.Skip("trains two 2-rank runs")
	}
	if _, err := os.Stat(textPath); err != nil {
		t.Skipf("%v (the file comes with Debian's base-files package)", err)
	}
	const steps = 20
	cpu, sim := worldLosses(t, "cpu", steps), worldLosses(t, "sim", steps)
	require.Len(t, cpu, steps)
	require.Len(t, sim, steps)
	worst := 0.0
	for i := range cpu {
		worst = max(worst, math.Abs(sim[i]-cpu[i])/math.Abs(cpu[i]))
	}
	t.Logf("%d steps at world 2: worst relative difference %.3g; loss cpu %.6f -> %.6f, sim %.6f -> %.6f",
		steps, worst, cpu[0], cpu[steps-1], sim[0], sim[steps-1])
	for i := range cpu {
		require.InEpsilon(t, cpu[i], sim[i], 1e-5, "step %d: cpu %v, sim %v", i+1, cpu, sim)
	}
}
