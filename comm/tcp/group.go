package tcp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/internal/wire"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func init() { backend.Register("tcp", New) }

// peerFault is why an op or the whole group failed: a sentinel kind, the
// ranks at fault when known, and words.
type peerFault struct {
	kind   error
	peers  []int
	detail string
	err    error
}

func (f *peerFault) Error() string {
	s := f.kind.Error()
	if f.detail != "" {
		s += ": " + f.detail
	}
	if f.err != nil {
		s += ": " + f.err.Error()
	}
	return s
}

func (f *peerFault) Unwrap() []error {
	if f.err == nil {
		return []error{f.kind}
	}
	return []error{f.kind, f.err}
}

// asFault views any error as a peerFault.
func asFault(err error) *peerFault {
	var f *peerFault
	if errors.As(err, &f) {
		return f
	}
	var oe *backend.OpError
	if errors.As(err, &oe) {
		return &peerFault{kind: oe.Kind, peers: oe.Peers, detail: oe.Detail, err: oe.Err}
	}
	kind := backend.ErrPeerFailed
	for _, k := range []error{backend.ErrTimeout, backend.ErrClosed, backend.ErrBadArgument, backend.ErrAuth, backend.ErrUnsupported} {
		if errors.Is(err, k) {
			kind = k
		}
	}
	return &peerFault{kind: kind, err: err}
}

// tcpGroup is the "tcp" backend: a full mesh of authenticated TCP
// connections. Collectives run one at a time, in issue order, on a worker
// goroutine or on the goroutine that waits for them (tcpWork); each
// connection has its own reader and writer goroutines so that sending,
// receiving and reducing overlap.
type tcpGroup struct {
	opts    backend.Options
	rank    int
	size    int
	timeout time.Duration
	logf    func(string, ...any)
	// stallf receives stall reports: every waiting rank names the
	// laggard, so it writes to stderr on every rank by default.
	stallf func(string, ...any)
	peers  []*peerConn // nil at this rank's own index

	// pieceBytes is the pipelining grain of large collectives.
	pieceBytes int
	// smallBytes is the size up to which latency-bound algorithms run.
	smallBytes int
	// spin is how long an op polls for a small reply before parking.
	spin time.Duration
	// exchangeBytes is the size up to which a two-rank all-reduce is one
	// pipelined exchange rather than a ring (which reduces half as much).
	exchangeBytes int
	// writeBatch caps the bytes of one writev: a piece's completion (and
	// what waits on it) comes only when its whole batch is out.
	writeBatch int
	// lastYield is when an inline progress loop last passed through the
	// scheduler (unix ns); see schedHint.
	lastYield atomic.Int64

	mu        sync.Mutex
	seq       uint64
	queue     []*tcpOp
	busy      bool // an op is executing (on the worker or inline in Wait)
	inlineRun int  // ops in a row that callers ran inline
	kick      *time.Timer
	kickArmed bool
	qcond     *sync.Cond
	closed    bool
	subgroups int
	p2pSend   map[p2pKey]uint32
	p2pRecv   map[p2pKey]uint32

	// The worker's state: completion events of its xfers and scratch space.
	events  chan *xfer
	scratch []byte
	work    []byte

	failOnce sync.Once
	cause    atomic.Pointer[peerFault]
	failed   chan struct{} // closed once the group is torn down after a failure or Close
	byeOnly  atomic.Bool   // the teardown is a clean Close

	cur           atomic.Pointer[tcpOp]
	lastStarted   atomic.Uint64
	lastCompleted atomic.Uint64
	// earlyDescs counts the descriptors the peers' connections hold for
	// collectives not started yet (peerConn.early): while it is 0, as it
	// nearly always is, starting an op looks at no connection.
	earlyDescs atomic.Int64

	progMu      sync.Mutex
	progID      uint64
	progWaiters map[uint64]chan progressNote

	workerDone chan struct{}
	watchStop  chan struct{}
	watchDone  chan struct{}

	// cfg is the resolved Config (no zero fields); last, so that the
	// hot fields above keep their layout.
	cfg Config
}

type p2pKey struct{ peer, tag int }

