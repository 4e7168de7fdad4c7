package sim

import (
	"encoding/json"
	"io"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Trace records when each operation of a device's streams ran: the
// simulated counterpart of a profiler's per-stream timeline (Nsight's
// rows, torch.profiler's CUDA streams). Device.StartTrace starts one;
// Mark adds instants the host chooses ("backward returned"), on the same
// clock, so that a test can order host and stream events.
type Trace struct {
	mu     sync.Mutex
	origin time.Time
	spans  []TraceSpan
}

// TraceSpan is one operation a stream ran, or a host mark (Stream "host",
// Start == End).
type TraceSpan struct {
	Stream     string
	Op         string // "launch scale_f32", "all-reduce", "wait event", ...
	Start, End time.Time
}

// StartTrace records, from now on, every operation run by the streams the
// device has at the call (create the streams first: the comm queue at
// ddp.Wrap, the group's with NewCollectives). Streams keep recording into
// it until StopTrace.
func (d *Device) StartTrace() *Trace {
	t := &Trace{origin: time.Now()}
	d.mu.Lock()
	for _, s := range d.streams {
		s.trace.Store(t)
	}
	d.mu.Unlock()
	return t
}

// StopTrace ends the device's recording.
func (d *Device) StopTrace() {
	d.mu.Lock()
	for _, s := range d.streams {
		s.trace.Store(nil)
	}
	d.mu.Unlock()
}

func (t *Trace) add(stream, op string, start, end time.Time) {
	t.mu.Lock()
	t.spans = append(t.spans, TraceSpan{Stream: stream, Op: op, Start: start, End: end})
	t.mu.Unlock()
}

// Mark records a host instant named name.
func (t *Trace) Mark(name string) {
	now := time.Now()
	t.add("host", name, now, now)
}

// Spans returns what was recorded so far, by start time.
func (t *Trace) Spans() []TraceSpan {
	t.mu.Lock()
	out := append([]TraceSpan(nil), t.spans...)
	t.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

// WriteChrome writes the trace in the Chrome trace event format
// (chrome://tracing, ui.perfetto.dev): one row per stream, process pid,
// host marks as instants. Several ranks' traces concatenate into one
// view with distinct pids (WriteChromeRanks).
func (t *Trace) WriteChrome(w io.Writer, pid int) error {
	return WriteChromeRanks(w, map[int]*Trace{pid: t})
}

// WriteChromeRanks writes the traces of several ranks (pid = rank) into
// one Chrome trace, on the earliest trace's clock.
func WriteChromeRanks(w io.Writer, traces map[int]*Trace) error {
	type event struct {
		Name string         `json:"name"`
		Ph   string         `json:"ph"`
		Ts   float64        `json:"ts"` // microseconds
		Dur  float64        `json:"dur,omitempty"`
		Pid  int            `json:"pid"`
		Tid  int            `json:"tid"`
		S    string         `json:"s,omitempty"`
		Args map[string]any `json:"args,omitempty"`
	}
	var origin time.Time
	for _, t := range traces {
		if origin.IsZero() || t.origin.Before(origin) {
			origin = t.origin
		}
	}
	pids := make([]int, 0, len(traces))
	for pid := range traces {
		pids = append(pids, pid)
	}
	sort.Ints(pids)
	evs := []event{}
	for _, pid := range pids {
		tids := map[string]int{}
		evs = append(evs, event{Name: "process_name", Ph: "M", Pid: pid, Args: map[string]any{"name": "rank " + strconv.Itoa(pid)}})
		for _, s := range traces[pid].Spans() {
			if s.Op == "record event" {
				continue // instantaneous bookkeeping
			}
			tid, ok := tids[s.Stream]
			if !ok {
				tid = len(tids)
				tids[s.Stream] = tid
				evs = append(evs, event{Name: "thread_name", Ph: "M", Pid: pid, Tid: tid, Args: map[string]any{"name": s.Stream}})
			}
			ts := float64(s.Start.Sub(origin).Nanoseconds()) / 1e3
			if s.Stream == "host" {
				evs = append(evs, event{Name: s.Op, Ph: "i", Ts: ts, Pid: pid, Tid: tid, S: "t"})
				continue
			}
			evs = append(evs, event{Name: s.Op, Ph: "X", Ts: ts, Dur: float64(s.End.Sub(s.Start).Nanoseconds()) / 1e3, Pid: pid, Tid: tid})
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(map[string]any{"traceEvents": evs, "displayTimeUnit": "ms"})
}
