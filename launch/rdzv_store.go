package launch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/goddp/goddp/comm/backend"
)

// Multi-node rendezvous through a store hosted by node 0's launcher (the
// "host"). Keys live under goddp/rdzv/<run id>/r/<round>/:
//
//	joined       counter; each launcher's Add gives its arrival index
//	node/<i>     the JSON nodeInfo of arrival i
//	plan         the host's decision: who is in, ranks, the workers' store
//	failed       counter, > 0 once some worker failed in this round
//	failure      JSON WorkerFailure of the first failure (CompareSet)
//	hb/<g>       heartbeat counter of node g
//	done, left   exit barrier and the final acknowledgement
//
// and goddp/rdzv/<run id>/closed (+ closedn) once a node was interrupted:
// the job is over for every node.
//
// Every round starts with a fresh workers' store hosted by the host, so
// workers never see keys of an earlier attempt.

type nodeInfo struct {
	NodeRank int    `json:"node_rank"` // -1: assigned by the host
	Host     string `json:"host"`
	Addr     string `json:"addr"`
	NProc    int    `json:"nproc"`
	PID      int    `json:"pid"`
	IsHost   bool   `json:"is_host"`
}

type planNode struct {
	nodeInfo
	Idx        int `json:"idx"` // arrival index
	GroupRank  int `json:"group_rank"`
	RankOffset int `json:"rank_offset"`
}

type rdzvPlan struct {
	RestartCount int        `json:"restart_count"`
	MaxRestarts  int        `json:"max_restarts"`
	WorldSize    int        `json:"world_size"`
	MasterAddr   string     `json:"master_addr"`
	MasterPort   int        `json:"master_port"`
	Nodes        []planNode `json:"nodes"`
	Error        string     `json:"error,omitempty"`
}

const (
	storeOpTimeout = 30 * time.Second
	minPollEvery   = 200 * time.Millisecond
)

type storeRdzv struct {
	a        *agent
	endpoint string
	epHost   string
	isHost   bool
	srv      storeServer // the rendezvous store, on the host
	st       backend.Store
	wsrv     storeServer // the workers' store of the round, on the host
	info     nodeInfo
	lastPoll time.Time
	hbRound  int
	hb       map[int]*hbSeen
	round    int // the last round this node joined
	peers    int // host: nodes of that round that will acknowledge the end
}

type hbSeen struct {
	count int64
	at    time.Time
}

func newStoreRdzv(a *agent) *storeRdzv { return &storeRdzv{a: a, hbRound: -1} }

// jobKey is a key that outlives rounds.
func (r *storeRdzv) jobKey(name string) string {
	return fmt.Sprintf("goddp/rdzv/%s/%s", r.a.cfg.RdzvID, name)
}

func (r *storeRdzv) key(round int, parts ...any) string {
	var b strings.Builder
	fmt.Fprintf(&b, "goddp/rdzv/%s/r/%d", r.a.cfg.RdzvID, round)
	for _, p := range parts {
		fmt.Fprintf(&b, "/%v", p)
	}
	return b.String()
}

// open hosts the store (node 0) and connects to it, retrying until the
// rendezvous deadline so that nodes may start in any order.
func (r *storeRdzv) open(ctx context.Context, deadline time.Time) error {
	cfg := &r.a.cfg
	host, port, err := cfg.rdzvHostPort()
	if err != nil {
		return err
	}
	r.epHost = host
	r.endpoint = net.JoinHostPort(host, strconv.Itoa(port))
	r.isHost = cfg.NodeRank == 0 || (cfg.NodeRank < 0 && isLocalAddr(host))
	if r.isHost {
		srv, err := r.a.stores.listen(ctx, r.endpoint, r.a.token)
		switch {
		case err == nil:
			r.srv = srv
			r.a.logf("hosting the rendezvous store on %s (run id %s)", srv.Addr(), cfg.RdzvID)
			if onlyLoopback(host) {
				r.a.logf("warning: %s resolves to a loopback address here, so other nodes cannot reach this store; "+
					"pass this node's IP instead", host)
			}
		case cfg.NodeRank == 0:
			return fmt.Errorf("%w: node 0 hosts the rendezvous store but cannot listen on %s "+
				"(is the address one of this machine's, and the port free?): %w", ErrRendezvous, r.endpoint, err)
		default:
			r.isHost = false // another launcher on this machine hosts it
		}
	}
	if c, ok := r.srv.(interface{ Client() backend.Store }); ok && r.srv != nil {
		r.st = c.Client() // in-process: no socket to itself
	}
	var lastErr error
	for attempt := 0; r.st == nil; attempt++ {
		actx, cancel := context.WithTimeout(ctx, min(10*time.Second, max(time.Until(deadline), time.Millisecond)))
		st, err := r.a.stores.dial(actx, r.endpoint, r.a.token)
		cancel()
		if err == nil {
			r.st = st
			continue
		}
		lastErr = err
		if errors.Is(err, backend.ErrAuth) {
			return fmt.Errorf("%w: the rendezvous store at %s refused this node's token: "+
				"every node needs the same %s: %w", ErrRendezvous, r.endpoint, EnvToken, err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: could not reach the rendezvous store at %s within %s "+
				"(is ddprun running on node 0 with the same endpoint?): %w", ErrRendezvous, r.endpoint, cfg.RdzvTimeout, lastErr)
		}
		if attempt == 0 {
			r.a.logf("waiting for the rendezvous store at %s", r.endpoint)
		}
		if err := sleepCtx(ctx, 250*time.Millisecond); err != nil {
			return err
		}
	}
	addr := cfg.LocalAddr
	if addr == "" && r.isHost {
		addr = host
	}
	if addr == "" {
		addr = localAddrOf(r.st)
	}
	if addr == "" {
		addr = outboundAddr(r.endpoint)
	}
	r.info = nodeInfo{NodeRank: cfg.NodeRank, Host: r.a.host, Addr: addr, NProc: cfg.NProcPerNode, PID: os.Getpid(), IsHost: r.isHost}
	return nil
}