// tcpOp is one collective on the worker.
type tcpOp struct {
	name  string
	seq   uint64
	bytes int
	desc  opDesc
	run   func(o *tcpOp) error
	w     *backend.Future
	// soft ops (monitored barrier) report failure without failing the group.
	soft bool
	// timeout overrides the group timeout when set.
	timeout time.Duration

	start    time.Time
	deadline time.Time
	// expired is closed by the watchdog once the deadline has passed, or
	// when the context of an inline waiter is cancelled (then cancelled
	// holds its error).
	expired    chan struct{}
	expireOnce sync.Once
	cancelled  atomic.Value
	// probed says the watchdog has asked every rank where it is shortly
	// before the deadline (its goroutine only); preNotes holds the
	// answers, for the timeout's diagnosis, when connections the timeout
	// cuts can no longer carry a question.
	probed   bool
	preNotes atomic.Pointer[map[int]progressNote]
	// agreeProbed says the watchdog has asked whether every rank runs
	// this collective (its goroutine only; see probeAgreement).
	agreeProbed bool
	xfers       []*xfer
	quiet       []*xfer // quiet receives not yet handed to the readers
	pending     int
}

// New creates this rank's tcp group with the Config the environment gives
// (ConfigFromEnv): it connects the full mesh through opts.Store and returns
// once every rank is connected, or fails when ctx ends. comm.Init calls it
// for backend "tcp" (and "auto" across hosts).
func New(ctx context.Context, opts backend.Options) (backend.ProcessGroup, error) {
	cfg, err := ConfigFromEnv()
	if err != nil {
		return nil, err
	}
	return NewWithConfig(ctx, opts, cfg)
}

// NewWithConfig is New with the tuning given by cfg instead of the environment.
func NewWithConfig(ctx context.Context, opts backend.Options, cfg Config) (backend.ProcessGroup, error) {
	if opts.Size < 1 || opts.Rank < 0 || opts.Rank >= opts.Size {
		return nil, fmt.Errorf("%w: tcp: rank %d of %d", backend.ErrBadArgument, opts.Rank, opts.Size)
	}
	if opts.Size > 1 && opts.Store == nil {
		return nil, fmt.Errorf("%w: tcp: no store", backend.ErrBadArgument)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.resolve(opts)
	g := &tcpGroup{
		opts:          opts,
		rank:          opts.Rank,
		size:          opts.Size,
		timeout:       opts.TimeoutOrDefault(),
		logf:          opts.Logger(),
		stallf:        opts.StallLogger(),
		peers:         make([]*peerConn, opts.Size),
		cfg:           cfg,
		pieceBytes:    cfg.PieceBytes,
		smallBytes:    cfg.SmallBytes,
		spin:          cfg.Spin,
		exchangeBytes: cfg.ExchangeBytes,
		writeBatch:    cfg.WriteBatch,
		p2pSend:       map[p2pKey]uint32{},
		p2pRecv:       map[p2pKey]uint32{},
		events:        make(chan *xfer, 1<<16),
		failed:        make(chan struct{}),
		progWaiters:   map[uint64]chan progressNote{},
		workerDone:    make(chan struct{}),
		watchStop:     make(chan struct{}),
		watchDone:     make(chan struct{}),
	}
	g.qcond = sync.NewCond(&g.mu)
	g.kick = time.AfterFunc(time.Hour, g.kicked)
	g.kick.Stop()
	if err := g.connectMesh(ctx); err != nil {
		return nil, err
	}
	for _, pc := range g.peers {
		if pc != nil {
			pc.start()
		}
	}
	go g.workerLoop()
	go g.watchdog(opts.StallThresholdOrDefault())
	return g, nil
}

// hostCPUs counts the host's online CPUs (not just this process's
// affinity: launchers pin each rank to one core).
func hostCPUs() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return runtime.NumCPU()
	}
	n := 0
	for _, part := range strings.Split(strings.TrimSpace(string(b)), ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		c := a
		var err2 error
		if isRange {
			c, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || c < a {
			return runtime.NumCPU()
		}
		n += c - a + 1
	}
	return max(n, 1)
}

func (g *tcpGroup) Rank() int       { return g.rank }
func (g *tcpGroup) Size() int       { return g.size }
func (g *tcpGroup) Backend() string { return "tcp" }

