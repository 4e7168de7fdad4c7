package comm

import (
	"fmt"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// Waiting. A rank waits for a peer's counter to reach a step number. The
// wait escalates: a pure spin first (a peer on another core answers within
// a microsecond or two, and any syscall would cost more than that), then
// yielding the CPU (runtime.Gosched for the other goroutines of this
// process and sched_yield for the other processes on this core: with more
// ranks than cores, a spinning rank would otherwise steal the time slice of
// the very rank it waits for), then sleeping with a growing period. While
// it yields or sleeps it checks, a few times per second, that the peers are
// still alive, and every iteration whether a peer aborted or the group is
// closing, so no wait outlives a dead peer or the op's deadline.

const (
	shmSpinIters     = 1 << 10               // pure spin before the clock is read
	shmSpinFor       = 20 * time.Microsecond // spin (reading the clock) until then
	shmYieldFor      = 2 * time.Millisecond  // then yield until then, then sleep
	shmSleepMax      = time.Millisecond      // longest sleep between checks
	shmLivenessEvery = 50 * time.Millisecond // /proc check period while waiting
)

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
	return g.awaitSlow(op, k, off, target)
}

func (g *shmGroup) awaitSlow(op *shmOp, k, off int, target uint64) error {
	c := g.seg.ctl(k, off)
	start := time.Now()
	nextLive := start.Add(shmLivenessEvery)
	sleep := 20 * time.Microsecond
	for i := 0; ; i++ {
		if c.Load() >= target {
			return nil
		}
		now := time.Now()
		spinning := now.Sub(start) < shmSpinFor
		if spinning && i&63 != 0 {
			continue
		}
		if err := g.checkPeers(op, k, off, target, now, &nextLive); err != nil {
			// The counter may have moved just before the peer exited or closed.
			if c.Load() >= target {
				return nil
			}
			return err
		}
		switch {
		case spinning:
		case now.Sub(start) < shmYieldFor:
			runtime.Gosched()
			syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
		default:
			time.Sleep(sleep)
			sleep = min(2*sleep, shmSleepMax)
		}
	}
}

// checkPeers returns the error that ends a wait on rank k, if any: the group
// closing, a peer that closed or aborted, the deadline, or a dead process.
func (g *shmGroup) checkPeers(op *shmOp, k, off int, target uint64, now time.Time, nextLive *time.Time) error {
	if g.closing.Load() {
		return fmt.Errorf("%w: shm %s on rank %d: group closed while waiting for rank %d", ErrClosed, op.describe(), g.rank, k)
	}
	if err := g.peerStatusErr(op, k); err != nil {
		return err
	}
	if now.After(op.deadline) {
		return fmt.Errorf("%w: shm %s on rank %d: waited %v for rank %d to %s step %d (it is at step %d)",
			ErrTimeout, op.describe(), g.rank, now.Sub(op.deadline.Add(-g.opTimeout(op))).Round(time.Millisecond),
			k, shmCounterVerb(off), target, g.seg.ctl(k, off).Load())
	}
	if now.After(*nextLive) {
		*nextLive = now.Add(shmLivenessEvery)
		// The waited-for rank first, then the others: a dead rank elsewhere
		// stalls the collective just the same.
		if err := g.livenessErr(op, k); err != nil {
			return err
		}
		for j := 0; j < g.size; j++ {
			if j != k && j != g.rank {
				if err := g.livenessErr(op, j); err != nil {
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
		return "post its data for"
	case shmCtlReduced:
		return "reduce its slice of"
	}
	return "finish reading"
}

// peerStatusErr reports a peer that closed its group or aborted.
func (g *shmGroup) peerStatusErr(op *shmOp, k int) error {
	switch g.seg.ctl(k, shmCtlStatus).Load() {
	case shmStatusClosed:
		return fmt.Errorf("%w: shm %s on rank %d: rank %d closed the group", ErrPeerFailed, op.describe(), g.rank, k)
	case shmStatusAborted:
		msg := g.seg.msg(k)
		// Point at the root cause: the aborting rank's own message names
		// the rank it was waiting for.
		return fmt.Errorf("%w: shm %s on rank %d: rank %d aborted: %s", ErrPeerFailed, op.describe(), g.rank, k,
			strings.TrimPrefix(msg, "comm: "))
	}
	return nil
}

// livenessErr reports rank k's process as gone.
func (g *shmGroup) livenessErr(op *shmOp, k int) error {
	if !g.pidUsable[k] || shmProcAlive(g.pids[k], g.starts[k]) {
		return nil
	}
	return fmt.Errorf("%w: shm %s on rank %d: rank %d (pid %d) died", ErrPeerFailed, op.describe(), g.rank, k, g.pids[k])
}
