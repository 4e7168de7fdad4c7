package comm

import (
	"context"
	"fmt"
	"goddp/internal/half"
	"hash/fnv"
	"math"
)

// A table of collectives that every backend test runs on every rank. Each
// rank's input is a deterministic function of (rank, index) with small
// integer values, so sums, products and averages are exact in every dtype
// and the expected result is computed locally from the same function.

type collCase struct {
	op    string
	dt    DType
	n     int // elements per rank (per chunk for the chunked ops)
	rop   ReduceOp
	root  int
	debug string
}

func (c collCase) String() string {
	return fmt.Sprintf("%s/%v/n=%d/%v/root=%d", c.op, c.dt, c.n, c.rop, c.root)
}

var allDTypes = []DType{Float32, Float64, Int32, Int64, Float16, BFloat16}
var allReduceOps = []ReduceOp{Sum, Avg, Max, Min, Product}

// collCases lists the cases for a world: every op and dtype, with zero,
// odd and non-divisible lengths, plus a few large ones that take the
// pipelined paths.
func collCases(world int, lengths []int, large int) []collCase {
	var cs []collCase
	for _, dt := range allDTypes {
		for _, n := range lengths {
			for _, rop := range allReduceOps {
				cs = append(cs, collCase{op: "allreduce", dt: dt, n: n, rop: rop})
			}
			cs = append(cs,
				collCase{op: "reducescatter", dt: dt, n: n, rop: Sum},
				collCase{op: "reduce", dt: dt, n: n, rop: Max, root: world - 1},
				collCase{op: "broadcast", dt: dt, n: n, root: world / 2},
				collCase{op: "allgather", dt: dt, n: n},
				collCase{op: "gather", dt: dt, n: n, root: world - 1},
				collCase{op: "scatter", dt: dt, n: n, root: 0},
				collCase{op: "alltoall", dt: dt, n: n},
				collCase{op: "sendrecv", dt: dt, n: n},
			)
		}
	}
	if large > 0 {
		for _, op := range []string{"allreduce", "reducescatter", "reduce", "broadcast", "allgather", "alltoall", "sendrecv"} {
			cs = append(cs, collCase{op: op, dt: Float32, n: large, rop: Sum, root: world - 1})
		}
		cs = append(cs, collCase{op: "allreduce", dt: BFloat16, n: large + 1, rop: Avg},
			collCase{op: "allreduce", dt: Int64, n: large/2 + 3, rop: Product},
			collCase{op: "reducescatter", dt: Float64, n: large / 3, rop: Avg},
			collCase{op: "reduce", dt: Float16, n: large, rop: Min, root: 0})
	}
	cs = append(cs, collCase{op: "barrier"})
	return cs
}

// caseVal is rank k's element i.
func caseVal(k, i int) float64 { return float64((k*7+i*3)%5 - 2) }

func caseInput(dt DType, k, n, off int) Buffer {
	v := make([]float64, n)
	for i := range v {
		v[i] = caseVal(k, off+i)
	}
	return makeBuf(dt, v)
}

// caseReduce folds element i over all ranks as the backend must.
func caseReduce(c collCase, world, i int) float64 {
	acc := caseVal(0, i)
	for k := 1; k < world; k++ {
		acc = refOp(c.rop, acc, caseVal(k, i))
	}
	if c.rop == Avg {
		switch c.dt {
		case Int32, Int64:
			return math.Trunc(acc / float64(world))
		case Float64:
			return acc / float64(world)
		case Float16:
			return float64(half.F16ToF32(half.F32ToF16(float32(acc) / float32(world))))
		case BFloat16:
			return float64(half.BF16ToF32(half.F32ToBF16(float32(acc) / float32(world))))
		}
		return float64(float32(acc) / float32(world))
	}
	return acc
}

