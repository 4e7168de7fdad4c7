package shm

// The "shm" backend: collectives between ranks on one host through a shared
// memory segment, with no sockets and no kernel involvement on the fast
// path. "auto" picks it when every rank is on one host.
//
// Set-up. Rank 0 creates a file under /dev/shm with a random name
// (goddp-shm-<pid>-<start>-<random>), sizes and maps it, and publishes the
// name and the protocol parameters (slot size, slots per rank, thresholds)
// in the rendezvous store; the other ranks map it and report success or
// failure through the store, so a rank on another host or in another
// mount namespace fails everyone's set-up at once with its reason. As soon as all
// ranks have mapped the segment, every rank unlinks its name: from then on
// the kernel frees it when the last rank unmaps or exits, so nothing leaks
// even if processes are killed. (A job killed during set-up, before every
// rank has mapped, can leave a goddp-shm-* file behind; the next group
// created on the host removes it, see internal/shmfile.) Set-up also probes
// whether every rank may read every other's memory with process_vm_readv.
//
// Data path. Each rank owns a ring of slots it alone writes, and a control
// block with monotonic step counters it alone writes (posted, reduced,
// consumed); peers poll those counters. There are no locks, no futexes and
// no syscalls on the fast path: a 4 KiB all-reduce is one copy in, one
// atomic store, a spin on the peers' counters and a reduction.
//
//   - all-reduce up to 8 KiB: one step, every rank reduces all inputs;
//   - above: pipelined in 256 KiB chunks, each reduce-scattered (rank r
//     reduces the r-th 1/N of it) then all-gathered through the slots;
//   - from 16 MiB, if the probe succeeded: single-copy, each rank reading
//     its peers' buffers directly (cma.go). Below that the chunked path
//     wins, since the buffers stay in cache: the crossover follows the
//     last-level cache's size (2 ranks, one core each, an idle host:
//     11-12 GB/s busbw at 1-8 MiB against 4-5 single-copy); above, memory
//     bandwidth rules, and single-copy moves less and tolerates a busy host
//     far better, since a rank no longer waits for its peers chunk by chunk
//     (16-64 MiB: 3.9-4.2 GB/s, never under 3.1, against 1.4-2.0 and
//     anywhere from 0.4 to 9 chunked);
//   - the other collectives copy through the slots in slot-sized steps.
//
// Reductions combine contributions in rank order, so all ranks get
// bit-identical results. The protocol and the algorithms are described in
// ops.go, the waiting policy (spin, then yield, then sleep) in
// wait.go, and the execution model (a worker goroutine, plus inline
// execution in Wait, which saves the goroutine hand-offs) in exec.go.
//
// Failure. Every wait has the group's timeout (Options.Timeout, 10 minutes
// by default). While waiting, a rank checks a few times per second that
// every peer process still exists (pid plus start time from /proc, so a
// recycled pid is not mistaken for the peer; zombies count as dead); a
// rank that closed its group cleanly has done its part and may exit while
// the others finish, so a wait fails on a closed rank only when it waits
// for that rank (and a send or receive checks its peer alone: see
// checkPeers). A rank
// whose collective fails marks itself aborted in the segment with its
// reason and the rank it blames, so the others fail at once. Errors are
// *OpError values naming the collective, its sequence number and size, and
// the ranks at fault (OpError.Peers), e.g.
//
//	comm: peer failed: allreduce #57 (4096 bytes) on rank 0: shm float32 sum: rank 1 (pid 4242) died
//
// After a failure the group is unusable (the ranks are at different steps);
// later ops fail wrapping the original error. Cancelling the ctx of a Wait
// that is running the op likewise abandons it and breaks the group. A
// MonitoredBarrier that times out is the exception: it names the missing
// ranks and leaves the group usable. Past Options.StallThreshold a waiting
// rank reports the wait once through Options.Logf.
//
// Tuning: see Config (the layout is rank 0's, published to the others;
// the waiting policy is each rank's own, wait.go).
//
// Send/Recv stream through a byte ring per ordered pair of ranks, on
// goroutines of their own (p2p.go), so they never queue behind
// collectives. NewGroup creates a new segment for the subgroup through the
// parent's store.

