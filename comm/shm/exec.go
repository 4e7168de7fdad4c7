package shm

import (
	"context"
	"errors"
	"fmt"
	"github.com/goddp/goddp/comm/backend"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Execution model. Every rank must run the group's collectives in the same
// order, so a group has one FIFO queue and at most one executor at a time
// (execMu). Two goroutines may execute:
//
//   - the group's worker goroutine, which drains the queue in the
//     background so that an op progresses even if nobody waits on it (DDP
//     issues a bucket and goes on with the backward pass);
//   - the caller itself, inside Wait(ctx): it takes the executor role and
//     runs the queue up to its own op. This
//     saves the two goroutine hand-offs (several microseconds each, and a
//     wake-up that competes for the CPU with the peer ranks on a small
//     host), which is what keeps a 4 KiB all-reduce near one microsecond.
//
// In eager mode large ops wake the worker at once. Small ones do not (a
// goroutine wake-up costs more than the whole op), nor does any op in lazy
// mode (see shmEager): a watchdog goroutine, ticking every g.tick while the
// group is in use, kicks the worker when it finds the same op still waiting
// at the head of the queue after g.kickAfter, so progress never depends on
// Wait being called: an op nobody waits for starts within kickAfter plus a
// tick. In lazy mode it ticks less often (each tick wakes a thread, on a
// core some rank computes on). The watchdog parks after shmWatchdogIdle
// without work.

const (
	shmWatchdogTick  = 500 * time.Microsecond
	shmWatchdogIdle  = 100 * time.Millisecond
	shmLazyTick      = 2 * time.Millisecond
	shmLazyKickAfter = 4 * time.Millisecond
)

// shmOp is one queued collective; it is the Work returned to the caller.
type shmOp struct {
	g        *shmGroup
	kind     shmKind
	buf      backend.Buffer // in-place buffer, or the output
	vec      *shmVec        // AllReduceV's buffers (buf is then empty but for its dtype)
	in       backend.Buffer // input for the out-of-place collectives
	root     int            // also the peer of a send or receive; all-reduce: 1 + the shared buffer's index, 0 if none
	arenaOff int            // all-reduce in a shared buffer: the offset in this rank's region
	tag      int64          // send/receive tag
	rop      backend.ReduceOp
	seq      uint64 // issue number within the group, 1-based

	timeout  time.Duration // overrides the group timeout when > 0 (MonitoredBarrier)
	deadline time.Time     // set by the first wait that reaches the slow path (a clock read costs)
	step0    uint64        // first step of this op

	stallReported bool
	ctx           context.Context // ctx of the Wait running this op inline, if any

	// Completion. The common case, Wait running the op inline, needs no
	// channel: ch is made only for a waiter that has to block.
	done atomic.Bool
	err  error // set before done
	mu   sync.Mutex
	ch   chan struct{}
}

// complete finishes the op with err; it is called exactly once.
func (op *shmOp) complete(err error) {
	op.err = err
	op.mu.Lock()
	op.done.Store(true)
	ch := op.ch
	op.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// doneChan returns a channel closed on completion, or nil if already done.
func (op *shmOp) doneChan() chan struct{} {
	op.mu.Lock()
	defer op.mu.Unlock()
	if op.done.Load() {
		return nil
	}
	if op.ch == nil {
		op.ch = make(chan struct{})
	}
	return op.ch
}

type shmKind uint8

const (
	shmAllReduce shmKind = iota + 1
	shmBroadcast
	shmAllGather
	shmReduceScatter
	shmReduce
	shmGather
	shmScatter
	shmAllToAll
	shmBarrier
	shmMonitoredBarrier
	shmSend
	shmRecv
)

func (k shmKind) String() string {
	switch k {
	case shmAllReduce:
		return "allreduce"
	case shmBroadcast:
		return "broadcast"
	case shmAllGather:
		return "allgather"
	case shmReduceScatter:
		return "reducescatter"
	case shmReduce:
		return "reduce"
	case shmGather:
		return "gather"
	case shmScatter:
		return "scatter"
	case shmAllToAll:
		return "alltoall"
	case shmBarrier:
		return "barrier"
	case shmMonitoredBarrier:
		return "monitored_barrier"
	case shmSend:
		return "send"
	case shmRecv:
		return "recv"
	}
	return fmt.Sprintf("shmKind(%d)", uint8(k))
}

// desc is the dtype and byte size every rank must agree on.
func (op *shmOp) desc() (backend.DType, int) {
	switch {
	case op.vec != nil:
		return op.buf.DType, op.vec.len()
	case op.kind == shmAllGather, op.kind == shmGather, op.kind == shmAllToAll:
		return op.in.DType, len(op.in.Bytes)
	}
	return op.buf.DType, len(op.buf.Bytes)
}

// descBytes is desc's byte size.
func (op *shmOp) descBytes() int {
	_, n := op.desc()
	return n
}

// describe names the op in logs: "allreduce #57 (4096 bytes float32 sum)".
func (op *shmOp) describe() string {
	return fmt.Sprintf("%s #%d (%d bytes %s)", op.kind, op.seq, op.descBytes(), strings.TrimSuffix(op.detail(), ": "))
}

// detail is the part of an op's identity OpError does not carry: dtype,
// reduction and root, as "float32 sum: ".
func (op *shmOp) detail() string {
	dt, _ := op.desc()
	switch op.kind {
	case shmBarrier, shmMonitoredBarrier:
		return ""
	case shmAllReduce:
		if op.root > 0 {
			return fmt.Sprintf("%s %s in shared buffer %d at +%d: ", dt, op.rop, op.root-1, op.arenaOff)
		}
		return fmt.Sprintf("%s %s: ", dt, op.rop)
	case shmReduceScatter:
		return fmt.Sprintf("%s %s: ", dt, op.rop)
	case shmReduce:
		return fmt.Sprintf("%s %s root %d: ", dt, op.rop, op.root)
	case shmBroadcast, shmGather, shmScatter:
		return fmt.Sprintf("%s root %d: ", dt, op.root)
	case shmSend:
		return fmt.Sprintf("%s to rank %d tag %d: ", dt, op.root, op.tag)
	case shmRecv:
		return fmt.Sprintf("%s from rank %d tag %d: ", dt, op.root, op.tag)
	}
	return fmt.Sprintf("%s: ", dt)
}

// Wait implements Work. If no other goroutine is executing the group's
// queue, the caller runs it itself up to its op (see the comment at the top
// of this file); otherwise it waits for the executor. The op fails by itself
// after the group's timeout. Cancelling ctx while this goroutine is running
// the op fails the op and, since the ranks are then out of step, breaks the
// group, as torch aborts a communicator whose wait timed out.
func (op *shmOp) Wait(ctx context.Context) error {
	if op.done.Load() {
		return op.err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	// A Wait beside the process's other work (DDP's bucket watchers beside
	// backward) does not count as a waiter: the op's waits then spin only
	// briefly (spinBudget), as when no one waits.
	if !backend.IsWaitBeside(ctx) {
		op.g.waiters.Add(1)
		defer op.g.waiters.Add(-1)
	}
	if op.kind != shmSend && op.kind != shmRecv {
		op.g.runUntil(op, ctx)
		if op.done.Load() {
			return op.err
		}
	}
	if ch := op.doneChan(); ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return op.err
}

// IsCompleted implements Work.
func (op *shmOp) IsCompleted() bool { return op.done.Load() }

// submit queues op and returns it as the caller's Work.
func (g *shmGroup) submit(op *shmOp) backend.Work {
	op.g = g
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		op.complete(g.opError(op, backend.ErrClosed, nil, "submitted after Close", nil))
		return op
	}
	g.issued++
	op.seq = g.issued
	g.queue = append(g.queue, op)
	g.mu.Unlock()
	if op.descBytes() >= g.asyncMin {
		g.kick()
	} else if g.watchdogParked.Load() && g.watchdogParked.CompareAndSwap(true, false) {
		select {
		case g.watchdogWake <- struct{}{}:
		default:
		}
	}
	return op
}

// watchdog kicks the worker for ops that wait un-started (see above).
func (g *shmGroup) watchdog() {
	defer close(g.watchdogDone)
	for {
		select {
		case <-g.watchdogWake:
		case <-g.quit:
			return
		}
		var last uint64
		var waited time.Duration // how long head has been seen un-started
		tick := time.NewTicker(g.tick)
		for idle := time.Duration(0); ; {
			select {
			case <-g.quit:
				tick.Stop()
				return
			case <-tick.C:
			}
			head := g.headSeq()
			if head != 0 && head == last {
				if waited += g.tick; waited >= g.kickAfter {
					g.kick()
				}
			} else {
				waited = 0
			}
			last = head
			if head != 0 {
				idle = 0
				continue
			}
			if idle += g.tick; idle < shmWatchdogIdle {
				continue
			}
			// Park, unless an op slipped in before submit could see us parked.
			g.watchdogParked.Store(true)
			if g.headSeq() == 0 || !g.watchdogParked.CompareAndSwap(true, false) {
				break
			}
			idle = 0
		}
		tick.Stop()
	}
}

// headSeq is the sequence number of the first queued op, 0 if none.
func (g *shmGroup) headSeq() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.queue) == 0 {
		return 0
	}
	return g.queue[0].seq
}