// runCase runs one case on pg and checks the result; it returns a hash of
// the output so that callers can compare ranks bit for bit.
func runCase(ctx context.Context, pg ProcessGroup, c collCase) (uint64, error) {
	r, w := pg.Rank(), pg.Size()
	var out Buffer
	var want []float64
	var err error
	switch c.op {
	case "allreduce":
		out = caseInput(c.dt, r, c.n, 0)
		err = pg.AllReduce(out, c.rop).Wait(ctx)
		for i := 0; i < c.n; i++ {
			want = append(want, caseReduce(c, w, i))
		}
	case "reducescatter":
		in := caseInput(c.dt, r, c.n*w, 0)
		out = caseInput(c.dt, 99, c.n, 0)
		err = ReduceScatter(pg, out, in, c.rop).Wait(ctx)
		for i := 0; i < c.n; i++ {
			want = append(want, caseReduce(c, w, r*c.n+i))
		}
	case "reduce":
		out = caseInput(c.dt, r, c.n, 0)
		err = Reduce(pg, out, c.root, c.rop).Wait(ctx)
		for i := 0; i < c.n; i++ {
			if r == c.root {
				want = append(want, caseReduce(c, w, i))
			} else {
				want = append(want, caseVal(r, i)) // untouched off the root
			}
		}
	case "broadcast":
		out = caseInput(c.dt, r, c.n, 0)
		err = pg.Broadcast(out, c.root).Wait(ctx)
		for i := 0; i < c.n; i++ {
			want = append(want, caseVal(c.root, i))
		}
	case "allgather":
		out = caseInput(c.dt, 99, c.n*w, 0)
		err = AllGather(pg, out, caseInput(c.dt, r, c.n, 0)).Wait(ctx)
		for k := 0; k < w; k++ {
			for i := 0; i < c.n; i++ {
				want = append(want, caseVal(k, i))
			}
		}
	case "gather":
		out = caseInput(c.dt, 99, c.n*w, 0)
		err = Gather(pg, out, caseInput(c.dt, r, c.n, 0), c.root).Wait(ctx)
		for k := 0; k < w; k++ {
			for i := 0; i < c.n; i++ {
				if r == c.root {
					want = append(want, caseVal(k, i))
				} else {
					want = append(want, caseVal(99, k*c.n+i))
				}
			}
		}
	case "scatter":
		out = caseInput(c.dt, 99, c.n, 0)
		err = Scatter(pg, out, caseInput(c.dt, r, c.n*w, 0), c.root).Wait(ctx)
		for i := 0; i < c.n; i++ {
			want = append(want, caseVal(c.root, r*c.n+i))
		}
	case "alltoall":
		// Chunk j of rank k's input holds caseVal(k, j*n+i).
		out = caseInput(c.dt, 99, c.n*w, 0)
		err = AllToAll(pg, out, caseInput(c.dt, r, c.n*w, 0)).Wait(ctx)
		for k := 0; k < w; k++ {
			for i := 0; i < c.n; i++ {
				want = append(want, caseVal(k, r*c.n+i))
			}
		}
	case "sendrecv":
		// A ring shift with two tags sent in one order and received in the other.
		if w == 1 {
			return 0, nil
		}
		next, prev := (r+1)%w, (r+w-1)%w
		a, b := caseInput(c.dt, r, c.n, 0), caseInput(c.dt, r, c.n, 7)
		s1 := Send(pg, a, next, 1)
		s2 := Send(pg, b, next, 2)
		got2 := caseInput(c.dt, 99, c.n, 0)
		got1 := caseInput(c.dt, 99, c.n, 0)
		w2 := Recv(pg, got2, prev, 2)
		w1 := Recv(pg, got1, prev, 1)
		for _, wk := range []Work{s1, s2, w2, w1} {
			if err = wk.Wait(ctx); err != nil {
				break
			}
		}
		out = Buffer{DType: c.dt, Bytes: append(append([]byte{}, got1.Bytes...), got2.Bytes...)}
		for i := 0; i < c.n; i++ {
			want = append(want, caseVal(prev, i))
		}
		for i := 0; i < c.n; i++ {
			want = append(want, caseVal(prev, 7+i))
		}
	case "barrier":
		return 0, pg.Barrier().Wait(ctx)
	default:
		return 0, fmt.Errorf("unknown case op %q", c.op)
	}
	if err != nil {
		return 0, fmt.Errorf("%v: rank %d: %w", c, r, err)
	}
	got := bufToF64(out)
	if len(got) != len(want) {
		return 0, fmt.Errorf("%v: rank %d: %d results, want %d", c, r, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] && !(math.IsNaN(got[i]) && math.IsNaN(want[i])) {
			return 0, fmt.Errorf("%v: rank %d: element %d = %v, want %v", c, r, i, got[i], want[i])
		}
	}
	h := fnv.New64a()
	h.Write(out.Bytes)
	return h.Sum64(), nil
}

// runCases runs every case and returns the output hashes.
func runCases(ctx context.Context, pg ProcessGroup, cases []collCase) ([]uint64, error) {
	hs := make([]uint64, len(cases))
	for i, c := range cases {
		h, err := runCase(ctx, pg, c)
		if err != nil {
			return nil, err
		}
		hs[i] = h
	}
	return hs, nil
}
