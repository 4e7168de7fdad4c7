package comm

import (
	"context"
	"errors"
	"fmt"
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/internal/auth"
	"github.com/goddp/goddp/comm/store"
	"net"
	"os"
	"strings"
	"syscall"
	"time"
)

// Init joins the job described by cfg and returns its default process group
// (torch's init_process_group). Every rank calls it; it returns once all
// ranks have connected, or fails when ctx ends or cfg.Timeout passes.
//
// Rendezvous: with env:// (and tcp://host:port) rank 0 hosts the store at the
// master address unless cfg.StoreHosted says the launcher does; with
// file:///path all ranks share a store file. Rank 0 publishes the job (run
// id, world size, backend) and each rank claims its slot once, so a rank of
// another job, a rank started with other settings or a second process with
// the same rank is refused at once, naming what differs (see
// rendezvous.go). The ranks then derive LocalRank/LocalWorldSize from their
// hosts when not given, and pick the backend: "auto" means shm when every
// rank is on one host and shm is registered, hier when the ranks span
// hosts with the same number (more than one) on each, tcp otherwise.
func Init(ctx context.Context, cfg Config) (ProcessGroup, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if err := checkAuth(cfg); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()

	base, srv, err := openStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (ProcessGroup, error) {
		base.Close()
		if srv != nil {
			srv.Close()
		}
		return nil, err
	}
	prefix := cfg.StorePrefix
	if prefix == "" {
		prefix = "goddp"
	}
	scheme, target, _ := cfg.initTarget()
	where := target
	if scheme == "file" {
		where = "file://" + target
	}
	// The rank hosting the store reports the ranks of other jobs that
	// rendezvous refuses, from the moment its record is out.
	var strangers *strangerWatch
	var published func(ns string)
	if srv != nil {
		published = func(ns string) { strangers = watchStrangers(base, ns, cfg.Rank, logfOf(cfg)) }
		failBase := fail
		fail = func(err error) (ProcessGroup, error) {
			strangers.stop()
			return failBase(err)
		}
	}
	j, err := rendezvous(ctx, base, cfg, prefix, where, published)
	if err != nil {
		if srv != nil {
			lingerForClients(srv, min(cfg.Timeout, 5*time.Second))
		}
		return fail(err)
	}
	if srv != nil {
		failRendezvous := fail
		fail = func(err error) (ProcessGroup, error) {
			lingerForReaders(base, j.ns, cfg.WorldSize, cfg.Timeout)
			return failRendezvous(err)
		}
	}
	localRank, localSize, err := localPlacement(j.members, cfg.Rank)
	if err != nil {
		return fail(fmt.Errorf("%w: rank %d: %v", ErrBadArgument, cfg.Rank, err))
	}
	sameHost := true
	for _, m := range j.members {
		sameHost = sameHost && m.Host == j.members[0].Host
	}
	if cfg.LocalWorldSize == 0 {
		cfg.LocalRank, cfg.LocalWorldSize = localRank[cfg.Rank], localSize[cfg.Rank]
	}

	name := cfg.Backend
	if name == "" || name == "auto" {
		name = autoBackend(j.members, sameHost)
	}
	factory, err := backend.Lookup(name)
	if err != nil {
		return fail(err)
	}
	addr := cfg.Addr
	if addr == "" {
		addr = defaultPeerHost(srv, base, sameHost)
	}
	pg, err := factory(ctx, Options{
		Rank:             cfg.Rank,
		Size:             cfg.WorldSize,
		Store:            store.NewPrefix(name, store.NewPrefix(j.ns, base)),
		Timeout:          cfg.Timeout,
		Token:            cfg.Token,
		Insecure:         cfg.Insecure,
		Prefix:           j.ns + "/" + name,
		LocalRank:        cfg.LocalRank,
		LocalSize:        cfg.LocalWorldSize,
		Addr:             addr,
		Logf:             cfg.Logf,
		StallThreshold:   cfg.StallThreshold,
		DebugCollectives: cfg.DebugCollectives,
	})
	if err != nil {
		return fail(fmt.Errorf("comm: init backend %q on rank %d: %w", name, cfg.Rank, err))
	}
	// A second claim of a slot may land while the backend connects; the
	// ranks that already formed a group with whoever came first must not
	// go on with it.
	if msg, err := aborted(ctx, base, j.ns); err == nil && msg != "" {
		pg.Close()
		return fail(fmt.Errorf("%w: rank %d: the job's rendezvous at %s failed: %s", ErrBadArgument, cfg.Rank, where, msg))
	}
	g := &initGroup{ProcessGroup: pg, base: base, srv: srv, strangers: strangers}
	if srv != nil {
		g.watchAborts(base, j.ns, cfg.Rank, logfOf(cfg))
	}
	if scheme == "file" {
		g.release = func() { releaseFileRun(base, j, prefix, cfg.WorldSize, cfg.Timeout) }
	}
	return g, nil
}

