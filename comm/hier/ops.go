package hier

import (
	"context"
	"fmt"
	"time"

	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/internal/reduce"
)

func (g *group) badArg(name string, bytes int, format string, args ...any) backend.Work {
	return backend.FailedFuture(&backend.OpError{Kind: backend.ErrBadArgument, Op: name, Bytes: bytes, Rank: g.rank,
		Detail: fmt.Sprintf(format, args...)})
}

// Broadcast crosses hosts once, between the ranks with the root's local
// index, then goes from that rank to the others of each host.
func (g *group) Broadcast(buf backend.Buffer, root int) backend.Work {
	if err := backend.CheckBuffer(buf); err != nil {
		return g.badArg("broadcast", len(buf.Bytes), "%v", err)
	}
	if root < 0 || root >= g.size {
		return g.badArg("broadcast", len(buf.Bytes), "root %d is not a rank of a group of %d", root, g.size)
	}
	return g.submit("broadcast", len(buf.Bytes), func(ctx context.Context, o *op) error {
		rootNode, rootLocal := g.where[root][0], g.where[root][1]
		if g.local == rootLocal && len(g.nodes) > 1 {
			if err := g.wait(ctx, o, "inter-node broadcast", g.inter, g.inter.Broadcast(buf, rootNode)); err != nil {
				return err
			}
		}
		if len(g.nodes[g.node]) > 1 {
			return g.wait(ctx, o, "intra-node broadcast", g.intra, g.intra.Broadcast(buf, rootLocal))
		}
		return nil
	})
}

// AllGather: each local index gathers its ranks' chunks across hosts, the
// host gathers those, and the chunks are put in rank order.
func (g *group) AllGather(out, in backend.Buffer) backend.Work {
	if err := firstErr(backend.CheckBuffer(in), backend.CheckBuffer(out)); err != nil {
		return g.badArg("allgather", len(in.Bytes), "%v", err)
	}
	if out.DType != in.DType || len(out.Bytes) != g.size*len(in.Bytes) {
		return g.badArg("allgather", len(in.Bytes), "out is %v[%d], want %v[%d] (%d ranks x %d)",
			out.DType, out.Len(), in.DType, g.size*in.Len(), g.size, in.Len())
	}
	return g.submit("allgather", len(in.Bytes), func(ctx context.Context, o *op) error {
		L, M, nb := len(g.nodes[g.node]), len(g.nodes), len(in.Bytes)
		if nb == 0 {
			return nil
		}
		across := in
		if M > 1 {
			across = backend.Buffer{DType: in.DType, Bytes: grow(&g.shard, M*nb)}
			if err := g.wait(ctx, o, "inter-node all-gather", g.inter, g.inter.(backend.AllGatherer).AllGather(across, in)); err != nil {
				return err
			}
		}
		host := across
		if L > 1 {
			host = backend.Buffer{DType: in.DType, Bytes: grow(&g.scratch, L*M*nb)}
			if err := g.wait(ctx, o, "intra-node all-gather", g.intra, g.intra.(backend.AllGatherer).AllGather(host, across)); err != nil {
				return err
			}
		}
		// host holds [local l][node m].
		for m, ranks := range g.nodes {
			for l, r := range ranks {
				copy(out.Bytes[r*nb:(r+1)*nb], host.Bytes[(l*M+m)*nb:])
			}
		}
		return nil
	})
}

