package trainer

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/goddp/goddp/amp"
	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/data"
	"github.com/goddp/goddp/ddp"
	"github.com/goddp/goddp/launch"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

// Defaults are an example's flag defaults.
type Defaults struct {
	Epochs, BatchSize, SaveEvery int
	// EvalBatchSize is -eval-batch-size's default; 0 means 1000, which
	// suits small classifiers; -1 means -batch-size's value (nanoGPT's
	// evaluation batches are its training batches). A language model's
	// evaluation batch holds B·T·vocab logits: 1000 × 1024 × 50304
	// floats would be 206 GB.
	EvalBatchSize int
	CkptDir       string
	Seed          uint64
	// Flags, when set, defines the program's own flags on Main's flag set
	// before it parses the arguments; build then reads their values.
	Flags func(fs *flag.FlagSet)
	// Recipe, when set, holds the defaults of the training-recipe flags
	// (-grad-accum, -clip, -optim, -lr, -lr-schedule, ...; see Recipe);
	// nil means DefaultRecipe's. Start from DefaultRecipe and change what
	// the program's recipe needs.
	Recipe *Recipe
}

// Job is what an example supplies: its data, model, optimizer and loss. Build
// is called on every rank with the same seed, so every rank holds the same
// dataset; DDP broadcasts rank 0's parameters anyway.
type Job struct {
	Name    string
	Dataset data.Dataset
	Model   nn.Layer
	NewOpt  func(params []*autograd.Variable) (optim.Optimizer, error)
	Loss    LossFunc
	// ForwardLoss, when set, computes each training batch's loss from the
	// model's input, equal to Loss of Model.Forward's output but in one
	// call that may fuse the head with the loss (Config.ForwardLoss);
	// evaluation keeps Forward and Loss, so Loss is still needed.
	ForwardLoss ForwardLossFunc
	// EvalDataset, when set, is evaluated after every epoch (see
	// Config.EvalData), sharded over the ranks without padding.
	EvalDataset data.Dataset
	// Callbacks are added to the Trainer's (Config.Callbacks), after those
	// the flags ask for.
	Callbacks []Callback
	// NewStep, when set, makes the Trainer's Config.Step from the wrapped
	// model and the optimizer: for a model that computes its own loss and
	// gradients. Loss may then be nil (without EvalDataset).
	NewStep func(model *ddp.DDP, opt optim.Optimizer) StepFunc
	// DropLast drops each epoch's last, partial batch (a graph built for a
	// fixed batch size needs it).
	DropLast bool
	// BatchSize, when positive, overrides -batch-size (for a program whose
	// own flag sets it).
	BatchSize int
	// TokensPerSample, when positive, is how many tokens a sample trains
	// on (a sequence model's context length): rank 0 then prints
	// tokens_per_s beside samples_per_s, at the end and in the step lines.
	TokensPerSample int
	// FlopsPerToken, when positive, is the training work per token (for a
	// transformer, FlopsPerToken's 6N + 12·L·H·Q·T): rank 0 then prints
	// mfu, the tokens' work over the devices' peak (-peak-tflops, or the
	// table of known GPUs).
	FlopsPerToken float64
}

