package linechart

import (
	"image"
	"image/color"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func labels(ts []Tick) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Label)
	}
	return out
}

func TestTicks(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		want   []string
	}{
		{0, 12000, []string{"0", "5000", "10000"}},
		{2.29, 2.31, []string{"2.290", "2.295", "2.300", "2.305", "2.310"}}, // not "2.3" five times
		{1, 10, []string{"2", "4", "6", "8", "10"}},
		{-1, 1, []string{"-1.0", "-0.5", "0.0", "0.5", "1.0"}},
		{0.1, 0.3, []string{"0.10", "0.15", "0.20", "0.25", "0.30"}}, // 3*0.1 is 0.30000000000000004
		{1e8, 3e8, []string{"1e+08", "1.5e+08", "2e+08", "2.5e+08", "3e+08"}},
	} {
		got := labels(Ticks(tc.lo, tc.hi))
		assert.Equal(t, tc.want, got, "[%v, %v]", tc.lo, tc.hi)
	}
	assert.Empty(t, Ticks(1, 1))
	assert.Empty(t, Ticks(0, math.NaN()))
}

// count is how many pixels of r have colour c.
func count(img *image.RGBA, r image.Rectangle, c color.RGBA) int {
	n := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if img.RGBAAt(x, y) == c {
				n++
			}
		}
	}
	return n
}

// Each series lands in its own panel, through the pixels its data map to,
// and a non-finite point breaks its line instead of spoiling the axes.
func TestDraw(t *testing.T) {
	red := color.RGBA{R: 255, A: 255}
	green := color.RGBA{G: 255, A: 255}
	const w, h = 400, 300
	img := Draw(w, h, []Panel{
		{Title: "loss", XLabel: "step", YLabel: "loss", Series: []Series{
			{Name: "train", X: []float64{0, 10, 11, 20}, Y: []float64{0, 10, math.NaN(), 20}, Color: red},
		}},
		{Title: "throughput", YLabel: "samples/s", YFromZero: true, Series: []Series{
			{X: []float64{0, 20}, Y: []float64{50, 100}, Color: green},
		}},
	})
	require.Equal(t, image.Rect(0, 0, w, h), img.Bounds())
	top, bottom := Area(w, h, 0, 2), Area(w, h, 1, 2)
	assert.Zero(t, count(img, bottom, red), "red only in the top panel")
	assert.Zero(t, count(img, top, green), "green only in the bottom panel")

	// The red line runs corner to corner of the top panel's area (x and y
	// from 0 to 20), through its middle.
	at := func(r image.Rectangle, fx, fy float64) image.Point {
		return image.Pt(r.Min.X+int(math.Round(fx*float64(r.Dx()-1))), r.Max.Y-1-int(math.Round(fy*float64(r.Dy()-1))))
	}
	for _, f := range []float64{0, 0.25, 0.5, 1} {
		p := at(top, f, f)
		assert.Equal(t, red, img.RGBAAt(p.X, p.Y), "red at %v (fraction %v)", p, f)
	}
	// The NaN at step 11 breaks the line: the chord from (10, 10) to
	// (20, 20) is bare around its middle.
	p := at(top, 0.75, 0.75)
	assert.Zero(t, count(img, image.Rect(p.X-3, p.Y-3, p.X+4, p.Y+4), red), "around %v", p)
	// The throughput axis starts at 0: 50 samples/s sits half way up.
	q := at(bottom, 0, 0.5)
	assert.Equal(t, green, img.RGBAAt(q.X, q.Y))
	// Text was drawn: the title row holds black pixels.
	assert.Positive(t, count(img, image.Rect(0, 0, w, marginTop), color.RGBA{A: 255}))
}