func (r *storeRdzv) join(ctx context.Context, round, restarts int) (*assignment, error) {
	deadline := time.Now().Add(r.a.cfg.RdzvTimeout)
	if r.st == nil {
		if err := r.open(ctx, deadline); err != nil {
			return nil, err
		}
	}
	for {
		r.round = round
		asg, err := r.joinRound(ctx, round, restarts, deadline)
		if asg != nil {
			r.peers = asg.GroupWorldSize - 1
		}
		if err != nil || asg != nil {
			return asg, err
		}
		r.a.logf("rendezvous round %d is full (--nnodes max %d); waiting for the next round", round, r.a.cfg.MaxNodes)
		round++
	}
}

// joinRound returns (nil, nil) when the round closed without this node.
func (r *storeRdzv) joinRound(ctx context.Context, round, restarts int, deadline time.Time) (*assignment, error) {
	n, err := r.add(ctx, r.key(round, "joined"), 1)
	if err != nil {
		return nil, err
	}
	idx := int(n - 1)
	data, _ := json.Marshal(r.info)
	if err := r.do(ctx, func(c context.Context) error { return r.st.Set(c, r.key(round, "node", idx), data) }); err != nil {
		return nil, err
	}
	var plan *rdzvPlan
	if r.isHost {
		if plan, err = r.decide(ctx, round, restarts, deadline); err != nil {
			return nil, err
		}
	} else {
		gctx, cancel := context.WithDeadline(ctx, deadline)
		data, err := r.st.Get(gctx, r.key(round, "plan"))
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil && !time.Now().Before(deadline):
			return nil, fmt.Errorf("%w: timed out after %s waiting for the other nodes "+
				"(the host at %s has not closed round %d): %w", ErrRendezvous, r.a.cfg.RdzvTimeout, r.endpoint, round, err)
		case err != nil:
			return nil, fmt.Errorf("%w: lost the rendezvous store at %s: %w", ErrRendezvous, r.endpoint, err)
		}
		plan = &rdzvPlan{}
		if err := json.Unmarshal(data, plan); err != nil {
			return nil, fmt.Errorf("%w: bad plan from the rendezvous host: %w", ErrRendezvous, err)
		}
		if plan.Error != "" {
			return nil, fmt.Errorf("%w: %s", ErrRendezvous, plan.Error)
		}
	}
	for _, pn := range plan.Nodes {
		if pn.Idx == idx {
			return &assignment{
				Round: round, RestartCount: plan.RestartCount, MaxRestarts: plan.MaxRestarts,
				GroupRank: pn.GroupRank, GroupWorldSize: len(plan.Nodes), RankOffset: pn.RankOffset,
				WorldSize: plan.WorldSize, MasterAddr: plan.MasterAddr, MasterPort: plan.MasterPort,
				Nodes: plan.Nodes,
			}, nil
		}
	}
	return nil, nil
}

