package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"time"

	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/comm/nccl"
)

// result is one row of the report.
type result struct {
	bytes  int64
	count  int64
	timeUS float64 // slowest rank's mean time per call
	algbw  float64 // GB/s
	busbw  float64 // GB/s
	iters  int
}

// busFactor converts algorithm to bus bandwidth (nccl-tests conventions).
func busFactor(collective string, n int) float64 {
	switch collective {
	case "allreduce":
		return 2 * float64(n-1) / float64(n)
	case "allgather", "reducescatter":
		return float64(n-1) / float64(n)
	}
	return 1
}

// runRank joins the job, runs the sweep, and on rank 0 writes the report.
func runRank(ctx context.Context, cfg benchConfig, stdout io.Writer) error {
	ccfg, err := rankConfig(cfg)
	if err != nil {
		return err
	}
	if pin, oneP := bindPlan(cfg.bind, ccfg.Backend, ccfg.LocalWorldSize, runtime.NumCPU()); pin {
		if _, err := bindToCore(ccfg.LocalRank); err != nil {
			return fmt.Errorf("-bind core: %w", err)
		}
		if oneP {
			// One core: more Ps would only time-slice it (GC workers
			// against the rank's own goroutine).
			runtime.GOMAXPROCS(1)
		}
	}
	pg, err := comm.Init(ctx, ccfg)
	if err != nil {
		return err
	}
	defer pg.Close()
	results, err := sweep(ctx, pg, cfg)
	if err != nil {
		return err
	}
	if pg.Rank() != 0 {
		return nil
	}
	hdr := header{cfg: cfg, backend: pg.Backend(), nproc: pg.Size()}
	if cfg.format == "csv" {
		writeCSV(stdout, hdr, results)
	} else {
		writeTable(stdout, hdr, results)
	}
	if cfg.plot != "" {
		if err := writePlot(cfg.plot, hdr, results); err != nil {
			return err
		}
	}
	return nil
}

// rankConfig is the comm.Config a rank joins with: the launcher's
// environment (GODDP_BACKEND included), -backend only when given.
func rankConfig(cfg benchConfig) (comm.Config, error) {
	ccfg, err := comm.ConfigFromEnv()
	if err != nil {
		return ccfg, err
	}
	if cfg.backend != "" {
		ccfg.Backend = cfg.backend
	}
	ccfg.Timeout = cfg.timeout
	return ccfg, nil
}

// gpuBackend reports whether a backend drives GPUs, whose library threads
// (NCCL's proxy threads, which inherit the CPU mask) need more than the
// rank's one core.
func gpuBackend(backend string) bool { return backend == "nccl" }

// bindPlan decides -bind: pin reports whether to pin this rank to one
// core, oneP whether to run the Go scheduler on one P too. auto pins host
// backends when the ranks fit the cores (pinning oversubscribed ranks to
// shared cores would forbid the scheduler to spread them) and never nccl;
// core pins whatever the backend, but leaves nccl's GOMAXPROCS alone.
func bindPlan(bind, backend string, localWorld, ncpu int) (pin, oneP bool) {
	fits := localWorld == 0 || localWorld <= ncpu
	switch bind {
	case "core":
		return fits, fits && !gpuBackend(backend)
	case "auto":
		ok := fits && !gpuBackend(backend)
		return ok, ok
	}
	return false, false
}

// sweep times the collective at every size; all ranks return the same rows.
func sweep(ctx context.Context, pg comm.ProcessGroup, cfg benchConfig) ([]result, error) {
	n := pg.Size()
	es := int64(cfg.dtype.Size())
	// Settle first (scheduler placement, first-touch page faults, the Go
	// runtime's start-up garbage) so the first size is not penalised.
	// Every rank must make the same number of calls, so the count is fixed.
	if call, release, err := prepare(pg, cfg, max(1, int(cfg.min/es)/n*n)); err == nil {
		calls := int(min(200, max(1, (64<<20)/cfg.min)))
		for i := 0; i < calls; i++ {
			if err := call().Wait(ctx); err != nil {
				release()
				return nil, fmt.Errorf("%s warm-up: %w", cfg.collective, err)
			}
		}
		release()
	} else {
		return nil, err
	}
	var out []result
	for size := cfg.min; size <= cfg.max; size *= 2 {
		count := size / es
		if cfg.collective == "allgather" || cfg.collective == "reducescatter" {
			count -= count % int64(n) // whole per-rank chunks
		}
		if count == 0 {
			continue
		}
		call, release, err := prepare(pg, cfg, int(count))
		if err != nil {
			return nil, err
		}
		row, err := timeSize(ctx, pg, cfg, call, size, count)
		release()
		if err != nil {
			return nil, err
		}
		out = append(out, row)
	}
	return out, nil
}

