package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/ddp"
	"github.com/goddp/goddp/tensor"
)

// syncConfig is the parsed command line of `ddpbench sync`.
type syncConfig struct {
	profile  string
	backends []string
	nprocs   []int
	caps     []float64
	hooks    []string
	static   []bool
	views    []bool
	overlaps []bool
	inPlaces []bool
	compute  string
	gflops   float64
	batch    int
	iters    int
	warmup   int
	format   string
	plot     string
	timeout  time.Duration
	bind     string
	procs    int
	emitRows bool // internal: a spawned job's rank 0 prints JSON rows for the launcher
	cpuProf  string
	timeline string
}

// syncRow is one configuration's result.
type syncRow struct {
	Profile     string  `json:"profile"`
	Backend     string  `json:"backend"`
	NProc       int     `json:"nproc"`
	BucketCapMB float64 `json:"bucket_cap_mb"`
	Hook        string  `json:"hook"`
	StaticGraph bool    `json:"static_graph"`
	BucketView  bool    `json:"bucket_view"`
	Overlap     bool    `json:"overlap"`
	InPlace     bool    `json:"in_place"`
	Compute     string  `json:"compute"`
	GradBytes   int64   `json:"grad_bytes"`
	Buckets     int     `json:"buckets"`
	IterMS      float64 `json:"iter_ms"`  // slowest rank's median DDP iteration
	LocalMS     float64 `json:"local_ms"` // rank 0's median iteration of the same loop without DDP
	SyncMS      float64 `json:"sync_ms"`
	SyncGBps    float64 `json:"sync_gbps"`
	HiddenPct   float64 `json:"hidden_pct"` // mean over ranks of DDP's Total.HiddenFraction
	CommMS      float64 `json:"comm_ms"`    // slowest rank's mean all-reduce time per iteration (DDP's Total.Comm)
	Iters       int     `json:"iters"`
}