// Main is a whole training program's main: it parses the common flags,
// joins the process group from the launcher's environment (a single
// process when there is none), trains, and prints `samples_per_s=<float>`
// on rank 0. It returns the process exit code, for os.Exit (Main itself
// never exits); on failure it prints the error to stderr and records it
// for ddprun's root-cause report.
//
// A run whose checkpoint directory already holds the final epoch's
// checkpoint trains nothing: rank 0 prints "nothing to do: checkpoint PATH
// is at epoch N; use -ckpt-dir or -fresh" and Main returns 0.
func Main(args []string, out io.Writer, defaults Defaults, build func(rng *tensor.RNG) (Job, error)) int {
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	epochs := fs.Int("epochs", defaults.Epochs, "total epochs to train")
	batch := fs.Int("batch-size", defaults.BatchSize, "batch size per rank")
	maxSteps := fs.Int("max-steps", 0, "stop after this many optimizer steps in all (0: train every epoch)")
	saveEvery := fs.Int("save-every", defaults.SaveEvery, "save a checkpoint every N epochs and after the last (0: never)")
	ckptDir := fs.String("ckpt-dir", defaults.CkptDir, "checkpoint directory, locked for the run: a second job on it is refused (\"\": no checkpoints)")
	seed := fs.Uint64("seed", defaults.Seed, "seed for data, model init and shuffling")
	workers := fs.Int("num-workers", 0, "DataLoader worker goroutines")
	bucketView := fs.Bool("gradient-as-bucket-view", true, "DDP gradient_as_bucket_view: gradients live in the buckets (saves a copy per step)")
	bucketMB := fs.Float64("bucket-cap-mb", ddp.DefaultBucketCapMB, "DDP bucket_cap_mb")
	overlap := fs.Bool("overlap", true, "all-reduce each bucket beside the rest of backward (false: ddp.OverlapComm(false), at once, blocking backward)")
	cpuProfile := fs.String("cpuprofile", "", "write a Go CPU profile of each rank to FILE (FILE.rank<r> when there are several ranks); read it with go tool pprof")
	kernelProfile := fs.Bool("kernel-profile", false, "time the matrix products, convolutions and fused attention heads of the measured steps and print their share and rate (tensor.KernelProfile)")
	timeline := fs.String("timeline", "", "write a Chrome trace of each rank to FILE.rank<r>.json and a merged FILE")
	evalBatchDefault := 1000
	if defaults.EvalBatchSize > 0 {
		evalBatchDefault = defaults.EvalBatchSize
	}
	evalBatch := fs.Int("eval-batch-size", evalBatchDefault, "batch size per rank for the evaluation set, if the example has one")
	metrics := fs.String("metrics", "", "write rank 0's metrics as JSON lines to FILE (step, epoch, loss, lr, samples/s, all-reduce hidden %, eval, per-rank communication)")
	metricsCSV := fs.String("metrics-csv", "", "write rank 0's metrics as CSV to FILE (the columns of -metrics, eval_loss and eval_acc)")
	metricsEvery := fs.Int("metrics-every", 10, "steps per train record of -metrics, -metrics-csv, -plot and -dashboard")
	terminateOnNaN := fs.Bool("terminate-on-nan", false, "fail the run at the first step whose loss is NaN or infinite on any rank, naming the step, epoch, rank and value (an all-reduce of one flag per rank each step; without it rank 0 prints the first such step to stderr once and the metrics record the NaN as \"NaN\")")
	plotFile := fs.String("plot", "", "draw loss and throughput curves to FILE.png at the end (rank 0)")
	dashboard := fs.String("dashboard", "", "serve a live training page on ADDR from rank 0 (loss, eval, throughput, per-rank communication); \":8080\" binds to 127.0.0.1 only, name a host (0.0.0.0:8080) to reach it from elsewhere")
	fresh := fs.Bool("fresh", false, "start over even if -ckpt-dir holds checkpoints: they are moved into a previous-<time> subdirectory, never deleted")
	keepBest := fs.String("keep-best", "", "save the best model by this evaluation metric (loss or acc) to <ckpt-dir>/best.safetensors (needs an evaluation set and -ckpt-dir)")
	earlyStop := fs.Int("early-stop", 0, "stop when the -keep-best metric (else the evaluation loss) has not improved for N evaluations (0: never)")
	progress := fs.Duration("progress-every", 10*time.Second, "when stderr is not a terminal, the least time between two progress lines of rank 0 (a terminal gets a bar)")
	ampFlag := fs.String("amp", "fp32", "mixed precision: bf16 runs the products of Linear and Conv2d layers with bfloat16 inputs and float32 accumulation (torch.autocast); fp16 trains with a GradScaler (dynamic loss scaling, its state in the checkpoints; the products stay float32); weights, gradients and optimizer state stay float32")
	shards := fs.String("shards", "", "train from shard files instead of the example's dataset: a glob or comma-separated list of .npy/.tar shards (see -write-shards), streamed and dealt over ranks and -num-workers")
	writeShards := fs.String("write-shards", "", "write the example's training set as shards into DIR and exit (one process)")
	shardSize := fs.Int("shard-size", 5000, "samples per shard for -write-shards")
	shardFormat := fs.String("shard-format", "tar", "format for -write-shards: tar (webdataset) or npy")
	unlabeled := fs.Bool("unlabeled", false, "the -shards data carry no labels or targets (samples without a label train as class 0); without it such shards are an error")
	device := fs.String("device", "cpu", "where to train: cpu, sim (goddp/cuda/sim's simulated GPU sim:LOCAL_RANK), cuda (cuda:LOCAL_RANK), or sim:N / cuda:N (device N for every rank)")
	if defaults.Flags != nil {
		defaults.Flags(fs)
	}
	recipe := DefaultRecipe()
	if defaults.Recipe != nil {
		recipe = *defaults.Recipe
	}
	recipe.define(fs) // after the program's own flags, which keep their names
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if defaults.EvalBatchSize < 0 && !flagGiven(fs, "eval-batch-size") {
		*evalBatch = *batch
	}
	recipe.note(fs)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, out, runConfig{recipe: recipe, epochs: *epochs, batch: *batch, saveEvery: *saveEvery, maxSteps: *maxSteps,
		ckptDir: *ckptDir, seed: *seed, workers: *workers, bucketMB: *bucketMB, bucketView: *bucketView, overlap: *overlap, timeline: *timeline, cpuProfile: *cpuProfile, kernelProfile: *kernelProfile,
		evalBatch: *evalBatch, metrics: *metrics, metricsCSV: *metricsCSV, metricsEvery: *metricsEvery, plot: *plotFile, device: *device,
		dashboard: *dashboard, fresh: *fresh, keepBest: *keepBest, earlyStop: *earlyStop, progressEvery: *progress, terminateOnNaN: *terminateOnNaN,
		amp: *ampFlag, shards: *shards, writeShards: *writeShards, shardSize: *shardSize, shardFormat: *shardFormat, unlabeled: *unlabeled}, build)
	if err != nil {
		if ctx.Err() == nil && (errors.Is(err, comm.ErrPeerFailed) || errors.Is(err, comm.ErrClosed)) {
			// A peer that left is most often one that was signalled a
			// moment before us (ddprun forwards to every worker): give our
			// own signal a moment to arrive, so the report names it.
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
		if cause := context.Cause(ctx); ctx.Err() != nil && cause != nil && !errors.Is(err, cause) {
			// Say why the context ended (e.g. "terminated signal received":
			// ddprun stops the other workers when one fails), not just
			// "context canceled".
			err = fmt.Errorf("stopped (%v): %w", cause, err)
		}
		fmt.Fprintf(os.Stderr, "%s: %v\n", args[0], err)
		_ = launch.RecordError(err)
		return 1
	}
	return 0
}

