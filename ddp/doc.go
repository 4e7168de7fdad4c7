// Package ddp is goddp's DistributedDataParallel: synchronous data-parallel
// training in which every rank holds a full replica of the model, computes
// gradients on its own shard of the batch, and averages them with the other
// ranks while backward is still running.
//
//	pg, _ := comm.InitFromEnv(ctx)
//	d, err := ddp.Wrap(ctx, model, pg)            // verify + broadcast rank 0's state
//	opt, _ := optim.NewSGD(d.Parameters(), optim.SGDConfig{LR: 0.01})
//	for x, y := range batches {
//		opt.ZeroGrad()
//		out, err := d.Forward(x)
//		loss := autograd.CrossEntropy(out, y, autograd.ReductionMean)
//		err = loss.Backward()                // returns with averaged gradients
//		err = opt.Step()
//	}
//
// # Construction
//
// Wrap compares the model across ranks (count, shape, dtype and
// requires-grad of every parameter and buffer): rank 0's signature is
// broadcast, each rank compares it with its own, and an all-reduce of "first
// mismatching entry" slots tells every rank which ranks disagree, so all fail
// together with an error naming the parameter and the ranks. Rank 0's
// parameters and buffers are then broadcast, coalesced per dtype.
//
// The trainable parameters are assigned to buckets in reverse registration
// order (backward produces the last layer's gradients first). A bucket closes
// as soon as its size reaches its cap: 1 MiB for the first bucket, so that
// communication starts early, then BucketCapMB (25 MiB). Parameters of
// different dtypes never share a bucket. Each bucket is one flat buffer with
// an offset per parameter and a pending count.
//
// # The reducer state machine
//
// The reducer (torch's Reducer, reducer.cpp) is driven by three events and
// performs no I/O except through the injected comm.ProcessGroup, so unit
// tests run it on commtest.NewGroups (goddp/comm/commtest):
//
//   - prepare, at the end of a synchronised Forward: reset every bucket's
//     pending count and next_bucket, arm the hooks, and (FindUnusedParameters)
//     walk the graph from the output to list parameters that cannot get a
//     gradient.
//   - gradReady(i), the autograd grad-ready hook, which fires when parameter
//     i's gradient is final while backward goes on. The first hook of an
//     iteration queues finalize on the backward pass and marks the unused
//     parameters ready. Marking a parameter ready copies Grad into its bucket
//     slot, multiplied by 1/world during the copy, and decrements the
//     bucket's pending count. (With GradientAsBucketView, Grad already is the
//     slot: there is no copy, and the default hook all-reduces with comm.Avg
//     so the backend divides, which a shared-memory backend fuses into its
//     reduction. At a power-of-two world size the default hook uses comm.Avg
//     too and the copy is a plain memmove: dividing by 2^k is exact, so the
//     result is torch's bit for bit.) With ReduceInPlace (the default) and a
//     backend that reduces a list of buffers as one collective
//     (comm.VectorAllReducer: shm), there is no copy either way at
//     power-of-two world sizes: the bucket's all-reduce works on the
//     gradients where they lie, and Grad holds the average when it ends.
//     With GradientAsBucketView on shm the buckets themselves live in memory
//     every rank maps (comm.SharedAllocator), and the all-reduce reads the
//     peers' buckets directly instead of copying through the backend's
//     slots. When a bucket reaches zero,
//     every ready bucket from next_bucket on is launched, strictly in index
//     order, so all ranks issue the same sequence of collectives whatever
//     order their gradients arrive in. A launch starts the comm hook (by
//     default an all-reduce sum, which gives the average) and hands its Work
//     to a watcher goroutine that records the completion time and, when no
//     parameter can be unused, copies the result back into Grad while
//     backward continues. With OverlapComm(false) the launch waits for the
//     bucket itself, on the backward goroutine (for ranks with one core).
//   - finalize, which runs after the last gradient and before Backward
//     returns: parameters still not ready are an error naming them (without
//     FindUnusedParameters or StaticGraph) or are marked ready with zero
//     gradient; then it waits for every bucket (bounded by Timeout), writes
//     the remaining results back and records the statistics. (On a device
//     whose group enqueues its all-reduce at the call, a StreamReducer, it
//     waits on the device instead: the compute stream waits for each
//     bucket's event and finalize returns at once, while a watchdog
//     goroutine polls the events with the Timeout, aborts the group on a
//     stuck one and fails the next Forward.) With
//     FindUnusedParameters an all-reduce of a "used" map tells parameters
//     unused on every rank, whose Grad is left untouched.
//
// The handlers branch on no option: the reducer is built from two
// strategies chosen once at Wrap (strategy.go). A bucketHome says where a
// bucket lives (hostCopies: fresh host memory, copied in and out;
// hostViews: memory Grad views, ordinary or shared by every rank;
// deviceHome: memory on the parameters' device, filled on the compute
// stream) and so how a gradient gets in and the result back out. A
// bucketReduce says what reduces it (allReduce of the flat bucket,
// allReduceV of the gradients where they lie, a comm hook, or deviceReduce:
// the comm queue waits for the bucket's event, then the group's device
// collective or a comm goroutine staging through the host). RegisterCommHook
// chooses the reduction again.
//
// After the first synchronised iteration the buckets are rebuilt once from
// the order in which gradients actually became ready (rank 0's order,
// broadcast), at the start of the next Forward, unless FindUnusedParameters
// is set without StaticGraph (the order may then change every iteration).
//
// Every iteration issues, in this order: the Join flag all-reduce (only
// inside Join), the one-time rebuild broadcast, the buffer broadcast
// (BroadcastBuffers, when the model has buffers), one collective per bucket
// in index order, and the used-map all-reduce (FindUnusedParameters).
//
// # Gradient accumulation, hooks and uneven inputs
//
// Forwards run inside NoSync (or between EnterNoSync and ExitNoSync) do not
// arm the reducer, so their backward passes only accumulate local gradients;
// the next synchronised backward averages the accumulated sum.
//
// A CommHook replaces the per-bucket all-reduce; FP16CompressHook and
// BF16CompressHook halve the bytes on the wire.
//
// Join handles ranks with fewer inputs than others (torch's Join context
// manager): each Forward first all-reduces a "still training" flag; a rank
// whose loop ended answers the others' collectives with zero gradients until
// all ranks are done, and the final model is broadcast from the last rank to
// finish.
//
// # Differences from torch
//
// The unused-parameter error is returned by the Backward that missed the
// gradients, not raised at the next forward. The first iteration already
// uses the size-capped buckets (torch 1.13 uses one bucket until the
// rebuild). Forward returns an error, since the collectives it performs can
// fail.
//
// # Observability
//
// Stats reports per-iteration and cumulative forward, backward,
// communication-wait and communication times per bucket, and the fraction
// of communication hidden behind backward. WithTimeline records a Chrome
// trace of forward, backward, each bucket's all-reduce and spans the caller
// adds (d.Timeline().Span("optimizer step")).
package ddp
