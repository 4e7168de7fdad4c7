package trainer

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/data"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

// singleProcess clears the launcher's variables: Main then runs one rank.
func singleProcess(t *testing.T) {
	for _, k := range []string{"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "GODDP_BACKEND"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
}

// tinyJob is a linear regression of 256 samples (8 steps of 32).
func tinyJob(cbs ...Callback) func(rng *tensor.RNG) (Job, error) {
	return func(rng *tensor.RNG) (Job, error) {
		ds, err := data.NewTensorDataset(tensor.Rand(rng, tensor.Float32, 256, 8), tensor.Rand(rng, tensor.Float32, 256, 1))
		if err != nil {
			return Job{}, err
		}
		return Job{Name: "tiny", Dataset: ds, Model: nn.NewLinear(rng, 8, 1), Callbacks: cbs,
			NewOpt: func(p []*autograd.Variable) (optim.Optimizer, error) {
				return optim.NewSGD(p, optim.SGDConfig{LR: 0.01})
			},
			Loss: mse}, nil
	}
}

var samplesRe = regexp.MustCompile(`(?m)^samples_per_s=(\S+)$`)

// The traps of a first run: -epochs 1 reports a throughput; running again
// after the run finished says there is nothing to do instead of training
// nothing; -fresh starts over, moving the old checkpoints aside.
func TestMainFinishedRunAndFresh(t *testing.T) {
	singleProcess(t)
	dir := t.TempDir()
	ck := filepath.Join(dir, "ck")
	args := []string{"tiny", "-epochs", "1", "-batch-size", "32", "-save-every", "1", "-ckpt-dir", ck}
	var out bytes.Buffer
	require.Equal(t, 0, Main(args, &out, Defaults{}, tinyJob()), out.String())
	m := samplesRe.FindStringSubmatch(out.String())
	require.NotNil(t, m, out.String())
	sps, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	assert.Positive(t, sps, "-epochs 1 measures the steps after the warm-up")
	saved := filepath.Join(ck, "ckpt-e00000000-s000000000008.safetensors")
	require.FileExists(t, saved)

	out.Reset()
	require.Equal(t, 0, Main(args, &out, Defaults{}, tinyJob()), out.String())
	assert.Contains(t, out.String(), "nothing to do: checkpoint "+saved+" is at epoch 0; use -ckpt-dir or -fresh")
	assert.NotContains(t, out.String(), "Epoch 0 |", "nothing trained")
	assert.NotContains(t, out.String(), "samples_per_s")

	out.Reset()
	require.Equal(t, 0, Main(append(args, "-fresh"), &out, Defaults{}, tinyJob()), out.String())
	assert.Regexp(t, `Fresh start: moved 1 checkpoint files from `+regexp.QuoteMeta(ck)+` to `+regexp.QuoteMeta(ck)+`/previous-\d{8}T\d{6}Z`, out.String())
	assert.Contains(t, out.String(), "[cpu0] Epoch 0 |", "trained from the start")
	aside, err := filepath.Glob(filepath.Join(ck, "previous-*", "ckpt-e00000000-s000000000008.safetensors"))
	require.NoError(t, err)
	assert.Len(t, aside, 1, "the old checkpoint is kept, not deleted")
	assert.FileExists(t, saved, "the fresh run saved its own")
}

// A CSV log written through Main parses back, with one train record per
// -metrics-every steps.
func TestMainCSV(t *testing.T) {
	singleProcess(t)
	path := filepath.Join(t.TempDir(), "m.csv")
	var out bytes.Buffer
	require.Equal(t, 0, Main([]string{"tiny", "-epochs", "2", "-batch-size", "32", "-metrics-csv", path, "-metrics-every", "4"},
		&out, Defaults{}, tinyJob()), out.String())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := regexp.MustCompile(`(?m)^train,`).FindAllString(string(b), -1)
	assert.Len(t, lines, 4, "two train records per epoch of 8 steps:\n%s", b)
	assert.Len(t, regexp.MustCompile(`(?m)^epoch,`).FindAllString(string(b), -1), 2)
	assert.Regexp(t, `^kind,step,epoch,loss,lr,samples_per_s,allreduce_hidden_pct,elapsed_s,eval_loss,eval_acc\n`, string(b))
}
