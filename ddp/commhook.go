package ddp

import (
	"context"
	"github.com/goddp/goddp/internal/half"
	"sync"

	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/tensor"
)

// GradBucket is what a CommHook sees of one bucket (torch's
// dist.GradBucket). Its flat buffer already holds this rank's gradients
// divided by the world size (or by the number of active ranks under Join
// with DivideByInitialWorldSize(false)), so summing across ranks yields the
// average.
type GradBucket struct {
	Index int
	DType tensor.DType
	// F32 or F64 (per DType) is the flat buffer, laid out as ParamIndices.
	F32 []float32
	F64 []float64
	// ParamIndices are indices into DDP.Parameters().
	ParamIndices []int
	// IsLast reports whether this is the last bucket of the iteration.
	IsLast bool

	owner *bucket
}

// Buffer returns the flat buffer as a comm.Buffer.
func (g *GradBucket) Buffer() backend.Buffer {
	if g.DType == tensor.Float64 {
		return backend.Float64s(g.F64)
	}
	return backend.Float32s(g.F32)
}

// CommHook reduces one bucket across ranks (torch's DDP communication hook).
// Reduce must start exactly one sequence of collectives that is identical on
// every rank, and return a Work whose successful completion means the
// bucket's buffer holds the sum across ranks of every rank's buffer. It runs
// on the backward goroutine, so it must not block.
type CommHook interface {
	Reduce(pg backend.ProcessGroup, b *GradBucket) backend.Work
}

// CommHookFunc adapts a function to CommHook.
type CommHookFunc func(pg backend.ProcessGroup, b *GradBucket) backend.Work

// Reduce calls f.
func (f CommHookFunc) Reduce(pg backend.ProcessGroup, b *GradBucket) backend.Work { return f(pg, b) }

// AllReduceHook is the default hook: an all-reduce (sum) of the pre-divided
// bucket, i.e. the average (torch's allreduce_hook).
func AllReduceHook() CommHook {
	return CommHookFunc(func(pg backend.ProcessGroup, b *GradBucket) backend.Work {
		return pg.AllReduce(b.Buffer(), backend.Sum)
	})
}

// FP16CompressHook casts each bucket to IEEE float16, all-reduces that (half
// the bytes on the wire) and casts the result back (torch's
// fp16_compress_hook). Gradients are divided by the world size before the
// cast, which keeps the sum in range; the relative error per element is
// about 2^-11 per rounding, and magnitudes below ~6e-8 flush to zero.
func FP16CompressHook() CommHook { return compressHook{bf16: false} }

// BF16CompressHook is FP16CompressHook with bfloat16 (torch's
// bf16_compress_hook): float32's range, 8 bits of mantissa (relative error
// about 2^-8 per rounding).
func BF16CompressHook() CommHook { return compressHook{bf16: true} }

type compressHook struct{ bf16 bool }

func (h compressHook) Reduce(pg backend.ProcessGroup, b *GradBucket) backend.Work {
	n := len(b.F32)
	if b.DType == tensor.Float64 {
		n = len(b.F64)
	}
	var wire []uint16
	if b.owner != nil {
		// Reuse the bucket's wire buffer: a bucket's previous reduction has
		// always finished before it launches again.
		if cap(b.owner.scratch) < n {
			b.owner.scratch = make([]uint16, n)
		}
		wire = b.owner.scratch[:n]
	} else {
		wire = make([]uint16, n)
	}
	narrow := half.F32ToF16
	widen := half.F16ToF32
	buf := backend.Float16s(wire)
	if h.bf16 {
		narrow, widen = half.F32ToBF16, half.BF16ToF32
		buf = backend.BFloat16s(wire)
	}
	if b.DType == tensor.Float64 {
		for i, v := range b.F64 {
			wire[i] = narrow(float32(v))
		}
	} else {
		for i, v := range b.F32 {
			wire[i] = narrow(v)
		}
	}
	w := pg.AllReduce(buf, backend.Sum)
	return &thenWork{inner: w, then: func() {
		if b.DType == tensor.Float64 {
			for i, v := range wire {
				b.F64[i] = float64(widen(v))
			}
			return
		}
		for i, v := range wire {
			b.F32[i] = widen(v)
		}
	}}
}

// thenWork runs then once, after inner succeeds, before Wait returns (a
// future's .then() without a callback thread).
type thenWork struct {
	inner backend.Work
	then  func()
	once  sync.Once
}

func (w *thenWork) Wait(ctx context.Context) error {
	if err := w.inner.Wait(ctx); err != nil {
		return err
	}
	w.once.Do(w.then)
	return nil
}

func (w *thenWork) IsCompleted() bool { return w.inner.IsCompleted() }
