package ddp

import (
	"fmt"
	"time"

	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/tensor"
)

// Defaults, as in torch.nn.parallel.DistributedDataParallel.
const (
	// DefaultBucketCapMB is bucket_cap_mb's default.
	DefaultBucketCapMB = 25
	// DefaultFirstBucketCapMB is the cap of the first (earliest-ready) bucket,
	// torch's dist._DEFAULT_FIRST_BUCKET_BYTES (1 MiB): a small first bucket
	// starts communication early in backward.
	DefaultFirstBucketCapMB = 1
)

// Option configures Wrap.
type Option func(*config)

type config struct {
	bucketCapMB      float64
	firstBucketCapMB float64
	findUnused       bool
	broadcastBuffers bool
	staticGraph      bool
	gradAsBucketView bool
	hook             CommHook
	timeout          time.Duration
	timeline         *Timeline
	timelineOn       bool
	rebuild          bool
	device           Device // OnDevice: buckets in device memory (device.go)
	overlap          bool
	inPlace          bool
	shared           map[tensor.DType][]byte // bucket memory every rank maps (allocSharedBuckets)
	sharedAlloc      backend.SharedAllocator // where shared came from, to give it back in Close
}

func defaultConfig() config {
	return config{
		bucketCapMB:      DefaultBucketCapMB,
		firstBucketCapMB: DefaultFirstBucketCapMB,
		broadcastBuffers: true,
		timeout:          backend.DefaultTimeout,
		rebuild:          true,
		overlap:          true,
		inPlace:          true,
	}
}

func (c *config) validate() error {
	if !(c.bucketCapMB > 0) {
		return fmt.Errorf("%w: BucketCapMB must be > 0, got %v", ErrInvalidOption, c.bucketCapMB)
	}
	if !(c.firstBucketCapMB > 0) {
		return fmt.Errorf("%w: FirstBucketCapMB must be > 0, got %v", ErrInvalidOption, c.firstBucketCapMB)
	}
	if c.timeout <= 0 {
		return fmt.Errorf("%w: Timeout must be > 0, got %v", ErrInvalidOption, c.timeout)
	}
	return nil
}

func mbToBytes(mb float64) int { return int(mb * (1 << 20)) }

// BucketCapMB sets the size cap of every bucket after the first, in MiB
// (torch's bucket_cap_mb, default 25). A bucket closes as soon as it reaches
// the cap, so one large parameter may exceed it alone.
func BucketCapMB(mb float64) Option { return func(c *config) { c.bucketCapMB = mb } }

// FirstBucketCapMB sets the cap of the first bucket in MiB (default 1).
func FirstBucketCapMB(mb float64) Option { return func(c *config) { c.firstBucketCapMB = mb } }

// FindUnusedParameters allows parameters that receive no gradient in an
// iteration (torch's find_unused_parameters). Forward then walks the graph
// from the output to find parameters that cannot receive a gradient and marks
// them ready at the first gradient hook; parameters still missing when
// backward ends are marked ready at finalize. A parameter unused on every rank
// keeps its Grad untouched (nil stays nil). Costs a graph walk per Forward and
// one small extra all-reduce per iteration.
func FindUnusedParameters(on bool) Option { return func(c *config) { c.findUnused = on } }

// BroadcastBuffers broadcasts rank 0's buffers (e.g. BatchNorm running
// statistics) before each Forward (default true).
func BroadcastBuffers(on bool) Option { return func(c *config) { c.broadcastBuffers = on } }

// StaticGraph declares that the set of used parameters and the order in which
// their gradients become ready do not change across iterations (torch's
// static_graph). Parameters unused in the first iteration are remembered and
// marked ready at the first hook of later iterations, with no graph walk and
// no extra all-reduce; buckets are rebuilt from the first iteration's order
// even when FindUnusedParameters is set.
func StaticGraph(on bool) Option { return func(c *config) { c.staticGraph = on } }

// GradientAsBucketView makes each parameter's Grad a view into its bucket's
// flat buffer (torch's gradient_as_bucket_view): autograd accumulates straight
// into bucket memory, saving the copy into the bucket and the copy back.
// Grad tensors then alias DDP's memory; zero them in place (Variable.ZeroGrad)
// rather than replacing them. With the default hook the division by the
// world size then happens in the collective (comm.Avg). Recommended for
// speed; off by default, as in torch.
func GradientAsBucketView(on bool) Option { return func(c *config) { c.gradAsBucketView = on } }

// WithCommHook replaces the default all-reduce of each bucket (torch's
// register_comm_hook); see FP16CompressHook and BF16CompressHook.
func WithCommHook(h CommHook) Option { return func(c *config) { c.hook = h } }

// Timeout bounds every wait of the reducer for its collectives (default
// comm.DefaultTimeout). The process group's own timeout usually fires first.
func Timeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithTimeline records forward, backward and each bucket's all-reduce into tl
// (a Chrome trace). A nil tl makes Wrap create one for this rank; get it with
// DDP.Timeline.
func WithTimeline(tl *Timeline) Option {
	return func(c *config) { c.timeline, c.timelineOn = tl, true }
}

// OverlapComm(false) makes each bucket's all-reduce run to completion as
// soon as the bucket is ready, on the goroutine running backward, before
// backward continues (default true: the all-reduce runs beside the rest of
// backward, as in torch). Overlap needs a spare core. When a rank has one
// core and GOMAXPROCS=1 (ddprun's setting until it gave each rank a P to
// spare), the collective and backward take turns on it in the Go
// scheduler's 10 ms slices, and a step of the collective needs both ranks' turns to meet: in
// `ddpbench sync -timeline` traces a 1 MiB bucket then took 250 ms to
// reduce and backward ran 4x longer. Measure both with
// `ddpbench sync -overlap true,false`. Stats count the time spent waiting
// here as CommWait.
func OverlapComm(on bool) Option { return func(c *config) { c.overlap = on } }

// ReduceInPlace (default true) all-reduces each bucket's gradients where
// they lie, when the process group can reduce a list of buffers as one
// collective (comm.VectorAllReducer: the shm backend, the default on one
// host): the gradient is neither copied into the bucket nor copied back,
// which on one core per rank costs as much as the all-reduce itself
// (`ddpbench sync -inplace true,false`). Results are bit-identical to the
// copying path. It is not used with comm hooks, GradientAsBucketView
// (which has no copies), OnDevice, at world sizes that are not a power of
// two (torch divides each gradient before the sum; only there does the
// division round), or for a gradient that is not a contiguous CPU tensor
// with memory of its own; those slots are copied as before.
// The difference a program can see: while backward runs, the Grad of a
// parameter whose gradient is ready may already hold the averaged value,
// or a partly reduced one; after backward it is the same as torch's.
func ReduceInPlace(on bool) Option { return func(c *config) { c.inPlace = on } }

// rebuildBuckets switches the post-first-iteration bucket rebuild (torch does
// it whenever StaticGraph is set or FindUnusedParameters is not); tests use it
// to pin the initial layout.
func rebuildBuckets(on bool) Option { return func(c *config) { c.rebuild = on } }
