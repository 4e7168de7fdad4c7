package shm

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/internal/procstat"
)

// Waiting. A rank waits for a peer's counter to reach a step number. The
// wait escalates (the budgets below depend on whether every rank has a
// core of its own, and on what a context switch costs next to a peer's
// answer; they were measured with 2 ranks on 2 cores): a pure spin first (a peer on another core answers within a microsecond or two,
// and any syscall would cost more than that), then yielding the CPU
// (sched_yield for the other processes on this core, and now and then
// runtime.Gosched for the other goroutines of this process: with more ranks
// than cores, a spinning rank would otherwise steal the time slice of the
// very rank it waits for), then sleeping with a growing period. While it
// yields or sleeps it checks, 20 times a second, that the peers are still
// alive, and every iteration whether a peer aborted, the group is closing
// or the caller's ctx ended, so no wait outlives a dead peer or the op's
// deadline.

const (
	shmSpinIters     = 1 << 10                // pure spin before the slow path
	shmSpinLong      = 2 * time.Millisecond   // spin budget when every rank can have a core
	shmSpinShort     = 10 * time.Microsecond  // spin budget when ranks outnumber cores
	shmYieldFor      = 100 * time.Millisecond // then yield until then, then sleep
	shmSleepMax      = time.Millisecond       // longest sleep between checks
	shmLivenessEvery = 50 * time.Millisecond  // /proc check period while waiting
)

// shmSpinBudget picks how long a wait spins before yielding.
// With as many ranks as cores and other processes loading them, yielding
// after 20us made two ranks
// hand the CPU to other processes in turn, and every other 4 KiB
// all-reduce took ~50us instead of ~1.2us; spinning 2ms keeps the median at
// 1.2us. When ranks outnumber cores, though, a spinning rank burns the time
// slice the rank it waits for needs, so it yields almost at once.
// Config.Spin (GODDP_SHM_SPIN) overrides it for this process.
func shmSpinBudget(world int) time.Duration {
	if world <= runtime.NumCPU() {
		return shmSpinLong
	}
	return shmSpinShort
}

// spinBudget is how long a wait spins before it yields: spinFor while some
// goroutine of this process is blocked in Wait on the group (it has nothing
// else to do, and a spin answers fastest), but only shmSpinShort while
// none is. Then the op runs asynchronously beside the caller's compute, as
// DDP's bucket all-reduces run beside backward, and a long spin takes the
// core from that compute: with 2 ranks on 2 cores, examples/mlp ran at
// 22.6-32.2k samples/s with a 2ms spin and 26.2-36.2k with 20us, in three
// interleaved pairs. It is read on every clock check, so the spin resumes
// as soon as the caller starts waiting.
func (g *shmGroup) spinBudget() time.Duration {
	if g.waiters.Load() > 0 {
		return g.spinFor
	}
	return min(g.spinFor, shmSpinShort)
}

// shmYieldFor (above) is how long a wait yields before it sleeps. A yielding
// rank stays runnable, a sleeping one does not: on a loaded 2-core host,
// sleeping after 4ms let the two ranks of a 4 KiB all-reduce stall each
// other in turn (worst runs at 0.2 GB/s, median 2.4us), yielding for 100ms
// kept the worst at 0.7 GB/s and the median at 1.6us (OpenMPI: 0.9, 1.3us).
// Waits longer than that (a rank far behind the others) sleep, so an idle
// rank does not hold a core. Config.Yield (GODDP_SHM_YIELD) overrides it
// for this process.

// await blocks until rank k's counter at control offset off reaches target.
func (g *shmGroup) await(op *shmOp, k, off int, target uint64) error {
	c := g.seg.ctl(k, off)
	if c.Load() >= target {
		return nil
	}
	for i := 0; i < shmSpinIters; i++ {
		if c.Load() >= target {
			return nil
		}
	}
	return g.awaitSlow(op, k, c, target, shmCounterVerb(off))
}

// awaitSlow waits for word c, which rank k advances, to reach target; what
// says what rank k is to do, for the timeout message.
func (g *shmGroup) awaitSlow(op *shmOp, k int, c *atomic.Uint64, target uint64, what string) error {
	start := time.Now()
	if op.deadline.IsZero() {
		// The op's clock starts at its first wait that had to spin: the
		// fast path reads no clock at all.
		op.deadline = start.Add(g.opTimeout(op))
	}
	nextLive := start.Add(shmLivenessEvery)
	sleep := 20 * time.Microsecond
	for i := 0; ; i++ {
		// Spin between clock reads: a clock read costs far more than a
		// load, more so in a VM.
		for j := 0; j < 256; j++ {
			if c.Load() >= target {
				return nil
			}
		}
		now := time.Now()
		if err := g.checkPeers(op, k, c, target, what, now, &nextLive); err != nil {
			// The counter may have moved just before the peer exited or closed.
			if c.Load() >= target {
				return nil
			}
			return err
		}
		switch waited := now.Sub(start); {
		case waited < g.spinBudget():
		case waited < g.yieldFor:
			// sched_yield lets another process run on this core. Gosched
			// (for the other goroutines of this process, e.g. ranks that
			// are goroutines in a test) wakes another thread, so only now
			// and then.
			syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
			if i&15 == 0 {
				runtime.Gosched()
			}
		default:
			time.Sleep(sleep)
			sleep = min(2*sleep, shmSleepMax)
		}
	}
}