type runConfig struct {
	recipe                            Recipe
	epochs, batch, saveEvery, workers int
	evalBatch                         int
	ckptDir, timeline                 string
	cpuProfile                        string
	kernelProfile                     bool
	maxSteps                          int
	seed                              uint64
	bucketMB                          float64
	bucketView                        bool
	overlap                           bool
	metrics, metricsCSV, plot         string
	metricsEvery                      int
	device                            string
	dashboard                         string
	fresh                             bool
	keepBest                          string
	earlyStop                         int
	terminateOnNaN                    bool
	progressEvery                     time.Duration
	amp                               string
	shards, writeShards, shardFormat  string
	unlabeled                         bool
	shardSize                         int
}

func run(ctx context.Context, out io.Writer, rc runConfig, build func(rng *tensor.RNG) (Job, error)) error {
	tensor.SetThreads(tensor.ThreadsFromEnv())
	cfg, err := comm.ConfigFromEnv()
	if err != nil {
		return err
	}
	setMemoryLimit(cfg.LocalWorldSize)
	// The device comes first: -device cuda without a usable GPU fails
	// before any rendezvous, naming what is missing.
	dev, release, err := openDevice(rc.device, cfg.LocalRank)
	if err != nil {
		return err
	}
	defer release()
	cfg.Backend = backendFor(rc.device, cfg.Backend)
	pg, err := comm.Init(ctx, cfg)
	if err != nil {
		return err
	}
	defer pg.Close()

	if rc.cpuProfile != "" {
		stopProfile, err := startCPUProfile(rc.cpuProfile, pg.Rank(), pg.Size())
		if err != nil {
			return err
		}
		defer stopProfile()
	}
	job, err := build(tensor.NewRNG(rc.seed))
	if err != nil {
		return err
	}
	if rc.writeShards != "" {
		return writeShardsOf(ctx, out, pg, job, rc)
	}
	if job.BatchSize > 0 {
		rc.batch = job.BatchSize
	}
	if err := rc.recipe.check(job); err != nil {
		return err
	}
	var (
		sampler *data.DistributedSampler
		loader  *data.DataLoader
		stream  *data.StreamLoader
	)
	if rc.shards != "" {
		if stream, err = openShardStream(out, pg, rc, job); err != nil {
			return err
		}
	} else {
		if sampler, err = data.NewDistributedSampler(job.Dataset, data.SamplerGroup(pg), data.SamplerSeed(rc.seed)); err != nil {
			return err
		}
		loader, err = data.NewDataLoader(job.Dataset, data.BatchSize(rc.batch), data.WithSampler(sampler),
			data.NumWorkers(rc.workers), data.DropLast(job.DropLast))
		if err != nil {
			return err
		}
	}
	dt, err := amp.ParseDType(rc.amp)
	if err != nil {
		return err
	}
	if dt == amp.BFloat16 {
		amp.Autocast(job.Model, dt)
		if pg.Rank() == 0 {
			speed := "natively (AVX512-BF16)"
			switch {
			case !tensor.IsCPU(dev):
				// The device's own bf16 GEMM (tensor.Kernels.GemmBF16);
				// the CPU's bf16 support does not matter there.
				speed = "on " + dev.String() + " (its bf16 GEMM)"
			case !tensor.BF16Native():
				speed = "without native bf16 on this CPU: same values, float32 speed or slower"
			}
			fmt.Fprintf(out, "amp: bf16 products in %d layers, %s\n", amp.Lowered(job.Model), speed)
		}
	}
	var scaler *amp.GradScaler
	if dt == amp.Float16 && job.NewStep != nil {
		return fmt.Errorf("-amp fp16: %s computes its own gradients (Job.NewStep), and loss scaling runs in the trainer's built-in step", job.Name)
	}
	if dt == amp.Float16 {
		// torch's defaults; the overflow flag is all-reduced so every rank
		// skips the same steps.
		if scaler, err = amp.NewGradScaler(amp.GradScalerConfig{}, amp.WithGroup(pg)); err != nil {
			return err
		}
		if pg.Rank() == 0 {
			fmt.Fprintf(out, "amp: fp16 loss scaling with a GradScaler (initial scale %g); float16 products are not implemented, so the products stay float32\n", scaler.Scale())
		}
	}
	var evalLoader *data.DataLoader
	if job.EvalDataset != nil {
		es, err := data.NewDistributedSampler(job.EvalDataset, data.SamplerGroup(pg), data.SamplerShuffle(false), data.SamplerEval())
		if err != nil {
			return err
		}
		if evalLoader, err = data.NewDataLoader(job.EvalDataset, data.BatchSize(rc.evalBatch), data.WithSampler(es)); err != nil {
			return err
		}
	}
	// torch's model.to(device): DDP then keeps its buckets on the device too.
	if err := nn.To(job.Model, dev); err != nil {
		return err
	}
	var tl *ddp.Timeline
	// Gradients as bucket views exist on the CPU only; on a device the
	// gradients are copied into and out of the device buckets.
	opts := []ddp.Option{ddp.BucketCapMB(rc.bucketMB), ddp.GradientAsBucketView(rc.bucketView && tensor.IsCPU(dev)), ddp.OverlapComm(rc.overlap)}
	if rc.timeline != "" {
		tl = ddp.NewTimeline(pg.Rank())
		opts = append(opts, ddp.WithTimeline(tl))
	}
	model, err := ddp.Wrap(ctx, job.Model, pg, opts...)
	if err != nil {
		return err
	}
	defer model.Close()
	opt, optDesc, err := rc.recipe.optimizer(job, model.Parameters())
	if err != nil {
		return err
	}
	rr, err := rc.recipe.setup(ctx, out, pg, job, opt, optDesc, stepPlan{epochs: rc.epochs, maxSteps: rc.maxSteps, loader: loader, stream: stream},
		rc.batch, rc, func() (float64, string) { return peakFor(rc.recipe.PeakTFLOPS, dev) })
	if err != nil {
		return err
	}
	var loggers []Logger
	var dash *Dashboard
	var plot *Plot
	if pg.Rank() == 0 {
		if rc.metrics != "" {
			j, err := CreateJSONLines(rc.metrics)
			if err != nil {
				return err
			}
			defer j.Close()
			loggers = append(loggers, j)
		}
		if rc.metricsCSV != "" {
			c, err := CreateCSV(rc.metricsCSV, "loss", "acc")
			if err != nil {
				return err
			}
			defer c.Close()
			loggers = append(loggers, c)
		}
		if rc.plot != "" {
			if plot, err = NewPlot(rc.plot); err != nil {
				return err
			}
			loggers = append(loggers, plot)
		}
		if rc.dashboard != "" {
			if dash, err = NewDashboard(rc.dashboard); err != nil {
				return err
			}
			defer dash.Close()
			dash.SetInfo(DashboardInfo{Name: job.Name, World: pg.Size(), Backend: pg.Backend()})
			loggers = append(loggers, dash)
			fmt.Fprintf(out, "dashboard: %s\n", dash.URL())
		}
	}
	cbs, err := flagCallbacks(rc, job)
	if err != nil {
		return err
	}
	if rc.terminateOnNaN {
		cbs = append(cbs, &TerminateOnNaN{})
	}
	if pg.Rank() == 0 {
		p := NewProgress(os.Stderr)
		p.Every = rc.progressEvery
		cbs = append(cbs, p)
		if rr.line != nil {
			cbs = append(cbs, rr.line)
		}
	}
	var step StepFunc
	if job.NewStep != nil {
		step = job.NewStep(model, opt)
	}
	t, err := New(ctx, Config{Model: model, TrainData: loader, Sampler: sampler, TrainStream: stream, Optimizer: opt, Scaler: scaler,
		GPUID: cfg.LocalRank, SaveEvery: rc.saveEvery, MaxSteps: rc.maxSteps, BatchSize: rc.batch, Loss: job.Loss, ForwardLoss: job.ForwardLoss, Step: step, CkptDir: rc.ckptDir, Fresh: rc.fresh,
		Out: out, EvalData: evalLoader, Loggers: loggers, LogEvery: rc.metricsEvery, Callbacks: append(cbs, job.Callbacks...),
		Device: deviceLabel(dev), OnDevice: dev, KernelProfile: kernelProfileIf(rc.kernelProfile),
		GradAccum: rc.recipe.GradAccum, ClipNorm: rc.recipe.Clip, Scheduler: rr.sched, EvalEvery: rc.recipe.EvalEvery, EvalBatches: rc.recipe.EvalBatches,
		TokensPerSample: job.TokensPerSample, FlopsPerToken: job.FlopsPerToken, PeakFLOPS: rr.peak})
	if err != nil {
		return err
	}
	defer t.Close()
	if done, path, epoch := t.Done(rc.epochs); done {
		if pg.Rank() == 0 {
			fmt.Fprintf(out, "nothing to do: checkpoint %s is at epoch %d; use -ckpt-dir or -fresh\n", path, epoch)
		}
		return nil
	}
	if err := t.Train(ctx, rc.epochs); err != nil {
		return err
	}
	if dash != nil {
		dash.Finish()
	}
	if plot != nil {
		if err := plot.Close(); err != nil {
			return err
		}
	}
	sps, err := t.SamplesPerSecond(ctx)
	if err != nil {
		return err
	}
	if rc.timeline != "" {
		if err := writeTimeline(ctx, pg, tl, rc.timeline); err != nil {
			return err
		}
	}
	if rc.kernelProfile {
		r, err := t.KernelReport(ctx)
		if err != nil {
			return err
		}
		if pg.Rank() == 0 {
			printKernelReport(out, r)
		}
	}
	if pg.Rank() == 0 {
		st := t.Stats()
		fmt.Fprintf(out, "%s: world=%d backend=%s blas=%s buckets=%d (%s) comm_hidden=%.1f%% comm_wait=%v/iter\n",
			job.Name, pg.Size(), pg.Backend(), tensor.BLASName(), len(st.BucketBytes), st.Reduction,
			100*st.Total.HiddenFraction(), perIter(st))
		fmt.Fprintf(out, "samples_per_s=%.1f\n", sps)
		printTokens(out, sps, job, rr.peak, pg.Size())
	}
	return nil
}

