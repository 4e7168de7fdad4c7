//go:build mpi

package mpi_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/comm/commtest"
	"github.com/goddp/goddp/comm/mpi"
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
	for _, c := range commtest.Cases(pg.Size(), []int{0, 1, 7, 1000, 4099}, 100_003) {
		t.Run(c.String(), func(t *testing.T) {
			_, err := commtest.RunCase(ctx, pg, c)
			require.NoError(t, err)
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
