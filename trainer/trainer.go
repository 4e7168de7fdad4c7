// Package trainer is the training loop shared by the examples. It mirrors the
// Trainer class of the PyTorch DDP tutorial (runBatch, runEpoch,
// saveCheckpoint, train), with a DistributedSampler-fed DataLoader, a
// ddp-wrapped model, rank-0 checkpoints and resume.
package trainer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"goddp/autograd"
	"goddp/checkpoint"
	"goddp/comm"
	"goddp/data"
	"goddp/ddp"
	"goddp/metrics"
	"goddp/nn"
	"goddp/optim"
	"goddp/tensor"
)

// LossFunc computes the loss of a model output against a batch.
type LossFunc func(out *autograd.Variable, b data.Batch) *autograd.Variable

// Trainer is the tutorial's Trainer{model, train_data, optimizer, gpu_id, save_every}.
type Trainer struct {
	model     *ddp.DDP
	trainData *data.DataLoader
	sampler   *data.DistributedSampler
	optimizer optim.Optimizer
	gpuID     int // the local rank, as in the tutorial
	saveEvery int
	batchSize int

	loss  LossFunc
	pg    comm.ProcessGroup
	ckpt  *checkpoint.Manager // nil: no checkpoints
	out   io.Writer
	tty   bool
	step  int
	start int // first epoch to run (after a resume)

	// throughput, counted after the warm-up epoch
	samples  int64
	measured time.Duration

	evalData *data.DataLoader // nil: no evaluation
	device   string           // this rank's device in log lines, e.g. "cpu0"
	dev      tensor.Device    // where the model lives; batches go there
	mon      monitor          // running loss and the metrics log (metrics.go)
}

// Config carries what the tutorial passes to Trainer's constructor, plus the
// goddp-specific pieces.
type Config struct {
	Model     *ddp.DDP
	TrainData *data.DataLoader
	Sampler   *data.DistributedSampler
	Optimizer optim.Optimizer
	GPUID     int
	SaveEvery int
	BatchSize int
	Loss      LossFunc
	CkptDir   string // "" disables checkpoints
	KeepLast  int
	Out       io.Writer
	// EvalData, when set, is evaluated after every epoch in eval mode and
	// without recording gradients; its loss and (for labelled batches)
	// accuracy are reduced over the ranks and printed by rank 0 as
	// "epoch=E test_loss=L test_acc=A". Shard it with a DistributedSampler
	// in SamplerEval mode, so each sample counts once.
	EvalData *data.DataLoader
	// Device names this rank's device in the log lines (the tutorial's
	// "[GPU0]"); "" means "cpu<GPUID>", the local rank's CPU slot.
	Device string
	// OnDevice is where the model's parameters live (nn.To); batches are
	// moved there before the forward pass. nil means the CPU.
	OnDevice tensor.Device
	// Metrics, when not nil, receives rank 0's metrics records (metrics.go)
	// every MetricsEvery steps (default 10) and at each epoch's end.
	Metrics      *MetricsLog
	MetricsEvery int
}

// New builds a Trainer. Rank 0 locks CkptDir for the run (see
// checkpoint.Manager.Lock; Close releases it): when another job holds it,
// every rank fails here, before training, and nothing in the directory is
// touched. When CkptDir holds a valid checkpoint, every rank resumes from it
// (rank 0 reads it and broadcasts it).
func New(ctx context.Context, cfg Config) (*Trainer, error) {
	t := &Trainer{model: cfg.Model, trainData: cfg.TrainData, sampler: cfg.Sampler,
		optimizer: cfg.Optimizer, gpuID: cfg.GPUID, saveEvery: cfg.SaveEvery, batchSize: cfg.BatchSize,
		loss: cfg.Loss, pg: cfg.Model.ProcessGroup(), out: cfg.Out,
		device: cfg.Device, mon: monitor{log: cfg.Metrics, every: cfg.MetricsEvery},
		evalData: cfg.EvalData, dev: cfg.OnDevice}
	if t.device == "" {
		t.device = fmt.Sprintf("cpu%d", cfg.GPUID)
	}
	if t.mon.every <= 0 {
		t.mon.every = 10
	}
	if t.out == nil {
		t.out = os.Stdout
	}
	if f, ok := t.out.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			t.tty = true
		}
	}
	if cfg.CkptDir != "" {
		keep := cfg.KeepLast
		if keep <= 0 {
			keep = 3
		}
		m, err := checkpoint.NewManager(cfg.CkptDir, checkpoint.Keep(keep))
		if err != nil {
			return nil, fmt.Errorf("trainer: checkpoint dir: %w", err)
		}
		t.ckpt = m
		if err := checkpoint.LockOnRank0(ctx, t.pg, m); err != nil {
			m.Close()
			if t.pg.Rank() != 0 {
				letRank0ReportFirst(ctx)
			}
			return nil, fmt.Errorf("trainer: checkpoint dir: %w", err)
		}
		if err := t.resume(ctx); err != nil {
			m.Close()
			return nil, err
		}
	}
	return t, nil
}