func parseSyncArgs(args []string, stderr io.Writer) (syncConfig, error) {
	var c syncConfig
	fs := flag.NewFlagSet("ddpbench sync", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.profile, "profile", "resnet50", "parameter profile: resnet50, gpt2 or a FILE.json")
	backends := fs.String("backend", "auto", "comm backends, comma-separated: tcp, shm, auto, mpi, nccl, ...")
	nprocs := fs.String("nproc", "2", "ranks to spawn, comma-separated (ignored under a launcher)")
	caps := fs.String("bucket-cap-mb", "25", "DDP bucket caps in MiB, comma-separated (e.g. 1,5,25,100)")
	hooks := fs.String("hook", "none", "comm hooks, comma-separated: none, fp16, bf16")
	static := fs.String("static-graph", "false", "static_graph settings, comma-separated: false, true")
	views := fs.String("bucket-view", "false", "gradient_as_bucket_view settings, comma-separated: false, true")
	overlaps := fs.String("overlap", "true", "all-reduce beside backward (true) or each bucket at once, blocking backward (false; ddp.OverlapComm), comma-separated")
	inPlaces := fs.String("inplace", "true", "reduce gradients where they lie (true) or copy them into the bucket and back (false; ddp.ReduceInPlace), comma-separated")
	fs.StringVar(&c.compute, "compute", "none", "backward compute: none (pure sync) or flops (each layer's backward FLOPs at -gflops)")
	fs.Float64Var(&c.gflops, "gflops", 100, "compute rate for -compute flops, GFLOP/s")
	fs.IntVar(&c.batch, "batch", 1, "samples per rank for -compute flops (the profile's flops_unit)")
	fs.IntVar(&c.iters, "iters", 20, "timed iterations per configuration (median reported)")
	fs.IntVar(&c.warmup, "warmup", 3, "untimed iterations per configuration")
	fs.StringVar(&c.format, "format", "table", "output format: table or csv")
	fs.StringVar(&c.plot, "plot", "", "write a sync-GB/s-vs-bucket-cap plot to this PNG/SVG/PDF file")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Minute, "per-op and rendezvous timeout")
	fs.StringVar(&c.bind, "bind", "core", "pin each rank to one CPU by local rank (core) or not (none)")
	fs.IntVar(&c.procs, "procs", 1, "GOMAXPROCS of a rank pinned by -bind core (2: backward and communication on two threads of its core)")
	fs.StringVar(&c.cpuProf, "cpuprofile", "", "write each rank's CPU profile to FILE.rankN (where DDP spends its time)")
	fs.StringVar(&c.timeline, "timeline", "", "write a Chrome trace of every DDP configuration to FILE.capX... (rank 0 gathers)")
	fs.BoolVar(&c.emitRows, "emit-rows", false, "internal: print JSON rows (used between the launcher and its ranks)")
	if err := fs.Parse(args); err != nil {
		return c, errUsage
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	c.backends = splitList(*backends)
	c.hooks = splitList(*hooks)
	var err error
	if c.nprocs, err = parseList(*nprocs, "-nproc", strconv.Atoi); err != nil {
		return c, err
	}
	if c.caps, err = parseList(*caps, "-bucket-cap-mb", func(s string) (float64, error) { return strconv.ParseFloat(s, 64) }); err != nil {
		return c, err
	}
	if c.static, err = parseList(*static, "-static-graph", strconv.ParseBool); err != nil {
		return c, err
	}
	if c.views, err = parseList(*views, "-bucket-view", strconv.ParseBool); err != nil {
		return c, err
	}
	if c.overlaps, err = parseList(*overlaps, "-overlap", strconv.ParseBool); err != nil {
		return c, err
	}
	if c.inPlaces, err = parseList(*inPlaces, "-inplace", strconv.ParseBool); err != nil {
		return c, err
	}
	switch {
	case len(c.backends) == 0 || len(c.hooks) == 0:
		return c, fmt.Errorf("-backend and -hook need at least one value")
	case slices.ContainsFunc(c.nprocs, func(n int) bool { return n < 1 }):
		return c, fmt.Errorf("-nproc %q: want counts >= 1", *nprocs)
	case slices.ContainsFunc(c.caps, func(v float64) bool { return !(v > 0) }):
		return c, fmt.Errorf("-bucket-cap-mb %q: want sizes > 0", *caps)
	case c.compute != "none" && c.compute != "flops":
		return c, fmt.Errorf("-compute %q: want none or flops", c.compute)
	case c.compute == "flops" && (!(c.gflops > 0) || c.batch < 1):
		return c, fmt.Errorf("-compute flops needs -gflops > 0 and -batch >= 1")
	case c.format != "table" && c.format != "csv":
		return c, fmt.Errorf("-format %q: want table or csv", c.format)
	case c.bind != "core" && c.bind != "none":
		return c, fmt.Errorf("-bind %q: want core or none", c.bind)
	case c.procs < 1:
		return c, fmt.Errorf("-procs %d: want >= 1", c.procs)
	case c.iters < 1 || c.warmup < 0:
		return c, fmt.Errorf("-iters must be >= 1 and -warmup >= 0")
	}
	for _, h := range c.hooks {
		if _, err := commHook(h); err != nil {
			return c, err
		}
	}
	return c, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func parseList[T any](s, flagName string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for _, f := range splitList(s) {
		v, err := parse(f)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", flagName, s, err)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no value", flagName)
	}
	return out, nil
}

func commHook(name string) (ddp.CommHook, error) {
	switch name {
	case "none":
		return nil, nil
	case "fp16":
		return ddp.FP16CompressHook(), nil
	case "bf16":
		return ddp.BF16CompressHook(), nil
	}
	return nil, fmt.Errorf("-hook %q: want none, fp16 or bf16", name)
}

// syncMain is `ddpbench sync`: started by hand it spawns one job per
// backend and rank count and reports them together; started by a launcher
// it is one rank of a single job.
func syncMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseSyncArgs(args, stderr)
	if err != nil {
		if err != errUsage {
			fmt.Fprintln(stderr, "ddpbench sync:", err)
		}
		return 2
	}
	prof, err := loadProfile(cfg.profile)
	if err == nil && cfg.compute == "flops" && !prof.hasFlops() {
		err = fmt.Errorf("-compute flops: profile %s has no backward_flops", prof.Name)
	}
	if err != nil {
		fmt.Fprintln(stderr, "ddpbench sync:", err)
		return 2
	}
	var rows []syncRow
	if startedByLauncher() {
		if len(cfg.backends) > 1 {
			fmt.Fprintln(stderr, "ddpbench sync: under a launcher give one -backend")
			return 2
		}
		rows, err = runSyncRank(ctx, cfg, prof)
		if err == nil && rows == nil {
			return 0 // not rank 0
		}
		if err == nil && cfg.emitRows {
			enc := json.NewEncoder(stdout)
			for _, r := range rows {
				if err = enc.Encode(r); err != nil {
					break
				}
			}
			if err == nil {
				return 0
			}
		}
	} else {
		rows, err = launchSync(ctx, cfg, args, stderr)
	}
	if err == nil {
		err = reportSync(stdout, cfg, prof, rows)
	}
	if err != nil {
		fmt.Fprintln(stderr, "ddpbench sync:", err)
		return 1
	}
	return 0
}

