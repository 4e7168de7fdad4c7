// Package linechart draws line charts into an image with the standard
// library and x/image's 7x13 bitmap font: panels stacked top to bottom,
// each with a title, labelled axes, a grid at the ticks, its series as
// lines and a legend. It is what trainer's end-of-run PNG needs and no more;
// it replaced gonum/plot there (2026-11-29), which linked about 60 packages
// (LaTeX, PDF, SVG and TrueType fonts) into every program built on trainer.
package linechart

import (
	"image"
	"image/color"
	"image/draw"
	"math"
	"strconv"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Series is one line: the points (X[i], Y[i]) in order. A non-finite
// point breaks the line there; a point alone is drawn as a dot.
type Series struct {
	Name  string // legend entry; "" for none
	X, Y  []float64
	Color color.RGBA
}

// Panel is one chart.
type Panel struct {
	Title, XLabel, YLabel string
	Series                []Series
	// YFromZero starts the y axis at 0 (or lower, for negative data), as
	// for a throughput, which reads wrongly on an axis cut above zero.
	YFromZero bool
}

// Margins around a panel's plot area, in pixels: they hold the title, the
// tick labels (up to 8 characters of the 7-pixel-wide font on the left)
// and the axis labels.
const (
	marginLeft   = 80
	marginRight  = 16
	marginTop    = 26
	marginBottom = 40
	charW, lineH = 7, 13 // basicfont.Face7x13
)

var (
	black = color.RGBA{A: 255}
	grid  = color.RGBA{R: 220, G: 220, B: 220, A: 255}
	white = color.RGBA{R: 255, G: 255, B: 255, A: 255}
)

// Draw renders the panels one above the other, each h/len(panels) pixels
// high, on a white w x h image.
func Draw(w, h int, panels []Panel) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), &image.Uniform{white}, image.Point{}, draw.Src)
	for i, p := range panels {
		r := image.Rect(0, i*h/len(panels), w, (i+1)*h/len(panels))
		drawPanel(img, r, p)
	}
	return img
}

// Area returns the plot area (inside the axes) of panel i of n in a w x h
// image, as Draw lays it out.
func Area(w, h, i, n int) image.Rectangle {
	r := image.Rect(0, i*h/n, w, (i+1)*h/n)
	return image.Rect(r.Min.X+marginLeft, r.Min.Y+marginTop, r.Max.X-marginRight, r.Max.Y-marginBottom)
}

func drawPanel(img *image.RGBA, r image.Rectangle, p Panel) {
	area := image.Rect(r.Min.X+marginLeft, r.Min.Y+marginTop, r.Max.X-marginRight, r.Max.Y-marginBottom)
	xlo, xhi, ylo, yhi := bounds(p.Series)
	if p.YFromZero {
		ylo = math.Min(ylo, 0)
	}
	xlo, xhi = widen(xlo, xhi)
	ylo, yhi = widen(ylo, yhi)
	px := func(x float64) int {
		return area.Min.X + int(math.Round((x-xlo)/(xhi-xlo)*float64(area.Dx()-1)))
	}
	py := func(y float64) int {
		return area.Max.Y - 1 - int(math.Round((y-ylo)/(yhi-ylo)*float64(area.Dy()-1)))
	}

	for _, t := range Ticks(xlo, xhi) {
		x := px(t.Value)
		vline(img, x, area.Min.Y, area.Max.Y-1, grid)
		vline(img, x, area.Max.Y, area.Max.Y+3, black)
		text(img, x-len(t.Label)*charW/2, area.Max.Y+4+lineH-2, t.Label)
	}
	for _, t := range Ticks(ylo, yhi) {
		y := py(t.Value)
		hline(img, area.Min.X, area.Max.X-1, y, grid)
		hline(img, area.Min.X-4, area.Min.X-1, y, black)
		text(img, area.Min.X-6-len(t.Label)*charW, y+lineH/2-2, t.Label)
	}
	hline(img, area.Min.X, area.Max.X-1, area.Min.Y, black)
	hline(img, area.Min.X, area.Max.X-1, area.Max.Y-1, black)
	vline(img, area.Min.X, area.Min.Y, area.Max.Y-1, black)
	vline(img, area.Max.X-1, area.Min.Y, area.Max.Y-1, black)

	text(img, (area.Min.X+area.Max.X-len(p.Title)*charW)/2, r.Min.Y+lineH+4, p.Title)
	text(img, (area.Min.X+area.Max.X-len(p.XLabel)*charW)/2, r.Max.Y-6, p.XLabel)
	vtext(img, r.Min.X+4, (area.Min.Y+area.Max.Y+len(p.YLabel)*charW)/2, p.YLabel)

	for _, s := range p.Series {
		var prev image.Point
		have := false
		for i := range s.X {
			if !finite(s.X[i]) || !finite(s.Y[i]) {
				have = false
				continue
			}
			pt := image.Pt(px(s.X[i]), py(s.Y[i]))
			if have {
				line(img, prev, pt, s.Color)
			} else {
				dot(img, pt, s.Color) // seen even if no neighbour joins it
			}
			prev, have = pt, true
		}
	}
	legend(img, area, p.Series)
}

