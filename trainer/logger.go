package trainer

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
)

// Record kinds.
const (
	KindTrain = "train" // a window of training steps
	KindEpoch = "epoch" // the end of an epoch
	KindEval  = "eval"  // an evaluation pass
)

// Record is one metrics record, written on rank 0 to every Logger.
type Record struct {
	Kind  string `json:"kind"`
	Step  int    `json:"step"`  // optimizer steps taken so far
	Epoch int    `json:"epoch"` // the epoch the record belongs to
	// Loss is rank 0's mean training loss over the steps since the previous
	// record (over the whole epoch in an epoch record).
	Loss float64 `json:"loss"`
	// LR is the first parameter group's learning rate at the last step.
	LR float64 `json:"lr"`
	// SamplesPerS is the throughput over all ranks since the previous record
	// (rank 0's samples times the world size, over rank 0's wall time).
	SamplesPerS float64 `json:"samples_per_s"`
	// AllReduceHiddenPct is the share of all-reduce time hidden behind
	// backward over the same steps, from ddp's Stats (100 when there was no
	// communication, as with one rank).
	AllReduceHiddenPct float64 `json:"allreduce_hidden_pct"`
	ElapsedS           float64 `json:"elapsed_s"` // since training started
	// GradNorm is the gradients' norm before clipping at the last step
	// (with Config.ClipNorm; absent without).
	GradNorm float64 `json:"grad_norm,omitempty"`
	// TokensPerS is SamplesPerS times Config.TokensPerSample, and MFU its
	// model FLOPs over the devices' peak (Config.FlopsPerToken,
	// PeakFLOPS); absent when those are not set.
	TokensPerS float64 `json:"tokens_per_s,omitempty"`
	MFU        float64 `json:"mfu,omitempty"`
	// Eval holds evaluation results (e.g. "loss", "acc") in eval records;
	// it is absent elsewhere.
	Eval map[string]float64 `json:"eval,omitempty"`
	// Ranks holds every rank's communication figures in epoch records
	// (gathered at the epoch's end), by rank.
	Ranks []RankComm `json:"ranks,omitempty"`
}

// RankComm is one rank's DDP communication over the run so far.
type RankComm struct {
	Rank int `json:"rank"`
	// HiddenPct is the share of its all-reduce time hidden behind backward.
	HiddenPct float64 `json:"hidden_pct"`
	// WaitMs is how long, per iteration, backward's end waited for the
	// all-reduces (the communication not hidden).
	WaitMs float64 `json:"wait_ms"`
	// CommMs is the all-reduce time per iteration, hidden or not.
	CommMs float64 `json:"comm_ms"`
}

// Logger receives rank 0's records. The Trainer calls Log from its own
// goroutine, one record at a time, and never on other ranks; whoever
// creates a Logger closes it. An error from Log stops training.
type Logger interface {
	Log(r Record) error
}

// JSONLines writes each record as one JSON object per line, flushed at
// once, so the file can be followed (tail -f) while training runs. NaN and
// ±Inf, which JSON cannot hold, are written as the strings "NaN",
// "Infinity" and "-Infinity" (see Record's MarshalJSON), so a loss that
// goes NaN is recorded rather than stopping the run.
type JSONLines struct {
	w    *bufio.Writer
	c    io.Closer // nil unless it owns the file
	name string
}

// NewJSONLines writes records to w.
func NewJSONLines(w io.Writer) *JSONLines {
	return &JSONLines{w: bufio.NewWriter(w), name: "JSON lines"}
}

// CreateJSONLines creates (truncates) path and writes records to it; Close
// closes the file.
func CreateJSONLines(path string) (*JSONLines, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("trainer: metrics log: %w", err)
	}
	return &JSONLines{w: bufio.NewWriter(f), c: f, name: path}, nil
}

// Log implements Logger.
func (j *JSONLines) Log(r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("trainer: metrics log %s: %w", j.name, err)
	}
	b = append(b, '\n')
	if _, err := j.w.Write(b); err != nil {
		return fmt.Errorf("trainer: metrics log %s: %w", j.name, err)
	}
	if err := j.w.Flush(); err != nil {
		return fmt.Errorf("trainer: metrics log %s: %w", j.name, err)
	}
	return nil
}

