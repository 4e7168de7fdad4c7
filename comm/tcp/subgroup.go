package tcp

import (
	"context"
	"fmt"
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/store"
	"slices"
)

// NewGroup creates a group over ranks (torch's new_group): every rank of
// this group calls it with the same ranks, and ranks outside get (nil, nil).
// Ranks are sorted, so subgroup rank i is the i-th smallest member. The
// subgroup has its own connections, timeout and worker.
func (g *tcpGroup) NewGroup(ctx context.Context, ranks []int) (backend.ProcessGroup, error) {
	members := slices.Clone(ranks)
	slices.Sort(members)
	for i, r := range members {
		if r < 0 || r >= g.size || (i > 0 && members[i-1] == r) {
			return nil, fmt.Errorf("%w: new group: ranks %v (group of %d)", backend.ErrBadArgument, ranks, g.size)
		}
	}
	if len(members) == 0 {
		return nil, fmt.Errorf("%w: new group: no ranks", backend.ErrBadArgument)
	}
	g.mu.Lock()
	g.subgroups++
	k := g.subgroups
	g.mu.Unlock()
	idx := slices.Index(members, g.rank)
	if idx < 0 {
		return nil, nil
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	opts := g.opts
	opts.Rank, opts.Size = idx, len(members)
	sub := fmt.Sprintf("sub%d", k)
	opts.Store = store.NewPrefix(sub, g.opts.Store)
	opts.Prefix = g.opts.Prefix + "/" + sub
	pg, err := New(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("comm: new group %v: %w", members, err)
	}
	return pg, nil
}