import (
	"context"
	"fmt"
	"github.com/goddp/goddp/comm/internal/reduce"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/internal/shmfile"
)

func init() {
	backend.Register("shm", New)
}

// shmAsyncMin: ops this large wake the worker at once (eager mode).
const shmAsyncMin = 64 << 10

// shmEager decides whether large ops start on the worker goroutine as soon
// as they are submitted (eager) or wait for the caller's Wait (lazy), the
// watchdog starting them only if nobody has waited for shmLazyKickAfter.
//
// Eager overlaps communication with the caller's compute, which pays only
// when a core is free to run it. Where the node's ranks already keep every
// core busy (world x threads per rank >= cores: 2 ranks of 1 thread on 2
// cores), the worker can only time-slice a core with some rank's compute,
// and an op cannot progress until the peers' workers happen to run at the
// same time; waiting for them costs more than the overlap saves. Measured
// with examples/mlp at world 2 on 2 cores (GOMAXPROCS=1 per rank, 12
// interleaved rounds): 38.5k samples/s eager, 40.7k lazy (median; lazy
// faster in 9 of 12 rounds), a small effect next to the run-to-run noise.
// What decides is whether a core is left over once every rank's threads
// have one, not the host: with one to spare, Config.resolve picks eager.
//
// Config.Async (GODDP_SHM_ASYNC=eager|lazy) overrides the choice, which
// Config.resolve makes; threads per rank come from GODDP_NUM_THREADS or
// OMP_NUM_THREADS (default 1), as tensor reads them.
func shmEager(async string) bool { return async == "eager" }

type shmGroup struct {
	rank, size int
	seg        *shmSegment
	store      backend.Store
	prefix     string
	timeout    time.Duration

	smallMax, chunkBytes, asyncMin int
	// kickAfter is how long an op may wait un-started at the head of the
	// queue before the watchdog starts it on the worker: one tick in eager
	// mode, shmLazyKickAfter in lazy mode (see shmEager).
	kickAfter time.Duration
	tick      time.Duration // the watchdog's period
	cmaMin    int           // single-copy all-reduce from this size (when cma)
	cma       bool          // every pair of ranks can process_vm_readv each other
	avx       bool          // float sums use the AVX kernel (shm_simd_amd64.go)
	probe     *uint64

	spinFor  time.Duration // see shmSpinBudget
	yieldFor time.Duration // see shmYieldBudget
	// waiters counts goroutines blocked in Wait on this group's ops. While
	// it is zero the process has other work (DDP's backward, say), and an
	// op on the worker that waits for a peer spins only briefly: see
	// shmGroup.spinBudget.
	waiters atomic.Int32
	stall   time.Duration // stall report threshold, 0 = off
	logf    func(format string, args ...any)
	stallf  func(format string, args ...any) // stall reports: every waiting rank, stderr by default

	// Peer identities for the liveness check.
	pids      []int
	starts    []uint64
	pidUsable []bool

	// Executor state, guarded by execMu.
	execMu   sync.Mutex
	step     uint64
	broken   error
	scratch  []byte
	scratch2 []byte
	vecTmp   []byte    // AllReduceV's gathered buffer below the chunked size
	one      shmVec    // a single buffer as a shmVec (single)
	oneParts [1][]byte // one's storage
	oneEnds  [1]int

	// Shared buffers (arena.go): appended under arenaMu, read lock-free.
	arenaMu    sync.Mutex
	arenas     atomic.Pointer[[]*shmArena]
	storeBase  string       // this group's key prefix in the store
	allocCalls int          // AllocShared calls so far (the same on every rank)
	sharedOps  atomic.Int64 // all-reduces run in shared buffers (for tests)

	mu        sync.Mutex // guards queue, closed, issued, subgroups and the p2p queues
	queue     []*shmOp
	closed    bool
	issued    uint64
	subgroups int

	// Point-to-point (p2p.go): a queue and worker per peer and direction.
	sendQs, recvQs []*shmP2PQueue
	p2pIssued      uint64
	p2pWG          sync.WaitGroup

	qbuf           []*shmOp
	closing        atomic.Bool
	kickCh         chan struct{}
	quit           chan struct{}
	workerDone     chan struct{}
	watchdogParked atomic.Bool
	watchdogWake   chan struct{}
	watchdogDone   chan struct{}

	// cfg is the resolved Config (no zero fields); last, so that the
	// hot fields above keep their layout.
	cfg Config
}