// submit queues a collective; ops run in the order they are submitted.
func (g *tcpGroup) submit(o *tcpOp) backend.Work {
	o.w = backend.NewFuture()
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return backend.FailedFuture(&backend.OpError{Kind: backend.ErrClosed, Op: o.name, Bytes: o.bytes, Rank: g.rank, Detail: "process group closed"})
	}
	g.seq++
	o.seq = g.seq
	g.queue = append(g.queue, o)
	lazy := g.inlineRun >= 2
	arm := lazy && !g.kickArmed
	if arm {
		g.kickArmed = true
	}
	g.mu.Unlock()
	switch {
	case !lazy:
		g.qcond.Signal()
	case arm:
		// The caller has been waiting on each op right away: it will most
		// likely run this one inline too, so do not wake the worker (a
		// thread wakeup per op). A timer, armed at most once per
		// kickDelay (arming wakes the netpoller), lets the worker start
		// whatever nobody waited for.
		g.kick.Reset(kickDelay)
	}
	return &tcpWork{Future: o.w, g: g, o: o}
}

// kickDelay bounds how long a lazily submitted op waits for the worker.
const kickDelay = time.Millisecond

// kicked is the lazy-start timer's action.
func (g *tcpGroup) kicked() {
	g.mu.Lock()
	g.kickArmed = false
	stranded := len(g.queue) > 0 && !g.busy
	if stranded {
		g.inlineRun = 0 // an op was left for the worker: be eager again
	}
	g.mu.Unlock()
	if stranded {
		g.qcond.Signal()
	}
}

// tcpWork is a collective's Work. Waiting on it runs the queued ops on the
// caller's goroutine when the worker is idle: the common issue-then-wait
// pattern then costs no goroutine handoff at all. This needs a context
// without a deadline (a deadline means the caller may want the op to go on
// without it); if such a context is cancelled while its op runs inline,
// the op cannot be handed back half done, so it fails and takes the group
// down, as a cancelled job would.
type tcpWork struct {
	*backend.Future
	g *tcpGroup
	o *tcpOp
}

func (w *tcpWork) Wait(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if _, hasDeadline := ctx.Deadline(); !hasDeadline && !w.IsCompleted() && ctx.Err() == nil {
		w.g.runInline(w.o, ctx)
	}
	return w.Future.Wait(ctx)
}

// runInline executes queued ops on the caller's goroutine, up to and
// including o, while no other op is executing.
func (g *tcpGroup) runInline(o *tcpOp, ctx context.Context) {
	for !o.w.IsCompleted() {
		g.mu.Lock()
		next := g.popLocked()
		if next != nil {
			g.inlineRun++
		}
		g.mu.Unlock()
		if next == nil {
			return
		}
		stop := func() bool { return false }
		if ctx.Done() != nil {
			stop = context.AfterFunc(ctx, func() { g.cancelInline(next, ctx) })
		}
		g.execute(next)
		stop()
		g.done()
	}
}

// cancelInline ends an op whose inline waiter's context was cancelled.
func (g *tcpGroup) cancelInline(o *tcpOp, ctx context.Context) {
	o.cancelled.Store(ctx.Err())
	g.expire(o)
}

// expiredFault is the fault of an op the watchdog or a cancellation ended.
func (g *tcpGroup) expiredFault(o *tcpOp) *peerFault {
	if c := g.cause.Load(); c != nil {
		return c // the teardown's deadlines, not o's
	}
	if err, _ := o.cancelled.Load().(error); err != nil {
		return &peerFault{kind: backend.ErrClosed, err: err,
			detail: "the context of the Wait running this op was cancelled; the group is torn down"}
	}
	return g.timeoutFault(o)
}

// popLocked takes the next op and marks the group busy, or returns nil
// when the queue is empty or an op is executing; g.mu held.
func (g *tcpGroup) popLocked() *tcpOp {
	if len(g.queue) == 0 || g.busy {
		return nil
	}
	o := g.queue[0]
	g.queue[0] = nil
	g.queue = g.queue[1:]
	g.busy = true
	return o
}

// done ends an op's execution and wakes the worker if more are queued.
func (g *tcpGroup) done() {
	g.mu.Lock()
	g.busy = false
	more := len(g.queue) > 0 || g.closed
	g.mu.Unlock()
	if more {
		g.qcond.Broadcast()
	}
}

