package hier

import (
	"context"
	"time"

	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/internal/reduce"
)

// AllReduce reduces buf across all ranks in place (see the package doc).
func (g *group) AllReduce(buf backend.Buffer, rop backend.ReduceOp) backend.Work {
	if err := backend.CheckBuffer(buf); err != nil {
		return g.badArg("allreduce", len(buf.Bytes), "%v", err)
	}
	if err := backend.CheckReduceOp(rop); err != nil {
		return g.badArg("allreduce", len(buf.Bytes), "%v", err)
	}
	return g.submit("allreduce", len(buf.Bytes), func(ctx context.Context, o *op) error {
		return g.allReduce(ctx, o, buf, rop)
	})
}

// AllReduceV implements backend.VectorAllReducer: the buffers are copied
// into one, all-reduced, and copied back, so a rank calling it matches
// ranks calling AllReduce on their concatenation bit for bit.
func (g *group) AllReduceV(bufs []backend.Buffer, rop backend.ReduceOp) backend.Work {
	total := 0
	for i, b := range bufs {
		if err := backend.CheckBuffer(b); err != nil {
			return g.badArg("allreduce", total, "AllReduceV buffer %d: %v", i, err)
		}
		if b.DType != bufs[0].DType {
			return g.badArg("allreduce", total, "AllReduceV buffer %d is %v, buffer 0 is %v", i, b.DType, bufs[0].DType)
		}
		total += len(b.Bytes)
	}
	if err := backend.CheckReduceOp(rop); err != nil {
		return g.badArg("allreduce", total, "%v", err)
	}
	if len(bufs) == 1 {
		return g.AllReduce(bufs[0], rop)
	}
	if len(bufs) == 0 {
		return backend.DoneWork{}
	}
	return g.submit("allreduce", total, func(ctx context.Context, o *op) error {
		// The concatenation has a scratch of its own: the all-reduce uses
		// the others.
		all := grow(&g.vec, total)
		at := 0
		for _, b := range bufs {
			at += copy(all[at:], b.Bytes)
		}
		if err := g.allReduce(ctx, o, backend.Buffer{DType: bufs[0].DType, Bytes: all}, rop); err != nil {
			return err
		}
		at = 0
		for _, b := range bufs {
			at += copy(b.Bytes, all[at:])
		}
		return nil
	})
}

// allReduce runs on the worker.
func (g *group) allReduce(ctx context.Context, o *op, buf backend.Buffer, rop backend.ReduceOp) error {
	sub := rop
	if rop == backend.Avg {
		sub = backend.Sum // divided once, at the end, as the flat backends do
	}
	L, M := len(g.nodes[g.node]), len(g.nodes)
	n := buf.Len()
	if len(buf.Bytes) <= g.cfg.SmallBytes || n < 2*L || L == 1 {
		// Latency path: the host's sum (bitwise equal on its ranks), then
		// every local rank all-reduces it with its peers on the other hosts;
		// equal inputs and one deterministic algorithm give equal results.
		if L > 1 {
			if err := g.wait(ctx, o, "intra-node all-reduce", g.intra, g.intra.AllReduce(buf, sub)); err != nil {
				return err
			}
		}
		if M > 1 {
			if err := g.wait(ctx, o, "inter-node all-reduce", g.inter, g.inter.AllReduce(buf, sub)); err != nil {
				return err
			}
		}
		if rop == backend.Avg {
			reduce.Divide(buf, g.size)
		}
		return nil
	}
	es := buf.DType.Size()
	// The reduce-scatter needs L equal chunks per segment: a length that L
	// does not divide is padded in scratch (the pad is reduced and dropped).
	work := buf
	np := (n + L - 1) / L * L
	if np != n {
		work = backend.Buffer{DType: buf.DType, Bytes: grow(&g.scratch, np*es)}
		copy(work.Bytes, buf.Bytes)
		clear(work.Bytes[len(buf.Bytes):])
	}
	shard := backend.Buffer{DType: buf.DType, Bytes: grow(&g.shard, np/L*es)}
	segElems := max(L, g.cfg.SegmentBytes/es/L*L)
	type seg struct{ whole, part backend.Buffer }
	var segs []seg
	for off := 0; off < np; off += segElems {
		end := min(np, off+segElems)
		segs = append(segs, seg{
			whole: backend.Buffer{DType: buf.DType, Bytes: work.Bytes[off*es : end*es]},
			part:  backend.Buffer{DType: buf.DType, Bytes: shard.Bytes[off/L*es : end/L*es]},
		})
	}
	// Every rank issues all the reduce-scatters, then the network
	// all-reduces as their inputs arrive, then the all-gathers as theirs
	// do: each sub-group sees the same sequence on every rank, and the
	// steps of different segments overlap.
	rs := make([]backend.Work, len(segs))
	for k, s := range segs {
		rs[k] = g.intra.(backend.ReduceScatterer).ReduceScatter(s.part, s.whole, sub)
	}
	ar := make([]backend.Work, len(segs))
	for k, s := range segs {
		if err := g.wait(ctx, o, "intra-node reduce-scatter", g.intra, rs[k]); err != nil {
			return drain(err, rs[k+1:], ar[:k])
		}
		if M > 1 {
			ar[k] = g.inter.AllReduce(s.part, sub)
		} else {
			ar[k] = backend.DoneWork{}
		}
	}
	ag := make([]backend.Work, len(segs))
	for k, s := range segs {
		if err := g.wait(ctx, o, "inter-node all-reduce", g.inter, ar[k]); err != nil {
			return drain(err, ar[k+1:], ag[:k])
		}
		if rop == backend.Avg {
			reduce.Divide(s.part, g.size)
		}
		ag[k] = g.intra.(backend.AllGatherer).AllGather(s.whole, s.part)
	}
	for k := range segs {
		if err := g.wait(ctx, o, "intra-node all-gather", g.intra, ag[k]); err != nil {
			return drain(err, ag[k+1:])
		}
	}
	if np != n {
		copy(buf.Bytes, work.Bytes)
	}
	return nil
}

// drain waits (briefly) for sub-ops still in flight after a failure, so
// that none writes into a buffer after the op returned; the group is
// broken by then and they fail fast.
func drain(err error, pending ...[]backend.Work) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, ws := range pending {
		for _, w := range ws {
			if w != nil {
				_ = w.Wait(ctx)
			}
		}
	}
	return err
}

// grow returns (*b)[:n], reallocating when it is too short.
func grow(b *[]byte, n int) []byte {
	if cap(*b) < n {
		*b = make([]byte, n)
	}
	return (*b)[:n]
}