// Close closes the file CreateJSONLines opened (nothing for NewJSONLines).
func (j *JSONLines) Close() error {
	if j.c == nil {
		return nil
	}
	err := j.c.Close()
	j.c = nil
	if err != nil {
		return fmt.Errorf("trainer: metrics log %s: %w", j.name, err)
	}
	return nil
}

// ReadJSONLines parses what JSONLines wrote.
func ReadJSONLines(r io.Reader) ([]Record, error) {
	var recs []Record
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		var rec Record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return recs, fmt.Errorf("trainer: metrics line %d: %w", n, err)
		}
		recs = append(recs, rec)
	}
	if err := sc.Err(); err != nil {
		return recs, fmt.Errorf("trainer: metrics: %w", err)
	}
	return recs, nil
}

// csvColumns are CSV's fixed columns, the JSON names of Record's scalar
// fields; the eval columns follow, one per key given to NewCSV, named
// "eval_<key>".
var csvColumns = []string{"kind", "step", "epoch", "loss", "lr", "samples_per_s", "allreduce_hidden_pct", "elapsed_s"}

// CSV writes records as comma-separated values with a header line, for
// spreadsheets and pandas.read_csv. A CSV file has fixed columns, so the
// evaluation results it keeps are those named when it is created (an eval
// record's other keys are left out); cells a record does not have are
// empty; NaN and ±Inf are written "NaN", "Infinity" and "-Infinity", as
// in JSON lines. Per-rank communication figures (Record.Ranks) are not written:
// use JSON lines for those.
type CSV struct {
	w      *csv.Writer
	c      io.Closer
	name   string
	keys   []string
	header bool
}

// NewCSV writes records to w, with one eval column per key (for the
// Trainer's evaluation: "loss" and "acc").
func NewCSV(w io.Writer, evalKeys ...string) *CSV {
	return &CSV{w: csv.NewWriter(w), name: "CSV", keys: slices.Clone(evalKeys)}
}

// CreateCSV creates (truncates) path and writes records to it; Close closes
// the file.
func CreateCSV(path string, evalKeys ...string) (*CSV, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("trainer: metrics CSV: %w", err)
	}
	c := NewCSV(f, evalKeys...)
	c.c, c.name = f, path
	return c, nil
}

// Log implements Logger.
func (c *CSV) Log(r Record) error {
	if !c.header {
		row := slices.Clone(csvColumns)
		for _, k := range c.keys {
			row = append(row, "eval_"+k)
		}
		if err := c.w.Write(row); err != nil {
			return fmt.Errorf("trainer: metrics CSV %s: %w", c.name, err)
		}
		c.header = true
	}
	f := formatMetric // NaN and ±Inf as the JSON lines spell them
	row := []string{r.Kind, strconv.Itoa(r.Step), strconv.Itoa(r.Epoch), "", f(r.LR), "", f(r.AllReduceHiddenPct), f(r.ElapsedS)}
	if r.Kind != KindEval { // an eval record has no training loss or throughput
		row[3], row[5] = f(r.Loss), f(r.SamplesPerS)
	}
	for _, k := range c.keys {
		cell := ""
		if v, ok := r.Eval[k]; ok {
			cell = f(v)
		}
		row = append(row, cell)
	}
	if err := c.w.Write(row); err != nil {
		return fmt.Errorf("trainer: metrics CSV %s: %w", c.name, err)
	}
	c.w.Flush()
	if err := c.w.Error(); err != nil {
		return fmt.Errorf("trainer: metrics CSV %s: %w", c.name, err)
	}
	return nil
}

// Close closes the file CreateCSV opened (nothing for NewCSV).
func (c *CSV) Close() error {
	if c.c == nil {
		return nil
	}
	err := c.c.Close()
	c.c = nil
	if err != nil {
		return fmt.Errorf("trainer: metrics CSV %s: %w", c.name, err)
	}
	return nil
}

// Memory keeps the records in memory (for a plot drawn at the end, or a
// test). Its zero value is ready to use.
type Memory struct{ recs []Record }

// Log implements Logger.
func (m *Memory) Log(r Record) error {
	m.recs = append(m.recs, r)
	return nil
}

// Records returns the records logged so far.
func (m *Memory) Records() []Record { return m.recs }