// kick wakes the worker without blocking.
func (g *shmGroup) kick() {
	select {
	case g.kickCh <- struct{}{}:
	default:
	}
}

func (g *shmGroup) pop() *shmOp {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.queue) == 0 {
		return nil
	}
	op := g.queue[0]
	g.queue[0] = nil
	g.queue = g.queue[1:]
	if len(g.queue) == 0 {
		g.queue = g.qbuf[:0] // reuse the initial array: no allocation per op
	}
	return op
}

func (g *shmGroup) queueLen() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queue)
}

// worker drains the queue whenever it is kicked, until the group closes.
func (g *shmGroup) worker() {
	defer close(g.workerDone)
	for {
		select {
		case <-g.kickCh:
		case <-g.quit:
			return
		}
		g.drain(nil, nil)
	}
}

// drain runs queued ops in order until the queue is empty or target has
// run. It returns at once if another goroutine is the executor; that one
// re-checks the queue after releasing execMu, so no op is stranded.
func (g *shmGroup) drain(target *shmOp, ctx context.Context) {
	for {
		if !g.execMu.TryLock() {
			return
		}
		for {
			if target != nil && target.done.Load() {
				break // another executor ran it meanwhile
			}
			op := g.pop()
			if op == nil {
				break
			}
			op.ctx = ctx
			g.run(op)
			if op == target {
				break
			}
		}
		g.execMu.Unlock()
		if g.queueLen() == 0 {
			return
		}
		if target != nil {
			// Leave the rest to the worker; the caller only wanted its own op.
			g.kick()
			return
		}
	}
}

