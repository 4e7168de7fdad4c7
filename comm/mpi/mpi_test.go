//go:build mpi

package mpi_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"goddp/comm"
	"goddp/comm/mpi"
)

// The collective tests need a real MPI job: scripts/test-mpi.sh builds this
// test binary with -tags mpi and runs it under mpirun -np 2 and -np 3. Every
// rank runs the same tests in the same order, so the collectives match.
// MPI can be initialised once per process, so TestMain opens the group,
// the tests share it, and TestMain closes it (a collective) at the end.

var world comm.ProcessGroup

const opTimeout = 60 * time.Second

const skipMsg = "not started by mpirun: run scripts/test-mpi.sh, which builds this test with -tags mpi and runs it under mpirun -np 2 and -np 3"

func TestMain(m *testing.M) {
	if !mpi.UnderLauncher() {
		os.Exit(m.Run())
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var err error
	if os.Getenv("GODDP_BACKEND") == "mpi" {
		// Through the registry, as a program using comm.InitFromEnv would.
		world, err = comm.InitFromEnv(ctx)
	} else {
		world, err = mpi.New(ctx, mpi.Options{Timeout: opTimeout})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mpi test: init:", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := world.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "mpi test: close:", err)
		code = 1
	}
	// After Close every op fails with ErrClosed, without touching MPI.
	err = world.AllReduce(comm.Float32s([]float32{1}), comm.Sum).Wait(ctx)
	if !errors.Is(err, comm.ErrClosed) {
		fmt.Fprintf(os.Stderr, "mpi test: allreduce after close: got %v, want comm.ErrClosed\n", err)
		code = 1
	}
	os.Exit(code)
}

func needWorld(t *testing.T) comm.ProcessGroup {
	t.Helper()
	if world == nil {
		t.Skip(skipMsg)
	}
	return world
}

func TestIdentity(t *testing.T) {
	pg := needWorld(t)
	assert.Equal(t, "mpi", pg.Backend())
	if v := os.Getenv("OMPI_COMM_WORLD_RANK"); v != "" {
		r, _ := strconv.Atoi(v)
		n, _ := strconv.Atoi(os.Getenv("OMPI_COMM_WORLD_SIZE"))
		assert.Equal(t, r, pg.Rank())
		assert.Equal(t, n, pg.Size())
	}
}

// TestCollectives runs every op on every dtype with zero, odd,
// non-divisible and large lengths and compares with local references.
func TestCollectives(t *testing.T) {
	pg := needWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*opTimeout)
	defer cancel()
	for _, c := range cases(pg.Size(), []int{0, 1, 7, 1000, 4099}, 100_003) {
		t.Run(c.String(), func(t *testing.T) {
			require.NoError(t, runCase(ctx, pg, c))
		})
	}
}

// TestInFlight issues many ops before waiting on any: the MPI thread keeps
// them all in flight and completes them in order.
func TestInFlight(t *testing.T) {
	pg := needWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	const k = 32
	bufs := make([][]float64, k)
	works := make([]comm.Work, k)
	for i := range bufs {
		bufs[i] = []float64{float64(pg.Rank() + i), 1}
		works[i] = pg.AllReduce(comm.Float64s(bufs[i]), comm.Sum)
	}
	n := pg.Size()
	for i, w := range works {
		require.NoError(t, w.Wait(ctx))
		assert.True(t, w.IsCompleted())
		assert.Equal(t, []float64{float64(n*(n-1)/2 + n*i), float64(n)}, bufs[i])
	}
}

// TestBadArguments checks the local validation; nothing reaches MPI, so
// ranks stay in step.
func TestBadArguments(t *testing.T) {
	pg := needWorld(t)
	ctx := context.Background()
	n := pg.Size()
	x := make([]float32, 4)
	tests := []struct {
		name string
		run  func() comm.Work
	}{
		{"allgather short output", func() comm.Work { return comm.AllGather(pg, comm.Float32s(x[:1]), comm.Float32s(x[:1])) }},
		{"reducescatter short input", func() comm.Work {
			return comm.ReduceScatter(pg, comm.Float32s(make([]float32, 2)), comm.Float32s(make([]float32, 2*n-1)), comm.Sum)
		}},
		{"dtype mismatch", func() comm.Work {
			return comm.AllGather(pg, comm.Float64s(make([]float64, n)), comm.Float32s(x[:1]))
		}},
		{"broadcast root", func() comm.Work { return pg.Broadcast(comm.Float32s(x), n) }},
		{"reduce op", func() comm.Work { return pg.AllReduce(comm.Float32s(x), comm.ReduceOp(99)) }},
		{"send peer", func() comm.Work { return comm.Send(pg, comm.Float32s(x), -1, 0) }},
		{"recv tag", func() comm.Work { return comm.Recv(pg, comm.Float32s(x), 0, -3) }},
		{"ragged bytes", func() comm.Work {
			return pg.AllReduce(comm.Buffer{DType: comm.Float32, Bytes: make([]byte, 5)}, comm.Sum)
		}},
		{"alltoall chunks", func() comm.Work {
			return comm.AllToAll(pg, comm.Float32s(make([]float32, n+1)), comm.Float32s(make([]float32, n+1)))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run().Wait(ctx)
			require.ErrorIs(t, err, comm.ErrBadArgument)
			var oe *comm.OpError
			require.ErrorAs(t, err, &oe)
			assert.Equal(t, pg.Rank(), oe.Rank)
		})
	}
	// The group still works afterwards.
	require.NoError(t, pg.Barrier().Wait(ctx))
}

