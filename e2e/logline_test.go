package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEpochLinesNameDevices: every rank prints the tutorial's epoch line
// naming its own device ("[cpu0]", "[cpu1]"), and ddprun's
// --local-ranks-filter chooses which ranks' lines are shown.
func TestEpochLinesNameDevices(t *testing.T) {
	skipShort(t)
	for _, tc := range []struct {
		name         string
		launcher     []string
		shown, never []string
	}{
		{"all ranks", nil, []string{"[cpu0] Epoch 1 | Batchsize: 32 | Steps: 32", "[cpu1] Epoch 1 | Batchsize: 32 | Steps: 32"}, nil},
		{"filter 1", []string{"--local-ranks-filter", "1"}, []string{"[cpu1] Epoch 1 | Batchsize: 32 | Steps: 32"}, []string{"[cpu0] Epoch"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := start(t, spec{launcher: tc.launcher, args: []string{"-epochs", "2", "-ckpt-dir", ""}})
			code, _ := j.wait(60 * time.Second)
			out := j.stdout.String()
			require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", tail(out, 20), tail(j.stderr.String(), 20))
			for _, s := range tc.shown {
				assert.Contains(t, out, s)
			}
			for _, s := range tc.never {
				assert.NotContains(t, out, s)
			}
		})
	}
}