// runUntil runs target on this goroutine if nobody else is executing. If
// someone else is (the worker, or a waiter for an earlier op), that executor
// either drains through target or kicks the worker after its own op, so
// the caller may then simply wait for target's completion.
func (g *shmGroup) runUntil(target *shmOp, ctx context.Context) {
	g.drain(target, ctx)
}

// run executes one op; the caller holds execMu.
func (g *shmGroup) run(op *shmOp) {
	if g.broken != nil {
		kind := backend.ErrPeerFailed
		var oe *backend.OpError
		if errors.As(g.broken, &oe) {
			kind = oe.Kind
		}
		op.complete(g.opError(op, kind, nil, "group unusable after an earlier failure", g.broken))
		return
	}
	if g.closing.Load() {
		op.complete(g.opError(op, backend.ErrClosed, nil, "group closed", nil))
		return
	}
	op.step0 = g.step + 1
	g.writeDesc(op)
	err := g.exec(op)
	if err != nil && !errors.Is(err, errShmSoft) {
		// A failed collective leaves the ranks at different steps; nothing
		// after it can be trusted. Tell the peers why, so that their waits
		// fail now with our reason instead of timing out.
		g.broken = err
		g.seg.setMsg(g.rank, err.Error())
		var oe *backend.OpError
		if errors.As(err, &oe) && len(oe.Peers) > 0 {
			g.seg.ctl(g.rank, shmCtlBlame).Store(uint64(oe.Peers[0]) + 1)
		}
		g.seg.ctl(g.rank, shmCtlStatus).Store(shmStatusAborted)
	}
	op.complete(stripSoft(err))
}

// errShmSoft marks errors that leave the protocol consistent (a monitored
// barrier that timed out), so the group stays usable.
var errShmSoft = errors.New("soft")

type shmSoftError struct{ err error }

func (e shmSoftError) Error() string   { return e.err.Error() }
func (e shmSoftError) Unwrap() []error { return []error{e.err, errShmSoft} }

func stripSoft(err error) error {
	if s, ok := err.(shmSoftError); ok {
		return s.err
	}
	return err
}
