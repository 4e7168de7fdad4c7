package trainer

import (
	"bytes"
	"context"
	"flag"
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

// nanoGPT's estimate for GPT-2 small (124M): N = 123,653,376 parameters
// without the position embeddings (124,439,808 - 1024*768), 12 layers of
// 12 heads of 64 dims, context 1024: 6N = 741,920,256 and 12·L·H·Q·T =
// 113,246,208 FLOPs per token.
func TestFlopsPerTokenGPT2Small(t *testing.T) {
	f := FlopsPerToken(123_653_376, 12, 12, 64, 1024)
	assert.Equal(t, 855_166_464.0, f)
	// 8 H100s at 50% MFU train 8*0.5*989e12/f tokens a second.
	tps := 8 * 0.5 * 989e12 / f
	assert.InDelta(t, 0.5, MFU(tps, f, 989e12, 8), 1e-12)
	assert.Equal(t, 0.0, MFU(tps, f, 0, 8), "no peak, no mfu")
}

func TestPeakFLOPS(t *testing.T) {
	for name, want := range map[string]float64{
		"NVIDIA H200":           989e12,
		"NVIDIA H200 NVL":       835e12,
		"NVIDIA H100 80GB HBM3": 989e12,
		"NVIDIA H100 PCIe":      756e12,
		"NVIDIA H100 NVL":       835e12,
		"NVIDIA A100-SXM4-80GB": 312e12,
		"NVIDIA A100-PCIE-40GB": 312e12,
		"NVIDIA GH200 480GB":    989e12,
	} {
		got, ok := PeakFLOPS(name)
		assert.True(t, ok, name)
		assert.Equal(t, want, got, name)
	}
	for _, name := range []string{"", "NVIDIA GeForce GTX 1080", "AMD EPYC 9654"} {
		_, ok := PeakFLOPS(name)
		assert.False(t, ok, name)
	}
	p, why := peakFor(2.5, tensor.CPU())
	assert.Equal(t, 2.5e12, p)
	assert.Contains(t, why, "-peak-tflops")
	p, why = peakFor(0, tensor.CPU())
	assert.Equal(t, 0.0, p)
	assert.Equal(t, "no peak known for the CPU: give -peak-tflops", why)
}

// CUDA ordinals index CUDA_VISIBLE_DEVICES, whose entries are NVML
// indices or UUID prefixes.
func TestPickGPU(t *testing.T) {
	gpus := []gpu{{0, "NVIDIA A100-SXM4-80GB", "GPU-aaa1"}, {1, "NVIDIA H100 80GB HBM3", "GPU-bbb2"}}
	assert.Equal(t, "NVIDIA H100 80GB HBM3", pickGPU(gpus, 1, ""))
	assert.Equal(t, "NVIDIA H100 80GB HBM3", pickGPU(gpus, 0, "1"))
	assert.Equal(t, "NVIDIA A100-SXM4-80GB", pickGPU(gpus, 1, "1, 0"))
	assert.Equal(t, "NVIDIA H100 80GB HBM3", pickGPU(gpus, 0, "GPU-bbb"))
	assert.Equal(t, "", pickGPU(gpus, 2, ""))
	assert.Equal(t, "", pickGPU(gpus, 1, "0"))
}

// tokenJob is tinyJob with biases to leave undecayed, an evaluation set,
// and 4 "tokens" a sample at 1000 FLOPs each.
func tokenJob(newOpt bool) func(rng *tensor.RNG) (Job, error) {
	return func(rng *tensor.RNG) (Job, error) {
		ds, err := data.NewTensorDataset(tensor.Rand(rng, tensor.Float32, 256, 8), tensor.Rand(rng, tensor.Float32, 256, 1))
		if err != nil {
			return Job{}, err
		}
		ev, err := data.NewTensorDataset(tensor.Rand(rng, tensor.Float32, 64, 8), tensor.Rand(rng, tensor.Float32, 64, 1))
		if err != nil {
			return Job{}, err
		}
		j := Job{Name: "tokens", Dataset: ds, EvalDataset: ev, Loss: mse, TokensPerSample: 4, FlopsPerToken: 1000,
			Model: nn.NewSequential(nn.NewLinear(rng, 8, 4), nn.NewLinear(rng, 4, 1))}
		if newOpt {
			j.NewOpt = func(p []*autograd.Variable) (optim.Optimizer, error) {
				return optim.NewSGD(p, optim.SGDConfig{LR: 0.01})
			}
		}
		return j, nil
	}
}

// Main's recipe flags build the recipe: nanoGPT's AdamW groups, the
// cosine schedule over the run's planned steps, accumulation, clipping,
// periodic evaluation, and the step lines and final figures with tokens
// and mfu.
func TestMainRecipe(t *testing.T) {
	singleProcess(t)
	metrics := filepath.Join(t.TempDir(), "m.jsonl")
	var out bytes.Buffer
	// 256 samples in batches of 16 accumulated by 2: 8 steps an epoch.
	args := []string{"tokens", "-epochs", "2", "-batch-size", "16", "-grad-accum", "2", "-clip", "1",
		"-optim", "adamw", "-lr", "0.01", "-weight-decay", "0.1", "-beta2", "0.95",
		"-lr-schedule", "cosine", "-warmup-steps", "2", "-min-lr", "0.001",
		"-eval-every", "5", "-eval-batches", "2", "-eval-batch-size", "8", "-peak-tflops", "0.001", "-progress-every", "-1s",
		"-metrics", metrics, "-metrics-every", "4"}
	require.Equal(t, 0, Main(args, &out, Defaults{}, tokenJob(false)), out.String())
	s := out.String()
	assert.Contains(t, s, "optimizer: AdamW lr 0.01 betas (0.9, 0.95) eps 1e-08; weight decay 0.1 on 2 tensors of 2+ dims (36 parameters), none on 2 tensors (5 parameters)")
	assert.Contains(t, s, "lr schedule: linear warm-up over 2 steps to 0.01, cosine decay to 0.001 at step 16 (the run's planned optimizer steps)")
	assert.Contains(t, s, "grad accum: 2 micro-batches of 16 per rank per optimizer step (32 samples a step over 1 ranks)")
	assert.Contains(t, s, "clip: gradients to global norm 1")
	assert.Contains(t, s, "mfu: 0.001 TFLOPS per device (-peak-tflops); 1000 FLOPs per token")
	assert.Contains(t, s, "[cpu0] Epoch 1 | Batchsize: 16 | Steps: 8 | Grad accum: 2")
	assert.Contains(t, s, "epoch=0 step=5 test_loss=")
	assert.Contains(t, s, "epoch=1 step=15 test_loss=")
	assert.Contains(t, s, "epoch=1 step=10 test_loss=")
	// Every step after the first prints a line (-progress-every -1s); step 16's lr is the floor.
	lines := regexp.MustCompile(`(?m)^step=(\d+) loss=\S+ lr=(\S+) grad_norm=\S+ tokens_per_s=(\S+) mfu=(\S+)$`).FindAllStringSubmatch(s, -1)
	require.Len(t, lines, 15, s)
	assert.Equal(t, "16", lines[14][1])
	assert.Equal(t, "0.001", lines[14][2])
	assert.Equal(t, strconv.FormatFloat(optim.WarmupCosine(5, 2, 16, 0.01, 0.001), 'g', 4, 64), lines[3][2], "the lr after step 4 is step 5's")
	m := regexp.MustCompile(`(?m)^samples_per_s=(\S+)\ntokens_per_s=(\S+) mfu=(\S+)$`).FindStringSubmatch(s)
	require.NotNil(t, m, s)
	sps, _ := strconv.ParseFloat(m[1], 64)
	tps, _ := strconv.ParseFloat(m[2], 64)
	mfu, _ := strconv.ParseFloat(m[3], 64)
	assert.InDelta(t, 4*sps, tps, 0.1+4*sps*1e-3)
	assert.InDelta(t, tps*1000/1e9, mfu, 1e-4+mfu*1e-3)

	// The train records carry the norm, tokens/s and mfu; the eval
	// records the capped evaluations.
	f, err := os.Open(metrics)
	require.NoError(t, err)
	defer f.Close()
	recs, err := ReadJSONLines(f)
	require.NoError(t, err)
	var train, evals []int
	for _, r := range recs {
		switch r.Kind {
		case KindTrain:
			train = append(train, r.Step)
			assert.Positive(t, r.GradNorm, "step %d", r.Step)
			assert.InDelta(t, 4*r.SamplesPerS, r.TokensPerS, 1e-6*r.TokensPerS)
			assert.InDelta(t, r.TokensPerS*1000/1e9, r.MFU, 1e-9*r.MFU)
		case KindEval:
			evals = append(evals, r.Step)
		}
	}
	assert.Equal(t, []int{4, 8, 12, 16}, train, "-metrics-every counts optimizer steps")
	assert.Equal(t, []int{5, 8, 10, 15, 16}, evals)
}

// Without the recipe's flags an example's output and training are what
// they were: no recipe lines, its own optimizer, and -lr alone only
// changes the learning rate.
func TestMainRecipeOff(t *testing.T) {
	singleProcess(t)
	var out bytes.Buffer
	require.Equal(t, 0, Main([]string{"tiny", "-epochs", "1", "-batch-size", "32"}, &out, Defaults{}, tinyJob()), out.String())
	assert.NotRegexp(t, `(?m)^(step=|optimizer:|lr schedule:|grad accum:|tokens_per_s=)`, out.String())

	out.Reset()
	var seen float64
	require.Equal(t, 0, Main([]string{"tiny", "-epochs", "1", "-batch-size", "32", "-lr", "0.5"}, &out, Defaults{},
		tinyJob(Funcs{EpochEnd: func(_ context.Context, tr *Trainer, _ EpochInfo) error { seen = tr.LR(); return nil }})), out.String())
	assert.Equal(t, 0.5, seen)
	assert.Contains(t, out.String(), "optimizer: tiny's, lr 0.5 (-lr)")
}

// A program's own flag of a recipe flag's name keeps it (examples/gorgonia
// has its own -lr), and Defaults.Recipe sets the recipe's defaults.
func TestMainRecipeDefaultsAndOwnFlags(t *testing.T) {
	singleProcess(t)
	r := DefaultRecipe()
	r.Optim, r.GradAccum, r.Schedule, r.WarmupSteps = "adamw", 2, "cosine", 1
	var own float64
	d := Defaults{Recipe: &r, Flags: func(fs *flag.FlagSet) { fs.Float64Var(&own, "lr", 0.25, "the program's own") }}
	var out bytes.Buffer
	require.Equal(t, 0, Main([]string{"tokens", "-epochs", "1", "-batch-size", "32", "-lr", "0.125"}, &out, d, tokenJob(false)), out.String())
	assert.Equal(t, 0.125, own)
	assert.Contains(t, out.String(), "optimizer: AdamW lr 0.001 ", "the recipe's lr stays its default")
	assert.Contains(t, out.String(), "Grad accum: 2")
}

// Flags that cannot work together are refused with the flag named.
func TestMainRecipeErrors(t *testing.T) {
	singleProcess(t)
	for _, c := range []struct {
		args   []string
		newOpt bool
		want   string
	}{
		{[]string{"-grad-accum", "0"}, true, "-grad-accum 0: want 1 or more"},
		{[]string{"-lr-schedule", "linear"}, true, `-lr-schedule "linear": want constant or cosine`},
		{[]string{"-warmup-steps", "5"}, true, "-warmup-steps applies to -lr-schedule cosine"},
		{[]string{"-weight-decay", "0.1"}, true, "-weight-decay applies to -optim adamw"},
		{[]string{"-optim", "sgd"}, true, `-optim "sgd": want adamw`},
		{nil, false, "tokens has no optimizer of its own (Job.NewOpt): give -optim adamw"},
		{[]string{"-clip", "-1"}, true, "must not be negative"},
	} {
		var out bytes.Buffer
		stderr := recipeStderr(t, func() {
			assert.Equal(t, 1, Main(append([]string{"tokens", "-epochs", "1", "-batch-size", "8"}, c.args...), &out, Defaults{}, tokenJob(c.newOpt)), c.want)
		})
		assert.Contains(t, stderr, c.want)
	}
}

// recipeStderr runs fn with os.Stderr sent to a file and returns what
// was written there (Main prints its errors to stderr).
func recipeStderr(t *testing.T, fn func()) string {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	require.NoError(t, err)
	defer f.Close()
	old := os.Stderr
	os.Stderr = f
	fn()
	os.Stderr = old
	b, err := os.ReadFile(f.Name())
	require.NoError(t, err)
	return string(b)
}

// The recipe runs on a device as on the host: accumulation with a short
// last group (16 batches by 3), clipping, AdamW's groups and the cosine
// schedule give sim the CPU's epoch losses; and clipping goes after the
// GradScaler's unscale under -amp fp16.
func TestMainRecipeOnSimAndFP16(t *testing.T) {
	singleProcess(t)
	losses := func(extra ...string) []string {
		var out bytes.Buffer
		args := append([]string{"tokens", "-epochs", "2", "-batch-size", "16", "-grad-accum", "3", "-clip", "0.5",
			"-optim", "adamw", "-lr", "0.01", "-weight-decay", "0.1", "-lr-schedule", "cosine", "-warmup-steps", "2"}, extra...)
		require.Equal(t, 0, Main(args, &out, Defaults{}, tokenJob(false)), out.String())
		require.Contains(t, out.String(), "Steps: 6 | Grad accum: 3")
		return regexp.MustCompile(`(?m)^epoch=\d+ loss=\S+$`).FindAllString(out.String(), -1)
	}
	cpu := losses()
	require.Len(t, cpu, 2)
	assert.Equal(t, cpu, losses("-device", "sim"), "the epochs' mean losses, to 4 decimals")
	assert.Equal(t, cpu, losses("-amp", "fp16"), "fp16's scaled gradients, unscaled before clipping")
}

// -optim adamw's groups on real layers: the embedding table and Linear's
// weight decay; Linear's bias and LayerNorm's weight and bias do not.
func TestAdamWGroupsOnLayers(t *testing.T) {
	rng := tensor.NewRNG(1)
	emb, ln, lin := nn.NewEmbedding(rng, 10, 4), nn.NewLayerNorm(4), nn.NewLinear(rng, 4, 3)
	model := nn.NewSequential(emb, ln, lin)
	r := DefaultRecipe()
	r.Optim, r.WeightDecay = "adamw", 0.1
	opt, desc, err := r.optimizer(Job{Name: "layers"}, nn.Parameters(model))
	require.NoError(t, err)
	gs := opt.ParamGroups()
	require.Len(t, gs, 2)
	assert.Equal(t, []*autograd.Variable{emb.Weight, lin.Weight}, gs[0].Params)
	assert.Equal(t, 0.1, gs[0].WeightDecay)
	assert.ElementsMatch(t, []*autograd.Variable{ln.Weight, ln.Bias, lin.Bias}, gs[1].Params)
	assert.Equal(t, 0.0, gs[1].WeightDecay)
	assert.Contains(t, desc, "weight decay 0.1 on 2 tensors of 2+ dims (52 parameters), none on 3 tensors (11 parameters)")
}
