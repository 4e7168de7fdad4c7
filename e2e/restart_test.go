package e2e

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/checkpoint"
	"github.com/goddp/goddp/tensor"
)

var (
	savedRe   = regexp.MustCompile(`Epoch (\d+) \| Training checkpoint saved at (\S+)`)
	resumedRe = regexp.MustCompile(`Resumed from epoch (\d+) \(step (\d+)\) of (\S+)`)
)

// TestRestartResumesBitIdentical: with --max-restarts 1 and a checkpoint
// directory, a worker killed after a checkpoint was written brings the group
// down; ddprun restarts it, the trainer resumes from that newest checkpoint,
// and the job completes. In deterministic mode (fixed seed,
// GODDP_NUM_THREADS=1, no DataLoader workers) the final checkpoint — model,
// optimizer, sampler and step — is bit-identical to an uninterrupted run's.
func TestRestartResumesBitIdentical(t *testing.T) {
	skipShort(t)
	const epochs, every = 301, 50 // the last epoch (300) is saved
	args := func(dir string) []string {
		return []string{"-epochs", strconv.Itoa(epochs), "-save-every", strconv.Itoa(every), "-ckpt-dir", dir, "-seed", "7"}
	}
	tests := []struct {
		backend string
		victim  int
	}{
		{"shm", 1},
		{"tcp", 0},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s kill rank %d", tc.backend, tc.victim), func(t *testing.T) {
			env := []string{"GODDP_BACKEND=" + tc.backend, "GODDP_TIMEOUT=20s"}

			ref := start(t, spec{args: args("ref"), env: env})
			code, _ := ref.wait(2 * time.Minute)
			require.Equal(t, 0, code, ref.stderr.String())

			j := start(t, spec{args: args("run"), env: env, launcher: []string{"--max-restarts", "1"}})
			ws := j.workers(2, 0, 30*time.Second)
			j.waitOut(savedRe, 60*time.Second) // epoch 0's checkpoint
			m := j.waitOut(regexp.MustCompile(`Epoch 50 \| Training checkpoint saved`), 60*time.Second)
			require.NotNil(t, m)
			j.inject(ws[tc.victim], syscall.SIGKILL)
			code, took := j.wait(2 * time.Minute)
			require.Equal(t, 0, code, j.stderr.String())
			t.Logf("job with a restart took %v", took.Round(time.Millisecond))

			out := j.stdout.String()
			assert.Contains(t, j.stderr.String(), "attempt 1")
			// It resumed from the newest checkpoint saved before the kill.
			res := resumedRe.FindStringSubmatchIndex(out)
			require.NotNil(t, res, "no resume line:\n%s", tail(out, 30))
			var lastSaved string
			for _, s := range savedRe.FindAllStringSubmatch(out[:res[0]], -1) {
				lastSaved = s[1]
			}
			resumed := out[res[2]:res[3]]
			if !assert.Equal(t, lastSaved, resumed, "resumed from an older checkpoint than the last saved") {
				tally.ckptLost.Add(1)
			}

			final := fmt.Sprintf("ckpt-e%08d-", epochs-1)
			a, b := finalCheckpoint(t, ref.dir+"/ref", final), finalCheckpoint(t, j.dir+"/run", final)
			requireBitIdentical(t, a, b)
		})
	}
}

// finalCheckpoint loads the single checkpoint of dir whose name starts with
// prefix.
func finalCheckpoint(t *testing.T, dir, prefix string) string {
	t.Helper()
	m, err := checkpoint.NewManager(dir)
	require.NoError(t, err)
	files, err := m.List()
	require.NoError(t, err)
	require.NotEmpty(t, files)
	require.Contains(t, files[0], prefix, "newest checkpoint of %s", dir)
	return files[0]
}

// requireBitIdentical compares two checkpoints' model and optimizer tensors
// bit for bit, and their epoch, step and sampler position.
func requireBitIdentical(t *testing.T, pa, pb string) {
	t.Helper()
	a, err := checkpoint.Load(pa)
	require.NoError(t, err)
	b, err := checkpoint.Load(pb)
	require.NoError(t, err)
	assert.Equal(t, a.Epoch, b.Epoch)
	assert.Equal(t, a.Step, b.Step)
	assert.Equal(t, a.Sampler, b.Sampler)
	require.Equal(t, len(a.Model), len(b.Model))
	for name, ta := range a.Model {
		tb, ok := b.Model[name]
		require.True(t, ok, name)
		requireSameBits(t, "model."+name, ta, tb)
	}
	if a.Optimizer != nil || b.Optimizer != nil {
		require.NotNil(t, a.Optimizer)
		require.NotNil(t, b.Optimizer)
		assert.Equal(t, a.Optimizer.Scalars, b.Optimizer.Scalars)
		for name, ta := range a.Optimizer.Tensors {
			requireSameBits(t, "optimizer."+name, ta, b.Optimizer.Tensors[name])
		}
	}
	fa, err := os.ReadFile(pa)
	require.NoError(t, err)
	fb, err := os.ReadFile(pb)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(fa, fb), "the checkpoint files differ byte-wise")
}

func requireSameBits(t *testing.T, name string, a, b *tensor.Tensor) {
	t.Helper()
	require.NotNil(t, b, name)
	require.Equal(t, a.Shape(), b.Shape(), name)
	switch {
	case a.DType() == tensor.Float32:
		x, y := a.F32(), b.F32()
		for i := range x {
			require.Equal(t, math.Float32bits(x[i]), math.Float32bits(y[i]), "%s[%d]: %v vs %v", name, i, x[i], y[i])
		}
	default:
		x, y := a.F64(), b.F64()
		for i := range x {
			require.Equal(t, math.Float64bits(x[i]), math.Float64bits(y[i]), "%s[%d]: %v vs %v", name, i, x[i], y[i])
		}
	}
}
