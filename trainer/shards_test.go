package trainer

import (
	"archive/tar"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/data"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

// TestMainShardsAndAMP writes the tiny job's training set as shards, trains
// from them (-shards, two loader workers), and trains with -amp bf16.
func TestMainShardsAndAMP(t *testing.T) {
	singleProcess(t)
	dir := t.TempDir()
	var out bytes.Buffer
	require.Equal(t, 0, Main([]string{"tiny", "-batch-size", "32", "-write-shards", dir, "-shard-size", "50", "-ckpt-dir", ""}, &out, Defaults{}, tinyJob()), out.String())
	require.Contains(t, out.String(), "wrote 256 samples in 6 shards")
	shards, err := filepath.Glob(filepath.Join(dir, "*.tar"))
	require.NoError(t, err)
	require.Len(t, shards, 6)

	out.Reset()
	require.Equal(t, 0, Main([]string{"tiny", "-shards", filepath.Join(dir, "*.tar"), "-num-workers", "2", "-epochs", "3",
		"-batch-size", "32", "-ckpt-dir", filepath.Join(t.TempDir(), "ck")}, &out, Defaults{}, tinyJob()), out.String())
	losses := regexp.MustCompile(`(?m)^epoch=\d+ loss=(\S+)$`).FindAllStringSubmatch(out.String(), -1)
	require.Len(t, losses, 3, out.String())
	first, _ := strconv.ParseFloat(losses[0][1], 64)
	last, _ := strconv.ParseFloat(losses[2][1], 64)
	require.Less(t, last, first, "training from shards did not lower the loss:\n%s", out.String())
	m := samplesRe.FindStringSubmatch(out.String())
	require.NotNil(t, m, out.String())
	sps, _ := strconv.ParseFloat(m[1], 64)
	require.Greater(t, sps, 0.0)
	// 256 samples in shards of 50: 6 shards over 2 workers, batches of 32
	// cut per worker: 3 shards of at most 50 each per worker.
	require.Regexp(t, `Steps: \d+`, out.String())

	out.Reset()
	require.Equal(t, 0, Main([]string{"tiny", "-amp", "bf16", "-epochs", "2", "-batch-size", "32", "-ckpt-dir", ""}, &out, Defaults{}, tinyJob()), out.String())
	require.Contains(t, out.String(), "amp: bf16 products in 1 layers")

	out.Reset()
	require.Equal(t, 1, Main([]string{"tiny", "-batch-size", "32", "-amp", "int8", "-ckpt-dir", ""}, &out, Defaults{}, tinyJob()))
	out.Reset()
	require.Equal(t, 1, Main([]string{"tiny", "-batch-size", "32", "-shards", filepath.Join(dir, "none-*.npy"), "-ckpt-dir", ""}, &out, Defaults{}, tinyJob()))
}

// classJob is a 3-class classifier of 64 samples of width 8.
func classJob(rng *tensor.RNG) (Job, error) {
	const n, classes = 64, 3
	labels := make([]int, n)
	for i := range labels {
		labels[i] = i % classes
	}
	ds, err := data.NewLabeledDataset(tensor.Rand(rng, tensor.Float32, n, 8), labels)
	if err != nil {
		return Job{}, err
	}
	return Job{Name: "cls", Dataset: ds, Model: nn.NewSequential(nn.NewLinear(rng, 8, classes), nn.NewReLU()),
		NewOpt: func(p []*autograd.Variable) (optim.Optimizer, error) {
			return optim.NewSGD(p, optim.SGDConfig{LR: 0.01})
		},
		Loss: func(out *autograd.Variable, b data.Batch) *autograd.Variable {
			return autograd.CrossEntropy(out, b.Labels, autograd.ReductionMean)
		}}, nil
}

// npyShard writes n rows of width as dir/name.npy and, unless labels is
// nil, the labels beside it.
func npyShard(t *testing.T, dir, name string, n, width int, labels []int64) string {
	t.Helper()
	p := filepath.Join(dir, name+".npy")
	var b bytes.Buffer
	require.NoError(t, data.WriteNPY(&b, &data.Array{Shape: []int{n, width}, Data: make([]float32, n*width)}))
	require.NoError(t, os.WriteFile(p, b.Bytes(), 0o644))
	if labels != nil {
		b.Reset()
		require.NoError(t, data.WriteNPY(&b, &data.Array{Shape: []int{n}, Data: labels}))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".labels.npy"), b.Bytes(), 0o644))
	}
	return p
}

// Shards that do not fit a classification job fail the run naming the
// file (and the sample): before, shards without labels trained every
// sample as class 0 (exit 0, no word), and a label outside the classes or
// an input of another width panicked inside CrossEntropy or Linear.
func TestMainShardsCheckedAgainstTheJob(t *testing.T) {
	singleProcess(t)
	dir := t.TempDir()
	runOn := func(shards string, extra ...string) (int, string, string) {
		stderr := captureStderr(t)
		var out bytes.Buffer
		args := append([]string{"cls", "-shards", shards, "-batch-size", "8", "-epochs", "1", "-ckpt-dir", ""}, extra...)
		code := Main(args, &out, Defaults{}, classJob)
		return code, out.String(), stderr()
	}

	good := npyShard(t, dir, "good", 16, 8, []int64{0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0})
	code, out, errs := runOn(good)
	require.Equal(t, 0, code, out+errs)

	bare := npyShard(t, dir, "bare", 16, 8, nil)
	code, out, errs = runOn(bare)
	require.Equal(t, 1, code, out)
	require.Contains(t, errs, "shard "+bare+" has no class labels")
	require.Contains(t, errs, "pass -unlabeled")
	code, out, errs = runOn(bare, "-unlabeled")
	require.Equal(t, 0, code, out+errs)
	require.Contains(t, out, "-unlabeled: samples without a label train as class 0")

	for _, v := range []int64{1000, -1, 3, 1 << 62} {
		bad := npyShard(t, dir, "bad", 16, 8, []int64{0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, v, 0, 1, 2, 0})
		code, out, errs = runOn(bad)
		require.Equal(t, 1, code, out)
		require.Contains(t, errs, fmt.Sprintf("shard %s: row 11 (bad.labels.npy): label %d outside [0, 3)", bad, v))
	}

	wide := npyShard(t, dir, "wide", 16, 5, make([]int64, 16))
	code, out, errs = runOn(wide)
	require.Equal(t, 1, code, out)
	require.Contains(t, errs, "shard "+wide+": input shape [5], the model takes [8]")

	// Tar shards from -write-shards, cut at a member boundary (a killed
	// copy): refused, where before half the samples trained.
	td := t.TempDir()
	var wout bytes.Buffer
	require.Equal(t, 0, Main([]string{"cls", "-write-shards", td, "-shard-size", "64", "-ckpt-dir", ""}, &wout, Defaults{}, classJob), wout.String())
	tp := filepath.Join(td, "cls-000000.tar")
	b, err := os.ReadFile(tp)
	require.NoError(t, err)
	r := bytes.NewReader(b)
	tr := tar.NewReader(r)
	var end int64
	for range 64 { // 32 samples of KEY.npy and KEY.cls
		h, err := tr.Next()
		require.NoError(t, err)
		end = int64(len(b)-r.Len()) + (h.Size+511)/512*512 // tar reads exact blocks from a bytes.Reader
	}
	require.NoError(t, os.WriteFile(tp, b[:end], 0o644))
	code, out, errs = runOn(tp)
	require.Equal(t, 1, code, out)
	require.Contains(t, errs, "shard "+tp+": truncated: no end-of-archive marker after member 64")
}
