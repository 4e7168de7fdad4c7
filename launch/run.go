package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// agent is one node's launcher during Run.
type agent struct {
	cfg            Config
	prog           *program
	spawner        *spawner
	stdout, stderr *console
	stores         storeDriver
	token          string
	host           string
	logRoot        string
}

func (a *agent) logf(format string, args ...any) {
	fmt.Fprintf(a.cfg.Log, "ddprun: "+format+"\n", args...)
}

// Run launches, supervises and restarts this node's workers until they all
// succeed, a failure exhausts --max-restarts, the rendezvous fails, or ctx
// ends. When ctx is canceled with a *SignalError cause, that signal is
// forwarded to the workers; otherwise they get SIGTERM. In every case the
// workers are stopped (SIGKILL after Config.StopGrace) before Run returns.
//
// The returned error matches one of ErrUsage, ErrProgram, ErrNoGPU,
// ErrRendezvous, ErrWorkerFailed (a *FailureError) or ErrInterrupted;
// ExitCode turns it into ddprun's exit status.
func Run(ctx context.Context, cfg Config) error {
	return run(ctx, cfg, commStores{})
}

func run(ctx context.Context, cfg Config, stores storeDriver) (err error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.Stdout == nil {
		cfg.Stdout = os.Stdout
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	if cfg.Log == nil {
		cfg.Log = cfg.Stderr
	}
	a := &agent{
		cfg: cfg, stores: stores, host: hostname(),
		stdout: &console{w: cfg.Stdout}, stderr: &console{w: cfg.Stderr},
	}
	if cs, ok := stores.(commStores); ok && cs.logf == nil {
		cs.logf = func(format string, args ...any) { a.logf("store: "+format, args...) }
		a.stores = cs
	}
	if a.token, err = a.jobToken(); err != nil {
		return err
	}
	if cfg.Standalone && cfg.RdzvID == "none" {
		a.cfg.RdzvID = newRunID()
	}
	a.sweepStale()
	// The spawner starts the build too: a launcher killed mid-build takes
	// the go command with it (Pdeathsig).
	a.spawner = newSpawner()
	defer a.spawner.close()
	b := builder{flags: cfg.BuildFlags, cache: cfg.BuildCache, start: a.spawner.start, log: a.logf}
	if a.prog, err = resolveProgram(ctx, cfg.Program, b); err != nil {
		return a.interrupted(ctx, err) // a signal during the build is not a build error
	}
	defer a.prog.cleanup()
	if err := checkGPU(a.prog.path, cfg.RequireGPU); err != nil {
		return err
	}
	cleanupLogs, err := a.makeLogRoot()
	if err != nil {
		return err
	}
	defer cleanupLogs()

	var rd rendezvous = &localRdzv{a: a}
	if cfg.multiNode() {
		rd = newStoreRdzv(a)
	}
	defer rd.close()

	err = a.loop(ctx, rd)
	if errors.Is(err, ErrInterrupted) {
		rd.shutdown(fmt.Sprintf("ddprun on %s (node rank %d) stopped: %v", a.host, cfg.NodeRank, err))
	}
	return err
}

// loop runs rounds until the job ends.
func (a *agent) loop(ctx context.Context, rd rendezvous) error {
	cfg := &a.cfg
	restarts := 0
	for round := 0; ; round++ {
		asg, err := rd.join(ctx, round, restarts)
		if err != nil {
			return a.interrupted(ctx, err)
		}
		round, restarts = asg.Round, asg.RestartCount
		res, err := a.runRound(ctx, rd, asg)
		rd.endRound(asg)
		if err != nil {
			return err
		}
		switch {
		case res.membership:
			a.logf("nodes are waiting to join: re-rendezvous (not counted as a restart)")
			continue
		case res.failure == nil:
			a.logf("all %d workers of this node finished successfully", cfg.NProcPerNode)
			return nil
		}
		ferr := &FailureError{Root: *res.failure, Others: res.others, Restarts: restarts}
		left := asg.MaxRestarts - restarts
		if left > 0 {
			a.logf("worker group failed (attempt %d); restarting, %d restart(s) left\n%s", restarts, left, ferr.Report())
			restarts++
			continue
		}
		a.logf("worker group failed (attempt %d, no restarts left)\n%s", restarts, ferr.Report())
		return ferr
	}
}

// roundResult is how a round ended when it did not end with an error.
type roundResult struct {
	failure    *WorkerFailure // nil: success (or membership change)
	others     []WorkerFailure
	membership bool
}

func (a *agent) runRound(ctx context.Context, rd rendezvous, asg *assignment) (roundResult, error) {
	dir := filepath.Join(a.logRoot, fmt.Sprintf("attempt_%d", asg.Round))
	g, err := a.startGroup(groupSpec{asg: asg, attempt: asg.RestartCount, dir: dir})
	if err != nil {
		return roundResult{}, err
	}
	a.logf("started %d worker(s): ranks %d..%d of world size %d (node %d of %d, attempt %d, store %s:%d)",
		len(g.workers), asg.RankOffset, asg.RankOffset+len(g.workers)-1, asg.WorldSize,
		asg.GroupRank, asg.GroupWorldSize, asg.RestartCount, asg.MasterAddr, asg.MasterPort)
	// However the round ends, its workers are gone by now: sweep what the
	// dead ones left in /dev/shm.
	defer a.sweepWorkerShm()
	return a.supervise(ctx, g, rd, asg)
}

// supervise waits for the round to end: all workers done, a local or remote
// failure, a membership change, a lost store, or ctx.
func (a *agent) supervise(ctx context.Context, g *group, rd rendezvous, asg *assignment) (roundResult, error) {
	grace := a.cfg.StopGrace
	tick := time.NewTicker(a.cfg.MonitorInterval)
	defer tick.Stop()
	for {
		select {
		case e := <-g.exits:
			w := g.record(e)
			if !w.exit.ok() {
				f := a.failureOf(w, asg, asg.RestartCount)
				a.logf("%s; stopping the other workers", f.Error())
				// Workers that already failed on their own are reported too;
				// what exits after the stop signal was stopped by us.
				others := a.drainFailures(g, asg)
				root := rd.fail(ctx, asg, f)
				g.stop(syscall.SIGTERM, grace)
				if root.GroupRank != f.GroupRank || root.Rank != f.Rank {
					others = append([]WorkerFailure{f}, others...)
				}
				return roundResult{failure: &root, others: others}, nil
			}
			if g.alive > 0 {
				continue
			}
			ev, err := rd.done(ctx, asg)
			if err != nil {
				return roundResult{}, a.interrupted(ctx, err)
			}
			if ev != nil && ev.failure != nil {
				return roundResult{failure: ev.failure}, nil
			}
			return roundResult{}, nil
		case <-tick.C:
			ev, err := rd.watch(ctx, asg)
			if err == nil && ev == nil {
				continue
			}
			g.stop(syscall.SIGTERM, grace)
			switch {
			case err != nil:
				return roundResult{}, a.interrupted(ctx, err)
			case ev.membership:
				return roundResult{membership: true}, nil
			}
			a.logf("a worker on node %d failed; stopping this node's workers", ev.failure.GroupRank)
			return roundResult{failure: ev.failure}, nil
		case <-ctx.Done():
			sig := syscall.SIGTERM
			var se *SignalError
			if errors.As(context.Cause(ctx), &se) && se.Signal != syscall.SIGKILL {
				sig = se.Signal
			}
			a.logf("stopping %d worker(s) with %s", g.alive, signalName(sig))
			g.stop(sig, grace)
			return roundResult{}, a.interrupted(ctx, ctx.Err())
		}
	}
}

// drainFailures collects workers that exited badly before the stop.
func (a *agent) drainFailures(g *group, asg *assignment) []WorkerFailure {
	var out []WorkerFailure
	for {
		select {
		case e := <-g.exits:
			w := g.record(e)
			if !w.exit.ok() {
				out = append(out, a.failureOf(w, asg, asg.RestartCount))
			}
		default:
			return out
		}
	}
}

// interrupted turns an error seen while ctx ended into the signal error.
func (a *agent) interrupted(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		return err
	}
	var se *SignalError
	if cause := context.Cause(ctx); errors.As(cause, &se) {
		return se
	} else if cause != nil && !errors.Is(cause, context.Canceled) {
		return fmt.Errorf("%w: %w", ErrInterrupted, cause)
	}
	return fmt.Errorf("%w: %w", ErrInterrupted, ctx.Err())
}

