package comm

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
)

// Collective test cases shared by the in-process and the multi-process shm
// tests. Every rank derives its inputs from (rank, index) and checks its
// own output against a reference computed locally in float64.

type shmTestCase struct {
	op   string
	dt   DType
	n    int // elements per rank (per piece for the chunked-input ops)
	rop  ReduceOp
	root int
}

func (c shmTestCase) String() string {
	return fmt.Sprintf("%s/%v/n=%d/%v/root=%d", c.op, c.dt, c.n, c.rop, c.root)
}

var shmTestDTypes = []DType{Float32, Float64, Int32, Int64, Float16, BFloat16}

// shmTestCases lists cases for a world size. lengths should include zero,
// odd, non-divisible and multi-chunk sizes.
func shmTestCases(world int, dts []DType, lengths []int) []shmTestCase {
	var cs []shmTestCase
	for _, dt := range dts {
		for li, n := range lengths {
			root := li % world
			for rop := Sum; rop <= Product; rop++ {
				cs = append(cs,
					shmTestCase{"allreduce", dt, n, rop, 0},
					shmTestCase{"reducescatter", dt, n, rop, 0},
					shmTestCase{"reduce", dt, n, rop, (root + int(rop)) % world})
			}
			cs = append(cs,
				shmTestCase{"broadcast", dt, n, Sum, root},
				shmTestCase{"allgather", dt, n, Sum, 0},
				shmTestCase{"gather", dt, n, Sum, root},
				shmTestCase{"scatter", dt, n, Sum, root},
				shmTestCase{"alltoall", dt, n, Sum, 0},
				shmTestCase{"barrier", dt, 0, Sum, 0})
		}
	}
	return cs
}

// shmVal is rank k's i-th input: small integers, so sums and products are
// exact in every dtype, with negatives to exercise Max/Min and truncation.
func shmVal(k, i int) float64 { return float64((k*7+i*3)%5 - 2) }

func shmInput(dt DType, k, n int) Buffer {
	v := make([]float64, n)
	for i := range v {
		v[i] = shmVal(k, i)
	}
	return makeBuf(dt, v)
}

func shmFold(rop ReduceOp, world int, at func(k int) float64) float64 {
	acc := at(0)
	for k := 1; k < world; k++ {
		x := at(k)
		switch rop {
		case Sum, Avg:
			acc += x
		case Product:
			acc *= x
		case Max:
			acc = math.Max(acc, x)
		case Min:
			acc = math.Min(acc, x)
		}
	}
	if rop == Avg {
		acc /= float64(world)
	}
	return acc
}

// shmExpectConv maps a float64 reference to what the dtype can hold
// (integers truncate toward zero, as integer division does).
func shmExpectConv(dt DType, v []float64) []float64 {
	if dt == Int32 || dt == Int64 {
		for i := range v {
			v[i] = math.Trunc(v[i])
		}
	}
	return bufToF64(makeBuf(dt, v))
}

// shmRunCase runs c on g and checks this rank's result. It returns a hash of
// the output so callers can check that all ranks got identical bits.
func shmRunCase(ctx context.Context, g ProcessGroup, c shmTestCase) (uint64, error) {
	r, N := g.Rank(), g.Size()
	var out Buffer
	var want []float64
	var w Work
	switch c.op {
	case "allreduce":
		out = shmInput(c.dt, r, c.n)
		w = g.AllReduce(out, c.rop)
		want = make([]float64, c.n)
		for i := range want {
			want[i] = shmFold(c.rop, N, func(k int) float64 { return shmVal(k, i) })
		}
	case "reduce":
		out = shmInput(c.dt, r, c.n)
		w = Reduce(g, out, c.root, c.rop)
		want = make([]float64, c.n)
		for i := range want {
			if r == c.root {
				want[i] = shmFold(c.rop, N, func(k int) float64 { return shmVal(k, i) })
			} else {
				want[i] = shmVal(r, i)
			}
		}
	case "reducescatter":
		out = makeBuf(c.dt, make([]float64, c.n))
		w = ReduceScatter(g, out, shmInput(c.dt, r, N*c.n), c.rop)
		want = make([]float64, c.n)
		for i := range want {
			want[i] = shmFold(c.rop, N, func(k int) float64 { return shmVal(k, r*c.n+i) })
		}
	case "broadcast":
		out = shmInput(c.dt, r, c.n)
		w = g.Broadcast(out, c.root)
		want = make([]float64, c.n)
		for i := range want {
			want[i] = shmVal(c.root, i)
		}
	case "allgather", "gather":
		out = makeBuf(c.dt, make([]float64, N*c.n))
		if c.op == "allgather" {
			w = AllGather(g, out, shmInput(c.dt, r, c.n))
		} else {
			w = Gather(g, out, shmInput(c.dt, r, c.n), c.root)
		}
		want = make([]float64, N*c.n)
		for i := range want {
			if c.op == "allgather" || r == c.root {
				want[i] = shmVal(i/max(c.n, 1), i%max(c.n, 1))
			}
		}
	case "scatter":
		out = makeBuf(c.dt, make([]float64, c.n))
		in := shmInput(c.dt, r, N*c.n)
		if r != c.root {
			in = Buffer{DType: c.dt}
		}
		w = Scatter(g, out, in, c.root)
		want = make([]float64, c.n)
		for i := range want {
			want[i] = shmVal(c.root, r*c.n+i)
		}
	case "alltoall":
		out = makeBuf(c.dt, make([]float64, N*c.n))
		w = AllToAll(g, out, shmInput(c.dt, r, N*c.n))
		want = make([]float64, N*c.n)
		for i := range want {
			j, p := i/max(c.n, 1), i%max(c.n, 1)
			want[i] = shmVal(j, r*c.n+p)
		}
	case "barrier":
		w = g.Barrier()
	default:
		return 0, fmt.Errorf("unknown case op %q", c.op)
	}
	if err := w.Wait(ctx); err != nil {
		return 0, fmt.Errorf("%v: %w", c, err)
	}
	if c.op == "barrier" {
		return 0, nil
	}
	want = shmExpectConv(c.dt, want)
	got := bufToF64(out)
	if len(got) != len(want) {
		return 0, fmt.Errorf("%v rank %d: got %d elements, want %d", c, r, len(got), len(want))
	}
	tol := 0.0
	if c.rop == Avg && (c.op == "allreduce" || c.op == "reduce" || c.op == "reducescatter") {
		tol = 1e-6
		if c.dt == Float16 || c.dt == BFloat16 {
			tol = 1e-2
		}
	}
	for i := range got {
		if d := math.Abs(got[i] - want[i]); d > tol*math.Max(1, math.Abs(want[i])) || math.IsNaN(got[i]) {
			return 0, fmt.Errorf("%v rank %d: element %d = %v, want %v", c, r, i, got[i], want[i])
		}
	}
	h := fnv.New64a()
	h.Write(out.Bytes)
	return h.Sum64(), nil
}