// ReduceScatter: the chunks are ordered [local l][node m], reduce-scattered
// within the host (local rank l gets its index's chunks summed over the
// host) and then across hosts between the ranks of one local index.
func (g *group) ReduceScatter(out, in backend.Buffer, rop backend.ReduceOp) backend.Work {
	if err := firstErr(backend.CheckBuffer(in), backend.CheckBuffer(out), backend.CheckReduceOp(rop)); err != nil {
		return g.badArg("reducescatter", len(out.Bytes), "%v", err)
	}
	if out.DType != in.DType || len(in.Bytes) != g.size*len(out.Bytes) {
		return g.badArg("reducescatter", len(out.Bytes), "in is %v[%d], want %v[%d] (%d ranks x %d)",
			in.DType, in.Len(), out.DType, g.size*out.Len(), g.size, out.Len())
	}
	return g.submit("reducescatter", len(out.Bytes), func(ctx context.Context, o *op) error {
		L, M, nb := len(g.nodes[g.node]), len(g.nodes), len(out.Bytes)
		if nb == 0 {
			return nil
		}
		sub := rop
		if rop == backend.Avg {
			sub = backend.Sum
		}
		ordered := backend.Buffer{DType: in.DType, Bytes: grow(&g.scratch, len(in.Bytes))}
		for m, ranks := range g.nodes {
			for l, r := range ranks {
				copy(ordered.Bytes[(l*M+m)*nb:(l*M+m+1)*nb], in.Bytes[r*nb:])
			}
		}
		mine := ordered
		if L > 1 {
			mine = backend.Buffer{DType: in.DType, Bytes: grow(&g.shard, M*nb)}
			w := g.intra.(backend.ReduceScatterer).ReduceScatter(mine, ordered, sub)
			if err := g.wait(ctx, o, "intra-node reduce-scatter", g.intra, w); err != nil {
				return err
			}
		}
		if M > 1 {
			w := g.inter.(backend.ReduceScatterer).ReduceScatter(out, mine, sub)
			if err := g.wait(ctx, o, "inter-node reduce-scatter", g.inter, w); err != nil {
				return err
			}
		} else {
			copy(out.Bytes, mine.Bytes)
		}
		if rop == backend.Avg {
			reduce.Divide(out, g.size)
		}
		return nil
	})
}

// Barrier is the flat group's, in issue order with the other collectives.
func (g *group) Barrier() backend.Work {
	return g.viaFlat("barrier", 0, func() backend.Work { return g.flat.Barrier() })
}

// viaFlat runs a collective of the flat group on the worker, so that it
// keeps its place among the two-level ones.
func (g *group) viaFlat(name string, bytes int, issue func() backend.Work) backend.Work {
	return g.submit(name, bytes, func(ctx context.Context, o *op) error {
		return g.wait(ctx, o, "flat "+name, g.flat, issue())
	})
}

func (g *group) Reduce(buf backend.Buffer, root int, rop backend.ReduceOp) backend.Work {
	return g.viaFlat("reduce", len(buf.Bytes), func() backend.Work { return backend.Reduce(g.flat, buf, root, rop) })
}

func (g *group) Gather(out, in backend.Buffer, root int) backend.Work {
	return g.viaFlat("gather", len(in.Bytes), func() backend.Work { return backend.Gather(g.flat, out, in, root) })
}

func (g *group) Scatter(out, in backend.Buffer, root int) backend.Work {
	return g.viaFlat("scatter", len(out.Bytes), func() backend.Work { return backend.Scatter(g.flat, out, in, root) })
}

func (g *group) AllToAll(out, in backend.Buffer) backend.Work {
	return g.viaFlat("alltoall", len(in.Bytes), func() backend.Work { return backend.AllToAll(g.flat, out, in) })
}

// Send and Recv go straight to the flat group: point-to-point ops are not
// ordered with the collectives, and queueing them behind one another
// would deadlock a pair that sends before it receives.
func (g *group) Send(buf backend.Buffer, dst, tag int) backend.Work {
	return backend.Send(g.flat, buf, dst, tag)
}

func (g *group) Recv(buf backend.Buffer, src, tag int) backend.Work {
	return backend.Recv(g.flat, buf, src, tag)
}

// MonitoredBarrier is the flat group's.
func (g *group) MonitoredBarrier(ctx context.Context, timeout time.Duration) error {
	if m, ok := g.flat.(backend.BarrierMonitor); ok {
		return m.MonitoredBarrier(ctx, timeout)
	}
	return fmt.Errorf("%w: monitored barrier on the flat %s group", backend.ErrUnsupported, g.flat.Backend())
}

// NewGroup makes a subgroup of the flat group.
func (g *group) NewGroup(ctx context.Context, ranks []int) (backend.ProcessGroup, error) {
	if s, ok := g.flat.(backend.Subgrouper); ok {
		return s.NewGroup(ctx, ranks)
	}
	return nil, fmt.Errorf("%w: new group on the flat %s group", backend.ErrUnsupported, g.flat.Backend())
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