// legend lists the named series in the plot area's top right corner.
func legend(img *image.RGBA, area image.Rectangle, series []Series) {
	var named []Series
	width := 0
	for _, s := range series {
		if s.Name != "" {
			named = append(named, s)
			width = max(width, len(s.Name)*charW)
		}
	}
	if len(named) == 0 {
		return
	}
	box := image.Rect(area.Max.X-width-40, area.Min.Y+4, area.Max.X-4, area.Min.Y+8+len(named)*(lineH+2))
	draw.Draw(img, box, &image.Uniform{white}, image.Point{}, draw.Src)
	for i, s := range named {
		y := box.Min.Y + 4 + i*(lineH+2) + lineH/2
		line(img, image.Pt(box.Min.X+4, y), image.Pt(box.Min.X+24, y), s.Color)
		text(img, box.Min.X+30, y+lineH/2-2, s.Name)
	}
}

// Tick is a labelled position on an axis.
type Tick struct {
	Value float64
	Label string
}

// Ticks returns about five round positions (1, 2 or 5 times a power of
// ten apart) within [lo, hi], labelled with the decimals their spacing
// needs, so labels never repeat: a loss moving within 2.29-2.31 reads
// 2.290, 2.295, ... rather than "2.3" at every tick.
func Ticks(lo, hi float64) []Tick {
	if !(hi > lo) || !finite(lo) || !finite(hi) {
		return nil
	}
	raw := (hi - lo) / 5
	exp := math.Floor(math.Log10(raw))
	mag := math.Pow(10, exp)
	step := 10 * mag
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	if step == 10*mag {
		exp++
	}
	first := math.Ceil(lo/step - 1e-9)
	var ticks []Tick
	for k := first; k*step <= hi+step*1e-9; k++ {
		v := k * step
		if v == 0 {
			v = 0 // not -0 (a ceil of a tiny negative), which prints "-0"
		}
		ticks = append(ticks, Tick{Value: v})
	}
	dec := int(math.Max(0, -exp))
	if dec <= 6 && math.Max(math.Abs(lo), math.Abs(hi)) < 1e7 {
		for i := range ticks {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'f', dec, 64)
		}
		return ticks
	}
	// Very large or small values: the fewest significant digits that tell
	// the ticks apart, in exponent form where %g chooses it.
	for prec := 2; prec <= 17; prec++ {
		seen, dup := map[string]bool{}, false
		for i := range ticks {
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

// bounds is the range of the series' finite points (0, 1 for none).
func bounds(series []Series) (xlo, xhi, ylo, yhi float64) {
	xlo, ylo = math.Inf(1), math.Inf(1)
	xhi, yhi = math.Inf(-1), math.Inf(-1)
	for _, s := range series {
		for i := range s.X {
			if finite(s.X[i]) && finite(s.Y[i]) {
				xlo, xhi = math.Min(xlo, s.X[i]), math.Max(xhi, s.X[i])
				ylo, yhi = math.Min(ylo, s.Y[i]), math.Max(yhi, s.Y[i])
			}
		}
	}
	if xlo > xhi {
		return 0, 1, 0, 1
	}
	return xlo, xhi, ylo, yhi
}

// widen gives an empty range some width, so that one point or a flat line
// lands mid-axis instead of dividing by zero.
func widen(lo, hi float64) (float64, float64) {
	if hi > lo {
		return lo, hi
	}
	d := math.Abs(lo) * 0.05
	if d == 0 {
		d = 1
	}
	return lo - d, hi + d
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func hline(img *image.RGBA, x0, x1, y int, c color.RGBA) {
	for x := x0; x <= x1; x++ {
		img.SetRGBA(x, y, c)
	}
}

func vline(img *image.RGBA, x, y0, y1 int, c color.RGBA) {
	for y := y0; y <= y1; y++ {
		img.SetRGBA(x, y, c)
	}
}

// dot is a 2x2 pixel square: the pen of a line, about gonum's 1.5 points
// at 96 dpi.
func dot(img *image.RGBA, p image.Point, c color.RGBA) {
	for dy := 0; dy < 2; dy++ {
		for dx := 0; dx < 2; dx++ {
			img.SetRGBA(p.X+dx, p.Y+dy, c)
		}
	}
}

// line joins a and b with the pen, one step per pixel of the longer side.
func line(img *image.RGBA, a, b image.Point, c color.RGBA) {
	n := max(abs(b.X-a.X), abs(b.Y-a.Y))
	for i := 0; i <= n; i++ {
		t := 0.0
		if n > 0 {
			t = float64(i) / float64(n)
		}
		dot(img, image.Pt(a.X+int(math.Round(t*float64(b.X-a.X))), a.Y+int(math.Round(t*float64(b.Y-a.Y)))), c)
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// text draws s in black with its baseline at y.
func text(img draw.Image, x, y int, s string) {
	d := font.Drawer{Dst: img, Src: image.Black, Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

// vtext draws s in black reading upwards, its first character's bottom
// left at (x, y): the y axis's label.
func vtext(img *image.RGBA, x, y int, s string) {
	if s == "" {
		return
	}
	tmp := image.NewRGBA(image.Rect(0, 0, len(s)*charW, lineH))
	draw.Draw(tmp, tmp.Bounds(), &image.Uniform{white}, image.Point{}, draw.Src)
	text(tmp, 0, lineH-3, s)
	// Turned a quarter counter-clockwise: (tx, ty) goes to (x+ty, y-tx).
	for ty := 0; ty < lineH; ty++ {
		for tx := 0; tx < tmp.Bounds().Dx(); tx++ {
			if c := tmp.RGBAAt(tx, ty); c != white {
				img.SetRGBA(x+ty, y-tx, c)
			}
		}
	}
}
