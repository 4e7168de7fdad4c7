package trainer

import (
	"bufio"
	"encoding/json"
	"fmt"
	"image/color"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Record kinds in the metrics log.
const (
	KindTrain = "train" // a window of training steps
	KindEpoch = "epoch" // the end of an epoch
	KindEval  = "eval"  // an evaluation pass (LogEval)
)

// MetricsRecord is one line of the -metrics JSON-lines log, written on rank 0.
type MetricsRecord struct {
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
	// Eval holds evaluation results (e.g. "loss", "accuracy") in eval
	// records; it is absent elsewhere.
	Eval map[string]float64 `json:"eval,omitempty"`
}

// MetricsLog writes MetricsRecords as JSON lines and keeps them for the plot.
// Use it on rank 0 only. A nil *MetricsLog discards everything.
type MetricsLog struct {
	path string
	f    *os.File
	w    *bufio.Writer
	recs []MetricsRecord
}

// NewMetricsLog creates (truncates) path for the log; path "" keeps the
// records in memory only (for a plot without a log file).
func NewMetricsLog(path string) (*MetricsLog, error) {
	m := &MetricsLog{path: path}
	if path == "" {
		return m, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("trainer: metrics log: %w", err)
	}
	m.f, m.w = f, bufio.NewWriter(f)
	return m, nil
}

// Write appends one record and flushes it, so the file can be followed
// (tail -f) while training runs.
func (m *MetricsLog) Write(r MetricsRecord) error {
	if m == nil {
		return nil
	}
	m.recs = append(m.recs, r)
	if m.w == nil {
		return nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("trainer: metrics log %s: %w", m.path, err)
	}
	b = append(b, '\n')
	if _, err := m.w.Write(b); err != nil {
		return fmt.Errorf("trainer: metrics log %s: %w", m.path, err)
	}
	if err := m.w.Flush(); err != nil {
		return fmt.Errorf("trainer: metrics log %s: %w", m.path, err)
	}
	return nil
}

// Records returns the records written so far.
func (m *MetricsLog) Records() []MetricsRecord {
	if m == nil {
		return nil
	}
	return m.recs
}

// Close closes the log file.
func (m *MetricsLog) Close() error {
	if m == nil || m.f == nil {
		return nil
	}
	err := m.f.Close()
	m.f, m.w = nil, nil
	if err != nil {
		return fmt.Errorf("trainer: metrics log %s: %w", m.path, err)
	}
	return nil
}

// WritePlot draws the training loss and the throughput against the step,
// one panel above the other, into a PNG file (800x700 pixels). Evaluation
// losses, when the log has them, are drawn on the loss panel too.
func WritePlot(path string, recs []MetricsRecord) error {
	if ext := strings.ToLower(filepath.Ext(path)); ext != ".png" {
		return fmt.Errorf("trainer: plot %s: only .png is supported, not %q", path, ext)
	}
	var loss, tput, evalLoss plotter.XYs
	for _, r := range recs {
		switch r.Kind {
		case KindTrain:
			loss = append(loss, plotter.XY{X: float64(r.Step), Y: r.Loss})
			tput = append(tput, plotter.XY{X: float64(r.Step), Y: r.SamplesPerS})
		case KindEval:
			if v, ok := r.Eval["loss"]; ok {
				evalLoss = append(evalLoss, plotter.XY{X: float64(r.Step), Y: v})
			}
		}
	}
	if len(loss) == 0 {
		return fmt.Errorf("trainer: plot %s: no training records", path)
	}
	lp := plot.New()
	lp.Title.Text = "training loss"
	lp.X.Label.Text = "step"
	lp.Y.Label.Text = "loss"
	lp.Y.Tick.Marker = preciseTicks{}
	lp.Add(plotter.NewGrid())
	if err := addLine(lp, loss, "train (rank 0)", color.RGBA{R: 31, G: 119, B: 180, A: 255}); err != nil {
		return fmt.Errorf("trainer: plot %s: %w", path, err)
	}
	if len(evalLoss) > 0 {
		if err := addLine(lp, evalLoss, "eval", color.RGBA{R: 214, G: 39, B: 40, A: 255}); err != nil {
			return fmt.Errorf("trainer: plot %s: %w", path, err)
		}
	}
	tp := plot.New()
	tp.Title.Text = "throughput"
	tp.X.Label.Text = "step"
	tp.Y.Label.Text = "samples/s (all ranks)"
	tp.Y.Min = 0
	tp.Add(plotter.NewGrid())
	if err := addLine(tp, tput, "", color.RGBA{R: 44, G: 160, B: 44, A: 255}); err != nil {
		return fmt.Errorf("trainer: plot %s: %w", path, err)
	}

	const dpi = 96
	img := vgimg.NewWith(vgimg.UseWH(800*vg.Inch/dpi, 700*vg.Inch/dpi), vgimg.UseDPI(dpi))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadX: vg.Millimeter * 2, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4}
	plots := [][]*plot.Plot{{lp}, {tp}}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("trainer: plot: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("trainer: plot %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("trainer: plot %s: %w", path, err)
	}
	return nil
}

// preciseTicks are gonum's default tick positions labelled with enough
// digits to tell them apart (a loss moving within 2.29-2.31 would otherwise
// read "2.3" at every tick).
type preciseTicks struct{}

func (preciseTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for prec := 2; prec <= 8; prec++ {
		seen, dup := map[string]bool{}, false
		for i := range ticks {
			if ticks[i].Label == "" {
				continue
			}
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'g', prec, 64)
			dup = dup || seen[ticks[i].Label]
			seen[ticks[i].Label] = true
		}
		if !dup {
			break
		}
	}
	return ticks
}