// ---- the case table

type collCase struct {
	op   string
	dt   comm.DType
	n    int
	rop  comm.ReduceOp
	root int
}

func (c collCase) String() string {
	return fmt.Sprintf("%s/%v/n=%d/%v/root=%d", c.op, c.dt, c.n, c.rop, c.root)
}

var (
	allDTypes = []comm.DType{comm.Float32, comm.Float64, comm.Int32, comm.Int64, comm.Float16, comm.BFloat16}
	allOps    = []comm.ReduceOp{comm.Sum, comm.Avg, comm.Max, comm.Min, comm.Product}
)

func cases(world int, lengths []int, large int) []collCase {
	var cs []collCase
	for _, dt := range allDTypes {
		for _, n := range lengths {
			for _, rop := range allOps {
				cs = append(cs, collCase{op: "allreduce", dt: dt, n: n, rop: rop})
			}
			cs = append(cs,
				collCase{op: "reducescatter", dt: dt, n: n, rop: comm.Sum},
				collCase{op: "reducescatter", dt: dt, n: n, rop: comm.Avg},
				collCase{op: "reduce", dt: dt, n: n, rop: comm.Max, root: world - 1},
				collCase{op: "reduce", dt: dt, n: n, rop: comm.Avg, root: 0},
				collCase{op: "broadcast", dt: dt, n: n, root: world / 2},
				collCase{op: "allgather", dt: dt, n: n},
				collCase{op: "gather", dt: dt, n: n, root: world - 1},
				collCase{op: "scatter", dt: dt, n: n, root: 0},
				collCase{op: "alltoall", dt: dt, n: n},
				collCase{op: "sendrecv", dt: dt, n: n},
			)
		}
	}
	for _, op := range []string{"allreduce", "reducescatter", "reduce", "broadcast", "allgather", "alltoall", "sendrecv"} {
		cs = append(cs, collCase{op: op, dt: comm.Float32, n: large, rop: comm.Sum, root: world - 1})
	}
	cs = append(cs,
		collCase{op: "allreduce", dt: comm.BFloat16, n: large + 1, rop: comm.Avg},
		collCase{op: "allreduce", dt: comm.Int64, n: large/2 + 3, rop: comm.Product},
		collCase{op: "reducescatter", dt: comm.Float64, n: large / 3, rop: comm.Avg},
		collCase{op: "reduce", dt: comm.Float16, n: large, rop: comm.Min, root: 0},
		collCase{op: "barrier"})
	return cs
}

// val is rank k's element i: small integers, so sums, products and
// averages are exact in every dtype.
func val(k, i int) float64 { return float64((k*7+i*3)%5 - 2) }

func input(dt comm.DType, k, n, off int) comm.Buffer {
	v := make([]float64, n)
	for i := range v {
		v[i] = val(k, off+i)
	}
	return makeBuf(dt, v)
}

// reduced is element i reduced over all ranks, as the backend must give it.
func reduced(c collCase, world, i int) float64 {
	acc := val(0, i)
	for k := 1; k < world; k++ {
		b := val(k, i)
		switch c.rop {
		case comm.Sum, comm.Avg:
			acc += b
		case comm.Product:
			acc *= b
		case comm.Max:
			acc = math.Max(acc, b)
		case comm.Min:
			acc = math.Min(acc, b)
		}
	}
	if c.rop != comm.Avg {
		return acc
	}
	switch c.dt {
	case comm.Int32, comm.Int64:
		return math.Trunc(acc / float64(world))
	case comm.Float64:
		return acc / float64(world)
	case comm.Float16:
		return float64(f16ToF32(f32ToF16(float32(acc) / float32(world))))
	case comm.BFloat16:
		return float64(bf16ToF32(f32ToBF16(float32(acc) / float32(world))))
	}
	return float64(float32(acc) / float32(world))
}