// timeSize times one message size.
func timeSize(ctx context.Context, pg comm.ProcessGroup, cfg benchConfig, call func() comm.Work, size, count int64) (result, error) {
	n := pg.Size()
	es := int64(cfg.dtype.Size())
	iters := cfg.iters
	if iters == 0 {
		iters = int(min(200, max(5, (256<<20)/size)))
	}
	for i := 0; i < cfg.warmup; i++ {
		if err := call().Wait(ctx); err != nil {
			return result{}, fmt.Errorf("%s %d bytes warm-up: %w", cfg.collective, size, err)
		}
	}
	if err := pg.Barrier().Wait(ctx); err != nil {
		return result{}, err
	}
	el, err := timeCalls(ctx, call, iters, cfg.stat == "median")
	if err != nil {
		return result{}, fmt.Errorf("%s %d bytes: %w", cfg.collective, size, err)
	}
	// Report the slowest rank, as a training step waits for it.
	slowest := []float64{el}
	if err := pg.AllReduce(comm.Float64s(slowest), comm.Max).Wait(ctx); err != nil {
		return result{}, err
	}
	el = slowest[0]
	bytes := count * es
	alg := float64(bytes) / el / 1e9
	return result{bytes: bytes, count: count, timeUS: el * 1e6, algbw: alg,
		busbw: alg * busFactor(cfg.collective, n), iters: iters}, nil
}

// timeCalls returns the mean seconds per call over iters calls, or the
// median of the individually timed calls.
func timeCalls(ctx context.Context, call func() comm.Work, iters int, median bool) (float64, error) {
	if !median {
		start := time.Now()
		for i := 0; i < iters; i++ {
			if err := call().Wait(ctx); err != nil {
				return 0, err
			}
		}
		return time.Since(start).Seconds() / float64(iters), nil
	}
	ts := make([]float64, iters)
	for i := range ts {
		t0 := time.Now()
		if err := call().Wait(ctx); err != nil {
			return 0, err
		}
		ts[i] = time.Since(t0).Seconds()
	}
	slices.Sort(ts)
	return ts[len(ts)/2], nil
}

// prepare allocates the buffers for count elements and returns one call
// and what releases the buffers.
func prepare(pg comm.ProcessGroup, cfg benchConfig, count int) (func() comm.Work, func(), error) {
	if cfg.mem == "device" {
		return prepareDevice(pg, cfg, count)
	}
	n := pg.Size()
	buf := filled(cfg.dtype, count)
	none := func() {}
	switch cfg.collective {
	case "allreduce":
		return func() comm.Work { return pg.AllReduce(buf, cfg.op) }, none, nil
	case "broadcast":
		return func() comm.Work { return pg.Broadcast(buf, 0) }, none, nil
	case "allgather":
		in := filled(cfg.dtype, count/n)
		return func() comm.Work { return comm.AllGather(pg, buf, in) }, none, nil
	case "reducescatter":
		out := filled(cfg.dtype, count/n)
		return func() comm.Work { return comm.ReduceScatter(pg, out, buf, cfg.op) }, none, nil
	}
	return nil, nil, fmt.Errorf("unknown collective %q", cfg.collective)
}

// prepareDevice is prepare for -mem device: the buffers are GPU memory
// and the calls go straight to NCCL, as nccl-tests measures.
func prepareDevice(pg comm.ProcessGroup, cfg benchConfig, count int) (func() comm.Work, func(), error) {
	dc, ok := nccl.AsDevice(pg)
	if !ok {
		return nil, nil, fmt.Errorf("-mem device needs the nccl backend, not %q", pg.Backend())
	}
	var frees []func() error
	release := func() {
		for _, f := range frees {
			f()
		}
	}
	alloc := func(count int) (nccl.DeviceBuffer, error) {
		b, free, err := nccl.AllocDevice(pg, filled(cfg.dtype, count))
		if err == nil {
			frees = append(frees, free)
		}
		return b, err
	}
	n := pg.Size()
	buf, err := alloc(count)
	var other nccl.DeviceBuffer
	if err == nil && (cfg.collective == "allgather" || cfg.collective == "reducescatter") {
		other, err = alloc(count / n)
	}
	if err != nil {
		release()
		return nil, nil, err
	}
	switch cfg.collective {
	case "allreduce":
		return func() comm.Work { return dc.AllReduceDevice(buf, cfg.op) }, release, nil
	case "broadcast":
		return func() comm.Work { return dc.BroadcastDevice(buf, 0) }, release, nil
	case "allgather":
		return func() comm.Work { return dc.AllGatherDevice(buf, other) }, release, nil
	case "reducescatter":
		return func() comm.Work { return dc.ReduceScatterDevice(other, buf, cfg.op) }, release, nil
	}
	release()
	return nil, nil, fmt.Errorf("unknown collective %q", cfg.collective)
}

// filled returns a buffer of count ones (as the anchors use).
func filled(dt comm.DType, count int) comm.Buffer {
	switch dt {
	case comm.Float32:
		return comm.Float32s(ones(count, float32(1)))
	case comm.Float64:
		return comm.Float64s(ones(count, float64(1)))
	case comm.Int32:
		return comm.Int32s(ones(count, int32(1)))
	case comm.Int64:
		return comm.Int64s(ones(count, int64(1)))
	case comm.Float16:
		return comm.Float16s(ones(count, uint16(0x3c00))) // 1.0 in IEEE half
	default:
		return comm.BFloat16s(ones(count, uint16(0x3f80))) // 1.0 in bfloat16
	}
}

// ones returns count copies of one.
func ones[T any](count int, one T) []T {
	x := make([]T, count)
	for i := range x {
		x[i] = one
	}
	return x
}