// workerLoop executes queued ops until the group is closed and drained.
func (g *tcpGroup) workerLoop() {
	defer close(g.workerDone)
	g.mu.Lock()
	for {
		if o := g.popLocked(); o != nil {
			g.inlineRun = 0
			g.mu.Unlock()
			g.execute(o)
			g.done()
			g.mu.Lock()
			continue
		}
		if g.closed && !g.busy && len(g.queue) == 0 {
			g.mu.Unlock()
			return
		}
		g.qcond.Wait()
	}
}

func (g *tcpGroup) execute(o *tcpOp) {
	if f := g.failure(); f != nil {
		o.w.Complete(g.opError(o, f, true))
		return
	}
	o.start = time.Now()
	o.xfers = o.xfers[:0]
	o.quiet = o.quiet[:0]
	o.pending = 0
	timeout := g.timeout
	if o.timeout > 0 {
		timeout = o.timeout
	}
	o.deadline = o.start.Add(timeout)
	o.expired = make(chan struct{})
	g.lastStarted.Store(o.seq)
	g.cur.Store(o)
	var err error
	if g.size > 1 {
		err = g.startDescs(o)
	}
	if err == nil && g.opts.DebugCollectives && g.size > 1 {
		err = g.checkAgreement(o)
	}
	if err == nil {
		err = o.run(o)
	}
	if err == nil {
		err = g.awaitAll(o)
	}
	g.cur.Store(nil)
	if err != nil {
		f := asFault(err)
		if !o.soft || !errors.Is(f.kind, backend.ErrTimeout) {
			g.abort(f)
			<-g.failed
			// What failed the group is what failed the op: a peer's abort
			// may have come first, and o's own error be its symptom.
			f = g.cause.Load()
		}
		err = g.opError(o, f, false)
	}
	g.lastCompleted.Store(o.seq)
	o.w.Complete(err)
}

// opError dresses a fault as the error of op o. later marks ops that found
// the group already failed.
func (g *tcpGroup) opError(o *tcpOp, f *peerFault, later bool) error {
	e := &backend.OpError{Kind: f.kind, Op: o.name, Seq: o.seq, Bytes: o.bytes, Rank: g.rank,
		Peers: f.peers, Detail: f.detail, Err: f.err}
	if later {
		e.Detail = "the group failed earlier: " + f.detail
	}
	return e
}

// failure returns the group's fault once it has been torn down, else nil.
func (g *tcpGroup) failure() *peerFault {
	select {
	case <-g.failed:
		return g.cause.Load()
	default:
		return nil
	}
}

// abort fails the group: every pending and future op fails with f. Peers
// are told why (or, on Close, that we left cleanly), then every connection
// is cut and its goroutines waited for, so that no reader still writes into
// a buffer whose op has failed, and only then is g.failed closed.
func (g *tcpGroup) abort(f *peerFault) {
	g.failOnce.Do(func() {
		g.cause.Store(f)
		go g.teardown(f)
	})
}

