package launch

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/goddp/goddp/comm/backend"
)

// storeServer is a store hosted by this launcher (store.Server).
type storeServer interface {
	Addr() string
	Close() error
}

// storeDriver hosts and dials stores. The real one is comm's TCP store;
// tests of the rendezvous logic plug in an in-memory one.
type storeDriver interface {
	listen(ctx context.Context, addr, token string) (storeServer, error)
	dial(ctx context.Context, addr, token string) (backend.Store, error)
}

// assignment is this node's place in one round of the job.
type assignment struct {
	Round          int        `json:"round"`
	RestartCount   int        `json:"restart_count"` // failures so far
	MaxRestarts    int        `json:"max_restarts"`
	GroupRank      int        `json:"group_rank"`
	GroupWorldSize int        `json:"group_world_size"`
	RankOffset     int        `json:"rank_offset"`
	WorldSize      int        `json:"world_size"`
	MasterAddr     string     `json:"master_addr"`
	MasterPort     int        `json:"master_port"`
	Nodes          []planNode `json:"nodes,omitempty"`
}

// remoteEvent ends a round because of something outside this node.
type remoteEvent struct {
	failure    *WorkerFailure // a worker (or a whole node) failed elsewhere
	membership bool           // nodes wait to join: re-rendezvous, not a failure
}

// rendezvous is how the nodes of a job agree on each round.
type rendezvous interface {
	// join blocks until this round's membership is settled.
	join(ctx context.Context, round, restarts int) (*assignment, error)
	// watch checks the other nodes during a round (called every monitor tick).
	watch(ctx context.Context, asg *assignment) (*remoteEvent, error)
	// fail publishes a local failure and returns the round's root cause,
	// which is an earlier failure on another node when there was one.
	fail(ctx context.Context, asg *assignment, f WorkerFailure) WorkerFailure
	// done marks this node's workers as finished and waits for every node.
	done(ctx context.Context, asg *assignment) (*remoteEvent, error)
	// endRound releases what the round held (the workers' store).
	endRound(asg *assignment)
	// shutdown tells the other nodes that this one stopped for good (it was
	// interrupted), so they end the job instead of waiting for it.
	shutdown(reason string)
	// close ends the job on this node; final is true after the last round.
	close()
}

// localRdzv is the single-node case: nothing to meet, the launcher only
// hosts a fresh workers' store for each round.
type localRdzv struct {
	a   *agent
	srv storeServer
}

func (r *localRdzv) join(ctx context.Context, round, restarts int) (*assignment, error) {
	cfg := &r.a.cfg
	host, port := cfg.MasterAddr, cfg.MasterPort
	if cfg.Standalone {
		host, port = "127.0.0.1", 0
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	srv, err := r.a.stores.listen(ctx, addr, r.a.token)
	if err != nil {
		hint := "is another job using it? choose a free one with --master-port, or use --standalone"
		if cfg.Standalone {
			hint = "check the loopback interface"
		}
		return nil, fmt.Errorf("%w: cannot host the workers' store on %s (%s): %w", ErrRendezvous, addr, hint, err)
	}
	r.srv = srv
	_, p, _ := net.SplitHostPort(srv.Addr())
	port, _ = strconv.Atoi(p)
	return &assignment{
		Round: round, RestartCount: restarts, MaxRestarts: cfg.MaxRestarts,
		GroupRank: 0, GroupWorldSize: 1, RankOffset: 0, WorldSize: cfg.NProcPerNode,
		MasterAddr: host, MasterPort: port,
	}, nil
}

func (r *localRdzv) watch(context.Context, *assignment) (*remoteEvent, error) { return nil, nil }

func (r *localRdzv) fail(_ context.Context, _ *assignment, f WorkerFailure) WorkerFailure { return f }

func (r *localRdzv) done(context.Context, *assignment) (*remoteEvent, error) { return nil, nil }

func (r *localRdzv) endRound(*assignment) {
	if r.srv != nil {
		_ = r.srv.Close()
		r.srv = nil
	}
}

func (r *localRdzv) shutdown(string) {}

func (r *localRdzv) close() { r.endRound(nil) }

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