// launchSync runs one job per (backend, nproc), each through launch (the
// ranks re-execute this binary), and gathers rank 0's rows.
func launchSync(ctx context.Context, cfg syncConfig, args []string, stderr io.Writer) ([]syncRow, error) {
	var rows []syncRow
	for _, be := range cfg.backends {
		for _, n := range cfg.nprocs {
			child := append([]string{"sync"}, args...)
			child = append(child, "-backend", be, "-nproc", strconv.Itoa(n), "-emit-rows", "-plot", "")
			var out bytes.Buffer
			if err := launch(ctx, benchConfig{nproc: n}, child, &out, stderr); err != nil {
				return nil, fmt.Errorf("backend %s, %d ranks: %w", be, n, err)
			}
			sc := bufio.NewScanner(&out)
			for sc.Scan() {
				var r syncRow
				if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
					return nil, fmt.Errorf("backend %s, %d ranks: bad row %q: %w", be, n, sc.Text(), err)
				}
				rows = append(rows, r)
			}
		}
	}
	return rows, nil
}

// computeTimes converts each parameter's backward FLOPs into a spin time.
func computeTimes(cfg syncConfig, p *profile) []time.Duration {
	if cfg.compute != "flops" {
		return nil
	}
	out := make([]time.Duration, len(p.Params))
	for i, q := range p.Params {
		out[i] = time.Duration(q.BackwardFlops * float64(cfg.batch) / cfg.gflops) // ns at GFLOP/s
	}
	return out
}

func (c syncConfig) computeLabel() string {
	if c.compute != "flops" {
		return "none"
	}
	return fmt.Sprintf("flops@%gGF/s*%d", c.gflops, c.batch)
}

// runSyncRank is one rank of one job: every bucket cap x hook x
// static-graph configuration through ddp.Wrap, then the same loop without
// DDP. Rank 0 returns the rows; the others return nil.
func runSyncRank(ctx context.Context, cfg syncConfig, prof *profile) ([]syncRow, error) {
	ccfg, err := comm.ConfigFromEnv()
	if err != nil {
		return nil, err
	}
	ccfg.Backend = cfg.backends[0]
	if cfg.bind == "core" && (ccfg.LocalWorldSize == 0 || ccfg.LocalWorldSize <= runtime.NumCPU()) {
		if _, err := bindToCore(ccfg.LocalRank); err != nil {
			return nil, fmt.Errorf("-bind core: %w", err)
		}
		runtime.GOMAXPROCS(cfg.procs) // one core: more Ps only time-slice it (in the kernel instead of Go's scheduler)
	}
	ccfg.Timeout = cfg.timeout
	pg, err := comm.Init(ctx, ccfg)
	if err != nil {
		return nil, err
	}
	defer pg.Close()

	model := newProfileModel(prof, computeTimes(cfg, prof))
	x := autograd.Const(tensor.Scalar(tensor.Float32, 1))
	var rows []syncRow
	for _, hookName := range cfg.hooks {
		for _, static := range cfg.static {
			for _, view := range cfg.views {
				for _, overlap := range cfg.overlaps {
					for _, inPlace := range cfg.inPlaces {
						for _, capMB := range cfg.caps {
							k := syncKnobs{capMB, hookName, static, view, overlap, inPlace}
							r, err := syncConfigRun(ctx, pg, cfg, model, x, k)
							if err != nil {
								return nil, fmt.Errorf("bucket_cap_mb %g, hook %s, static_graph %v, bucket_view %v, overlap %v, inplace %v: %w",
									capMB, hookName, static, view, overlap, inPlace, err)
							}
							r.Profile, r.Compute = prof.Name, cfg.computeLabel()
							r.GradBytes = prof.gradBytes()
							r.SyncMS = r.IterMS - r.LocalMS
							if r.SyncMS > 0 {
								r.SyncGBps = float64(r.GradBytes) / r.SyncMS / 1e6
							}
							rows = append(rows, r)
						}
					}
				}
			}
		}
	}
	if pg.Rank() != 0 {
		return nil, nil
	}
	return rows, nil
}

// syncConfigRun times one configuration: DDP iterations on every rank, then
// (as torch_grad_sync.py does) the same forward and backward without DDP on
// rank 0 alone while the others wait.
// syncKnobs is one configuration of the sweep.
type syncKnobs struct {
	capMB            float64
	hook             string
	static, view, ov bool
	inPlace          bool
}

