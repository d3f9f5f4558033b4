package lockbench

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
)

// The scaling chart's geometry, in pixels: two panels side by side (wait
// p99 and round trips per success against contenders, both on log scales)
// and a legend below them.
const (
	scaleTop        = 70
	scalePanel      = 360 // panel height
	scaleAxis       = 44  // x-axis labels below a panel
	scaleLegendRow  = 18
	scaleLegendCols = 3
	scaleMargin     = 16 // inside a panel, left and right of the outer levels
)

// scalePalette colours the implementations' lines in table order; the best
// setting is always colBest.
var scalePalette = []color.RGBA{
	{110, 110, 110, 255}, // plain-spin
	{140, 86, 75, 255},   // bsm/redislock
	{148, 103, 189, 255}, // redsync
	{227, 119, 194, 255}, // rueidislock
	{31, 119, 180, 255},
	{23, 190, 207, 255},
	{188, 189, 34, 255},
	{255, 127, 14, 255},
	{214, 39, 40, 255},
	{120, 120, 200, 255},
	{100, 200, 100, 255},
	{200, 160, 60, 255},
}

// WriteScaleChart draws the scaling scenario as a PNG: per implementation, a
// line of its wait p99 and one of its Redis round trips per success against
// the contenders. It draws nothing but what the tables hold.
func (rep *Report) WriteScaleChart(w io.Writer) error {
	if len(rep.Scale) == 0 {
		return fmt.Errorf("lockbench: no results of the scaling scenario to chart")
	}
	return png.Encode(w, rep.scaleChart())
}

// scaleChartHeight is the chart's height for rows implementations.
func scaleChartHeight(rows int) int {
	legendRows := (rows + scaleLegendCols - 1) / scaleLegendCols
	return scaleTop + scalePanel + scaleAxis + legendRows*scaleLegendRow + 12
}

func (rep *Report) scaleChart() *image.RGBA {
	rows := rep.ScaleRows()
	img := image.NewRGBA(image.Rect(0, 0, chartWidth, scaleChartHeight(len(rows))))
	draw.Draw(img, img.Bounds(), image.NewUniform(colBackground), image.Point{}, draw.Src)

	p := rep.Params
	text(img, 10, 18, colText, fmt.Sprintf("Scaling: %d processes on one name, %d to %d contenders; simulated round trip %v (measured %s); redis-server %s; %s",
		p.ScaleProcs, p.ScaleProcs*p.ScaleGoroutines[0], p.ScaleProcs*p.ScaleGoroutines[len(p.ScaleGoroutines)-1], p.RTT, ms2(rep.MeasuredRTT), rep.Redis, rep.Date.Format("2006-01-02")))
	text(img, 10, 36, colText, "Lower is better; both axes logarithmic. Green, thick: reqlock's best setting. Dashed: proportional to contenders, through its last point.")

	left := panel{x0: 70, x1: 540, y0: scaleTop, y1: scaleTop + scalePanel, title: "wait p99 (ms)", format: "%g"}
	right := panel{x0: 640, x1: chartWidth - 30, y0: scaleTop, y1: scaleTop + scalePanel, title: "Redis round trips per success", format: "%g"}
	var waits, trips []float64
	for _, r := range rep.Scale {
		if r.Succeeded > 0 {
			waits = append(waits, msf(r.WaitP99))
			trips = append(trips, r.RoundTripsPerSuccess())
		}
	}
	left.lo, left.hi = logRange(waits)
	right.lo, right.hi = logRange(trips)
	levels := make([]float64, len(p.ScaleGoroutines))
	for i, g := range p.ScaleGoroutines {
		levels[i] = float64(p.ScaleProcs * g)
	}
	for _, pn := range []*panel{&left, &right} {
		pn.levels = levels
		pn.frame(img)
	}

	for i, row := range rows {
		c := scalePalette[i%len(scalePalette)]
		width := 2
		if row[0].Impl == Best {
			c, width = colBest, 4
		}
		var pw, pt []point
		for _, r := range row {
			if r.Succeeded == 0 {
				continue
			}
			pw = append(pw, left.at(float64(r.Contenders), msf(r.WaitP99)))
			pt = append(pt, right.at(float64(r.Contenders), r.RoundTripsPerSuccess()))
		}
		polyline(img, pw, width, c)
		polyline(img, pt, width, c)
		if row[0].Impl == Best && len(row) > 1 {
			// The guide: what the wait would be if it grew in proportion
			// to the contenders from the largest level down.
			last := row[len(row)-1]
			var guide []point
			for _, r := range row {
				v := msf(last.WaitP99) * float64(r.Contenders) / float64(last.Contenders)
				guide = append(guide, left.at(float64(r.Contenders), v))
			}
			dashed(img, guide, colBest)
		}
		// The legend, in columns below the panels.
		col, line := i%scaleLegendCols, i/scaleLegendCols
		x := 20 + col*(chartWidth-40)/scaleLegendCols
		y := scaleTop + scalePanel + scaleAxis + line*scaleLegendRow + 12
		bar(img, x, y-8, 18, width+2, c)
		text(img, x+24, y, colText, row[0].Impl)
	}
	return img
}