type shmParams struct {
	name                                                     string
	slotBytes, nbuf, smallMax, chunkBytes, cmaMin, ringBytes int
	nonce                                                    uint64
}

func (p shmParams) encode() string {
	return fmt.Sprintf("v3 %s %d %d %d %d %d %d %d", p.name, p.slotBytes, p.nbuf, p.smallMax, p.chunkBytes, p.cmaMin,
		p.ringBytes, p.nonce)
}

// Bounds of a segment record's fields.
const (
	shmMaxField = 1 << 30
	shmMaxNbuf  = 1 << 12
)

func decodeShmParams(v string) (shmParams, error) {
	var p shmParams
	_, err := fmt.Sscanf(v, "v3 %s %d %d %d %d %d %d %d", &p.name, &p.slotBytes, &p.nbuf, &p.smallMax, &p.chunkBytes,
		&p.cmaMin, &p.ringBytes, &p.nonce)
	// Every field is bounded, so that the layout a rank computes from the
	// record (world x nbuf x slot, world² x ring) cannot overflow, and the
	// name is one file directly under /dev/shm.
	if err != nil || p.slotBytes <= 0 || p.slotBytes > shmMaxField || p.nbuf < 2 || p.nbuf > shmMaxNbuf ||
		p.chunkBytes <= 0 || p.chunkBytes > p.slotBytes ||
		p.ringBytes < 4096 || p.ringBytes > shmMaxField || p.ringBytes%8 != 0 ||
		p.smallMax < 0 || p.smallMax > p.slotBytes || p.cmaMin < 0 ||
		p.name == "" || p.name == "." || p.name == ".." || len(p.name) > 255 || strings.ContainsAny(p.name, "/\x00") {
		return p, fmt.Errorf("%w: shm: bad segment record %q", backend.ErrBadArgument, v)
	}
	return p, nil
}

// New creates this rank's shm group with the Config the environment gives
// (ConfigFromEnv): every rank of opts must be on this host. It returns once
// all ranks have mapped the segment, or fails when ctx ends. comm.Init
// calls it for backend "shm" (and "auto" on one host).
func New(ctx context.Context, opts backend.Options) (backend.ProcessGroup, error) {
	cfg, err := ConfigFromEnv()
	if err != nil {
		return nil, err
	}
	return NewWithConfig(ctx, opts, cfg)
}

