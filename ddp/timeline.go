package ddp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
	"unsafe"

	"github.com/goddp/goddp/comm/backend"
)

// Timeline records spans as a Chrome trace (the JSON array format that
// chrome://tracing and https://ui.perfetto.dev open): complete events
// ("ph":"X") with pid = rank, one thread row for compute (forward, backward,
// optimizer) and one for communication (each bucket's all-reduce).
// Timestamps are wall-clock microseconds, so the files of several ranks on
// one machine line up when merged (MergeTimelineFiles).
//
// All methods are safe for concurrent use and do nothing on a nil
// *Timeline, so `d.Timeline().Span("step")` is always valid.
type Timeline struct {
	rank int

	mu      sync.Mutex
	events  []traceEvent
	dropped int
	limit   int
}

type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  float64        `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

const (
	tidCompute = 0
	tidComm    = 1
	tidUser    = 2

	// DefaultTimelineLimit bounds the events kept in memory (about 100 MB of
	// JSON); later events are counted and dropped.
	DefaultTimelineLimit = 1_000_000
)

// NewTimeline returns an empty timeline for rank.
func NewTimeline(rank int) *Timeline {
	return &Timeline{rank: rank, limit: DefaultTimelineLimit}
}

func micros(t time.Time) float64 { return float64(t.UnixNano()) / 1e3 }

func (t *Timeline) record(name, cat string, tid int, start time.Time, dur time.Duration, args map[string]any) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.events) >= t.limit {
		t.dropped++
		return
	}
	t.events = append(t.events, traceEvent{Name: name, Cat: cat, Ph: "X", Ts: micros(start),
		Dur: float64(dur.Nanoseconds()) / 1e3, Pid: t.rank, Tid: tid, Args: args})
}

// Span starts a span on the compute row (e.g. "optimizer step") and returns
// the function that ends it: `defer d.Timeline().Span("step")()`.
func (t *Timeline) Span(name string) (end func()) {
	if t == nil {
		return func() {}
	}
	start := time.Now()
	return func() { t.record(name, "user", tidCompute, start, time.Since(start), nil) }
}

// Record adds a finished span on the user row.
func (t *Timeline) Record(name string, start time.Time, dur time.Duration) {
	t.record(name, "user", tidUser, start, dur, nil)
}

// Len returns the number of recorded events.
func (t *Timeline) Len() int {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.events)
}

// Reset drops every recorded event.
func (t *Timeline) Reset() {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.events, t.dropped = nil, 0
	t.mu.Unlock()
}

func (t *Timeline) metadata() []traceEvent {
	meta := func(name string, tid int, label string) traceEvent {
		return traceEvent{Name: name, Ph: "M", Pid: t.rank, Tid: tid, Args: map[string]any{"name": label}}
	}
	return []traceEvent{
		meta("process_name", 0, fmt.Sprintf("rank %d", t.rank)),
		meta("thread_name", tidCompute, "compute"),
		meta("thread_name", tidComm, "communication"),
		meta("thread_name", tidUser, "user"),
	}
}

// WriteTo writes the trace as a JSON array.
func (t *Timeline) WriteTo(w io.Writer) (int64, error) {
	if t == nil {
		n, err := io.WriteString(w, "[]\n")
		return int64(n), err
	}
	t.mu.Lock()
	events := append(t.metadata(), t.events...)
	if t.dropped > 0 {
		events = append(events, traceEvent{Name: "dropped events", Ph: "M", Pid: t.rank,
			Args: map[string]any{"count": t.dropped}})
	}
	t.mu.Unlock()
	cw := &countWriter{w: w}
	bw := bufio.NewWriter(cw)
	if _, err := bw.WriteString("[\n"); err != nil {
		return cw.n, err
	}
	enc := json.NewEncoder(bw)
	for i, e := range events {
		if i > 0 {
			if _, err := bw.WriteString(","); err != nil {
				return cw.n, err
			}
		}
		if err := enc.Encode(e); err != nil {
			return cw.n, fmt.Errorf("ddp: timeline: %w", err)
		}
	}
	if _, err := bw.WriteString("]\n"); err != nil {
		return cw.n, err
	}
	err := bw.Flush()
	return cw.n, err
}

// WriteFile writes the trace to path (atomically: a temporary file renamed).
func (t *Timeline) WriteFile(path string) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("ddp: timeline: %w", err)
	}
	if _, err := t.WriteTo(f); err != nil {
		f.Close()
		os.Remove(f.Name())
		return fmt.Errorf("ddp: timeline %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("ddp: timeline %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("ddp: timeline %s: %w", path, err)
	}
	return nil
}

// MergeTimelineFiles concatenates the traces in srcs (one per rank) into
// dst, so one viewer shows every rank.
func MergeTimelineFiles(dst string, srcs ...string) error {
	var all []json.RawMessage
	for _, s := range srcs {
		b, err := os.ReadFile(s)
		if err != nil {
			return fmt.Errorf("ddp: merge timelines: %w", err)
		}
		var evs []json.RawMessage
		if err := json.Unmarshal(b, &evs); err != nil {
			return fmt.Errorf("ddp: merge timelines: %s: %w", s, err)
		}
		all = append(all, evs...)
	}
	b, err := json.Marshal(all)
	if err != nil {
		return fmt.Errorf("ddp: merge timelines: %w", err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		return fmt.Errorf("ddp: merge timelines: %w", err)
	}
	return nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// gatherTimelines sends every rank's trace to rank 0 over pg (one pair of
// broadcasts per rank, so it works on any backend) and returns the merged
// JSON array on rank 0 (nil elsewhere). Collective: every rank calls it.
func gatherTimelines(ctx context.Context, pg backend.ProcessGroup, tl *Timeline) ([]byte, error) {
	var mine bytes.Buffer
	if _, err := tl.WriteTo(&mine); err != nil {
		return nil, err
	}
	var merged []json.RawMessage
	for r := 0; r < pg.Size(); r++ {
		n := []int64{int64(mine.Len())}
		if err := wait(ctx, pg.Broadcast(backend.Int64s(n), r), "timeline: broadcasting a trace size"); err != nil {
			return nil, err
		}
		words := make([]int32, (n[0]+3)/4)
		raw := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), len(words)*4)
		if r == pg.Rank() {
			copy(raw, mine.Bytes())
		}
		if len(words) > 0 {
			if err := wait(ctx, pg.Broadcast(backend.Int32s(words), r), "timeline: broadcasting a trace"); err != nil {
				return nil, err
			}
		}
		if pg.Rank() != 0 {
			continue
		}
		var evs []json.RawMessage
		if err := json.Unmarshal(raw[:n[0]], &evs); err != nil {
			return nil, fmt.Errorf("ddp: timeline of rank %d: %w", r, err)
		}
		merged = append(merged, evs...)
	}
	if pg.Rank() != 0 {
		return nil, nil
	}
	return json.Marshal(merged)
}