type point struct{ x, y int }

// panel is one plot: contenders on a log x axis, values on a log y axis
// from lo to hi.
type panel struct {
	x0, x1, y0, y1 int
	lo, hi         float64
	levels         []float64
	title, format  string
}

// at maps a level and a value to pixels; values outside [lo, hi] are
// clamped.
func (pn *panel) at(contenders, v float64) point {
	x := (pn.x0 + pn.x1) / 2
	if n := len(pn.levels); n > 1 {
		first, last := math.Log(pn.levels[0]), math.Log(pn.levels[n-1])
		f := (math.Log(contenders) - first) / (last - first)
		x = pn.x0 + scaleMargin + int(math.Round(f*float64(pn.x1-pn.x0-2*scaleMargin)))
	}
	v = math.Min(math.Max(v, pn.lo), pn.hi)
	f := (math.Log(v) - math.Log(pn.lo)) / (math.Log(pn.hi) - math.Log(pn.lo))
	return point{x, pn.y1 - int(math.Round(f*float64(pn.y1-pn.y0)))}
}

// frame draws the panel's title, its grid at 1, 2 and 5 times each power of
// ten, and the contenders below it.
func (pn *panel) frame(img *image.RGBA) {
	text(img, pn.x0, pn.y0-10, colText, pn.title)
	for decade := pn.lo; decade < pn.hi*1.001; decade *= 10 {
		for _, m := range []float64{1, 2, 5} {
			v := decade * m
			if v > pn.hi*1.001 {
				break
			}
			y := pn.at(pn.levels[0], v).y
			c := colGrid
			if m == 1 {
				c = color.RGBA{190, 190, 190, 255}
			}
			bar(img, pn.x0, y, pn.x1-pn.x0, 1, c)
			label := fmt.Sprintf(pn.format, v)
			text(img, pn.x0-8-7*len(label), y+4, colText, label)
		}
	}
	for _, l := range pn.levels {
		x := pn.at(l, pn.lo).x
		bar(img, x, pn.y0, 1, pn.y1-pn.y0, colGrid)
		label := fmt.Sprintf("%.0f", l)
		text(img, x-7*len(label)/2, pn.y1+16, colText, label)
	}
	text(img, (pn.x0+pn.x1)/2-35, pn.y1+32, colText, "contenders")
}

// logRange returns the powers of ten around vs (at least one decade).
func logRange(vs []float64) (lo, hi float64) {
	lo, hi = math.Inf(1), 0
	for _, v := range vs {
		if v > 0 {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if hi == 0 {
		return 1, 10
	}
	lo = math.Pow(10, math.Floor(math.Log10(lo)))
	hi = math.Pow(10, math.Ceil(math.Log10(hi)))
	if hi <= lo {
		hi = lo * 10
	}
	return lo, hi
}

// polyline draws the segments between pts, width pixels thick, with a
// square marker at each point.
func polyline(img *image.RGBA, pts []point, width int, c color.Color) {
	for i, p := range pts {
		bar(img, p.x-width-1, p.y-width-1, 2*width+3, 2*width+3, c)
		if i > 0 {
			segment(img, pts[i-1], p, width, c, 0)
		}
	}
}

// dashed draws the segments between pts as a thin dashed line.
func dashed(img *image.RGBA, pts []point, c color.Color) {
	for i := 1; i < len(pts); i++ {
		segment(img, pts[i-1], pts[i], 1, c, 6)
	}
}

// segment draws a line from a to b, width pixels thick; with dash > 0, it
// draws dash pixels out of every 2×dash.
func segment(img *image.RGBA, a, b point, width int, c color.Color, dash int) {
	dx, dy := float64(b.x-a.x), float64(b.y-a.y)
	steps := int(math.Max(math.Abs(dx), math.Abs(dy)))
	for s := 0; s <= steps; s++ {
		if dash > 0 && (s/dash)%2 == 1 {
			continue
		}
		f := 0.0
		if steps > 0 {
			f = float64(s) / float64(steps)
		}
		x := a.x + int(math.Round(f*dx))
		y := a.y + int(math.Round(f*dy))
		bar(img, x-width/2, y-width/2, width, width, c)
	}
}
