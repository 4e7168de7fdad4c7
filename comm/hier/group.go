package hier

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/store"
)

func init() { backend.Register("hier", New) }

// group is one rank's hier process group.
type group struct {
	rank, size int
	cfg        Config
	timeout    time.Duration

	// nodes[m] lists the global ranks of node m in rank order; node and
	// local are this rank's place, where[r] every rank's.
	nodes       [][]int
	node, local int
	where       [][2]int
	// hosts[m] is node m's Config.Host, for errors.
	hosts []string

	// store and faultKey share the first fault any rank saw (firstFault).
	store    backend.Store
	faultKey string

	intra, inter, flat backend.ProcessGroup

	mu     sync.Mutex
	queue  []*op
	closed bool
	kick   chan struct{}
	done   chan struct{}
	seq    uint64

	// Scratch of the worker (one op at a time).
	scratch, shard, vec []byte
}

// op is one queued collective.
type op struct {
	name  string
	bytes int
	seq   uint64
	run   func(ctx context.Context, o *op) error
	fut   *backend.Future
}

// New creates this rank's hier group with the Config the environment
// gives. comm.Init calls it for backend "hier" (and "auto" on several
// hosts with several ranks each).
func New(ctx context.Context, opts backend.Options) (backend.ProcessGroup, error) {
	cfg, err := ConfigFromEnv()
	if err != nil {
		return nil, err
	}
	return NewWithConfig(ctx, opts, cfg)
}

// NewWithConfig is New with the tuning given by cfg.
func NewWithConfig(ctx context.Context, opts backend.Options, cfg Config) (backend.ProcessGroup, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Size < 1 || opts.Rank < 0 || opts.Rank >= opts.Size {
		return nil, fmt.Errorf("%w: hier: rank %d of world size %d", backend.ErrBadArgument, opts.Rank, opts.Size)
	}
	if opts.Store == nil {
		return nil, fmt.Errorf("%w: hier: Options.Store is nil", backend.ErrBadArgument)
	}
	cfg = cfg.resolve()
	if opts.Timeout <= 0 {
		opts.Timeout = backend.DefaultTimeout
	}
	intraF, err := backend.Lookup(cfg.Intra)
	if err != nil {
		return nil, fmt.Errorf("hier: intra-node backend: %w", err)
	}
	interF, err := backend.Lookup(cfg.Inter)
	if err != nil {
		return nil, fmt.Errorf("hier: inter-node backend: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	g := &group{rank: opts.Rank, size: opts.Size, cfg: cfg, timeout: opts.Timeout,
		store: opts.Store, faultKey: opts.Prefix + "/hier/fault",
		kick: make(chan struct{}, 1), done: make(chan struct{})}
	if err := g.place(ctx, opts); err != nil {
		return nil, err
	}
	logf := opts.Logger()
	// Each sub-group has its own store prefix. Its local size stays the
	// number of ranks on this host, even for the inter group (one per
	// host): backends read it as how many ranks share the host's cores
	// (tcp spins only when each can have one).
	sub := func(f backend.Factory, name string, rank, size, localRank, localSize int) (backend.ProcessGroup, error) {
		o := opts
		o.Rank, o.Size, o.LocalRank, o.LocalSize = rank, size, localRank, localSize
		o.Store = store.NewPrefix(name, opts.Store)
		o.Prefix = opts.Prefix + "/" + name
		o.Logf = logf
		return f(ctx, o)
	}
	fail := func(step string, err error) (backend.ProcessGroup, error) {
		for _, pg := range []backend.ProcessGroup{g.intra, g.inter, g.flat} {
			if pg != nil {
				pg.Close()
			}
		}
		return nil, fmt.Errorf("comm: hier: rank %d: creating the %s group: %w", g.rank, step, err)
	}
	L, M := len(g.nodes[g.node]), len(g.nodes)
	if g.intra, err = sub(intraF, "intra"+strconv.Itoa(g.node), g.local, L, g.local, L); err != nil {
		return fail("intra-node ("+cfg.Intra+")", err)
	}
	if g.inter, err = sub(interF, "inter"+strconv.Itoa(g.local), g.node, M, g.local, L); err != nil {
		return fail("inter-node ("+cfg.Inter+")", err)
	}
	if g.flat, err = sub(interF, "flat", g.rank, g.size, opts.LocalRank, opts.LocalSize); err != nil {
		return fail("flat ("+cfg.Inter+")", err)
	}
	for _, c := range []struct {
		pg   backend.ProcessGroup
		name string
	}{{g.intra, cfg.Intra}, {g.inter, cfg.Inter}} {
		_, rs := c.pg.(backend.ReduceScatterer)
		_, ag := c.pg.(backend.AllGatherer)
		if !rs || !ag {
			return fail(c.name, fmt.Errorf("%w: backend %q has no reduce-scatter or all-gather", backend.ErrUnsupported, c.name))
		}
	}
	go g.worker()
	return g, nil
}

// place learns every rank's host through the store and numbers the nodes
// by their lowest rank.
func (g *group) place(ctx context.Context, opts backend.Options) error {
	if err := opts.Store.Set(ctx, "hier/host/"+strconv.Itoa(g.rank), []byte(g.cfg.Host)); err != nil {
		return fmt.Errorf("comm: hier: rank %d: publishing its host: %w", g.rank, err)
	}
	index := map[string]int{}
	g.where = make([][2]int, g.size)
	for r := range g.size {
		v, err := opts.Store.Get(ctx, "hier/host/"+strconv.Itoa(r))
		if err != nil {
			return fmt.Errorf("comm: hier: rank %d: waiting for rank %d's host: %w", g.rank, r, err)
		}
		m, ok := index[string(v)]
		if !ok {
			m = len(g.nodes)
			index[string(v)] = m
			g.nodes = append(g.nodes, nil)
			g.hosts = append(g.hosts, string(v))
		}
		g.where[r] = [2]int{m, len(g.nodes[m])}
		g.nodes[m] = append(g.nodes[m], r)
	}
	g.node, g.local = g.where[g.rank][0], g.where[g.rank][1]
	for m, ranks := range g.nodes {
		if len(ranks) != len(g.nodes[0]) {
			return fmt.Errorf("%w: hier: every host must run the same number of ranks: host of rank %d runs %d, host of rank %d runs %d "+
				"(use backend tcp)", backend.ErrBadArgument, g.nodes[0][0], len(g.nodes[0]), g.nodes[m][0], len(ranks))
		}
	}
	if opts.LocalSize > 0 && opts.LocalSize != len(g.nodes[g.node]) {
		return fmt.Errorf("%w: hier: rank %d was given local world size %d but its host runs %d ranks",
			backend.ErrBadArgument, g.rank, opts.LocalSize, len(g.nodes[g.node]))
	}
	return nil
}

func (g *group) Rank() int       { return g.rank }
func (g *group) Size() int       { return g.size }
func (g *group) Backend() string { return "hier" }

// submit queues an op for the worker.
func (g *group) submit(name string, bytes int, run func(ctx context.Context, o *op) error) backend.Work {
	o := &op{name: name, bytes: bytes, run: run, fut: backend.NewFuture()}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return backend.FailedFuture(&backend.OpError{Kind: backend.ErrClosed, Op: name, Bytes: bytes, Rank: g.rank})
	}
	g.seq++
	o.seq = g.seq
	g.queue = append(g.queue, o)
	g.mu.Unlock()
	select {
	case g.kick <- struct{}{}:
	default:
	}
	return o.fut
}