// autoBackend is what "auto" picks: shm when every rank is on one host;
// hier when the ranks span hosts and every host runs the same number of
// them, more than one (a reduce-scatter within each host then saves the
// hosts' links); tcp otherwise.
func autoBackend(members []member, sameHost bool) string {
	registered := func(name string) bool { _, err := backend.Lookup(name); return err == nil }
	if sameHost {
		if registered("shm") {
			return "shm"
		}
		return "tcp"
	}
	perHost := map[string]int{}
	for _, m := range members {
		perHost[m.Host]++
	}
	even := true
	for _, n := range perHost {
		even = even && n == perHost[members[0].Host]
	}
	if even && perHost[members[0].Host] > 1 && registered("hier") && registered("shm") {
		return "hier"
	}
	return "tcp"
}

// logfOf is cfg.Logf, or stderr.
func logfOf(cfg Config) func(format string, args ...any) {
	if cfg.Logf != nil {
		return cfg.Logf
	}
	return func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
}

// releaseFileRun empties the job record of a file store once every rank
// of the run has closed its group, so that the next run on the same file
// starts afresh (its keys live under a new generation anyway). A run that
// did not end cleanly leaves its record; the next run's rank 0 replaces it
// when the old rank 0 has exited on this host, and refuses it otherwise.
func releaseFileRun(s Store, j *joined, prefix string, world int, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), min(timeout, 10*time.Second))
	defer cancel()
	n, err := s.Add(ctx, j.ns+"/closed", 1)
	if err == nil && n == int64(world) {
		_, _ = s.CompareSet(ctx, rootOf(prefix)+"/job", j.recRaw, []byte{})
	}
}

// InitFromEnv is Init(ctx, ConfigFromEnv()).
func InitFromEnv(ctx context.Context) (ProcessGroup, error) {
	cfg, err := ConfigFromEnv()
	if err != nil {
		return nil, err
	}
	return Init(ctx, cfg)
}

// checkAuth refuses, on every rank and before anything listens, a job
// whose store or peers would be reachable beyond this host with no token,
// and prints the warning of GODDP_INSECURE=1 on every rank.
func checkAuth(cfg Config) error {
	scheme, target, err := cfg.initTarget()
	if err != nil {
		return err
	}
	var addrs []string
	if scheme != "file" {
		addrs = append(addrs, target)
		if cfg.Rank == 0 && !cfg.StoreHosted && cfg.StoreBind != "" {
			addrs = append(addrs, cfg.StoreBind)
		}
	}
	if cfg.Addr != "" {
		addrs = append(addrs, cfg.Addr)
	}
	for _, a := range addrs {
		if err := auth.CheckListen(a, cfg.Token, cfg.Insecure); err != nil {
			return fmt.Errorf("comm: rank %d: %w", cfg.Rank, err)
		}
	}
	if cfg.Token == "" && cfg.Insecure {
		logf := logfOf(cfg)
		where := target
		if len(addrs) > 0 {
			where = strings.Join(addrs, " and ")
		}
		logf("%s", auth.InsecureWarning(cfg.Rank, where))
	}
	return nil
}

// openStore connects to (or, on rank 0, hosts) the rendezvous store.
func openStore(ctx context.Context, cfg Config) (Store, *store.Server, error) {
	scheme, target, err := cfg.initTarget()
	if err != nil {
		return nil, nil, err
	}
	opts := []store.Option{store.WithToken(cfg.Token), store.WithTimeout(cfg.Timeout)}
	if cfg.Insecure {
		opts = append(opts, store.WithInsecure())
	}
	if cfg.Logf != nil {
		opts = append(opts, store.WithLogger(cfg.Logf))
	}
	if scheme == "file" {
		s, err := store.NewFile(target, opts...)
		return s, nil, err
	}
	if s, ok, err := openAgentStore(ctx, cfg, scheme, target); ok {
		return s, nil, err
	}
	if cfg.Rank == 0 && !cfg.StoreHosted {
		bind := cfg.StoreBind
		if bind == "" {
			bind = target
		}
		srv, err := store.Listen(ctx, bind, opts...)
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, nil, fmt.Errorf("%w (is another job using port %s? set MASTER_PORT)", err, portOf(bind))
		}
		if err != nil {
			return nil, nil, err
		}
		return srv.Client(), srv, nil
	}
	s, err := store.Dial(ctx, target, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("comm: rank %d: rendezvous at %s: %w", cfg.Rank, target, err)
	}
	return s, nil, nil
}

func portOf(addr string) string {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return p
}

// hostIdentity names this host in the ranks' claims: the host name plus
// the kernel boot id, so two containers that share a host name on
// different machines are told apart.
func hostIdentity() string {
	h, _ := os.Hostname()
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return h + "/" + strings.TrimSpace(string(boot))
}