func (g *tcpGroup) teardown(f *peerFault) {
	bye := errors.Is(f.kind, backend.ErrClosed) && g.byeOnly.Load()
	kind := frameAbort
	msg := encodeAbort(f)
	if bye {
		kind, msg = frameBye, nil
	} else if !errors.Is(f.kind, backend.ErrClosed) {
		g.logf("comm: tcp rank %d: process group failed: %v", g.rank, f)
	}
	// Let the control frames out, briefly: a stuck peer must not hold us.
	deadline := time.Now().Add(250 * time.Millisecond)
	for _, pc := range g.peers {
		if pc != nil && pc.cut.Load() {
			// expire put this connection's write deadline in the past. A
			// write it tore mid-frame closed the writer (the send below
			// then drops the frame); otherwise the stream ends at a frame
			// boundary, and the peer, often a live rank that is merely
			// busy, must read why we left rather than a bare EOF, which it
			// would take for the cause.
			pc.conn.SetWriteDeadline(deadline)
		}
	}
	for _, pc := range g.peers {
		if pc != nil {
			pc.send(&xfer{key: frameKey{kind: kind}, peer: pc.rank, buf: msg}, true)
		}
	}
	for _, pc := range g.peers {
		for pc != nil && !pc.idle() && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	closedErr := &peerFault{kind: f.kind, peers: f.peers, detail: f.detail, err: f.err}
	// After a failure, linger: closing a socket that holds unread bytes
	// (a peer's data for the op that failed) sends a reset, and a peer that
	// meets the reset before it has read our abort frame would blame the
	// connection instead of naming the cause. So end our side with a FIN
	// and read until the peer closes too (it does once it has read the
	// abort), or for abortLinger at most. A clean Close has nothing to tell.
	linger := !bye
	past, until := time.Unix(1, 0), time.Now().Add(abortLinger)
	for _, pc := range g.peers {
		if pc != nil {
			pc.closeWriter(closedErr)
			close(pc.stop)
			if linger {
				pc.conn.SetWriteDeadline(past) // a write blocked on a peer that does not read
				pc.conn.SetReadDeadline(until)
			} else {
				pc.conn.Close()
			}
		}
	}
	for _, pc := range g.peers {
		if pc != nil {
			<-pc.writerDone
			if cw, ok := pc.conn.(interface{ CloseWrite() error }); linger && ok {
				cw.CloseWrite()
			}
		}
	}
	for _, pc := range g.peers {
		if pc != nil {
			<-pc.readerDone
			if linger {
				pc.drain(until)
				pc.conn.Close()
			}
			pc.markGone(closedErr)
		}
	}
	close(g.failed)
}

// abortLinger bounds how long a failed group reads what its peers still
// send before it closes their connections (see teardown).
const abortLinger = time.Second

// drain discards what the peer sends until it closes the connection or
// until; the read deadline is set. An op reading inline holds the read
// token until the deadline ends its read.
func (pc *peerConn) drain(until time.Time) {
	select {
	case <-pc.rtok:
	case <-time.After(time.Until(until)):
		return
	}
	defer func() { pc.rtok <- struct{}{} }()
	var buf [16 << 10]byte
	for {
		if _, err := pc.conn.Read(buf[:]); err != nil {
			return
		}
	}
}

// Abort frames carry the fault's kind and culprits, so a rank that hears of
// a failure second-hand still names the rank that caused it.
var faultKinds = []error{backend.ErrPeerFailed, backend.ErrTimeout, backend.ErrClosed, backend.ErrBadArgument, backend.ErrAuth, backend.ErrUnsupported}

func encodeAbort(f *peerFault) []byte {
	code := byte(0)
	for i, k := range faultKinds {
		if errors.Is(f.kind, k) {
			code = byte(i)
			break
		}
	}
	peers := f.peers[:min(len(f.peers), 64)]
	b := []byte{code, byte(len(peers))}
	for _, p := range peers {
		b = binary.BigEndian.AppendUint32(b, uint32(p))
	}
	text := f.detail
	if f.err != nil {
		text += ": " + f.err.Error()
	}
	return append(b, text[:min(len(text), maxControlPayload-len(b))]...)
}

// decodeAbort reads the fault a peer aborted with.
func decodeAbort(from int, b []byte) *peerFault {
	d := wire.Decoder{B: b}
	code := int(d.U8())
	n := int(d.U8())
	var peers []int
	for i := 0; i < n && d.Err == nil; i++ {
		peers = append(peers, int(d.U32()))
	}
	if d.Err != nil || code >= len(faultKinds) {
		return &peerFault{kind: backend.ErrPeerFailed, peers: []int{from}, detail: fmt.Sprintf("rank %d aborted the group", from)}
	}
	if len(peers) == 0 {
		peers = []int{from}
	}
	return &peerFault{kind: faultKinds[code], peers: peers,
		detail: fmt.Sprintf("rank %d aborted the group: %s", from, d.B)}
}

// connFailed turns a connection error into the group's failure. Once the
// group is going down, connection errors are consequences, not causes.
func (g *tcpGroup) connFailed(pc *peerConn, err error, dir string) error {
	if c := g.cause.Load(); c != nil {
		return c
	}
	if dir == "write" && pc.cut.Load() && errors.Is(err, os.ErrDeadlineExceeded) {
		// expire set this deadline: the op timed out while the write was
		// blocked on a peer that does not read, most often because that
		// peer waits for the same laggard. The op names the cause itself
		// (expiredFault asks every rank); blaming this peer would race it.
		return errExpiredWrite
	}
	f, ok := err.(*peerFault)
	if !ok {
		kind := backend.ErrPeerFailed
		if errors.Is(err, os.ErrDeadlineExceeded) {
			kind = backend.ErrTimeout
		}
		f = &peerFault{kind: kind, peers: []int{pc.rank},
			detail: fmt.Sprintf("rank %d: %s (%s)", pc.rank, describeConnErr(err), dir)}
	}
	g.abort(f)
	return g.cause.Load()
}

// Close fails pending ops with ErrClosed, tells the peers we left, and
// releases every connection and goroutine.
func (g *tcpGroup) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		<-g.workerDone
		return nil
	}
	g.closed = true
	g.mu.Unlock()
	g.qcond.Broadcast()
	g.byeOnly.Store(true)
	g.abort(&peerFault{kind: backend.ErrClosed, detail: "process group closed"})
	<-g.failed
	<-g.workerDone
	close(g.watchStop)
	<-g.watchDone
	g.kick.Stop()
	return nil
}