func (k syncKnobs) fileSuffix() string {
	name := fmt.Sprintf(".cap%g.%s", k.capMB, k.hook)
	if k.static {
		name += ".static"
	}
	if k.view {
		name += ".view"
	}
	if !k.ov {
		name += ".nooverlap"
	}
	if !k.inPlace {
		name += ".copies"
	}
	return name
}

func syncConfigRun(ctx context.Context, pg comm.ProcessGroup, cfg syncConfig, m *profileModel, x *autograd.Variable,
	k syncKnobs) (syncRow, error) {
	r := syncRow{Backend: pg.Backend(), NProc: pg.Size(), BucketCapMB: k.capMB, Hook: k.hook, StaticGraph: k.static,
		BucketView: k.view, Overlap: k.ov, InPlace: k.inPlace, Iters: cfg.iters}
	hook, _ := commHook(k.hook)
	opts := []ddp.Option{ddp.BucketCapMB(k.capMB), ddp.StaticGraph(k.static), ddp.GradientAsBucketView(k.view),
		ddp.OverlapComm(k.ov), ddp.ReduceInPlace(k.inPlace), ddp.Timeout(cfg.timeout)}
	if hook != nil {
		opts = append(opts, ddp.WithCommHook(hook))
	}
	if cfg.timeline != "" {
		opts = append(opts, ddp.WithTimeline(nil))
	}
	d, err := ddp.Wrap(ctx, m, pg, opts...)
	if err != nil {
		return r, err
	}
	defer d.Close()
	step := func() error {
		out, err := d.Forward(x)
		if err != nil {
			return err
		}
		return out.Backward()
	}
	var prof *os.File
	afterWarmup := func() {
		d.ResetStats()
		if cfg.cpuProf != "" {
			// Only the timed DDP iterations, one file per rank and configuration.
			name := fmt.Sprintf("%s.rank%d", cfg.cpuProf, pg.Rank()) + k.fileSuffix()
			if prof, err = os.Create(name); err == nil {
				err = pprof.StartCPUProfile(prof)
			}
		}
	}
	iter, err2 := timeSteps(step, cfg.warmup, cfg.iters, afterWarmup)
	if prof != nil {
		pprof.StopCPUProfile()
		prof.Close()
	}
	if err == nil {
		err = err2
	}
	if err != nil {
		return r, err
	}
	st := d.Stats()
	r.Buckets = len(st.BucketBytes)
	if cfg.timeline != "" {
		if err := d.WriteTimeline(ctx, cfg.timeline+k.fileSuffix()+".json"); err != nil {
			return r, err
		}
	}
	d.Close()

	if err := pg.Barrier().Wait(ctx); err != nil {
		return r, err
	}
	local := 0.0
	if pg.Rank() == 0 {
		local, err = timeSteps(func() error { return m.Forward(x).Backward() }, cfg.warmup, cfg.iters, nil)
		if err != nil {
			return r, err
		}
	}
	// Slowest rank's DDP median, rank 0's local median, mean hidden fraction.
	comm1 := 0.0
	if st.Iterations > 0 {
		comm1 = st.Total.Comm.Seconds() / float64(st.Iterations)
	}
	red := []float64{iter, local, comm1}
	if err := pg.AllReduce(comm.Float64s(red), comm.Max).Wait(ctx); err != nil {
		return r, err
	}
	hid := []float64{st.Total.HiddenFraction() / float64(pg.Size())}
	if err := pg.AllReduce(comm.Float64s(hid), comm.Sum).Wait(ctx); err != nil {
		return r, err
	}
	r.IterMS, r.LocalMS, r.CommMS, r.HiddenPct = red[0]*1e3, red[1]*1e3, red[2]*1e3, hid[0]*100
	return r, nil
}

// timeSteps runs warmup untimed steps, calls afterWarmup, and returns the
// median seconds of iters timed steps.
func timeSteps(step func() error, warmup, iters int, afterWarmup func()) (float64, error) {
	for i := 0; i < warmup; i++ {
		if err := step(); err != nil {
			return 0, err
		}
	}
	if afterWarmup != nil {
		afterWarmup()
	}
	ts := make([]float64, iters)
	for i := range ts {
		t0 := time.Now()
		if err := step(); err != nil {
			return 0, err
		}
		ts[i] = time.Since(t0).Seconds()
	}
	slices.Sort(ts)
	if n := len(ts); n%2 == 0 {
		return (ts[n/2-1] + ts[n/2]) / 2, nil // statistics.median, as the anchor
	}
	return ts[len(ts)/2], nil
}
