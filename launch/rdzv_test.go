package launch

import (
	"context"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// node is one simulated node: its own launcher, sharing an in-memory store
// driver with the others, so the rendezvous logic runs for real while the
// workers are real processes.
type node struct {
	cfg      Config
	out, log *syncBuffer
	err      error
}

func multiNodeConfig(nodeRank, nnodes, nproc int, args ...string) *node {
	cfg, out, _ := testConfig(nproc, args...)
	log := &syncBuffer{}
	cfg.Standalone = false
	cfg.MinNodes, cfg.MaxNodes, cfg.NodeRank = nnodes, nnodes, nodeRank
	cfg.MasterAddr, cfg.MasterPort = "127.0.0.1", 29999
	cfg.Token, cfg.RdzvID = "test-token", "job"
	cfg.RdzvTimeout = 5 * time.Second
	cfg.Stderr, cfg.Log = log, log
	return &node{cfg: cfg, out: out, log: log}
}

// runNodes runs each node's launcher; node i starts after delays[i]. After
// runNodesLimit every launcher is stopped, so that nodes left waiting for
// one that gave up (say, its rendezvous timed out on a loaded machine) fail
// the test with their logs instead of running into the test binary's
// timeout.
func runNodes(d *memDriver, nodes []*node, delays ...time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), runNodesLimit)
	defer cancel()
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i < len(delays) {
				time.Sleep(delays[i])
			}
			n.err = run(ctx, n.cfg, d)
		}()
	}
	wg.Wait()
}

const runNodesLimit = time.Minute

func TestRendezvousStaticTwoNodes(t *testing.T) {
	d := newMemDriver()
	nodes := []*node{multiNodeConfig(0, 2, 2), multiNodeConfig(1, 2, 2)}
	// Node 1 first: it must wait for node 0's store.
	runNodes(d, nodes, 300*time.Millisecond, 0)
	var all []report
	for i, n := range nodes {
		require.NoError(t, n.err, n.log.String())
		rs := reports(n.out.String(), "start")
		require.Len(t, rs, 2)
		for _, r := range rs {
			assert.Equal(t, strconv.Itoa(i), r.str("GROUP_RANK"))
			assert.Equal(t, "2", r.str("GROUP_WORLD_SIZE"))
			assert.Equal(t, "4", r.str("WORLD_SIZE"))
			assert.Equal(t, "2", r.str("LOCAL_WORLD_SIZE"))
			lr, _ := strconv.Atoi(r.str("LOCAL_RANK"))
			assert.Equal(t, strconv.Itoa(2*i+lr), r.str("RANK"))
		}
		all = append(all, rs...)
	}
	for _, r := range all {
		assert.Equal(t, all[0].str("MASTER_ADDR"), r.str("MASTER_ADDR"))
		assert.Equal(t, all[0].str("MASTER_PORT"), r.str("MASTER_PORT"))
		assert.NotEqual(t, "29999", r.str("MASTER_PORT"), "workers get a fresh store, not the rendezvous one")
	}
}

func TestRendezvousElastic(t *testing.T) {
	d := newMemDriver()
	nodes := []*node{multiNodeConfig(0, 2, 1), multiNodeConfig(-1, 2, 2), multiNodeConfig(-1, 2, 1)}
	for _, n := range nodes {
		n.cfg.RdzvBackend, n.cfg.RdzvEndpoint = BackendStore, "127.0.0.1:29998"
		n.cfg.MinNodes, n.cfg.MaxNodes = 1, 3
		n.cfg.LastCall = 500 * time.Millisecond
	}
	runNodes(d, nodes, 0, 50*time.Millisecond, 100*time.Millisecond)
	var ranks []int
	for _, n := range nodes {
		require.NoError(t, n.err, n.log.String())
		for _, r := range reports(n.out.String(), "start") {
			assert.Equal(t, "4", r.str("WORLD_SIZE"))
			assert.Equal(t, "3", r.str("GROUP_WORLD_SIZE"))
			k, _ := strconv.Atoi(r.str("RANK"))
			ranks = append(ranks, k)
		}
	}
	sort.Ints(ranks)
	assert.Equal(t, []int{0, 1, 2, 3}, ranks)
	assert.Equal(t, "0", reports(nodes[0].out.String(), "start")[0].str("GROUP_RANK"), "the host is node 0")
}

