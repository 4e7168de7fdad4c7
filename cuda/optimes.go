package cuda

import (
	"sort"
	"sync"
	"time"
)

// OpTime is what Context.StartOpTimes measured for one kind of call the
// context's tensor device queued: a kernel by name, a cuBLAS product or a
// cuDNN pass with its shape, a copy.
type OpTime struct {
	Name  string
	Calls int64
	Time  time.Duration // wall time from an idle stream to the call's end, summed
	Host  time.Duration // of which the host spent in the call itself (queuing it), summed
}

// opClock accumulates OpTimes. Each timed call waits for the stream to
// drain before it is queued and again after, so a figure is the call's
// device time plus one launch and one synchronisation (a few
// microseconds, which the smallest kernels' figures mostly are): it tells
// which calls take a step's device time, not how the stream overlaps them.
// Host is the part spent inside the call before it returned. After such a
// wait a few cuBLAS and cuDNN calls spend milliseconds there, every step,
// that the same products queued back to back do not (docs/gpu.md, "What
// a reader of these figures needs to know"): a figure whose time is mostly host time says little about
// the device.
type opClock struct {
	mu  sync.Mutex
	ops map[string]*OpTime
}

func newOpClock() *opClock { return &opClock{ops: map[string]*OpTime{}} }

func (k *opClock) add(name string, d, host time.Duration) {
	k.mu.Lock()
	o := k.ops[name]
	if o == nil {
		o = &OpTime{Name: name}
		k.ops[name] = o
	}
	o.Calls++
	o.Time += d
	o.Host += host
	k.mu.Unlock()
}

// times returns the totals, most time first.
func (k *opClock) times() []OpTime {
	k.mu.Lock()
	out := make([]OpTime, 0, len(k.ops))
	for _, o := range k.ops {
		out = append(out, *o)
	}
	k.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Time != out[j].Time {
			return out[i].Time > out[j].Time
		}
		return out[i].Name < out[j].Name
	})
	return out
}