func addLine(p *plot.Plot, pts plotter.XYs, name string, c color.Color) error {
	l, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	l.Color = c
	l.Width = vg.Points(1.5)
	p.Add(l)
	if name != "" {
		p.Legend.Add(name, l)
		p.Legend.Top = true
	}
	return nil
}

// monitor is the trainer's running view of training for the progress bar
// and the metrics log: rank 0's losses over the current window and epoch,
// and where the window started (time, samples, ddp's communication totals).
type monitor struct {
	log   *MetricsLog
	every int // steps per train record

	began                time.Time
	lastLoss             float64
	winLoss, epochLoss   float64
	winSteps, epochSteps int
	winSamples           int64
	winStart             time.Time
	winComm, winCommWait time.Duration
	running              float64 // the progress bar's loss: mean over the epoch so far
}

// epochStarted starts the clock of the epoch's first window (and of the
// run, on the first call).
func (m *monitor) epochStarted(now time.Time) {
	if m.began.IsZero() {
		m.began = now
	}
	m.winStart = now
}

// observeStep records one finished step of rank 0 (the others return at
// once) and writes a train record every `every` steps.
func (t *Trainer) observeStep(epoch, samples int) error {
	m := &t.mon
	if t.pg.Rank() != 0 {
		return nil
	}
	now := time.Now()
	m.winLoss += m.lastLoss
	m.epochLoss += m.lastLoss
	m.winSteps++
	m.epochSteps++
	m.winSamples += int64(samples)
	m.running = m.epochLoss / float64(m.epochSteps)
	if m.log == nil || m.winSteps < max(m.every, 1) {
		return nil
	}
	return t.flushWindow(epoch, now)
}

// flushWindow writes the current window as a train record and starts a new one.
func (t *Trainer) flushWindow(epoch int, now time.Time) error {
	m := &t.mon
	if m.winSteps == 0 {
		return nil
	}
	st := t.model.Stats().Total
	dComm, dWait := st.Comm-m.winComm, st.CommWait-m.winCommWait
	hidden := 100.0
	if dComm > 0 {
		hidden = 100 * min(max(1-float64(dWait)/float64(dComm), 0), 1)
	}
	sps := 0.0
	if dt := now.Sub(m.winStart).Seconds(); dt > 0 {
		sps = float64(m.winSamples) * float64(t.pg.Size()) / dt
	}
	err := m.log.Write(MetricsRecord{Kind: KindTrain, Step: t.step, Epoch: epoch,
		Loss: m.winLoss / float64(m.winSteps), LR: t.learningRate(), SamplesPerS: sps,
		AllReduceHiddenPct: hidden, ElapsedS: now.Sub(m.began).Seconds()})
	m.winLoss, m.winSteps, m.winSamples = 0, 0, 0
	m.winStart, m.winComm, m.winCommWait = now, st.Comm, st.CommWait
	return err
}

// epochMean is this rank's mean training loss over the epoch so far.
func (m *monitor) epochMean() float64 {
	if m.epochSteps == 0 {
		return 0
	}
	return m.epochLoss / float64(m.epochSteps)
}

// endEpochMetrics flushes the partial window and writes the epoch record
// (rank 0's mean loss over the epoch, cumulative hidden share).
func (t *Trainer) endEpochMetrics(epoch int, elapsed time.Duration, samples int) error {
	m := &t.mon
	defer func() { m.epochLoss, m.epochSteps = 0, 0 }()
	if t.pg.Rank() != 0 || m.log == nil || m.epochSteps == 0 {
		return nil
	}
	now := time.Now()
	if err := t.flushWindow(epoch, now); err != nil {
		return err
	}
	sps := 0.0
	if s := elapsed.Seconds(); s > 0 {
		sps = float64(samples) * float64(t.pg.Size()) / s
	}
	return m.log.Write(MetricsRecord{Kind: KindEpoch, Step: t.step, Epoch: epoch,
		Loss: m.epochLoss / float64(m.epochSteps), LR: t.learningRate(), SamplesPerS: sps,
		AllReduceHiddenPct: 100 * t.model.Stats().Total.HiddenFraction(), ElapsedS: now.Sub(m.began).Seconds()})
}

// LogEval writes an eval record with the given results (for example
// {"loss": 0.31, "accuracy": 0.92}) at the current step; call it on every
// rank after an evaluation pass (rank 0 writes, the others return nil).
// This is the hook the evaluation loop reports through, so its results land
// in the metrics log and on the plot.
func (t *Trainer) LogEval(epoch int, results map[string]float64) error {
	if t.pg.Rank() != 0 || t.mon.log == nil {
		return nil
	}
	ev := make(map[string]float64, len(results))
	maps.Copy(ev, results)
	var elapsed float64
	if !t.mon.began.IsZero() {
		elapsed = time.Since(t.mon.began).Seconds()
	}
	return t.mon.log.Write(MetricsRecord{Kind: KindEval, Step: t.step, Epoch: epoch,
		LR: t.learningRate(), AllReduceHiddenPct: 100 * t.model.Stats().Total.HiddenFraction(),
		ElapsedS: elapsed, Eval: ev})
}

func (t *Trainer) learningRate() float64 {
	if gs := t.optimizer.ParamGroups(); len(gs) > 0 {
		return gs[0].LR
	}
	return 0
}

// RunningLoss is rank 0's mean training loss over the current (or last)
// epoch so far; it is what the progress bar shows.
func (t *Trainer) RunningLoss() float64 { return t.mon.running }
