package trainer

import (
	"fmt"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/goddp/goddp/internal/linechart"
)

// Plot is a Logger that keeps the records and draws them with WritePlot
// into a PNG file when it is closed: the end-of-run picture of the loss
// and throughput curves.
type Plot struct {
	path string
	mem  Memory
}

// NewPlot returns a Plot that Close draws to path (a .png file).
func NewPlot(path string) (*Plot, error) {
	if ext := strings.ToLower(filepath.Ext(path)); ext != ".png" {
		return nil, fmt.Errorf("trainer: plot %s: only .png is supported, not %q", path, ext)
	}
	return &Plot{path: path}, nil
}

// Log implements Logger.
func (p *Plot) Log(r Record) error { return p.mem.Log(r) }

// Close draws the records logged so far to the file.
func (p *Plot) Close() error { return WritePlot(p.path, p.mem.Records()) }

// WritePlot draws the training loss and the throughput against the step,
// one panel above the other, into a PNG file (800x700 pixels). Evaluation
// losses, when the log has them, are drawn on the loss panel too.
func WritePlot(path string, recs []Record) error {
	if ext := strings.ToLower(filepath.Ext(path)); ext != ".png" {
		return fmt.Errorf("trainer: plot %s: only .png is supported, not %q", path, ext)
	}
	var loss, tput, evalLoss linechart.Series
	trains := 0
	for _, r := range recs {
		switch r.Kind {
		case KindTrain:
			// A NaN or infinite loss has no place on the axis (gonum's
			// plotter, which drew this before internal/linechart, refused
			// it and failed the run at its end): the curve skips it, as
			// the live page does, and the run's stderr has said at which
			// step the loss stopped being finite.
			trains++
			if finite(r.Loss) {
				loss.X, loss.Y = append(loss.X, float64(r.Step)), append(loss.Y, r.Loss)
			}
			if finite(r.SamplesPerS) {
				tput.X, tput.Y = append(tput.X, float64(r.Step)), append(tput.Y, r.SamplesPerS)
			}
		case KindEval:
			if v, ok := r.Eval["loss"]; ok && finite(v) {
				evalLoss.X, evalLoss.Y = append(evalLoss.X, float64(r.Step)), append(evalLoss.Y, v)
			}
		}
	}
	if trains == 0 {
		return fmt.Errorf("trainer: plot %s: no training records", path)
	}
	if len(loss.X) == 0 {
		return fmt.Errorf("trainer: plot %s: no finite training loss in %d records (the loss was NaN or infinite throughout)", path, trains)
	}
	loss.Name, loss.Color = "train (rank 0)", color.RGBA{R: 31, G: 119, B: 180, A: 255}
	lp := linechart.Panel{Title: "training loss", XLabel: "step", YLabel: "loss", Series: []linechart.Series{loss}}
	if len(evalLoss.X) > 0 {
		evalLoss.Name, evalLoss.Color = "eval", color.RGBA{R: 214, G: 39, B: 40, A: 255}
		lp.Series = append(lp.Series, evalLoss)
	}
	tput.Color = color.RGBA{R: 44, G: 160, B: 44, A: 255}
	tp := linechart.Panel{Title: "throughput", XLabel: "step", YLabel: "samples/s (all ranks)",
		Series: []linechart.Series{tput}, YFromZero: true}
	img := linechart.Draw(800, 700, []linechart.Panel{lp, tp})

	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("trainer: plot: %w", err)
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return fmt.Errorf("trainer: plot %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("trainer: plot %s: %w", path, err)
	}
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