func runCase(ctx context.Context, pg comm.ProcessGroup, c collCase) error {
	r, w := pg.Rank(), pg.Size()
	var out comm.Buffer
	var want []float64
	var err error
	switch c.op {
	case "allreduce":
		out = input(c.dt, r, c.n, 0)
		err = pg.AllReduce(out, c.rop).Wait(ctx)
		for i := 0; i < c.n; i++ {
			want = append(want, reduced(c, w, i))
		}
	case "reducescatter":
		out = input(c.dt, 99, c.n, 0)
		err = comm.ReduceScatter(pg, out, input(c.dt, r, c.n*w, 0), c.rop).Wait(ctx)
		for i := 0; i < c.n; i++ {
			want = append(want, reduced(c, w, r*c.n+i))
		}
	case "reduce":
		out = input(c.dt, r, c.n, 0)
		err = comm.Reduce(pg, out, c.root, c.rop).Wait(ctx)
		for i := 0; i < c.n; i++ {
			if r == c.root {
				want = append(want, reduced(c, w, i))
			} else {
				want = append(want, val(r, i)) // untouched off the root
			}
		}
	case "broadcast":
		out = input(c.dt, r, c.n, 0)
		err = pg.Broadcast(out, c.root).Wait(ctx)
		for i := 0; i < c.n; i++ {
			want = append(want, val(c.root, i))
		}
	case "allgather":
		out = input(c.dt, 99, c.n*w, 0)
		err = comm.AllGather(pg, out, input(c.dt, r, c.n, 0)).Wait(ctx)
		for k := 0; k < w; k++ {
			for i := 0; i < c.n; i++ {
				want = append(want, val(k, i))
			}
		}
	case "gather":
		out = input(c.dt, 99, c.n*w, 0)
		err = comm.Gather(pg, out, input(c.dt, r, c.n, 0), c.root).Wait(ctx)
		for k := 0; k < w; k++ {
			for i := 0; i < c.n; i++ {
				if r == c.root {
					want = append(want, val(k, i))
				} else {
					want = append(want, val(99, k*c.n+i))
				}
			}
		}
	case "scatter":
		out = input(c.dt, 99, c.n, 0)
		err = comm.Scatter(pg, out, input(c.dt, r, c.n*w, 0), c.root).Wait(ctx)
		for i := 0; i < c.n; i++ {
			want = append(want, val(c.root, r*c.n+i))
		}
	case "alltoall":
		out = input(c.dt, 99, c.n*w, 0)
		err = comm.AllToAll(pg, out, input(c.dt, r, c.n*w, 0)).Wait(ctx)
		for k := 0; k < w; k++ {
			for i := 0; i < c.n; i++ {
				want = append(want, val(k, r*c.n+i))
			}
		}
	case "sendrecv":
		// A ring shift with two tags, sent in one order and received in the other.
		next, prev := (r+1)%w, (r+w-1)%w
		a, b := input(c.dt, r, c.n, 0), input(c.dt, r, c.n, 7)
		s1 := comm.Send(pg, a, next, 1)
		s2 := comm.Send(pg, b, next, 2)
		got1, got2 := input(c.dt, 99, c.n, 0), input(c.dt, 99, c.n, 0)
		r2 := comm.Recv(pg, got2, prev, 2)
		r1 := comm.Recv(pg, got1, prev, 1)
		for _, wk := range []comm.Work{s1, s2, r2, r1} {
			if err = wk.Wait(ctx); err != nil {
				break
			}
		}
		out = comm.Buffer{DType: c.dt, Bytes: append(append([]byte{}, got1.Bytes...), got2.Bytes...)}
		for i := 0; i < c.n; i++ {
			want = append(want, val(prev, i))
		}
		for i := 0; i < c.n; i++ {
			want = append(want, val(prev, 7+i))
		}
	case "barrier":
		return pg.Barrier().Wait(ctx)
	default:
		return fmt.Errorf("unknown case op %q", c.op)
	}
	if err != nil {
		return fmt.Errorf("rank %d: %w", r, err)
	}
	got := readBuf(out)
	if len(got) != len(want) {
		return fmt.Errorf("rank %d: %d results, want %d", r, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Errorf("rank %d: element %d = %v, want %v", r, i, got[i], want[i])
		}
	}
	return nil
}

// TestGoSignalsIntact checks that initialising MPI left Go's own signal
// handling alone: a nil dereference is still a recoverable panic. (OpenMPI
// installs its SIGSEGV handler only where none exists, and Go's exists.)
func TestGoSignalsIntact(t *testing.T) {
	needWorld(t)
	var p *int
	assert.Panics(t, func() { _ = *p })
}

// Outside mpirun, New refuses to initialise MPI unless asked to.
func TestNotUnderLauncher(t *testing.T) {
	if mpi.UnderLauncher() {
		t.Skip("running under an MPI launcher")
	}
	_, err := mpi.New(context.Background(), mpi.Options{})
	require.ErrorIs(t, err, mpi.ErrNotUnderMPI)
}