// jobToken is Config.Token, else $GODDP_TOKEN (Config.Env first), else a
// fresh random one for a single-node job.
func (a *agent) jobToken() (string, error) {
	if a.cfg.Token != "" {
		return a.cfg.Token, nil
	}
	if t := lookupEnv(append(os.Environ(), a.cfg.Env...), EnvToken); t != "" {
		return t, nil
	}
	if a.cfg.multiNode() {
		return "", usagef("a multi-node job needs the same secret %s on every node (e.g. export %s=$(openssl rand -hex 32) and share it)", EnvToken, EnvToken)
	}
	t, err := newToken()
	if err != nil {
		return "", fmt.Errorf("launch: generate job token: %w", err)
	}
	return t, nil
}

// makeLogRoot creates the per-run log directory: under --log-dir, or a temp
// dir that is removed at the end unless --redirects/--tee wrote files to it.
func (a *agent) makeLogRoot() (func(), error) {
	if a.cfg.LogDir != "" {
		a.logRoot = filepath.Join(a.cfg.LogDir, a.cfg.RdzvID)
		if err := os.MkdirAll(a.logRoot, 0o755); err != nil {
			return nil, fmt.Errorf("%w: --log-dir: %w", ErrUsage, err)
		}
		return func() {}, nil
	}
	if a.cfg.Redirects.Any() || a.cfg.Tee.Any() {
		// Kept on purpose, a kill included: no owner in the name, so no
		// sweep removes it.
		dir, err := os.MkdirTemp("", "ddprun-"+a.cfg.RdzvID+"-")
		if err != nil {
			return nil, fmt.Errorf("launch: temp log dir: %w", err)
		}
		a.logRoot = dir
		a.logf("worker logs go to %s", dir)
		return func() {}, nil
	}
	d, err := makeOwnedDir("", "ddprun-"+a.cfg.RdzvID+"-")
	if err != nil {
		return nil, fmt.Errorf("launch: temp log dir: %w", err)
	}
	a.logRoot = d.path
	return d.remove, nil
}

// sweepStale removes what launchers killed before their cleanup left: their
// temp log dirs and per-run build dirs, the scratch dirs of their builds in
// the build cache, and their workers' shared-memory files. Only what
// belongs to a dead process goes (see owned_dir.go), so launchers running
// beside this one keep theirs.
func (a *agent) sweepStale() {
	removed := sweepOwnedDirs(os.TempDir(), "ddprun-", true)
	removed = append(removed, sweepBuildScratch(a.cfg.BuildCache)...)
	for _, p := range removed {
		a.logf("removed %s, left by a launcher that was killed", p)
	}
	a.sweepWorkerShm()
}

var _ io.Writer = (*lineWriter)(nil)