// Close releases the checkpoint directory for the next run.
func (t *Trainer) Close() error {
	if t.ckpt == nil {
		return nil
	}
	if err := t.ckpt.Close(); err != nil {
		return fmt.Errorf("trainer: %w", err)
	}
	return nil
}

// letRank0ReportFirst delays a rank's exit after rank 0 failed and told it
// why: rank 0, which holds the full story, then exits first and the
// launcher reports it as the root cause; the launcher then stops this rank
// (ctx ends), or it gives up waiting after a few seconds.
func letRank0ReportFirst(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(3 * time.Second):
	}
}

// resume loads the newest valid checkpoint, if any, on every rank. Newer
// files that are corrupt or truncated (a disk fault, a copy cut short) are
// skipped, and rank 0 says so, naming each file and why. A file that cannot
// be read (permission, I/O error) stops the resume on every rank, naming
// it, with nothing renamed or deleted: it may hold the newest state, and
// falling back would roll training back. When the directory
// holds checkpoint files but none of them loads, every rank fails with an
// error naming them instead of silently starting over: a fresh run would
// otherwise train from scratch, and its new, lower-numbered checkpoints would
// be the ones pruned behind the unreadable files.
func (t *Trainer) resume(ctx context.Context) error {
	var listed []string
	if t.pg.Rank() == 0 {
		var err error
		if listed, err = t.ckpt.List(); err != nil {
			listed = nil // LoadLatestAndBroadcast reports the directory error
		}
	}
	c, err := checkpoint.LoadLatestAndBroadcast(ctx, t.pg, t.ckpt)
	if errors.Is(err, checkpoint.ErrNotFound) {
		// Every rank got ErrNotFound; rank 0 alone knows whether files were
		// there, so it tells the others.
		refusal := ""
		if t.pg.Rank() == 0 && len(listed) > 0 {
			refusal = err.Error()
		}
		if berr := comm.BroadcastObject(ctx, t.pg, &refusal, 0); berr != nil {
			return fmt.Errorf("trainer: resume: %w", berr)
		}
		if refusal == "" {
			return nil
		}
		if t.pg.Rank() == 0 {
			return fmt.Errorf("trainer: resume: no checkpoint in %s loads; move the unreadable files away to start fresh: %w",
				t.ckpt.Dir(), err)
		}
		letRank0ReportFirst(ctx)
		return fmt.Errorf("trainer: resume: rank 0 found no loadable checkpoint: %s", refusal)
	}
	if err != nil {
		if t.pg.Rank() != 0 && errors.Is(err, checkpoint.ErrRemote) {
			letRank0ReportFirst(ctx)
		}
		return fmt.Errorf("trainer: resume: %w", err)
	}
	if t.pg.Rank() == 0 {
		t.reportSkipped(listed, t.ckpt.Path(c.Epoch, c.Step))
	}
	if err := checkpoint.LoadStateDict(t.model.Module(), c.Model, true); err != nil {
		return fmt.Errorf("trainer: resume model: %w", err)
	}
	if c.Optimizer != nil {
		if err := t.optimizer.LoadStateDict((*optim.StateDict)(c.Optimizer)); err != nil {
			return fmt.Errorf("trainer: resume optimizer: %w", err)
		}
	}
	t.start, t.step = c.Epoch+1, c.Step
	if c.Sampler != nil && c.Sampler.Position > 0 && c.Sampler.Position < t.sampler.Len() {
		// A mid-epoch checkpoint: continue inside that epoch.
		if err := t.sampler.LoadState(*c.Sampler); err != nil {
			return fmt.Errorf("trainer: resume sampler: %w", err)
		}
		t.start = c.Epoch
	}
	t.logf("Resumed from epoch %d (step %d) of %s\n", c.Epoch, c.Step, t.ckpt.Path(c.Epoch, c.Step))
	return nil
}