// NewWithConfig is New with the tuning given by cfg instead of the environment.
func NewWithConfig(ctx context.Context, opts backend.Options, cfg Config) (backend.ProcessGroup, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Size < 1 || opts.Rank < 0 || opts.Rank >= opts.Size {
		return nil, fmt.Errorf("%w: shm: rank %d of world size %d", backend.ErrBadArgument, opts.Rank, opts.Size)
	}
	if opts.Store == nil {
		return nil, fmt.Errorf("%w: shm: Options.Store is nil", backend.ErrBadArgument)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = backend.DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	g := &shmGroup{
		rank: opts.Rank, size: opts.Size, store: opts.Store, prefix: opts.Prefix, timeout: opts.Timeout,
		asyncMin: shmAsyncMin, kickAfter: shmWatchdogTick, tick: shmWatchdogTick, stall: opts.StallThresholdOrDefault(), logf: opts.Logger(), stallf: opts.StallLogger(),
		avx: reduce.HasAVX(),
	}
	g.arenas.Store(new([]*shmArena))
	cfg = cfg.resolve(opts.Size)
	g.cfg, g.spinFor, g.yieldFor = cfg, cfg.Spin, cfg.Yield
	if !shmEager(cfg.Async) {
		g.asyncMin, g.kickAfter, g.tick = math.MaxInt, shmLazyKickAfter, shmLazyTick
	}
	// A job killed during its set-up leaves its files in /dev/shm with
	// nobody to remove them; whoever starts next does (internal/shmfile).
	if removed, _ := SweepDead(); len(removed) > 0 {
		g.logf("comm: shm: removed %d file(s) that dead processes left: %s", len(removed), strings.Join(removed, " "))
	}
	if err := g.setup(ctx); err != nil {
		return nil, err
	}
	g.sendQs = make([]*shmP2PQueue, g.size)
	g.recvQs = make([]*shmP2PQueue, g.size)
	for k := range g.sendQs {
		g.sendQs[k], g.recvQs[k] = &shmP2PQueue{}, &shmP2PQueue{}
	}
	g.scratch = make([]byte, max(g.chunkBytes, shmCMAPiece))
	g.scratch2 = make([]byte, max(g.chunkBytes, shmCMAPiece))
	g.kickCh = make(chan struct{}, 1)
	g.quit = make(chan struct{})
	g.workerDone = make(chan struct{})
	g.qbuf = make([]*shmOp, 0, 16)
	g.queue = g.qbuf
	g.watchdogWake = make(chan struct{}, 1)
	g.watchdogDone = make(chan struct{})
	g.watchdogParked.Store(true)
	go g.worker()
	go g.watchdog()
	return g, nil
}

// setup creates or opens the segment and agrees on it through the store.
func (g *shmGroup) setup(ctx context.Context) (err error) {
	// Each rank counts the shm groups it created under this prefix; ranks
	// create groups in the same order, so the count names this instance and
	// a store reused by a later group never serves a stale segment name.
	inst, err := g.store.Add(ctx, g.prefix+"shm/instances/"+strconv.Itoa(g.rank), 1)
	if err != nil {
		return fmt.Errorf("comm: shm: rendezvous on rank %d: %w", g.rank, err)
	}
	base := fmt.Sprintf("%sshm/%d/", g.prefix, inst)
	g.storeBase = base
	var p shmParams
	if g.rank == 0 {
		p = g.cfg.params()
		if p.name, err = shmfile.RandomName(); err != nil {
			return err
		}
		p.nonce = uint64(time.Now().UnixNano())
		g.seg, err = shmCreate(p.name, newShmLayout(g.size, p.slotBytes, p.nbuf, p.ringBytes), p.nonce)
		if err != nil {
			g.store.Set(ctx, base+"seg", []byte("error: "+err.Error()))
			return err
		}
		if err := g.store.Set(ctx, base+"seg", []byte(p.encode())); err != nil {
			g.seg.unlink()
			g.seg.unmap()
			return fmt.Errorf("comm: shm: publish segment: %w", err)
		}
	} else {
		v, err := g.store.Get(ctx, base+"seg")
		if err != nil {
			return fmt.Errorf("comm: shm: rank %d waiting for rank 0's segment: %w", g.rank, err)
		}
		if msg, ok := strings.CutPrefix(string(v), "error: "); ok {
			return fmt.Errorf("%w: shm: rank 0 could not create the segment: %s", backend.ErrPeerFailed, msg)
		}
		if p, err = decodeShmParams(string(v)); err != nil {
			return err
		}
		g.seg, err = shmOpen(p.name, newShmLayout(g.size, p.slotBytes, p.nbuf, p.ringBytes), p.nonce)
		if err != nil {
			g.store.Set(ctx, fmt.Sprintf("%sopen/%d", base, g.rank), []byte("error: "+err.Error()))
			return err
		}
	}
	g.smallMax, g.chunkBytes, g.cmaMin = p.smallMax, p.chunkBytes, p.cmaMin
	defer func() {
		if err != nil {
			// Whoever knows the name removes it: a half-set-up job must not
			// leave the segment behind.
			g.seg.unlink()
			g.seg.unmap()
		}
	}()

	pid, start, ns := shmProcIdentity()
	g.seg.ctl(g.rank, shmCtlPid).Store(uint64(pid))
	g.seg.ctl(g.rank, shmCtlStart).Store(start)
	g.seg.ctl(g.rank, shmCtlPidNS).Store(ns)
	g.probe = new(uint64)
	*g.probe = shmProbeValue
	g.seg.ctl(g.rank, shmCtlProbe).Store(uint64(uintptr(unsafe.Pointer(g.probe))))
	g.seg.ctl(g.rank, shmCtlStatus).Store(shmStatusReady)
	bad, msg, err := g.agree(ctx, base+"open/", nil)
	if err != nil {
		return fmt.Errorf("comm: shm: rank %d waiting for all ranks to map %s: %w", g.rank, g.seg.path, err)
	}
	if bad >= 0 {
		return fmt.Errorf("%w: shm: rank %d could not map the segment: %s", backend.ErrPeerFailed, bad, msg)
	}
	// Everyone has mapped it; drop the name now (every rank tries, in case
	// one dies right here).
	if err := g.seg.unlink(); err != nil {
		return err
	}
	g.pids = make([]int, g.size)
	g.starts = make([]uint64, g.size)
	g.pidUsable = make([]bool, g.size)
	for k := 0; k < g.size; k++ {
		g.pids[k] = int(g.seg.ctl(k, shmCtlPid).Load())
		g.starts[k] = g.seg.ctl(k, shmCtlStart).Load()
		g.pidUsable[k] = k != g.rank && ns != 0 && g.seg.ctl(k, shmCtlPidNS).Load() == ns
	}
	// Single-copy only if every rank can read every other: each probes its
	// peers and the ranks agree through the store.
	if g.cmaMin > 0 && g.size > 1 {
		bad, _, err := g.agree(ctx, base+"cma/", g.probeCMA())
		if err != nil {
			return fmt.Errorf("comm: shm: rank %d waiting for the CMA probes: %w", g.rank, err)
		}
		g.cma = bad < 0
	}
	return nil
}

// agree publishes this rank's verdict ("ok", or "error: " and mine's
// message) under prefix<rank> in the store and waits for every rank's: the
// ranks then take the same decision. It returns the lowest rank whose
// verdict was not "ok" and its message, or -1; err is the store's.
func (g *shmGroup) agree(ctx context.Context, prefix string, mine error) (bad int, msg string, err error) {
	verdict := "ok"
	if mine != nil {
		verdict = "error: " + mine.Error()
	}
	keys := make([]string, g.size)
	for k := range keys {
		keys[k] = fmt.Sprintf("%s%d", prefix, k)
	}
	if err := g.store.Set(ctx, keys[g.rank], []byte(verdict)); err != nil {
		return -1, "", err
	}
	if err := g.store.Wait(ctx, keys...); err != nil {
		return -1, "", err
	}
	for k, key := range keys {
		v, err := g.store.Get(ctx, key)
		if err != nil {
			return -1, "", err
		}
		if string(v) != "ok" {
			return k, strings.TrimPrefix(string(v), "error: "), nil
		}
	}
	return -1, "", nil
}

func (g *shmGroup) Rank() int       { return g.rank }
func (g *shmGroup) Size() int       { return g.size }
func (g *shmGroup) Backend() string { return "shm" }

func (g *shmGroup) badArg(op shmKind, format string, args ...any) backend.Work {
	return backend.FailedFuture(&backend.OpError{Kind: backend.ErrBadArgument, Op: op.String(), Rank: g.rank, Detail: "shm: " + fmt.Sprintf(format, args...)})
}

// AllReduce reduces buf across all ranks in place.
func (g *shmGroup) AllReduce(buf backend.Buffer, op backend.ReduceOp) backend.Work {
	if err := errorsJoinFirst(backend.CheckBuffer(buf), backend.CheckReduceOp(op)); err != nil {
		return g.badArg(shmAllReduce, "%v", err)
	}
	o := &shmOp{kind: shmAllReduce, buf: buf, rop: op}
	if len(buf.Bytes) > g.smallMax && g.size > 1 {
		if i, off, ok := g.findArena(buf.Bytes); ok {
			o.root, o.arenaOff = i+1, off // reduced where it lies (arena.go)
		}
	}
	return g.submit(o)
}

// Broadcast copies root's buf to every rank.
func (g *shmGroup) Broadcast(buf backend.Buffer, root int) backend.Work {
	if err := errorsJoinFirst(backend.CheckBuffer(buf), backend.CheckRoot(root, g.size)); err != nil {
		return g.badArg(shmBroadcast, "%v", err)
	}
	return g.submit(&shmOp{kind: shmBroadcast, buf: buf, root: root})
}

// Barrier completes once every rank has entered it.
func (g *shmGroup) Barrier() backend.Work {
	return g.submit(&shmOp{kind: shmBarrier})
}

// AllGather: out holds Size() chunks of in.Len() elements, rank-major.
func (g *shmGroup) AllGather(out, in backend.Buffer) backend.Work {
	if err := errorsJoinFirst(backend.CheckBuffer(in), backend.CheckBuffer(out)); err != nil {
		return g.badArg(shmAllGather, "%v", err)
	}
	if out.DType != in.DType || len(out.Bytes) != g.size*len(in.Bytes) {
		return g.badArg(shmAllGather, "out is %v[%d], want %v[%d] (%d ranks x %d)",
			out.DType, out.Len(), in.DType, g.size*in.Len(), g.size, in.Len())
	}
	return g.submit(&shmOp{kind: shmAllGather, buf: out, in: in})
}

// ReduceScatter: rank r gets the reduction of chunk r of in.
func (g *shmGroup) ReduceScatter(out, in backend.Buffer, op backend.ReduceOp) backend.Work {
	if err := errorsJoinFirst(backend.CheckBuffer(in), backend.CheckBuffer(out), backend.CheckReduceOp(op)); err != nil {
		return g.badArg(shmReduceScatter, "%v", err)
	}
	if out.DType != in.DType || len(in.Bytes) != g.size*len(out.Bytes) {
		return g.badArg(shmReduceScatter, "in is %v[%d], want %v[%d] (%d ranks x %d)",
			in.DType, in.Len(), out.DType, g.size*out.Len(), g.size, out.Len())
	}
	return g.submit(&shmOp{kind: shmReduceScatter, buf: out, in: in, rop: op})
}

// Reduce reduces buf into root's buf; the others' buffers are left unchanged.
func (g *shmGroup) Reduce(buf backend.Buffer, root int, op backend.ReduceOp) backend.Work {
	if err := errorsJoinFirst(backend.CheckBuffer(buf), backend.CheckRoot(root, g.size), backend.CheckReduceOp(op)); err != nil {
		return g.badArg(shmReduce, "%v", err)
	}
	return g.submit(&shmOp{kind: shmReduce, buf: buf, root: root, rop: op})
}

// Gather: root's out holds Size() chunks of in.Len(); out is ignored elsewhere.
func (g *shmGroup) Gather(out, in backend.Buffer, root int) backend.Work {
	if err := errorsJoinFirst(backend.CheckBuffer(in), backend.CheckRoot(root, g.size)); err != nil {
		return g.badArg(shmGather, "%v", err)
	}
	if g.rank == root && (out.DType != in.DType || len(out.Bytes) != g.size*len(in.Bytes)) {
		return g.badArg(shmGather, "root's out is %v[%d], want %v[%d]", out.DType, out.Len(), in.DType, g.size*in.Len())
	}
	return g.submit(&shmOp{kind: shmGather, buf: out, in: in, root: root})
}

// Scatter: root's in holds Size() chunks of out.Len(); in is ignored elsewhere.
func (g *shmGroup) Scatter(out, in backend.Buffer, root int) backend.Work {
	if err := errorsJoinFirst(backend.CheckBuffer(out), backend.CheckRoot(root, g.size)); err != nil {
		return g.badArg(shmScatter, "%v", err)
	}
	if g.rank == root && (out.DType != in.DType || len(in.Bytes) != g.size*len(out.Bytes)) {
		return g.badArg(shmScatter, "root's in is %v[%d], want %v[%d]", in.DType, in.Len(), out.DType, g.size*out.Len())
	}
	return g.submit(&shmOp{kind: shmScatter, buf: out, in: in, root: root})
}

// AllToAll: chunk j of in goes to rank j; out's chunk j comes from rank j.
func (g *shmGroup) AllToAll(out, in backend.Buffer) backend.Work {
	if err := errorsJoinFirst(backend.CheckBuffer(in), backend.CheckBuffer(out)); err != nil {
		return g.badArg(shmAllToAll, "%v", err)
	}
	if out.DType != in.DType || len(out.Bytes) != len(in.Bytes) || in.Len()%g.size != 0 {
		return g.badArg(shmAllToAll, "in %v[%d] and out %v[%d] must match and divide into %d chunks",
			in.DType, in.Len(), out.DType, out.Len(), g.size)
	}
	return g.submit(&shmOp{kind: shmAllToAll, buf: out, in: in})
}

// MonitoredBarrier is a barrier that, on timeout, names the ranks that did
// not arrive. The group stays usable after such a timeout.
func (g *shmGroup) MonitoredBarrier(ctx context.Context, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = g.timeout
	}
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	return g.submit(&shmOp{kind: shmMonitoredBarrier, timeout: max(timeout, time.Millisecond)}).Wait(ctx)
}

