package main

import (
	"fmt"
	"io"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// syncCSVHeader is the CSV header of `ddpbench sync`; the first nine columns
// are the ones torch_grad_sync.py prints.
const syncCSVHeader = "profile,backend,bucket_cap_mb,grad_bytes,iter_ms,local_ms,sync_ms,sync_gbps,hidden_pct," +
	"nproc,hook,static_graph,bucket_view,compute,buckets,iters,comm_ms,overlap,in_place"

func reportSync(w io.Writer, cfg syncConfig, prof *profile, rows []syncRow) error {
	if cfg.format == "csv" {
		writeSyncCSV(w, rows)
	} else {
		writeSyncTable(w, cfg, prof, rows)
	}
	if cfg.plot != "" {
		return writeSyncPlot(cfg.plot, prof, rows)
	}
	return nil
}

func writeSyncCSV(w io.Writer, rows []syncRow) {
	fmt.Fprintln(w, syncCSVHeader)
	for _, r := range rows {
		fmt.Fprintf(w, "%s,%s,%g,%d,%.3f,%.3f,%.3f,%.4f,%.1f,%d,%s,%t,%t,%s,%d,%d,%.3f,%t,%t\n", r.Profile, r.Backend, r.BucketCapMB,
			r.GradBytes, r.IterMS, r.LocalMS, r.SyncMS, r.SyncGBps, r.HiddenPct, r.NProc, r.Hook, r.StaticGraph, r.BucketView,
			r.Compute, r.Buckets, r.Iters, r.CommMS, r.Overlap, r.InPlace)
	}
}

func writeSyncTable(w io.Writer, cfg syncConfig, prof *profile, rows []syncRow) {
	fmt.Fprintf(w, "# ddpbench sync %s: %s, %d tensors, %d parameters, %d bytes of float32 gradients\n",
		prof.Name, prof.Model, len(prof.Params), prof.numel(), prof.gradBytes())
	fmt.Fprintf(w, "# compute %s; median of %d iterations after %d warm-up; iter = slowest rank with DDP, local = rank 0 without;\n",
		cfg.computeLabel(), cfg.iters, cfg.warmup)
	fmt.Fprintf(w, "# sync = iter - local, sync GB/s = grad bytes / sync; hidden = all-reduce time overlapped with backward,\n# comm = time with an all-reduce in flight per iteration (DDP stats)\n#\n")
	fmt.Fprintf(w, "# %-8s %5s %8s %5s %6s %5s %7s %7s %7s %10s %10s %10s %10s %10s %10s\n", "backend", "nproc", "cap_MB", "hook", "static",
		"view", "overlap", "inplace", "buckets", "iter_ms", "local_ms", "sync_ms", "sync_GB/s", "hidden_%", "comm_ms")
	for _, r := range rows {
		fmt.Fprintf(w, "  %-8s %5d %8g %5s %6t %5t %7t %7t %7d %10.2f %10.2f %10.2f %10.3f %10.1f %10.2f\n", r.Backend, r.NProc,
			r.BucketCapMB, r.Hook, r.StaticGraph, r.BucketView, r.Overlap, r.InPlace, r.Buckets, r.IterMS, r.LocalMS, r.SyncMS, r.SyncGBps, r.HiddenPct,
			r.CommMS)
	}
}

// capTicks labels each bucket cap that was measured.
type capTicks []float64

func (c capTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for _, v := range c {
		if v >= lo*0.999 && v <= hi*1.001 {
			ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', -1, 64)})
		}
	}
	return ts
}

// writeSyncPlot draws sync GB/s against bucket cap (log scale), one line per
// backend (and per rank count, hook and static_graph when those vary).
func writeSyncPlot(file string, prof *profile, rows []syncRow) error {
	if len(rows) == 0 {
		return fmt.Errorf("plot: no results")
	}
	vary := func(f func(syncRow) string) bool {
		for _, r := range rows {
			if f(r) != f(rows[0]) {
				return true
			}
		}
		return false
	}
	nprocV := vary(func(r syncRow) string { return strconv.Itoa(r.NProc) })
	hookV := vary(func(r syncRow) string { return r.Hook })
	staticV := vary(func(r syncRow) string { return strconv.FormatBool(r.StaticGraph) })
	viewV := vary(func(r syncRow) string { return strconv.FormatBool(r.BucketView) })
	overlapV := vary(func(r syncRow) string { return strconv.FormatBool(r.Overlap) })
	inPlaceV := vary(func(r syncRow) string { return strconv.FormatBool(r.InPlace) })
	label := func(r syncRow) string {
		l := r.Backend
		if nprocV {
			l += fmt.Sprintf(" x%d", r.NProc)
		}
		if hookV {
			l += " " + r.Hook
		}
		if staticV && r.StaticGraph {
			l += " static"
		}
		if viewV && r.BucketView {
			l += " bucket-view"
		}
		if overlapV && !r.Overlap {
			l += " no-overlap"
		}
		if inPlaceV && !r.InPlace {
			l += " copies"
		}
		return l
	}
	var order []string
	series := map[string]plotter.XYs{}
	var caps capTicks
	for _, r := range rows {
		l := label(r)
		if _, ok := series[l]; !ok {
			order = append(order, l)
		}
		series[l] = append(series[l], plotter.XY{X: r.BucketCapMB, Y: r.SyncGBps})
		seen := false
		for _, c := range caps {
			seen = seen || c == r.BucketCapMB
		}
		if !seen {
			caps = append(caps, r.BucketCapMB)
		}
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("ddpbench sync %s (%.1f MB of gradients, %d ranks)", prof.Name, float64(prof.gradBytes())/1e6, rows[0].NProc)
	p.X.Label.Text = "bucket_cap_mb"
	p.Y.Label.Text = "gradient sync (GB/s)"
	if len(caps) > 1 {
		p.X.Scale = plot.LogScale{}
	}
	p.X.Tick.Marker = caps
	p.Y.Min = 0
	top := 0.0
	for _, r := range rows {
		top = max(top, r.SyncGBps)
	}
	p.Y.Max = top * (1.15 + 0.07*float64(len(order))) // headroom for the legend above the lines
	p.Add(plotter.NewGrid())
	for i, l := range order {
		line, points, err := plotter.NewLinePoints(series[l])
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		line.Color = plotutil.Color(i)
		points.Color = plotutil.Color(i)
		p.Add(line, points)
		p.Legend.Add(l, line, points)
	}
	p.Legend.Top = true
	p.Legend.XOffs = -vg.Points(12)
	if err := p.Save(8*vg.Inch, 5*vg.Inch, file); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return nil
}
