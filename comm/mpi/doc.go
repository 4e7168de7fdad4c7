// Package mpi is goddp's "mpi" comm backend: a comm.ProcessGroup over
// MPI_COMM_WORLD, for clusters where jobs are started with mpirun (or srun
// with PMIx) and MPI is the interconnect's best-tuned library.
//
// It needs cgo and an MPI library and is built only with the mpi tag:
//
//	go build -tags mpi ./...                       # Debian: apt install libopenmpi-dev
//	mpirun -np 4 ./train                           # comm.InitFromEnv with GODDP_BACKEND=mpi
//
// Without the tag, importing the package still registers the name "mpi",
// and New and comm.Init(Backend "mpi") return ErrNotCompiled, which says how
// to rebuild. cgo finds MPI through pkg-config ("ompi", OpenMPI).
//
// # Joining
//
// Rank and size come from MPI itself. Two ways in:
//
//   - mpi.New(ctx, mpi.Options{}) joins MPI_COMM_WORLD directly; no
//     rendezvous store is needed.
//   - comm.InitFromEnv(ctx) with GODDP_BACKEND=mpi: comm.ConfigFromEnv reads
//     OMPI_COMM_WORLD_RANK and _SIZE (RANK and WORLD_SIZE are unset under
//     mpirun), comm.Init opens its usual store (env:// with MASTER_ADDR and
//     MASTER_PORT, or GODDP_INIT_METHOD=file:///shared/path), and the backend
//     checks that Init's rank and size agree with MPI's.
//
// New refuses, with ErrNotUnderMPI, to initialise MPI in a process that no
// MPI launcher started, unless Options.AllowSingleton is set.
//
// # Threads and progress
//
// Every MPI call of a group runs on one goroutine locked to one OS thread
// (MPI is initialised with MPI_THREAD_FUNNELED on it). Ops are issued, in
// the order they are submitted, as nonblocking MPI calls (MPI_Iallreduce,
// MPI_Isend, ...) straight on the caller's memory, which is pinned
// (runtime.Pinner) until the op completes; many ops may be in flight at
// once. While any is pending the thread drives MPI's progress engine with
// MPI_Testsome and completes each Work as its request finishes, yielding
// the CPU after the first millisecond of waiting.
//
// float32, float64, int32 and int64 use MPI's built-in types and ops;
// float16 and bfloat16 travel as 16-bit integers with user-defined MPI ops
// that widen to float32 and round back to nearest-even, as the tcp backend
// does. Avg reduces as a sum and divides once at the end (integer averages
// truncate). Counts are 32-bit: at most 2^31-1 elements per call.
//
// # Limits
//
// MPI can be initialised once per process: Close finalizes it (a collective,
// so every rank must close) and a later New fails. One group per process is
// supported, and there are no subgroups. Every op has the group's timeout
// (Options.Timeout, 10 minutes by default), but MPI cannot cancel a
// collective: an op that times out fails with comm.ErrTimeout and leaves the
// group unusable, with its buffers pinned until the process exits. When a
// rank dies, mpirun normally ends the whole job.
package mpi
