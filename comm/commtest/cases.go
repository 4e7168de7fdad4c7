package commtest

import (
	"context"
	"fmt"
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/internal/half"
	"hash/fnv"
	"math"
)

// The conformance table: collectives that every backend's tests run on
// every rank. Each rank's input is a deterministic function of (rank,
// index) with small integer values, so sums, products and averages are
// exact in every dtype and the expected result is computed locally from
// the same function.

// Case is one collective of the table.
type Case struct {
	// Op is "allreduce", "allreducev", "reducescatter", "reduce",
	// "broadcast", "allgather", "gather", "scatter", "alltoall", "sendrecv"
	// or "barrier". "allreducev" is AllReduceV over pieces of the input
	// that differ from rank to rank, except that rank Root calls
	// AllReduce on the whole buffer (and so does every rank of a backend
	// without backend.VectorAllReducer): both must give AllReduce's result.
	Op       string
	DType    backend.DType
	N        int // elements per rank (per chunk for the chunked ops)
	ReduceOp backend.ReduceOp
	Root     int
}

func (c Case) String() string {
	return fmt.Sprintf("%s/%v/n=%d/%v/root=%d", c.Op, c.DType, c.N, c.ReduceOp, c.Root)
}

var allDTypes = []backend.DType{backend.Float32, backend.Float64, backend.Int32, backend.Int64, backend.Float16, backend.BFloat16}
var allReduceOps = []backend.ReduceOp{backend.Sum, backend.Avg, backend.Max, backend.Min, backend.Product}

// CasesFor lists every op (barrier aside) for each of dtypes (nil: all
// six) at each of lengths.
func CasesFor(world int, dtypes []backend.DType, lengths []int) []Case {
	if dtypes == nil {
		dtypes = allDTypes
	}
	var cs []Case
	for _, dt := range dtypes {
		for li, n := range lengths {
			// Roots move with the length and the op, so every rank is a
			// root somewhere in the table.
			root := li % world
			for _, rop := range allReduceOps {
				cs = append(cs,
					Case{Op: "allreduce", DType: dt, N: n, ReduceOp: rop},
					Case{Op: "allreducev", DType: dt, N: n, ReduceOp: rop, Root: (root + int(rop)) % world},
					Case{Op: "reducescatter", DType: dt, N: n, ReduceOp: rop},
					Case{Op: "reduce", DType: dt, N: n, ReduceOp: rop, Root: (root + int(rop)) % world})
			}
			cs = append(cs,
				Case{Op: "broadcast", DType: dt, N: n, Root: (root + world/2) % world},
				Case{Op: "allgather", DType: dt, N: n},
				Case{Op: "gather", DType: dt, N: n, Root: (root + world - 1) % world},
				Case{Op: "scatter", DType: dt, N: n, Root: root},
				Case{Op: "alltoall", DType: dt, N: n},
				Case{Op: "sendrecv", DType: dt, N: n},
			)
		}
	}
	return cs
}

// Cases lists the table for a world: every op and dtype at each of lengths
// (zero, odd and non-divisible ones find edge cases), plus, when large > 0,
// a few cases of about large elements that take backends' pipelined paths,
// and a barrier.
func Cases(world int, lengths []int, large int) []Case {
	cs := CasesFor(world, nil, lengths)
	if large > 0 {
		for _, op := range []string{"allreduce", "allreducev", "reducescatter", "reduce", "broadcast", "allgather", "alltoall", "sendrecv"} {
			cs = append(cs, Case{Op: op, DType: backend.Float32, N: large, ReduceOp: backend.Sum, Root: world - 1})
		}
		cs = append(cs, Case{Op: "allreduce", DType: backend.BFloat16, N: large + 1, ReduceOp: backend.Avg},
			Case{Op: "allreduce", DType: backend.Int64, N: large/2 + 3, ReduceOp: backend.Product},
			Case{Op: "reducescatter", DType: backend.Float64, N: large / 3, ReduceOp: backend.Avg},
			Case{Op: "reduce", DType: backend.Float16, N: large, ReduceOp: backend.Min, Root: 0})
	}
	cs = append(cs, Case{Op: "barrier"})
	return cs
}

