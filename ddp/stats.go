package ddp

import (
	"sort"
	"sync"
	"time"
)

// IterStats describes one synchronised iteration.
type IterStats struct {
	// Forward is the time spent in DDP.Forward (including the buffer
	// broadcast and, under Join, the join all-reduce).
	Forward time.Duration
	// Backward is the time from the end of Forward until every gradient was
	// ready (loss computation included), i.e. until finalize started.
	Backward time.Duration
	// CommWait is how long finalize blocked waiting for all-reduces: the
	// communication not hidden behind backward.
	CommWait time.Duration
	// Comm is the wall time during which at least one bucket's all-reduce
	// was in flight (launch to completion, union over buckets).
	Comm time.Duration
	// BucketComm is each bucket's launch-to-completion time, by bucket index.
	BucketComm []time.Duration
}

// HiddenFraction is the fraction of communication time overlapped with
// backward: 1 - CommWait/Comm (1 when there was no communication).
func (s IterStats) HiddenFraction() float64 {
	if s.Comm <= 0 {
		return 1
	}
	f := 1 - float64(s.CommWait)/float64(s.Comm)
	return min(max(f, 0), 1)
}

// Stats are DDP's timing statistics.
type Stats struct {
	// Iterations counts synchronised backward passes.
	Iterations int64
	// Last is the most recent synchronised iteration.
	Last IterStats
	// Total sums every synchronised iteration (BucketComm per bucket index;
	// it restarts when buckets are rebuilt). Total.HiddenFraction() is the
	// overall fraction hidden.
	Total IterStats
	// BucketBytes is the current size of each bucket.
	BucketBytes []int
	// Reduction says how the buckets reach the collective: "copies" (each
	// gradient copied into its bucket and back, as torch), "in place"
	// (ReduceInPlace: reduced where the gradients lie), "bucket view"
	// (GradientAsBucketView), "shared buckets" (bucket view in memory every
	// rank maps), "device" (OnDevice) or "device, stream-ordered" (OnDevice
	// with a StreamReducer: the last backward's finalize did not wait on
	// the host).
	Reduction string
}

type statsRecorder struct {
	mu      sync.Mutex
	forward time.Duration
	s       Stats
}

func (r *statsRecorder) setForward(d time.Duration) {
	r.mu.Lock()
	r.forward = d
	r.mu.Unlock()
}

func (r *statsRecorder) endIteration(it IterStats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	it.Forward = r.forward
	r.s.Iterations++
	r.s.Last = it
	t := &r.s.Total
	t.Forward += it.Forward
	t.Backward += it.Backward
	t.CommWait += it.CommWait
	t.Comm += it.Comm
	if len(t.BucketComm) != len(it.BucketComm) {
		t.BucketComm = make([]time.Duration, len(it.BucketComm))
	}
	for i, d := range it.BucketComm {
		t.BucketComm[i] += d
	}
}

func (r *statsRecorder) snapshot() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.s
	s.Last.BucketComm = append([]time.Duration(nil), s.Last.BucketComm...)
	s.Total.BucketComm = append([]time.Duration(nil), s.Total.BucketComm...)
	return s
}

func (r *statsRecorder) reset() {
	r.mu.Lock()
	r.s = Stats{}
	r.mu.Unlock()
}

// unionLength is the total length covered by the intervals.
func unionLength(spans [][2]time.Time) time.Duration {
	if len(spans) == 0 {
		return 0
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i][0].Before(spans[j][0]) })
	var total time.Duration
	cur := spans[0]
	for _, s := range spans[1:] {
		if s[0].After(cur[1]) {
			total += cur[1].Sub(cur[0])
			cur = s
			continue
		}
		if s[1].After(cur[1]) {
			cur[1] = s[1]
		}
	}
	return total + cur[1].Sub(cur[0])
}