// newXfer records a transfer of op o.
func (g *tcpGroup) newXfer(o *tcpOp, peer int, kind frameKind, step, aux uint32, buf []byte) *xfer {
	x := &xfer{key: frameKey{kind: kind, seq: o.seq, step: step, aux: aux}, peer: peer, buf: buf, events: g.events, op: o}
	o.xfers = append(o.xfers, x)
	o.pending++
	return x
}

// send queues buf to peer as part of op o.
func (g *tcpGroup) send(o *tcpOp, peer int, step, aux uint32, buf []byte) *xfer {
	x := g.newXfer(o, peer, frameData, step, aux, buf)
	x.send = true
	x.direct = true
	g.peers[peer].send(x, false)
	return x
}

// recv posts a receive of exactly len(buf) bytes from peer as part of op
// o; the connection's reader goroutine reads it.
func (g *tcpGroup) recv(o *tcpOp, peer int, step, aux uint32, buf []byte) *xfer {
	x := g.newXfer(o, peer, frameData, step, aux, buf)
	g.peers[peer].post(x)
	return x
}

// recvQuiet posts a receive that the op reads itself when it awaits it:
// for the small, latency-bound steps.
func (g *tcpGroup) recvQuiet(o *tcpOp, peer int, step, aux uint32, buf []byte) *xfer {
	x := g.newXfer(o, peer, frameData, step, aux, buf)
	x.quiet = true
	o.quiet = append(o.quiet, x)
	g.peers[peer].post(x)
	return x
}

// await waits until x completes, handling other completions meanwhile. A
// quiet receive is read right here when the connection is free.
func (g *tcpGroup) await(o *tcpOp, x *xfer) error {
	for !x.done {
		if x.quiet && !x.arrived.Load() {
			if _, err := g.peers[x.peer].readInline(x, o.expired); err != nil {
				return g.expiredFault(o)
			}
		}
		if err := g.next(o); err != nil {
			return err
		}
	}
	return nil
}

// awaitAll waits for every transfer of o.
func (g *tcpGroup) awaitAll(o *tcpOp) error {
	for o.pending > 0 {
		if err := g.next(o); err != nil {
			return err
		}
	}
	return nil
}

// next takes one completion event of o, or fails on timeout or group
// failure. Events of an earlier op (a monitored barrier's late arrivals)
// are dropped.
func (g *tcpGroup) next(o *tcpOp) error {
	var x *xfer
	select {
	case x = <-g.events:
	default:
		// About to block on something else than a quiet receive: hand the
		// quiet ones to the reader goroutines, or two ranks each waiting
		// for its own send could leave each other's data unread.
		g.promoteQuiet(o)
	}
	if x != nil {
		return g.took(o, x)
	}
	select {
	case x := <-g.events:
		return g.took(o, x)
	case <-g.failed:
		return g.cause.Load()
	case <-o.expired:
		return g.expiredFault(o)
	}
}