// caseVal is rank k's element i.
func caseVal(k, i int) float64 { return float64((k*7+i*3)%5 - 2) }

// Input is rank k's input of n elements, as the table builds it.
func Input(dt backend.DType, k, n int) backend.Buffer { return caseInput(dt, k, n, 0) }

func caseInput(dt backend.DType, k, n, off int) backend.Buffer {
	v := make([]float64, n)
	for i := range v {
		v[i] = caseVal(k, off+i)
	}
	return MakeBuffer(dt, v)
}

// caseReduce folds element i over all ranks as the backend must.
func caseReduce(c Case, world, i int) float64 {
	acc := caseVal(0, i)
	for k := 1; k < world; k++ {
		acc = refOp(c.ReduceOp, acc, caseVal(k, i))
	}
	if c.ReduceOp == backend.Avg {
		switch c.DType {
		case backend.Int32, backend.Int64:
			return math.Trunc(acc / float64(world))
		case backend.Float64:
			return acc / float64(world)
		case backend.Float16:
			return float64(half.F16ToF32(half.F32ToF16(float32(acc) / float32(world))))
		case backend.BFloat16:
			return float64(half.BF16ToF32(half.F32ToBF16(float32(acc) / float32(world))))
		}
		return float64(float32(acc) / float32(world))
	}
	return acc
}