// flagCallbacks are the callbacks -keep-best and -early-stop ask for.
func flagCallbacks(rc runConfig, job Job) ([]Callback, error) {
	var cbs []Callback
	if rc.keepBest == "" && rc.earlyStop <= 0 {
		return nil, nil
	}
	if job.EvalDataset == nil {
		return nil, fmt.Errorf("-keep-best and -early-stop watch an evaluation metric, and %s has no evaluation set", job.Name)
	}
	metric := rc.keepBest
	if metric == "" {
		metric = "loss"
	}
	mode := Min
	switch metric {
	case "loss":
	case "acc":
		mode = Max
	default:
		return nil, fmt.Errorf("-keep-best %q: want loss or acc", metric)
	}
	if rc.keepBest != "" {
		if rc.ckptDir == "" {
			return nil, fmt.Errorf("-keep-best needs -ckpt-dir, where best.safetensors goes")
		}
		cbs = append(cbs, &KeepBest{Metric: metric, Mode: mode, Path: filepath.Join(rc.ckptDir, "best.safetensors")})
	}
	if rc.earlyStop > 0 {
		cbs = append(cbs, &EarlyStopping{Metric: metric, Mode: mode, Patience: rc.earlyStop})
	}
	return cbs, nil
}

func perIter(st ddp.Stats) time.Duration {
	if st.Iterations == 0 {
		return 0
	}
	return st.Total.CommWait / time.Duration(st.Iterations)
}