// NewGroup creates an shm group over ranks (indices into this group); every
// rank of this group must call it with the same ranks, and those outside
// get (nil, nil). The subgroup has its own segment and queue, so its ops are
// not ordered with this group's.
func (g *shmGroup) NewGroup(ctx context.Context, ranks []int) (backend.ProcessGroup, error) {
	sorted := slices.Clone(ranks)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	if len(sorted) != len(ranks) || len(ranks) == 0 || sorted[0] < 0 || sorted[len(sorted)-1] >= g.size {
		return nil, fmt.Errorf("%w: shm: NewGroup ranks %v (world size %d)", backend.ErrBadArgument, ranks, g.size)
	}
	g.mu.Lock()
	g.subgroups++
	n := g.subgroups
	g.mu.Unlock()
	idx := slices.Index(sorted, g.rank)
	if idx < 0 {
		return nil, nil
	}
	var b strings.Builder
	for _, r := range sorted {
		fmt.Fprintf(&b, "-%d", r)
	}
	return New(ctx, backend.Options{
		Rank: idx, Size: len(sorted), Store: g.store, Timeout: g.timeout,
		Prefix: fmt.Sprintf("%ssub%d%s/", g.prefix, n, b.String()),
		Logf:   g.logf, StallThreshold: g.stallOpt(),
	})
}

// Close releases the segment. Queued ops fail with ErrClosed, a running one
// fails within microseconds, and peers still waiting on this rank fail
// with an error saying it closed.
func (g *shmGroup) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	q := g.queue
	g.queue = nil
	for _, pq := range append(slices.Clone(g.sendQs), g.recvQs...) {
		q = append(q, pq.ops...)
		pq.ops = nil
	}
	g.mu.Unlock()
	g.closing.Store(true)
	for _, op := range q {
		op.complete(g.opError(op, backend.ErrClosed, nil, "group closed", nil))
	}
	close(g.quit)
	<-g.workerDone
	<-g.watchdogDone
	g.p2pWG.Wait() // a running transfer fails within microseconds once closing is set
	g.execMu.Lock()
	defer g.execMu.Unlock()
	st := g.seg.ctl(g.rank, shmCtlStatus)
	if st.Load() != shmStatusAborted {
		st.Store(shmStatusClosed)
	}
	g.seg.unmap()
	return nil
}

func (g *shmGroup) stallOpt() time.Duration {
	if g.stall == 0 {
		return -1
	}
	return g.stall
}

func errorsJoinFirst(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