// defaultPeerHost picks the host this rank's peer listener binds to: the
// interface its store connection uses, else the store server's own host,
// else loopback when every rank is local, else the host name's address.
func defaultPeerHost(srv *store.Server, s Store, sameHost bool) string {
	if a, ok := store.LocalAddr(s).(*net.TCPAddr); ok && a != nil {
		return a.IP.String()
	}
	if srv != nil {
		if h, _, err := net.SplitHostPort(srv.Addr()); err == nil {
			if ip := net.ParseIP(h); ip != nil && !ip.IsUnspecified() {
				return h
			}
		}
	}
	if sameHost {
		return "127.0.0.1"
	}
	if name, err := os.Hostname(); err == nil {
		if addrs, err := net.LookupHost(name); err == nil && len(addrs) > 0 {
			return addrs[0]
		}
	}
	return "127.0.0.1"
}

// initGroup is the group Init returns: the backend's group plus the store
// (and server) that Init opened, closed with it. It forwards every optional
// interface; Unwrap gives the backend's own group.
type initGroup struct {
	ProcessGroup
	base Store
	srv  *store.Server
	// stopWatch ends watchAborts, and watched is closed once it has.
	stopWatch context.CancelFunc
	watched   chan struct{}
	// release runs once the backend's group is closed (file stores).
	release func()
	// strangers logs the ranks of other jobs refused (hosting rank only).
	strangers *strangerWatch
}

// watchAborts reports, on the rank that hosts the store, a second claim of
// a rank's slot that comes after the job has formed: the late process is
// refused and the job goes on with the ranks it formed with, but whoever
// runs the job needs to know that another job, or a duplicate rank, tried
// to join. The watch is a blocking get on the in-process store, so it
// costs no round trips.
func (g *initGroup) watchAborts(s Store, ns string, rank int, logf func(format string, args ...any)) {
	ctx, cancel := context.WithCancel(context.Background())
	g.stopWatch, g.watched = cancel, make(chan struct{})
	go func() {
		defer close(g.watched)
		for {
			v, err := s.Get(ctx, abortKey(ns))
			if err == nil {
				logf("comm: rank %d: WARNING: %s, after this job had formed; the late process was refused and this job "+
					"goes on with the ranks it formed with", rank, v)
				return
			}
			if !errors.Is(err, ErrTimeout) {
				return // closed
			}
		}
	}()
}

// Unwrap returns the backend's process group.
func (g *initGroup) Unwrap() ProcessGroup { return g.ProcessGroup }

func (g *initGroup) Close() error {
	if g.stopWatch != nil {
		g.stopWatch()
		<-g.watched
	}
	g.strangers.stop()
	err := g.ProcessGroup.Close()
	if g.release != nil {
		g.release()
	}
	if e := g.base.Close(); err == nil && !errors.Is(e, ErrClosed) {
		err = e
	}
	if g.srv != nil {
		// The other ranks need the store only while setting up groups,
		// which every rank does together, so it can go with rank 0's group.
		if e := g.srv.Close(); err == nil {
			err = e
		}
	}
	return err
}

func (g *initGroup) AllGather(out, in Buffer) Work { return AllGather(g.ProcessGroup, out, in) }
func (g *initGroup) ReduceScatter(out, in Buffer, op ReduceOp) Work {
	return ReduceScatter(g.ProcessGroup, out, in, op)
}
func (g *initGroup) Reduce(buf Buffer, root int, op ReduceOp) Work {
	return Reduce(g.ProcessGroup, buf, root, op)
}
func (g *initGroup) Gather(out, in Buffer, root int) Work {
	return Gather(g.ProcessGroup, out, in, root)
}
func (g *initGroup) Scatter(out, in Buffer, root int) Work {
	return Scatter(g.ProcessGroup, out, in, root)
}
func (g *initGroup) AllToAll(out, in Buffer) Work { return AllToAll(g.ProcessGroup, out, in) }
func (g *initGroup) Send(buf Buffer, dst, tag int) Work {
	return Send(g.ProcessGroup, buf, dst, tag)
}
func (g *initGroup) Recv(buf Buffer, src, tag int) Work {
	return Recv(g.ProcessGroup, buf, src, tag)
}

func (g *initGroup) MonitoredBarrier(ctx context.Context, timeout time.Duration) error {
	if m, ok := g.ProcessGroup.(BarrierMonitor); ok {
		return m.MonitoredBarrier(ctx, timeout)
	}
	return fmt.Errorf("%w: monitored barrier on backend %q", ErrUnsupported, g.Backend())
}

func (g *initGroup) NewGroup(ctx context.Context, ranks []int) (ProcessGroup, error) {
	if s, ok := g.ProcessGroup.(Subgrouper); ok {
		return s.NewGroup(ctx, ranks)
	}
	return nil, fmt.Errorf("%w: new group on backend %q", ErrUnsupported, g.Backend())
}