// reportSkipped names the listed files newer than loaded (the newest first,
// as Manager.List orders them), which LoadLatestAndBroadcast passed over, with
// the reason each fails to load, and renames each damaged one to
// FILE.corrupt: kept for inspection, but out of Manager's way, so later
// resumes do not skip it again and later saves do not re-read it while
// pruning. A file that fails now for another reason (it could not be read
// this time) is only reported: it may not be damaged at all.
func (t *Trainer) reportSkipped(listed []string, loaded string) {
	for _, p := range listed {
		if p == loaded {
			return
		}
		_, err := checkpoint.Load(p)
		if err == nil {
			continue
		}
		moved := ""
		if !errors.Is(err, checkpoint.ErrCorrupt) && !errors.Is(err, checkpoint.ErrUnsupported) {
			moved = "; left in place"
		} else if rerr := os.Rename(p, p+".corrupt"); rerr == nil {
			moved = "; moved to " + p + ".corrupt"
		}
		fmt.Fprintf(t.out, "Skipped checkpoint %s: %v%s\n", p, err, moved)
	}
}

func (t *Trainer) logf(format string, args ...any) {
	if t.pg.Rank() == 0 {
		fmt.Fprintf(t.out, format, args...)
	}
}

func (t *Trainer) runBatch(source *tensor.Tensor, b data.Batch) error {
	t.optimizer.ZeroGrad()
	output, err := t.model.Forward(autograd.Const(source))
	if err != nil {
		return err
	}
	loss := t.loss(output, b)
	if loss.Value.Numel() != 1 {
		return fmt.Errorf("loss has shape %v, want a scalar", loss.Value.Shape())
	}
	t.mon.lastLoss = loss.Value.Item()
	if err := loss.Backward(); err != nil {
		return err
	}
	// The step's activations are read no more: their storage goes back to
	// the allocator's cache now, for the next step, instead of waiting for
	// the garbage collector (parameters and their gradients are kept).
	loss.FreeGraph()
	end := t.model.Timeline().Span("optimizer")
	err = t.optimizer.Step()
	end()
	t.step++
	return err
}

func (t *Trainer) runEpoch(ctx context.Context, epoch int) error {
	t.sampler.SetEpoch(epoch)
	// The tutorial peeks len(next(iter(train_data))[0]); peeking here would
	// consume a batch of the sampler's resumable position, so use the size.
	bsz := min(t.batchSize, t.sampler.Len())
	if !t.tty || t.pg.Rank() != 0 {
		// Every rank prints its line, naming its device, as in the
		// tutorial; ddprun --local-ranks-filter chooses which are shown.
		fmt.Fprintf(t.out, "[%s] Epoch %d | Batchsize: %d | Steps: %d\n", t.device, epoch, bsz, t.trainData.Len())
	}
	began := time.Now()
	t.mon.epochStarted(began)
	n, steps := 0, t.trainData.Len()
	i := 0
	for b, err := range t.trainData.All(ctx) {
		if err != nil {
			return fmt.Errorf("trainer: epoch %d: %w", epoch, err)
		}
		if b, err = toDevice(b, t.dev); err != nil {
			return fmt.Errorf("trainer: epoch %d step %d: %w", epoch, i, err)
		}
		if err := t.runBatch(b.Inputs, b); err != nil {
			return fmt.Errorf("trainer: epoch %d step %d: %w", epoch, i, err)
		}
		n += b.Size()
		i++
		if err := t.observeStep(epoch, b.Size()); err != nil {
			return err
		}
		if t.tty && t.pg.Rank() == 0 {
			t.progress(epoch, i, steps)
		}
	}
	if t.tty && t.pg.Rank() == 0 {
		fmt.Fprintln(t.out)
	}
	elapsed := time.Since(began)
	if epoch > t.start { // the first epoch run is the warm-up
		t.samples += int64(n)
		t.measured += elapsed
	}
	// Rank 0's mean training loss over the epoch's steps, as torch's anchors print it.
	t.logf("epoch=%d loss=%.4f\n", epoch, t.mon.epochMean())
	return t.endEpochMetrics(epoch, elapsed, n)
}