// took processes a completion event taken from the queue.
func (g *tcpGroup) took(o *tcpOp, x *xfer) error {
	if x.op != o {
		return nil
	}
	x.done = true
	o.pending--
	if x.err == nil && x.then != nil {
		x.then()
	}
	if errors.Is(x.err, errExpiredWrite) {
		return g.expiredFault(o)
	}
	return x.err
}

// promoteQuiet turns o's outstanding quiet receives into ordinary ones.
func (g *tcpGroup) promoteQuiet(o *tcpOp) {
	for _, x := range o.quiet {
		if !x.arrived.Load() {
			g.peers[x.peer].promote(x)
		}
	}
	o.quiet = o.quiet[:0]
}

// errExpiredWrite finishes the transfers of a write that an op's expiry
// interrupted (connFailed); the op turns it into its own timeout diagnosis
// (took).
// It is a timeout wherever it surfaces as it is.
var errExpiredWrite = fmt.Errorf("%w: comm: tcp: a write interrupted by the op's deadline", backend.ErrTimeout)

// timeoutFault names the peers o still waits on and, asking every rank
// where it is, the ranks that never reached this collective.
func (g *tcpGroup) timeoutFault(o *tcpOp) *peerFault {
	seen := map[int]bool{}
	var waiting []int
	for _, x := range o.xfers {
		if !x.done && !seen[x.peer] {
			seen[x.peer] = true
			waiting = append(waiting, x.peer)
		}
	}
	slices.Sort(waiting)
	timeout := g.timeout
	if o.timeout > 0 {
		timeout = o.timeout
	}
	// Ask every rank where it is, filling in from the answers taken just
	// before the deadline: a peer whose connection the timeout cut can
	// answer no more, and it is usually a live one that waits too. The
	// question's wait also lets the other waiting ranks reach their own
	// deadlines, so each reports its own diagnosis rather than ours.
	notes := g.queryProgress(time.Second)
	if pre := o.preNotes.Load(); pre != nil {
		for r, n := range *pre {
			if _, ok := notes[r]; !ok {
				notes[r] = n
			}
		}
	}
	if f := g.mismatchIn(o, notes); f != nil {
		f.detail = fmt.Sprintf("waited %v; %s", timeout, f.detail)
		return f
	}
	lag, words := g.laggards(o, notes)
	if len(lag) == 0 {
		detail := fmt.Sprintf("no progress after %v", timeout)
		if len(waiting) > 0 {
			detail = fmt.Sprintf("waited %v for %s; every rank has reached %s #%d (a slow or stuck connection)",
				timeout, backend.RankList(waiting), o.name, o.seq)
		}
		return &peerFault{kind: backend.ErrTimeout, peers: waiting, detail: detail}
	}
	// Blame the ranks that never arrived, not the peers whose data this
	// rank waits for: on 3 or more ranks those are often waiting for the
	// same laggard themselves. Likewise, when some laggards are silent,
	// the ones that answer from inside an earlier collective are stuck
	// behind them: they are counted, not blamed.
	var silent []int
	var silentWords []string
	stuck := 0
	for i, r := range lag {
		if _, ok := notes[r]; !ok {
			silent, silentWords = append(silent, r), append(silentWords, words[i])
		} else if notes[r].inOp {
			stuck++
		}
	}
	if len(silent) > 0 && len(silent)+stuck == len(lag) && stuck > 0 {
		detail := fmt.Sprintf("waited %v; not arrived at %s #%d: %s; %d more still in an earlier collective, waiting too",
			timeout, o.name, o.seq, strings.Join(silentWords, ", "), stuck)
		return &peerFault{kind: backend.ErrTimeout, peers: silent, detail: detail}
	}
	detail := fmt.Sprintf("waited %v; not arrived at %s #%d: %s", timeout, o.name, o.seq, strings.Join(words, ", "))
	if others := len(waiting) - countIn(waiting, lag); others > 0 {
		detail += fmt.Sprintf("; the %d peer(s) this rank waits on have arrived and wait too", others)
	}
	return &peerFault{kind: backend.ErrTimeout, peers: lag, detail: detail}
}

// countIn counts the elements of a that are in b.
func countIn(a, b []int) int {
	n := 0
	for _, x := range a {
		if slices.Contains(b, x) {
			n++
		}
	}
	return n
}
