package hier

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/goddp/goddp/comm/backend"
)

// faultLookup bounds the store round trip that names the first fault: the
// store may have died with the rank that hosted it, and an op that failed
// must still fail promptly.
const faultLookup = 2 * time.Second

// opError wraps a sub-group's failure as this group's OpError. The
// sub-group's own message numbers ranks its way (the intra group by local
// index, the inter group by node) and calls this rank by that number, so
// the detail names the ranks at fault by global rank, node and host.
//
// A failure also spreads: when rank 3 of two hosts of two ranks dies,
// rank 2 (its host) and rank 1 (its local index) fail their steps and give
// up, and rank 0, which meets rank 3 in no step, sees one of them leave
// and would blame that one. So the first rank to see a fault
// records its culprit in the store, and every later error names that rank
// first, with the partner it saw fail after.
func (g *group) opError(o *op, step string, sub backend.ProcessGroup, err error) error {
	kind := backend.ErrPeerFailed
	for _, s := range []error{backend.ErrTimeout, backend.ErrClosed, backend.ErrBadArgument, backend.ErrAuth, backend.ErrUnsupported, backend.ErrPeerFailed} {
		if errors.Is(err, s) {
			kind = s
			break
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		kind = backend.ErrTimeout
	}
	oe := &backend.OpError{Kind: kind, Op: o.name, Seq: o.seq, Bytes: o.bytes, Rank: g.rank, Detail: step, Err: err}
	var sube *backend.OpError
	if errors.As(err, &sube) {
		for _, p := range sube.Peers {
			oe.Peers = append(oe.Peers, g.global(sub, p))
		}
	}
	if len(oe.Peers) > 0 {
		oe.Detail += " with " + g.describe(oe.Peers)
	}
	if n := g.numbering(sub); n != "" {
		oe.Detail += " (" + n + ")"
	}
	if kind != backend.ErrPeerFailed && kind != backend.ErrTimeout {
		return oe // this rank's own doing (closed, bad argument): nothing to trace
	}
	if root, by, ok := g.firstFault(oe.Peers); ok && (len(oe.Peers) == 0 || oe.Peers[0] != root) {
		oe.Detail = fmt.Sprintf("%s failed first (rank %d saw it); here: %s", g.describe([]int{root}), by, oe.Detail)
		peers := []int{root}
		for _, p := range oe.Peers {
			if p != root {
				peers = append(peers, p)
			}
		}
		oe.Peers = peers
	}
	return oe
}

// global is the global rank of rank p of sub.
func (g *group) global(sub backend.ProcessGroup, p int) int {
	switch {
	case sub == g.intra && p >= 0 && p < len(g.nodes[g.node]):
		return g.nodes[g.node][p]
	case sub == g.inter && p >= 0 && p < len(g.nodes):
		return g.nodes[p][g.local]
	}
	return p
}

// numbering says how sub's message numbers ranks, where that is not by
// global rank.
func (g *group) numbering(sub backend.ProcessGroup) string {
	switch sub {
	case g.intra:
		return fmt.Sprintf("the %s group of node %d numbers its ranks %s", g.cfg.Intra, g.node, rankMap(g.nodes[g.node]))
	case g.inter:
		ranks := make([]int, len(g.nodes))
		for m := range g.nodes {
			ranks[m] = g.nodes[m][g.local]
		}
		return fmt.Sprintf("the %s group of local index %d numbers its ranks %s", g.cfg.Inter, g.local, rankMap(ranks))
	}
	return ""
}

// rankMap renders sub-group numbering as "0=rank 2, 1=rank 3".
func rankMap(global []int) string {
	s := make([]string, len(global))
	for i, r := range global {
		s[i] = fmt.Sprintf("%d=rank %d", i, r)
	}
	return strings.Join(s, ", ")
}

// describe names global ranks with their node and host: "rank 3 (node 1,
// host "b")". A host identity's boot id (HostIdentity) is left out.
func (g *group) describe(ranks []int) string {
	s := make([]string, len(ranks))
	for i, r := range ranks {
		if r < 0 || r >= g.size {
			s[i] = "rank " + strconv.Itoa(r)
			continue
		}
		m := g.where[r][0]
		host, _, _ := strings.Cut(g.hosts[m], "/")
		s[i] = fmt.Sprintf("rank %d (node %d, host %q)", r, m, host)
	}
	return strings.Join(s, ", ")
}

// firstFault records peers[0] as the group's first fault unless a rank
// recorded one before, and returns the recorded culprit and the rank that
// saw it. With no culprit of its own a rank only reads, without waiting.
// The store failing (it may have gone with the rank that died) leaves the
// error as it was.
func (g *group) firstFault(peers []int) (root, by int, ok bool) {
	ctx, cancel := context.WithTimeout(context.Background(), faultLookup)
	defer cancel()
	var v []byte
	var err error
	if len(peers) > 0 {
		v, err = g.store.CompareSet(ctx, g.faultKey, nil, []byte(fmt.Sprintf("%d %d", peers[0], g.rank)))
	} else {
		// A missing key must not block: CompareSet that never matches
		// reads the value without waiting for one.
		v, err = g.store.CompareSet(ctx, g.faultKey, []byte("-"), []byte("-"))
	}
	if err != nil {
		return 0, 0, false
	}
	a, b, found := strings.Cut(string(v), " ")
	root, err1 := strconv.Atoi(a)
	by, err2 := strconv.Atoi(b)
	if !found || err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return root, by, true
}