// RunCase runs one case on pg and checks the result; it returns a hash of
// the output so that callers can compare ranks bit for bit.
func RunCase(ctx context.Context, pg backend.ProcessGroup, c Case) (uint64, error) {
	r, w := pg.Rank(), pg.Size()
	var out backend.Buffer
	var want []float64
	var err error
	switch c.Op {
	case "allreduce":
		out = caseInput(c.DType, r, c.N, 0)
		err = pg.AllReduce(out, c.ReduceOp).Wait(ctx)
		for i := 0; i < c.N; i++ {
			want = append(want, caseReduce(c, w, i))
		}
	case "allreducev":
		out = caseInput(c.DType, r, c.N, 0)
		vr, ok := pg.(backend.VectorAllReducer)
		if !ok || r == c.Root {
			err = pg.AllReduce(out, c.ReduceOp).Wait(ctx)
		} else {
			// Separate buffers, so that nothing depends on the pieces
			// being adjacent in memory.
			es := c.DType.Size()
			var pieces []backend.Buffer
			at := 0
			for _, n := range pieceSizes(c.N, r) {
				p := backend.Buffer{DType: c.DType, Bytes: make([]byte, n*es)}
				copy(p.Bytes, out.Bytes[at*es:])
				pieces = append(pieces, p)
				at += n
			}
			err = vr.AllReduceV(pieces, c.ReduceOp).Wait(ctx)
			at = 0
			for _, p := range pieces {
				at += copy(out.Bytes[at:], p.Bytes)
			}
		}
		for i := 0; i < c.N; i++ {
			want = append(want, caseReduce(c, w, i))
		}
	case "reducescatter":
		in := caseInput(c.DType, r, c.N*w, 0)
		out = caseInput(c.DType, 99, c.N, 0)
		err = backend.ReduceScatter(pg, out, in, c.ReduceOp).Wait(ctx)
		for i := 0; i < c.N; i++ {
			want = append(want, caseReduce(c, w, r*c.N+i))
		}
	case "reduce":
		out = caseInput(c.DType, r, c.N, 0)
		err = backend.Reduce(pg, out, c.Root, c.ReduceOp).Wait(ctx)
		for i := 0; i < c.N; i++ {
			if r == c.Root {
				want = append(want, caseReduce(c, w, i))
			} else {
				want = append(want, caseVal(r, i)) // untouched off the root
			}
		}
	case "broadcast":
		out = caseInput(c.DType, r, c.N, 0)
		err = pg.Broadcast(out, c.Root).Wait(ctx)
		for i := 0; i < c.N; i++ {
			want = append(want, caseVal(c.Root, i))
		}
	case "allgather":
		out = caseInput(c.DType, 99, c.N*w, 0)
		err = backend.AllGather(pg, out, caseInput(c.DType, r, c.N, 0)).Wait(ctx)
		for k := 0; k < w; k++ {
			for i := 0; i < c.N; i++ {
				want = append(want, caseVal(k, i))
			}
		}
	case "gather":
		out = caseInput(c.DType, 99, c.N*w, 0)
		err = backend.Gather(pg, out, caseInput(c.DType, r, c.N, 0), c.Root).Wait(ctx)
		for k := 0; k < w; k++ {
			for i := 0; i < c.N; i++ {
				if r == c.Root {
					want = append(want, caseVal(k, i))
				} else {
					want = append(want, caseVal(99, k*c.N+i))
				}
			}
		}
	case "scatter":
		out = caseInput(c.DType, 99, c.N, 0)
		err = backend.Scatter(pg, out, caseInput(c.DType, r, c.N*w, 0), c.Root).Wait(ctx)
		for i := 0; i < c.N; i++ {
			want = append(want, caseVal(c.Root, r*c.N+i))
		}
	case "alltoall":
		// Chunk j of rank k's input holds caseVal(k, j*n+i).
		out = caseInput(c.DType, 99, c.N*w, 0)
		err = backend.AllToAll(pg, out, caseInput(c.DType, r, c.N*w, 0)).Wait(ctx)
		for k := 0; k < w; k++ {
			for i := 0; i < c.N; i++ {
				want = append(want, caseVal(k, r*c.N+i))
			}
		}
	case "sendrecv":
		// A ring shift with two tags sent in one order and received in the other.
		if w == 1 {
			return 0, nil
		}
		next, prev := (r+1)%w, (r+w-1)%w
		a, b := caseInput(c.DType, r, c.N, 0), caseInput(c.DType, r, c.N, 7)
		s1 := backend.Send(pg, a, next, 1)
		s2 := backend.Send(pg, b, next, 2)
		got2 := caseInput(c.DType, 99, c.N, 0)
		got1 := caseInput(c.DType, 99, c.N, 0)
		w2 := backend.Recv(pg, got2, prev, 2)
		w1 := backend.Recv(pg, got1, prev, 1)
		for _, wk := range []backend.Work{s1, s2, w2, w1} {
			if err = wk.Wait(ctx); err != nil {
				break
			}
		}
		out = backend.Buffer{DType: c.DType, Bytes: append(append([]byte{}, got1.Bytes...), got2.Bytes...)}
		for i := 0; i < c.N; i++ {
			want = append(want, caseVal(prev, i))
		}
		for i := 0; i < c.N; i++ {
			want = append(want, caseVal(prev, 7+i))
		}
	case "barrier":
		return 0, pg.Barrier().Wait(ctx)
	default:
		return 0, fmt.Errorf("unknown case op %q", c.Op)
	}
	if err != nil {
		return 0, fmt.Errorf("%v: rank %d: %w", c, r, err)
	}
	got := Values(out)
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

// pieceSizes splits n elements into pieces for rank r's AllReduceV: empty,
// single-element, odd and large pieces, in a rank-dependent pattern, so
// that piece boundaries fall at different places on different ranks and
// across the backends' chunk boundaries.
func pieceSizes(n, r int) []int {
	pattern := []int{1, 0, 3 + r, 64, 1000 + 17*r, 4096, 65537 + 5*r}
	var out []int
	for i := 0; n > 0; i++ {
		k := min(pattern[i%len(pattern)], n)
		out = append(out, k)
		n -= k
	}
	return append(out, 0)
}

// RunCases runs every case in order and returns the output hashes; it
// stops at the first failure.
func RunCases(ctx context.Context, pg backend.ProcessGroup, cases []Case) ([]uint64, error) {
	hs := make([]uint64, len(cases))
	for i, c := range cases {
		h, err := RunCase(ctx, pg, c)
		if err != nil {
			return nil, err
		}
		hs[i] = h
	}
	return hs, nil
}
