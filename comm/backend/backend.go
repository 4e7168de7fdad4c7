package backend

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unsafe"
)

// Sentinel errors. Backends wrap them with %w and add rank, op, sequence
// number and byte count, e.g.
// "comm: timeout: allreduce #57 (4096 bytes) waiting for rank 3".
var (
	ErrTimeout     = errors.New("comm: timeout")
	ErrPeerFailed  = errors.New("comm: peer failed")
	ErrClosed      = errors.New("comm: process group closed")
	ErrUnsupported = errors.New("comm: operation not supported by backend")
	ErrBadArgument = errors.New("comm: bad argument")
	ErrAuth        = errors.New("comm: authentication failed")
)

// DefaultTimeout is the per-operation timeout when none is configured (as in torch).
const DefaultTimeout = 10 * time.Minute

// DType is the element type of a Buffer.
type DType uint8

const (
	Float32 DType = iota
	Float64
	Int32
	Int64
	Float16  // IEEE half, stored as uint16
	BFloat16 // bfloat16, stored as uint16
)

// Size is the element width in bytes.
func (d DType) Size() int {
	switch d {
	case Float64, Int64:
		return 8
	case Float16, BFloat16:
		return 2
	}
	return 4
}

func (d DType) String() string {
	switch d {
	case Float32:
		return "float32"
	case Float64:
		return "float64"
	case Int32:
		return "int32"
	case Int64:
		return "int64"
	case Float16:
		return "float16"
	case BFloat16:
		return "bfloat16"
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// ReduceOp is a reduction for AllReduce, Reduce and ReduceScatter.
type ReduceOp uint8

const (
	Sum ReduceOp = iota
	Avg
	Max
	Min
	Product
)

func (o ReduceOp) String() string {
	switch o {
	case Sum:
		return "sum"
	case Avg:
		return "avg"
	case Max:
		return "max"
	case Min:
		return "min"
	case Product:
		return "product"
	}
	return fmt.Sprintf("ReduceOp(%d)", uint8(o))
}

// Buffer is a typed view of memory that collectives read and write in place.
// Bytes aliases the caller's slice; build one with Float32s, Float64s, etc.
type Buffer struct {
	DType DType
	Bytes []byte
}

// Len is the number of elements.
func (b Buffer) Len() int { return len(b.Bytes) / b.DType.Size() }

func bytesOf[T any](x []T) []byte {
	if len(x) == 0 {
		return []byte{}
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), len(x)*int(unsafe.Sizeof(z)))
}

func Float32s(x []float32) Buffer { return Buffer{Float32, bytesOf(x)} }
func Float64s(x []float64) Buffer { return Buffer{Float64, bytesOf(x)} }
func Int32s(x []int32) Buffer     { return Buffer{Int32, bytesOf(x)} }
func Int64s(x []int64) Buffer     { return Buffer{Int64, bytesOf(x)} }
func Float16s(x []uint16) Buffer  { return Buffer{Float16, bytesOf(x)} }
func BFloat16s(x []uint16) Buffer { return Buffer{BFloat16, bytesOf(x)} }

// Work is an in-flight asynchronous operation (torch's Work / future).
type Work interface {
	// Wait blocks until the operation completes, fails, or ctx ends.
	// Wait may be called more than once; it returns the same result.
	Wait(ctx context.Context) error
	// IsCompleted reports, without blocking, whether the operation finished.
	IsCompleted() bool
}

// ProcessGroup is the small required face of a backend. Every op is async:
// it is issued in call order (all ranks must issue the same sequence) and
// completes through its Work. Each op fails by itself after the group's
// timeout, so a dead peer never hangs the caller.
type ProcessGroup interface {
	Rank() int
	Size() int
	Backend() string
	AllReduce(buf Buffer, op ReduceOp) Work
	Broadcast(buf Buffer, root int) Work
	Barrier() Work
	// Close releases the group's resources; pending ops fail with ErrClosed.
	Close() error
}

// Optional capabilities, found by type assertion (database/sql style). The
// package functions below (AllGather, ...) return a failed Work wrapping
// ErrUnsupported when a backend lacks one.

// AllGatherer: out holds Size() chunks of in.Len() elements, rank-major.
type AllGatherer interface {
	AllGather(out, in Buffer) Work
}

// ReduceScatterer: in holds Size() chunks of out.Len() elements; rank r gets
// the reduction of chunk r.
type ReduceScatterer interface {
	ReduceScatter(out, in Buffer, op ReduceOp) Work
}

// RootReducer reduces buf into root's buf.
type RootReducer interface {
	Reduce(buf Buffer, root int, op ReduceOp) Work
}

// Gatherer: root's out holds Size() chunks of in.Len(); out is ignored elsewhere.
type Gatherer interface {
	Gather(out, in Buffer, root int) Work
}

// Scatterer: root's in holds Size() chunks of out.Len(); in is ignored elsewhere.
type Scatterer interface {
	Scatter(out, in Buffer, root int) Work
}

// AllToAller: in and out hold Size() equal chunks; chunk j of in goes to rank j.
type AllToAller interface {
	AllToAll(out, in Buffer) Work
}

// VectorAllReducer all-reduces a list of buffers in place as one collective:
// the result is that of AllReduce on their concatenation, bit for bit, and
// a rank calling it matches peers calling AllReduce on the same total, but
// nothing is copied into one buffer and back. Every buffer has the same
// dtype; none may overlap another. DDP's buckets use it to reduce the
// gradients where they are (torch's buckets copy them in and out).
type VectorAllReducer interface {
	AllReduceV(bufs []Buffer, op ReduceOp) Work
}

// SharedAllocator is implemented by groups whose collectives work directly
// on memory that every rank maps (shm): an AllReduce of a buffer lying in
// such memory copies nothing through the backend's own buffers. Every rank
// must then pass a buffer at the same offset of its allocation. AllocShared
// is collective: every rank calls it with the same size in the same order,
// and it returns zeroed memory on every rank or an error on every rank.
// The memory stays valid for the life of the process. FreeShared, called
// on every rank, lets a later AllocShared reuse it.
type SharedAllocator interface {
	AllocShared(ctx context.Context, bytes int) ([]byte, error)
	FreeShared(mem []byte) error
}

// As returns the T that pg is, or wraps behind Unwrap() ProcessGroup (as
// the group comm.Init returns does): how callers find an optional
// capability through wrappers.
func As[T any](pg ProcessGroup) (T, bool) {
	for pg != nil {
		if v, ok := pg.(T); ok {
			return v, true
		}
		u, ok := pg.(interface{ Unwrap() ProcessGroup })
		if !ok {
			break
		}
		pg = u.Unwrap()
	}
	var zero T
	return zero, false
}

// AsSharedAllocator is As[SharedAllocator].
func AsSharedAllocator(pg ProcessGroup) (SharedAllocator, bool) { return As[SharedAllocator](pg) }

// AsVectorAllReducer is As[VectorAllReducer].
func AsVectorAllReducer(pg ProcessGroup) (VectorAllReducer, bool) { return As[VectorAllReducer](pg) }

// PointToPoint sends and receives tagged messages between two ranks.
type PointToPoint interface {
	Send(buf Buffer, dst, tag int) Work
	Recv(buf Buffer, src, tag int) Work
}

// BarrierMonitor is a barrier that, on timeout, names the ranks that did not arrive.
type BarrierMonitor interface {
	MonitoredBarrier(ctx context.Context, timeout time.Duration) error
}

// Subgrouper creates a group over a subset of ranks. Every rank of the parent
// must call it with the same ranks; ranks outside get (nil, nil).
type Subgrouper interface {
	NewGroup(ctx context.Context, ranks []int) (ProcessGroup, error)
}

// DoneWork is a Work that has already completed with err.
type DoneWork struct{ Err error }

func (w DoneWork) Wait(context.Context) error { return w.Err }
func (w DoneWork) IsCompleted() bool          { return true }

func unsupported(pg ProcessGroup, op string) Work {
	return DoneWork{fmt.Errorf("%w: %s on backend %q", ErrUnsupported, op, pg.Backend())}
}

func AllGather(pg ProcessGroup, out, in Buffer) Work {
	if g, ok := pg.(AllGatherer); ok {
		return g.AllGather(out, in)
	}
	return unsupported(pg, "allgather")
}

func ReduceScatter(pg ProcessGroup, out, in Buffer, op ReduceOp) Work {
	if g, ok := pg.(ReduceScatterer); ok {
		return g.ReduceScatter(out, in, op)
	}
	return unsupported(pg, "reducescatter")
}

func Reduce(pg ProcessGroup, buf Buffer, root int, op ReduceOp) Work {
	if g, ok := pg.(RootReducer); ok {
		return g.Reduce(buf, root, op)
	}
	return unsupported(pg, "reduce")
}

func Gather(pg ProcessGroup, out, in Buffer, root int) Work {
	if g, ok := pg.(Gatherer); ok {
		return g.Gather(out, in, root)
	}
	return unsupported(pg, "gather")
}

func Scatter(pg ProcessGroup, out, in Buffer, root int) Work {
	if g, ok := pg.(Scatterer); ok {
		return g.Scatter(out, in, root)
	}
	return unsupported(pg, "scatter")
}

func AllToAll(pg ProcessGroup, out, in Buffer) Work {
	if g, ok := pg.(AllToAller); ok {
		return g.AllToAll(out, in)
	}
	return unsupported(pg, "alltoall")
}

func Send(pg ProcessGroup, buf Buffer, dst, tag int) Work {
	if g, ok := pg.(PointToPoint); ok {
		return g.Send(buf, dst, tag)
	}
	return unsupported(pg, "send")
}

func Recv(pg ProcessGroup, buf Buffer, src, tag int) Work {
	if g, ok := pg.(PointToPoint); ok {
		return g.Recv(buf, src, tag)
	}
	return unsupported(pg, "recv")
}