func (g *group) worker() {
	defer close(g.done)
	for {
		g.mu.Lock()
		for len(g.queue) == 0 && !g.closed {
			g.mu.Unlock()
			<-g.kick
			g.mu.Lock()
		}
		if g.closed {
			q := g.queue
			g.queue = nil
			g.mu.Unlock()
			for _, o := range q {
				o.fut.Complete(&backend.OpError{Kind: backend.ErrClosed, Op: o.name, Seq: o.seq, Bytes: o.bytes, Rank: g.rank})
			}
			return
		}
		o := g.queue[0]
		g.queue = g.queue[1:]
		g.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
		err := o.run(ctx, o)
		cancel()
		o.fut.Complete(err)
	}
}

// wait waits for a sub-group's op and names the step when it fails.
func (g *group) wait(ctx context.Context, o *op, step string, sub backend.ProcessGroup, w backend.Work) error {
	if err := w.Wait(ctx); err != nil {
		return g.opError(o, step, sub, err)
	}
	return nil
}

// Close fails queued ops with ErrClosed and closes the sub-groups, which
// fails the op in progress.
func (g *group) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	g.mu.Unlock()
	select {
	case g.kick <- struct{}{}:
	default:
	}
	var errs []error
	for _, pg := range []backend.ProcessGroup{g.intra, g.inter, g.flat} {
		if err := pg.Close(); err != nil && !errors.Is(err, backend.ErrClosed) {
			errs = append(errs, err)
		}
	}
	<-g.done
	return errors.Join(errs...)
}