// checkPeers returns the error that ends a wait on rank k, if any: the group
// closing, the caller's ctx ending, a peer that closed or aborted, the
// deadline, or a dead process. Past the stall threshold it also reports the
// wait once through Logf.
func (g *shmGroup) checkPeers(op *shmOp, k int, c *atomic.Uint64, target uint64, what string, now time.Time, nextLive *time.Time) error {
	if g.closing.Load() {
		return g.opError(op, backend.ErrClosed, nil, fmt.Sprintf("group closed while waiting for rank %d", k), nil)
	}
	if op.ctx != nil {
		select {
		case <-op.ctx.Done():
			kind := backend.ErrClosed
			if errors.Is(op.ctx.Err(), context.DeadlineExceeded) {
				kind = backend.ErrTimeout
			}
			return g.opError(op, kind, nil, fmt.Sprintf("the caller's context ended while waiting for rank %d", k), op.ctx.Err())
		default:
		}
	}
	if err := g.peerStatusErr(op, k); err != nil {
		return err
	}
	waited := now.Sub(op.deadline.Add(-g.opTimeout(op)))
	if now.After(op.deadline) {
		return g.opError(op, backend.ErrTimeout, []int{k}, fmt.Sprintf("waited %v for rank %d to %s %d (it is at %d)",
			waited.Round(time.Millisecond), k, what, target, c.Load()), nil)
	}
	if g.stall > 0 && waited > g.stall && !op.stallReported {
		op.stallReported = true
		g.stallf("comm: shm %s on rank %d has waited %v for rank %d to %s %d (it is at %d)",
			op.describe(), g.rank, waited.Round(time.Second), k, what, target, c.Load())
	}
	if now.After(*nextLive) {
		*nextLive = now.Add(shmLivenessEvery)
		// The waited-for rank first, then, for a collective, the others: a
		// rank elsewhere that died in the middle stalls the collective
		// just the same. A send or receive needs its peer alone.
		if err := g.livenessErr(op, k); err != nil {
			return err
		}
		if op.kind == shmSend || op.kind == shmRecv {
			return nil
		}
		for j := 0; j < g.size; j++ {
			if j != k && j != g.rank {
				if err := g.bystanderErr(op, j); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (g *shmGroup) opTimeout(op *shmOp) time.Duration {
	if op.timeout > 0 {
		return op.timeout
	}
	return g.timeout
}

func shmCounterVerb(off int) string {
	switch off {
	case shmCtlPosted:
		return "post its data for step"
	case shmCtlReduced:
		return "reduce its slice of step"
	}
	return "finish reading step"
}

// opError builds the error of a failed op: kind is the sentinel, peers the
// ranks at fault. The message reads, e.g.,
// "comm: timeout: allreduce #57 (4096 bytes) on rank 0: shm float32 sum: waited 10m0s for rank 3 to ...".
func (g *shmGroup) opError(op *shmOp, kind error, peers []int, detail string, cause error) error {
	return &backend.OpError{
		Kind: kind, Op: op.kind.String(), Seq: op.seq, Bytes: op.descBytes(), Rank: g.rank,
		Peers: peers, Detail: "shm " + op.detail() + detail, Err: cause,
	}
}

// peerStatusErr reports a peer that closed its group or aborted.
func (g *shmGroup) peerStatusErr(op *shmOp, k int) error {
	switch g.seg.ctl(k, shmCtlStatus).Load() {
	case shmStatusClosed:
		return g.opError(op, backend.ErrPeerFailed, []int{k}, fmt.Sprintf("rank %d closed the group", k), nil)
	case shmStatusAborted:
		// Blame the rank the aborting peer blamed (the root cause), and
		// quote its reason.
		peers := []int{k}
		if b := g.seg.ctl(k, shmCtlBlame).Load(); b > 0 && int(b-1) < g.size && int(b-1) != g.rank {
			peers = []int{int(b - 1)}
		}
		return g.opError(op, backend.ErrPeerFailed, peers, fmt.Sprintf("rank %d aborted: %s", k,
			strings.TrimPrefix(g.seg.msg(k), "comm: ")), nil)
	}
	return nil
}

// bystanderErr reports rank j, which this wait is not waiting for, as
// gone, unless it closed its group cleanly. A rank closes once its part of
// every op is done (a Close in the middle of a collective fails the
// collective, which marks the rank aborted), and what it left in its slots
// stays readable in the segment after it exits, so its peers may still be
// finishing an op it has finished: the last op of a job (a gather's
// non-root ranks post and go; a rank of a ring exchange done with its
// neighbours), between ranks that run at different speeds. Before issue
// 43 such a rank failed its slower peers ("rank 3 closed the group", on a
// rank waiting for rank 0). A rank that closed before its part is waited
// for in its turn, and the wait on it fails naming it.
func (g *shmGroup) bystanderErr(op *shmOp, j int) error {
	if g.seg.ctl(j, shmCtlStatus).Load() == shmStatusClosed {
		return nil
	}
	return g.livenessErr(op, j)
}

// livenessErr reports rank k's process as gone.
func (g *shmGroup) livenessErr(op *shmOp, k int) error {
	if !g.pidUsable[k] || procstat.Alive(g.pids[k], g.starts[k]) {
		return nil
	}
	// It may have aborted (blaming another rank) and then exited.
	if err := g.peerStatusErr(op, k); err != nil {
		return err
	}
	return g.opError(op, backend.ErrPeerFailed, []int{k}, fmt.Sprintf("rank %d (pid %d) died", k, g.pids[k]), nil)
}
