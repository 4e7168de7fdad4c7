package ddp

import (
	"context"
	"fmt"
	"github.com/goddp/goddp/comm/commtest"
	"github.com/goddp/goddp/internal/proctest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

// The MLP of examples/mlp and the torch anchor: 784-512-512-10, batch 64
// per rank, SGD, cross-entropy.
var benchSizes = []int{784, 512, 512, 10}

const (
	benchBatch  = 64
	benchWarmup = 5
)

type benchLoop struct {
	d   *DDP
	net *testNet
	opt optim.Optimizer
	x   *autograd.Variable
	y   []int
}

func newBenchLoop(pg comm.ProcessGroup, opts ...Option) (*benchLoop, error) {
	net := mlpNet(benchSizes, 1)
	d, err := Wrap(context.Background(), net, pg, opts...)
	if err != nil {
		return nil, err
	}
	opt, err := optim.NewSGD(d.Parameters(), optim.SGDConfig{LR: 1e-3})
	if err != nil {
		return nil, err
	}
	rng := tensor.NewRNG(uint64(pg.Rank() + 1))
	y := make([]int, benchBatch)
	for i := range y {
		y[i] = int(rng.Float64() * 10)
	}
	return &benchLoop{d: d, net: net, opt: opt,
		x: autograd.Const(tensor.Rand(rng, tensor.Float32, benchBatch, benchSizes[0])), y: y}, nil
}

func (l *benchLoop) step() error {
	l.opt.ZeroGrad()
	out, err := l.d.Forward(l.x)
	if err != nil {
		return err
	}
	if err := autograd.CrossEntropy(out, l.y, autograd.ReductionMean).Backward(); err != nil {
		return err
	}
	end := l.d.Timeline().Span("optimizer step")
	err = l.opt.Step()
	end()
	return err
}

// benchWorker is the other ranks' side of BenchmarkDDPStep.
func benchWorker(pg comm.ProcessGroup, spec string) error {
	parts := strings.Split(spec, ":")
	if len(parts) != 2 {
		return fmt.Errorf("bad bench spec %q", spec)
	}
	steps, err := strconv.Atoi(parts[1])
	if err != nil {
		return err
	}
	l, err := newBenchLoop(pg, GradientAsBucketView(parts[0] == "view"))
	if err != nil {
		return err
	}
	for i := 0; i < benchWarmup+steps; i++ {
		if err := l.step(); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkDDPStep runs one training step of the MLP at world 2: rank 0 in
// this process, rank 1 a re-executed worker, one BLAS thread each. It
// reports the fraction of all-reduce time hidden behind backward, the time
// finalize blocked (comm-wait), backward and communication per step, and
// samples/s over both ranks. Compare with BenchmarkMLPStepSingle (one rank,
// one thread) for the scaling ratio. Set GODDP_DDP_TIMELINE=file.json to
// write rank 0's Chrome trace.
func BenchmarkDDPStep(b *testing.B) {
	for _, c := range []struct{ backend, mode string }{
		{"tcp", "copy"}, {"tcp", "view"}, {"shm", "view"},
	} {
		b.Run(c.backend+"/"+c.mode, func(b *testing.B) { benchDDP(b, c.backend, c.mode) })
	}
}

func benchDDP(b *testing.B, backend, mode string) {
	tensor.SetThreads(1)
	dir := b.TempDir()
	store := filepath.Join(dir, "store")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$", "-test.bench=^$")
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	// Rank 1 is a worker of the multi-process tests' scenario "bench".
	cmd.Env = append(append(os.Environ(), workerEnv(backend)...),
		proctest.WorkerEnv+"=bench:"+mode+":"+strconv.Itoa(b.N), "GODDP_PROCTEST_DIR="+dir,
		"GODDP_INIT_METHOD=file://"+store, "RANK=1", "WORLD_SIZE=2", "OMP_NUM_THREADS=1")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	pg, err := comm.Init(ctx, comm.Config{Backend: backend, InitMethod: "file://" + store, Rank: 0, WorldSize: 2, Timeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer pg.Close()
	opts := []Option{GradientAsBucketView(mode == "view")}
	trace := os.Getenv("GODDP_DDP_TIMELINE")
	if trace != "" {
		opts = append(opts, WithTimeline(nil))
	}
	l, err := newBenchLoop(pg, opts...)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < benchWarmup; i++ {
		if err := l.step(); err != nil {
			b.Fatal(err)
		}
	}
	l.d.ResetStats()
	l.d.Timeline().Reset()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if err := l.step(); err != nil {
			b.Fatal(err)
		}
	}
	el := time.Since(start)
	b.StopTimer()
	if err := pg.Barrier().Wait(ctx); err != nil {
		b.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		b.Fatalf("worker: %v\n%s", err, log.String())
	}
	s := l.d.Stats()
	n := float64(s.Iterations)
	b.ReportMetric(s.Total.HiddenFraction(), "hidden")
	b.ReportMetric(float64(s.Total.CommWait.Microseconds())/n, "wait-us/op")
	b.ReportMetric(float64(s.Total.Comm.Microseconds())/n, "comm-us/op")
	b.ReportMetric(float64(s.Total.Backward.Microseconds())/n, "bwd-us/op")
	b.ReportMetric(float64(2*benchBatch*b.N)/el.Seconds(), "samples/s")
	if trace != "" {
		if err := l.d.Timeline().WriteFile(trace); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMLPStepSingle is the same step on one process, one thread,
// without DDP: the baseline of the "world 2 >= 1.9x one rank" bar.
func BenchmarkMLPStepSingle(b *testing.B) {
	tensor.SetThreads(1)
	net := mlpNet(benchSizes, 1)
	opt, err := optim.NewSGD(net.params, optim.SGDConfig{LR: 1e-3})
	if err != nil {
		b.Fatal(err)
	}
	rng := tensor.NewRNG(1)
	x := autograd.Const(tensor.Rand(rng, tensor.Float32, benchBatch, benchSizes[0]))
	y := make([]int, benchBatch)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		opt.ZeroGrad()
		if err := autograd.CrossEntropy(net.Forward(x), y, autograd.ReductionMean).Backward(); err != nil {
			b.Fatal(err)
		}
		if err := opt.Step(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(benchBatch*b.N)/time.Since(start).Seconds(), "samples/s")
}

// BenchmarkReducerOverhead measures the reducer's own cost on the MLP at
// world 1 (no communication): compare with BenchmarkMLPStepSingle.
func BenchmarkReducerOverhead(b *testing.B) {
	tensor.SetThreads(1)
	for _, mode := range []string{"copy", "view"} {
		b.Run(mode, func(b *testing.B) {
			l, err := newBenchLoop(commtest.NewGroups(1)[0], GradientAsBucketView(mode == "view"))
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := l.step(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
