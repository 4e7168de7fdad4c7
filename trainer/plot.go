package trainer

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
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
	var loss, tput, evalLoss plotter.XYs
	trains := 0
	for _, r := range recs {
		switch r.Kind {
		case KindTrain:
			// A NaN or infinite loss has no place on the axis (gonum's
			// plotter refuses it, which failed the run at its end): the
			// curve skips it, as the live page does, and the run's
			// stderr has said at which step the loss stopped being finite.
			trains++
			if finite(r.Loss) {
				loss = append(loss, plotter.XY{X: float64(r.Step), Y: r.Loss})
			}
			if finite(r.SamplesPerS) {
				tput = append(tput, plotter.XY{X: float64(r.Step), Y: r.SamplesPerS})
			}
		case KindEval:
			if v, ok := r.Eval["loss"]; ok && finite(v) {
				evalLoss = append(evalLoss, plotter.XY{X: float64(r.Step), Y: v})
			}
		}
	}
	if trains == 0 {
		return fmt.Errorf("trainer: plot %s: no training records", path)
	}
	if len(loss) == 0 {
		return fmt.Errorf("trainer: plot %s: no finite training loss in %d records (the loss was NaN or infinite throughout)", path, trains)
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

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