// evaluate runs the evaluation set through the model in eval mode without
// recording gradients, and prints the loss and accuracy over all ranks on
// rank 0. It calls the wrapped module directly: DDP's forward would issue
// collectives, and unpadded shards give ranks different batch counts.
func (t *Trainer) evaluate(ctx context.Context, epoch int) error {
	m := t.model.Module()
	wasTraining := m.Training()
	m.Train(false)
	defer m.Train(wasTraining)
	var loss metrics.Mean
	var acc metrics.Accuracy
	var err error
	nn.NoGrad(m, func() {
		for b, e := range t.evalData.All(ctx) {
			if e != nil {
				err = fmt.Errorf("trainer: evaluation after epoch %d: %w", epoch, e)
				return
			}
			if b, e = toDevice(b, t.dev); e != nil {
				err = fmt.Errorf("trainer: evaluation after epoch %d: %w", epoch, e)
				return
			}
			out := m.Forward(autograd.Const(b.Inputs))
			loss.Add(t.loss(out, b).Value.Item(), float64(b.Size()))
			if b.Labels != nil && out.Value.Dim() == 2 {
				host, e := out.Value.To(tensor.CPU())
				if e != nil {
					err = fmt.Errorf("trainer: evaluation after epoch %d: %w", epoch, e)
					return
				}
				acc.Add(tensor.ArgMax(host, 1), b.Labels)
			}
		}
	})
	if err != nil {
		return err
	}
	l, err := loss.Reduce(ctx, t.pg)
	if err != nil {
		return fmt.Errorf("trainer: evaluation after epoch %d: %w", epoch, err)
	}
	a, err := acc.Reduce(ctx, t.pg)
	if err != nil {
		return fmt.Errorf("trainer: evaluation after epoch %d: %w", epoch, err)
	}
	t.logf("epoch=%d test_loss=%.4f test_acc=%.4f\n", epoch, l, a)
	return t.LogEval(epoch, map[string]float64{"loss": l, "acc": a})
}

func (t *Trainer) progress(epoch, i, steps int) {
	const width = 30
	filled := 0
	if steps > 0 {
		filled = i * width / steps
	}
	fmt.Fprintf(t.out, "\r[%s] Epoch %d [%s%s] %d/%d loss %.4f", t.device, epoch,
		strings.Repeat("=", filled), strings.Repeat(" ", width-filled), i, steps, t.mon.running)
}

// saveCheckpoint saves from rank 0 while the others wait.
func (t *Trainer) saveCheckpoint(ctx context.Context, epoch int) error {
	if t.ckpt == nil {
		return nil
	}
	var c *checkpoint.Checkpoint
	if t.pg.Rank() == 0 {
		st := t.sampler.State()
		cfg, _ := json.Marshal(map[string]any{"world_size": t.pg.Size(), "save_every": t.saveEvery})
		c = &checkpoint.Checkpoint{Epoch: epoch, Step: t.step,
			Model:     checkpoint.StateDict(t.model.Module()),
			Optimizer: (*checkpoint.OptimizerState)(t.optimizer.StateDict()),
			Sampler:   &st, Config: cfg}
	}
	path, err := checkpoint.SaveOnRank0(ctx, t.pg, t.ckpt, c)
	if err != nil {
		return fmt.Errorf("trainer: save checkpoint at epoch %d: %w", epoch, err)
	}
	t.logf("Epoch %d | Training checkpoint saved at %s\n", epoch, path)
	return nil
}

// Train runs epochs [resumed epoch, maxEpochs) and saves every saveEvery epochs.
func (t *Trainer) Train(ctx context.Context, maxEpochs int) error {
	for epoch := t.start; epoch < maxEpochs; epoch++ {
		if err := t.runEpoch(ctx, epoch); err != nil {
			return err
		}
		if t.evalData != nil {
			if err := t.evaluate(ctx, epoch); err != nil {
				return err
			}
		}
		if t.saveEvery > 0 && epoch%t.saveEvery == 0 {
			if err := t.saveCheckpoint(ctx, epoch); err != nil {
				return err
			}
		}
	}
	t.logf("host memory: %v\n", tensor.Host().Stats())
	return nil
}

// SamplesPerSecond returns the throughput over all ranks after the warm-up
// epoch: the ranks' sample counts summed, over the slowest rank's time.
func (t *Trainer) SamplesPerSecond(ctx context.Context) (float64, error) {
	v := []float64{float64(t.samples)}
	if err := t.pg.AllReduce(comm.Float64s(v), comm.Sum).Wait(ctx); err != nil {
		return 0, err
	}
	secs := []float64{t.measured.Seconds()}
	if err := t.pg.AllReduce(comm.Float64s(secs), comm.Max).Wait(ctx); err != nil {
		return 0, err
	}
	if secs[0] == 0 {
		return 0, nil
	}
	return v[0] / secs[0], nil
}

// Stats reports DDP's overlap statistics.
func (t *Trainer) Stats() ddp.Stats { return t.model.Stats() }
