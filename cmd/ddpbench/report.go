package main

import (
	"fmt"
	"io"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/goddp/goddp/internal/bytesize"
)

// header is what every report states about the run.
type header struct {
	cfg     benchConfig
	backend string
	nproc   int
}

func (h header) title() string {
	return fmt.Sprintf("%s %s %s, %s backend, %d ranks", h.cfg.collective, h.cfg.dtype, h.cfg.op, h.backend, h.nproc)
}

func writeTable(w io.Writer, h header, rs []result) {
	fmt.Fprintf(w, "# ddpbench %s\n", h.title())
	fmt.Fprintf(w, "# warmup %d, iters per size: %s; time = slowest rank's %s per call\n", h.cfg.warmup, itersNote(h.cfg), h.cfg.stat)
	fmt.Fprintf(w, "#\n# %12s %12s %9s %8s %12s %12s %12s\n", "bytes", "count", "type", "redop", "time_us", "algbw_GB/s", "busbw_GB/s")
	var sum float64
	for _, r := range rs {
		fmt.Fprintf(w, "  %12d %12d %9s %8s %12.2f %12.3f %12.3f\n", r.bytes, r.count, h.cfg.dtype, redop(h.cfg), r.timeUS, r.algbw, r.busbw)
		sum += r.busbw
	}
	if len(rs) > 0 {
		fmt.Fprintf(w, "# Avg bus bandwidth: %.3f GB/s\n", sum/float64(len(rs)))
	}
}

func itersNote(c benchConfig) string {
	if c.iters > 0 {
		return fmt.Sprint(c.iters)
	}
	return "256MiB/size in [5,200]"
}

func redop(c benchConfig) string {
	if c.collective == "allreduce" || c.collective == "reducescatter" {
		return c.op.String()
	}
	return "none"
}

func writeCSV(w io.Writer, h header, rs []result) {
	fmt.Fprintln(w, "bytes,count,dtype,time_us,algbw_gbps,busbw_gbps,iters,op,backend,nproc,collective")
	for _, r := range rs {
		fmt.Fprintf(w, "%d,%d,%s,%.3f,%.4f,%.4f,%d,%s,%s,%d,%s\n", r.bytes, r.count, h.cfg.dtype, r.timeUS, r.algbw, r.busbw,
			r.iters, redop(h.cfg), h.backend, h.nproc, h.cfg.collective)
	}
}

// sizeTicks puts a labelled tick at every power of two between the ends,
// thinned to at most about ten labels.
type sizeTicks struct{}

func (sizeTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	n := int(math.Log2(hi/lo)) + 1
	step := max(1, (n+9)/10)
	i := 0
	for v := math.Exp2(math.Ceil(math.Log2(lo))); v <= hi*1.0001; v *= 2 {
		label := ""
		if i%step == 0 {
			label = bytesize.Format(int64(v))
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: label})
		i++
	}
	return ticks
}

// writePlot draws busbw against message size (log scale) to file; the
// extension picks the format (png, svg, pdf, ...).
func writePlot(file string, h header, rs []result) error {
	if len(rs) == 0 {
		return fmt.Errorf("plot: no results")
	}
	p := plot.New()
	p.Title.Text = "ddpbench " + h.title()
	p.X.Label.Text = "message size (bytes)"
	p.Y.Label.Text = "bus bandwidth (GB/s)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = sizeTicks{}
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	pts := make(plotter.XYs, len(rs))
	for i, r := range rs {
		pts[i].X, pts[i].Y = float64(r.bytes), r.busbw
	}
	line, points, err := plotter.NewLinePoints(pts)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	p.Add(line, points)
	p.Legend.Add(h.backend, line, points)
	p.Legend.Top = true
	p.Legend.XOffs = -vg.Points(12)
	if err := p.Save(8*vg.Inch, 5*vg.Inch, file); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return nil
}