func writeTimeline(ctx context.Context, pg comm.ProcessGroup, tl *ddp.Timeline, path string) error {
	mine := fmt.Sprintf("%s.rank%d.json", path, pg.Rank())
	if err := tl.WriteFile(mine); err != nil {
		return err
	}
	if err := pg.Barrier().Wait(ctx); err != nil {
		return err
	}
	if pg.Rank() != 0 {
		return nil
	}
	srcs := make([]string, pg.Size())
	for r := range srcs {
		srcs[r] = fmt.Sprintf("%s.rank%d.json", path, r)
	}
	return ddp.MergeTimelineFiles(path, srcs...)
}

// deviceLabel names the rank's device in log lines: the tutorial's "cpu0"
// on the host, else the device's own name ("sim:1", "cuda:0").
func deviceLabel(dev tensor.Device) string {
	if tensor.IsCPU(dev) {
		return ""
	}
	return dev.String()
}

// backendFor is the rule for GODDP_BACKEND=auto (or unset) on a device,
// applied here because the backend is chosen before the model exists: a
// CUDA model reduces its device buckets with nccl (torch's default for
// cuda); every other device stages through host memory, so auto keeps
// comm's choice (shm on one host, tcp otherwise). A backend named
// explicitly is kept.
func backendFor(device, configured string) string {
	if device == "cuda" && (configured == "" || configured == "auto") {
		return "nccl"
	}
	return configured
}

// writeShardsOf writes the job's training set as shards (rank 0; the
// others wait) for a later -shards run.
func writeShardsOf(ctx context.Context, out io.Writer, pg comm.ProcessGroup, job Job, rc runConfig) error {
	if pg.Rank() == 0 {
		if err := os.MkdirAll(rc.writeShards, 0o755); err != nil {
			return fmt.Errorf("trainer: -write-shards: %w", err)
		}
		paths, err := data.WriteShards(job.Dataset, rc.writeShards, job.Name, rc.shardSize, data.ShardFormat(rc.shardFormat))
		if err != nil {
			return fmt.Errorf("trainer: -write-shards: %w", err)
		}
		fmt.Fprintf(out, "wrote %d samples in %d shards to %s\n", job.Dataset.Len(), len(paths), rc.writeShards)
	}
	return pg.Barrier().Wait(ctx)
}

// flagGiven reports whether the command line set the flag name.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}
