package comm

import (
	"context"

	"github.com/goddp/goddp/comm/backend"
)

// The contract between users, comm and the backends lives in
// goddp/comm/backend (see doc.go); these aliases let users write
// comm.ProcessGroup, comm.Float32s(x), comm.Sum and so on.

// Sentinel errors; backends wrap them in an *OpError.
var (
	ErrTimeout     = backend.ErrTimeout
	ErrPeerFailed  = backend.ErrPeerFailed
	ErrClosed      = backend.ErrClosed
	ErrUnsupported = backend.ErrUnsupported
	ErrBadArgument = backend.ErrBadArgument
	ErrAuth        = backend.ErrAuth
)

// DefaultTimeout is the per-operation timeout when none is configured (as in torch).
const DefaultTimeout = backend.DefaultTimeout

// DefaultStallThreshold is when the stall inspector first reports.
const DefaultStallThreshold = backend.DefaultStallThreshold

type (
	// DType is the element type of a Buffer.
	DType = backend.DType
	// ReduceOp is a reduction for AllReduce, Reduce and ReduceScatter.
	ReduceOp = backend.ReduceOp
	// Buffer is a typed view of memory that collectives read and write in place.
	Buffer = backend.Buffer
	// Work is an in-flight asynchronous operation (torch's Work / future).
	Work = backend.Work
	// ProcessGroup is the small required face of a backend.
	ProcessGroup = backend.ProcessGroup
	// OpError is the error of a failed collective or point-to-point op.
	OpError = backend.OpError
	// Store is the rendezvous key-value store (torch's c10d Store).
	Store = backend.Store
	// Options configure a backend when a process group is created.
	Options = backend.Options
	// Factory creates a backend's process group.
	Factory = backend.Factory
	// Future is a Work completed exactly once; backends outside comm use it.
	Future = backend.Future
	// DoneWork is a Work that has already completed with Err.
	DoneWork = backend.DoneWork

	AllGatherer     = backend.AllGatherer
	ReduceScatterer = backend.ReduceScatterer
	RootReducer     = backend.RootReducer
	Gatherer        = backend.Gatherer
	Scatterer       = backend.Scatterer
	AllToAller      = backend.AllToAller
	PointToPoint    = backend.PointToPoint
	// VectorAllReducer reduces a list of buffers as if concatenated, in
	// place (shm and the in-memory test group implement it).
	VectorAllReducer = backend.VectorAllReducer
	// SharedAllocator gives memory that collectives reduce where it lies
	// (shm).
	SharedAllocator = backend.SharedAllocator
	BarrierMonitor  = backend.BarrierMonitor
	Subgrouper      = backend.Subgrouper
)

// Element types.
const (
	Float32  = backend.Float32
	Float64  = backend.Float64
	Int32    = backend.Int32
	Int64    = backend.Int64
	Float16  = backend.Float16  // IEEE half, stored as uint16
	BFloat16 = backend.BFloat16 // bfloat16, stored as uint16
)

// Reductions.
const (
	Sum     = backend.Sum
	Avg     = backend.Avg
	Max     = backend.Max
	Min     = backend.Min
	Product = backend.Product
)

// Buffers over the caller's slices (no copy).
func Float32s(x []float32) Buffer { return backend.Float32s(x) }
func Float64s(x []float64) Buffer { return backend.Float64s(x) }
func Int32s(x []int32) Buffer     { return backend.Int32s(x) }
func Int64s(x []int64) Buffer     { return backend.Int64s(x) }
func Float16s(x []uint16) Buffer  { return backend.Float16s(x) }
func BFloat16s(x []uint16) Buffer { return backend.BFloat16s(x) }

// WaitBeside marks ctx for a Wait that runs beside other work of the
// process (backend.WaitBeside).
func WaitBeside(ctx context.Context) context.Context { return backend.WaitBeside(ctx) }

// NewFuture returns a pending Future.
func NewFuture() *Future { return backend.NewFuture() }

// FailedFuture returns a Future already completed with err.
func FailedFuture(err error) *Future { return backend.FailedFuture(err) }

// Register makes a backend available to Init by name (database/sql style);
// it panics on a duplicate name or nil factory. tcp, shm, mpi and nccl are
// registered by the packages comm imports.
func Register(name string, f Factory) { backend.Register(name, f) }

// Backends lists the registered backend names.
func Backends() []string { return backend.Backends() }

// The optional capabilities, reached through package functions that return
// a failed Work wrapping ErrUnsupported when the backend lacks one.

func AllGather(pg ProcessGroup, out, in Buffer) Work { return backend.AllGather(pg, out, in) }

// AsVectorAllReducer returns pg's AllReduceV, looking through wrappers
// with Unwrap() ProcessGroup such as the group Init returns.
func AsVectorAllReducer(pg ProcessGroup) (VectorAllReducer, bool) {
	return backend.AsVectorAllReducer(pg)
}

// AsSharedAllocator returns pg's AllocShared, looking through wrappers.
func AsSharedAllocator(pg ProcessGroup) (SharedAllocator, bool) {
	return backend.AsSharedAllocator(pg)
}
func ReduceScatter(pg ProcessGroup, out, in Buffer, op ReduceOp) Work {
	return backend.ReduceScatter(pg, out, in, op)
}
func Reduce(pg ProcessGroup, buf Buffer, root int, op ReduceOp) Work {
	return backend.Reduce(pg, buf, root, op)
}
func Gather(pg ProcessGroup, out, in Buffer, root int) Work {
	return backend.Gather(pg, out, in, root)
}
func Scatter(pg ProcessGroup, out, in Buffer, root int) Work {
	return backend.Scatter(pg, out, in, root)
}
func AllToAll(pg ProcessGroup, out, in Buffer) Work { return backend.AllToAll(pg, out, in) }
func Send(pg ProcessGroup, buf Buffer, dst, tag int) Work {
	return backend.Send(pg, buf, dst, tag)
}
func Recv(pg ProcessGroup, buf Buffer, src, tag int) Work {
	return backend.Recv(pg, buf, src, tag)
}