// decide runs on the host: it waits for the nodes, assigns ranks, hosts the
// round's workers' store and publishes the plan.
func (r *storeRdzv) decide(ctx context.Context, round, restarts int, deadline time.Time) (*rdzvPlan, error) {
	cfg := &r.a.cfg
	var minAt time.Time
	n := 0
	for {
		cnt, err := r.add(ctx, r.key(round, "joined"), 0)
		if err != nil {
			return nil, err
		}
		if err := r.checkClosed(ctx); err != nil {
			return nil, err
		}
		now := time.Now()
		if int(cnt) >= cfg.MaxNodes {
			n = cfg.MaxNodes
			break
		}
		if int(cnt) >= cfg.MinNodes {
			if minAt.IsZero() {
				minAt = now
			}
			if now.Sub(minAt) >= cfg.LastCall || !now.Before(deadline) {
				n = int(cnt)
				break
			}
		}
		if !now.Before(deadline) {
			msg := r.timeoutMessage(ctx, round, int(cnt))
			r.peers = int(cnt) - 1
			r.publish(ctx, round, &rdzvPlan{Error: msg})
			return nil, fmt.Errorf("%w: %s", ErrRendezvous, msg)
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return nil, err
		}
	}
	nodes, err := r.nodes(ctx, round, n)
	if err != nil {
		return nil, err
	}
	plan := &rdzvPlan{RestartCount: restarts, MaxRestarts: cfg.MaxRestarts}
	r.peers = n - 1
	if err := assignRanks(nodes, cfg.RdzvBackend == BackendStatic); err != nil {
		plan.Error = err.Error()
		r.publish(ctx, round, plan)
		return nil, fmt.Errorf("%w: %s", ErrRendezvous, plan.Error)
	}
	plan.Nodes = nodes
	for _, pn := range nodes {
		plan.WorldSize += pn.NProc
	}
	masterHost := r.info.Addr
	addr := net.JoinHostPort(masterHost, "0")
	wsrv, err := r.a.stores.listen(ctx, addr, r.a.token)
	if err != nil {
		plan.Error = fmt.Sprintf("the host cannot open the workers' store on %s: %v", addr, err)
		r.publish(ctx, round, plan)
		return nil, fmt.Errorf("%w: %s", ErrRendezvous, plan.Error)
	}
	r.wsrv = wsrv
	_, p, _ := net.SplitHostPort(wsrv.Addr())
	plan.MasterAddr = masterHost
	plan.MasterPort, _ = strconv.Atoi(p)
	if err := r.publish(ctx, round, plan); err != nil {
		return nil, err
	}
	return plan, nil
}

func (r *storeRdzv) publish(ctx context.Context, round int, plan *rdzvPlan) error {
	data, _ := json.Marshal(plan)
	return r.do(ctx, func(c context.Context) error { return r.st.Set(c, r.key(round, "plan"), data) })
}

func (r *storeRdzv) nodes(ctx context.Context, round, n int) ([]planNode, error) {
	out := make([]planNode, 0, n)
	for i := 0; i < n; i++ {
		var data []byte
		err := r.do(ctx, func(c context.Context) (err error) { data, err = r.st.Get(c, r.key(round, "node", i)); return })
		if err != nil {
			return nil, err
		}
		pn := planNode{Idx: i}
		if err := json.Unmarshal(data, &pn.nodeInfo); err != nil {
			return nil, fmt.Errorf("%w: bad node record %d: %w", ErrRendezvous, i, err)
		}
		out = append(out, pn)
	}
	return out, nil
}

// assignRanks orders the nodes (node rank when fixed; else host first, then
// node rank if given, then arrival) and gives each its group rank and the
// global rank of its first worker.
func assignRanks(nodes []planNode, static bool) error {
	if static {
		seen := map[int]planNode{}
		for _, pn := range nodes {
			if prev, dup := seen[pn.NodeRank]; dup {
				return fmt.Errorf("two nodes claim --node-rank %d (hosts %s and %s)", pn.NodeRank, prev.Host, pn.Host)
			}
			seen[pn.NodeRank] = pn
		}
	}
	sort.SliceStable(nodes, func(i, j int) bool {
		a, b := nodes[i], nodes[j]
		if static {
			return a.NodeRank < b.NodeRank
		}
		if a.IsHost != b.IsHost {
			return a.IsHost
		}
		ra, rb := a.NodeRank, b.NodeRank
		if ra < 0 {
			ra = 1 << 30
		}
		if rb < 0 {
			rb = 1 << 30
		}
		if ra != rb {
			return ra < rb
		}
		return a.Idx < b.Idx
	})
	off := 0
	for i := range nodes {
		nodes[i].GroupRank = i
		nodes[i].RankOffset = off
		off += nodes[i].NProc
	}
	return nil
}

func (r *storeRdzv) timeoutMessage(ctx context.Context, round, cnt int) string {
	cfg := &r.a.cfg
	nodes, _ := r.nodes(ctx, round, cnt)
	var here []string
	present := map[int]bool{}
	for _, pn := range nodes {
		here = append(here, fmt.Sprintf("node rank %d on %s", pn.NodeRank, pn.Host))
		present[pn.NodeRank] = true
	}
	msg := fmt.Sprintf("timed out after %s: %d of %d nodes joined [%s]", cfg.RdzvTimeout, cnt, cfg.MinNodes, strings.Join(here, ", "))
	if cfg.RdzvBackend == BackendStatic {
		var missing []string
		for i := 0; i < cfg.MaxNodes; i++ {
			if !present[i] {
				missing = append(missing, strconv.Itoa(i))
			}
		}
		msg += fmt.Sprintf("; node rank(s) %s never arrived", strings.Join(missing, ", "))
	}
	return msg + " (start ddprun on every node with the same endpoint, --rdzv-id and " + EnvToken + ", or raise --rdzv-timeout)"
}
