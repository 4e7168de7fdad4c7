package amp

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/internal/proctest"
	"github.com/goddp/goddp/tensor"
)

func TestMain(m *testing.M) {
	proctest.Main(m, map[string]func() error{"skips": skipsWorker})
}

// overflowSteps are the steps on which rank 1 alone sees an inf.
var overflowSteps = map[int]bool{3: true, 10: true, 11: true, 40: true}

type skipsReport struct {
	Skipped []int     `json:"skipped"`
	Scales  []float32 `json:"scales"`
}

// skipsWorker runs 50 steps of a scaler over rank-local gradients (no DDP,
// so nothing else carries rank 1's overflow to rank 0).
func skipsWorker() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pg, err := comm.InitFromEnv(ctx)
	if err != nil {
		return err
	}
	defer pg.Close()
	s, err := NewGradScaler(GradScalerConfig{GrowthInterval: 5}, WithGroup(pg))
	if err != nil {
		return err
	}
	p, opt := oneParamNoT()
	var rep skipsReport
	for step := range 50 {
		g := []float32{s.Scale(), 1, 1}
		if pg.Rank() == 1 && overflowSteps[step] {
			g[0] = float32(math.Inf(-1))
		}
		p.Grad = tensor.FromF32(g, 3)
		skipped, err := s.Step(ctx, opt)
		if err != nil {
			return fmt.Errorf("rank %d step %d: %w", pg.Rank(), step, err)
		}
		if skipped {
			rep.Skipped = append(rep.Skipped, step)
		}
		s.Update()
		rep.Scales = append(rep.Scales, s.Scale())
	}
	b, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(os.Getenv("AMP_OUT"), fmt.Sprintf("rank%d.json", pg.Rank())), b, 0o644)
}

func TestEveryRankSkipsTheSameSteps(t *testing.T) {
	out := t.TempDir()
	proctest.RequireSuccess(t, proctest.Run(t, proctest.Options{Worker: "skips", World: 2,
		Timeout: 90 * time.Second, Env: []string{"AMP_OUT=" + out}}))
	var reps [2]skipsReport
	for r := range reps {
		b, err := os.ReadFile(filepath.Join(out, fmt.Sprintf("rank%d.json", r)))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &reps[r]))
	}
	require.Equal(t, []int{3, 10, 11, 40}, reps[1].Skipped)
	require.Equal(t, reps[1].Skipped, reps[0].Skipped, "rank 0 did not skip rank 1's overflow steps")
	require.Equal(t, reps[1].Scales, reps[0].Scales)
}