func TestRendezvousNodeNeverArrives(t *testing.T) {
	tests := []struct {
		name     string
		nodeRank int
		msg      string
	}{
		{"host waits for node 1", 0, "node rank(s) 1 never arrived"},
		{"node 1 waits for the host", 1, "could not reach the rendezvous store at 127.0.0.1:29999"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := multiNodeConfig(tc.nodeRank, 2, 1)
			n.cfg.RdzvTimeout = 700 * time.Millisecond
			start := time.Now()
			runNodes(newMemDriver(), []*node{n})
			require.ErrorIs(t, n.err, ErrRendezvous)
			assert.Equal(t, ExitRendezvous, ExitCode(n.err))
			assert.Contains(t, n.err.Error(), tc.msg)
			assert.Less(t, time.Since(start), 10*time.Second)
		})
	}
}

func TestRendezvousDuplicateNodeRank(t *testing.T) {
	d := newMemDriver()
	nodes := []*node{multiNodeConfig(0, 3, 1), multiNodeConfig(1, 3, 1), multiNodeConfig(1, 3, 1)}
	runNodes(d, nodes)
	for _, n := range nodes {
		require.ErrorIs(t, n.err, ErrRendezvous)
		assert.Contains(t, n.err.Error(), "two nodes claim --node-rank 1")
	}
}

func TestRendezvousRemoteFailureStopsAllNodes(t *testing.T) {
	d := newMemDriver()
	nodes := []*node{
		multiNodeConfig(0, 2, 2, "-mode", "fail", "-fail-rank", "3", "-delay", "500ms"),
		multiNodeConfig(1, 2, 2, "-mode", "fail", "-fail-rank", "3", "-delay", "500ms"),
	}
	start := time.Now()
	runNodes(d, nodes)
	assert.Less(t, time.Since(start), 15*time.Second)
	for _, n := range nodes {
		var fe *FailureError
		require.ErrorAs(t, n.err, &fe, n.log.String())
		assert.Equal(t, 3, fe.Root.Rank, "every node names rank 3 on node 1 as the root cause")
		assert.Equal(t, 1, fe.Root.GroupRank)
		assert.Equal(t, 3, fe.Root.ExitCode)
		assert.Contains(t, fe.Root.StderrTail, "worker: rank 3: boom, exiting with 3")
		for _, r := range reports(n.out.String(), "start") {
			assert.False(t, alive(r.pid()))
		}
	}
}

func TestRendezvousRestartAcrossNodes(t *testing.T) {
	d := newMemDriver()
	var nodes []*node
	for i := 0; i < 2; i++ {
		n := multiNodeConfig(i, 2, 1, "-mode", "restart", "-fail-rank", "1", "-until", "1", "-delay", "200ms")
		n.cfg.MaxRestarts = 2
		nodes = append(nodes, n)
	}
	runNodes(d, nodes)
	for _, n := range nodes {
		require.NoError(t, n.err, n.log.String())
		counts := []string{}
		for _, r := range reports(n.out.String(), "start") {
			counts = append(counts, r.str("TORCHELASTIC_RESTART_COUNT"))
		}
		assert.Equal(t, []string{"0", "1"}, counts)
	}
}

// TestRendezvousElasticScaleUp: a node that arrives after the group formed
// makes it re-rendezvous (not counted as a restart) and join.
func TestRendezvousElasticScaleUp(t *testing.T) {
	d := newMemDriver()
	var nodes []*node
	for i := 0; i < 3; i++ {
		rank := -1
		if i == 0 {
			rank = 0
		}
		n := multiNodeConfig(rank, 2, 1, "-mode", "until-nodes", "-nodes", "3")
		n.cfg.RdzvBackend, n.cfg.RdzvEndpoint = BackendStore, "127.0.0.1:29997"
		n.cfg.MinNodes, n.cfg.MaxNodes = 2, 3
		n.cfg.LastCall = 200 * time.Millisecond
		nodes = append(nodes, n)
	}
	// Node 1 (node rank -1, on this host) would host the store itself if
	// it listened first, and node 0 (rank 0) would then fail to listen:
	// start it a moment later.
	runNodes(d, nodes, 0, 300*time.Millisecond, 1500*time.Millisecond)
	for i, n := range nodes {
		require.NoError(t, n.err, "node %d: %s", i, n.log.String())
		rs := reports(n.out.String(), "start")
		last := rs[len(rs)-1]
		assert.Equal(t, "3", last.str("GROUP_WORLD_SIZE"))
		assert.Equal(t, "0", last.str("TORCHELASTIC_RESTART_COUNT"), "a scale-up is not a restart")
	}
	assert.Len(t, reports(nodes[0].out.String(), "start"), 2, "node 0 ran a 2-node and a 3-node group")
	assert.Contains(t, nodes[0].log.String(), "re-rendezvous")
}
