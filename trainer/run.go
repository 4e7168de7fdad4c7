package trainer

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"goddp/autograd"
	"goddp/comm"
	"goddp/data"
	"goddp/ddp"
	"goddp/launch"
	"goddp/nn"
	"goddp/optim"
	"goddp/tensor"
)

// Defaults are an example's flag defaults.
type Defaults struct {
	Epochs, BatchSize, SaveEvery int
	CkptDir                      string
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
	// EvalDataset, when set, is evaluated after every epoch (see
	// Config.EvalData), sharded over the ranks without padding.
	EvalDataset data.Dataset
}

// Main parses the common flags, joins the process group from the launcher's
// environment (a single process when there is none), trains, and prints
// `samples_per_s=<float>` on rank 0. It returns the process exit code; on
// failure it records the error for ddprun's root-cause report.
func Main(args []string, out io.Writer, defaults Defaults, build func(rng *tensor.RNG) (Job, error)) int {
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	epochs := fs.Int("epochs", defaults.Epochs, "total epochs to train")
	batch := fs.Int("batch-size", defaults.BatchSize, "batch size per rank")
	saveEvery := fs.Int("save-every", defaults.SaveEvery, "save a checkpoint every N epochs (0: never)")
	ckptDir := fs.String("ckpt-dir", defaults.CkptDir, "checkpoint directory, locked for the run: a second job on it is refused (\"\": no checkpoints)")
	seed := fs.Uint64("seed", 0, "seed for data, model init and shuffling")
	workers := fs.Int("num-workers", 0, "DataLoader worker goroutines")
	bucketView := fs.Bool("gradient-as-bucket-view", true, "DDP gradient_as_bucket_view: gradients live in the buckets (saves a copy per step)")
	bucketMB := fs.Float64("bucket-cap-mb", ddp.DefaultBucketCapMB, "DDP bucket_cap_mb")
	overlap := fs.Bool("overlap", true, "all-reduce each bucket beside the rest of backward (false: ddp.OverlapComm(false), at once, blocking backward)")
	timeline := fs.String("timeline", "", "write a Chrome trace of each rank to FILE.rank<r>.json and a merged FILE")
	evalBatch := fs.Int("eval-batch-size", 1000, "batch size per rank for the evaluation set, if the example has one")
	metrics := fs.String("metrics", "", "write rank 0's metrics as JSON lines to FILE (step, epoch, loss, lr, samples/s, all-reduce hidden %, eval)")
	metricsEvery := fs.Int("metrics-every", 10, "steps per -metrics record")
	plotFile := fs.String("plot", "", "draw loss and throughput curves to FILE.png at the end (rank 0)")
	device := fs.String("device", "cpu", "where to train: cpu, sim (goddp/cuda/sim's simulated GPU sim:LOCAL_RANK), cuda (cuda:LOCAL_RANK), or sim:N / cuda:N (device N for every rank)")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, out, runConfig{epochs: *epochs, batch: *batch, saveEvery: *saveEvery,
		ckptDir: *ckptDir, seed: *seed, workers: *workers, bucketMB: *bucketMB, bucketView: *bucketView, overlap: *overlap, timeline: *timeline,
		evalBatch: *evalBatch, metrics: *metrics, metricsEvery: *metricsEvery, plot: *plotFile, device: *device}, build)
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
	epochs, batch, saveEvery, workers int
	evalBatch                         int
	ckptDir, timeline                 string
	seed                              uint64
	bucketMB                          float64
	bucketView                        bool
	overlap                           bool
	metrics, plot                     string
	metricsEvery                      int
	device                            string
}

func run(ctx context.Context, out io.Writer, rc runConfig, build func(rng *tensor.RNG) (Job, error)) error {
	tensor.SetThreads(tensor.ThreadsFromEnv())
	cfg, err := comm.ConfigFromEnv()
	if err != nil {
		return err
	}
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

	job, err := build(tensor.NewRNG(rc.seed))
	if err != nil {
		return err
	}
	sampler, err := data.NewDistributedSampler(job.Dataset, data.SamplerGroup(pg), data.SamplerSeed(rc.seed))
	if err != nil {
		return err
	}
	loader, err := data.NewDataLoader(job.Dataset, data.BatchSize(rc.batch), data.WithSampler(sampler),
		data.NumWorkers(rc.workers))
	if err != nil {
		return err
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
	opt, err := job.NewOpt(model.Parameters())
	if err != nil {
		return err
	}
	var mlog *MetricsLog
	if pg.Rank() == 0 && (rc.metrics != "" || rc.plot != "") {
		if mlog, err = NewMetricsLog(rc.metrics); err != nil {
			return err
		}
		defer mlog.Close()
	}
	t, err := New(ctx, Config{Model: model, TrainData: loader, Sampler: sampler, Optimizer: opt,
		GPUID: cfg.LocalRank, SaveEvery: rc.saveEvery, BatchSize: rc.batch, Loss: job.Loss, CkptDir: rc.ckptDir, Out: out,
		EvalData: evalLoader, Metrics: mlog, MetricsEvery: rc.metricsEvery, Device: deviceLabel(dev), OnDevice: dev})
	if err != nil {
		return err
	}
	defer t.Close()
	if err := t.Train(ctx, rc.epochs); err != nil {
		return err
	}
	if err := mlog.Close(); err != nil {
		return err
	}
	if mlog != nil && rc.plot != "" {
		if err := WritePlot(rc.plot, mlog.Records()); err != nil {
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
	if pg.Rank() == 0 {
		st := t.Stats()
		fmt.Fprintf(out, "%s: world=%d backend=%s blas=%s buckets=%d (%s) comm_hidden=%.1f%% comm_wait=%v/iter\n",
			job.Name, pg.Size(), pg.Backend(), tensor.BLASName(), len(st.BucketBytes), st.Reduction,
			100*st.Total.HiddenFraction(), perIter(st))
		fmt.Fprintf(out, "samples_per_s=%.1f\n", sps)
	}
	return nil
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
