package trainer

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/data"
	"github.com/goddp/goddp/tensor"
)

// Defaults.EvalBatchSize -1 makes -eval-batch-size follow -batch-size (a
// language model cannot evaluate 1000 sequences at once); the flag still
// wins when given, and 0 keeps the default of 1000.
func TestEvalBatchSizeDefaults(t *testing.T) {
	singleProcess(t)
	for _, c := range []struct {
		def  int
		args []string
		want int
	}{
		{-1, nil, 16},
		{-1, []string{"-eval-batch-size", "64"}, 64},
		{0, nil, 128}, // 1000, capped by the 128 samples
	} {
		largest := 0
		build := func(rng *tensor.RNG) (Job, error) {
			job, err := tinyJob()(rng)
			if err != nil {
				return job, err
			}
			if job.EvalDataset, err = data.NewTensorDataset(tensor.Rand(rng, tensor.Float32, 128, 8), tensor.Rand(rng, tensor.Float32, 128, 1)); err != nil {
				return job, err
			}
			job.Loss = func(out *autograd.Variable, b data.Batch) *autograd.Variable {
				// Training batches are 16: a larger one is an evaluation's.
				largest = max(largest, b.Inputs.Shape()[0])
				return mse(out, b)
			}
			return job, nil
		}
		args := append([]string{"tiny", "-epochs", "1", "-batch-size", "16"}, c.args...)
		var out bytes.Buffer
		require.Equal(t, 0, Main(args, &out, Defaults{EvalBatchSize: c.def}, build), out.String())
		assert.Equal(t, c.want, largest, "EvalBatchSize %d, %v", c.def, c.args)
	}
}
