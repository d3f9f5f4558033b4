package lockbench

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// The chart's geometry, in pixels, and colours.
const (
	chartWidth  = 1140
	chartTop    = 64 // title and legend
	chartBottom = 36 // axis labels
	rowHeight   = 34
	labelWidth  = 250
	panelGap    = 40
	waitPanel   = 520 // width of the wait panel; the round-trip panel takes the rest
)

var (
	colBackground = color.RGBA{255, 255, 255, 255}
	colText       = color.RGBA{30, 30, 30, 255}
	colGrid       = color.RGBA{225, 225, 225, 255}
	colP50        = color.RGBA{140, 180, 225, 255}
	colP99        = color.RGBA{30, 90, 160, 255}
	colRoundTrips = color.RGBA{220, 130, 40, 255}
	colPeer       = color.RGBA{110, 110, 110, 255}
	colBest       = color.RGBA{0, 120, 60, 255}
)

// WriteChart draws the contention experiment as a PNG: per implementation, the
// lock wait p50 and p99 and the Redis round trips per success, as
// horizontal bars. It draws nothing but what the table holds.
func (rep *Report) WriteChart(w io.Writer) error {
	if len(rep.Results) == 0 {
		return fmt.Errorf("lockbench: no results of the contention experiment to chart")
	}
	return png.Encode(w, rep.chart())
}

func (rep *Report) chart() *image.RGBA {
	rows := len(rep.Results)
	height := chartTop + rows*rowHeight + chartBottom
	img := image.NewRGBA(image.Rect(0, 0, chartWidth, height))
	draw.Draw(img, img.Bounds(), image.NewUniform(colBackground), image.Point{}, draw.Src)

	p := rep.Params
	text(img, 10, 18, colText, fmt.Sprintf("Contention experiment: %d processes x %d attempts in rounds of %d on one name; simulated round trip %v (measured %s); redis-server %s; %s",
		p.Procs, p.Attempts, p.Goroutines, p.RTT, ms2(rep.MeasuredRTT), rep.Redis, rep.Date.Format("2006-01-02")))
	text(img, 10, 36, colText, "Lower is better. Grey labels: peers and the plain spin lock; green: reqlock's best settings.")

	waitX0 := labelWidth
	waitX1 := waitX0 + waitPanel
	rtX0 := waitX1 + panelGap
	rtX1 := chartWidth - 20
	y0 := chartTop
	y1 := chartTop + rows*rowHeight

	var maxWait, maxRT float64
	for _, r := range rep.Results {
		maxWait = math.Max(maxWait, msf(r.WaitP99))
		maxRT = math.Max(maxRT, per(r.RoundTrips, r.Succeeded))
	}
	waitScale := niceCeil(maxWait)
	rtScale := niceCeil(maxRT)

	// Legends above the panels.
	legend(img, waitX0, 56, colP50, "wait p50 (ms)")
	legend(img, waitX0+130, 56, colP99, "wait p99 (ms)")
	legend(img, rtX0, 56, colRoundTrips, "Redis round trips per success")

	grid(img, waitX0, waitX1, y0, y1, waitScale, "%.0f")
	grid(img, rtX0, rtX1, y0, y1, rtScale, "%.1f")

	for i, r := range rep.Results {
		top := y0 + i*rowHeight
		label := colPeer
		if impl, ok := find(r.Impl); ok && !impl.Peer {
			label = colText
		}
		if r.Impl == Best {
			label = colBest
		}
		text(img, 8, top+rowHeight/2+4, label, r.Impl)

		w50 := scale(msf(r.WaitP50), waitScale, waitX1-waitX0)
		w99 := scale(msf(r.WaitP99), waitScale, waitX1-waitX0)
		bar(img, waitX0, top+5, w50, 11, colP50)
		bar(img, waitX0, top+17, w99, 11, colP99)
		text(img, waitX0+w50+4, top+15, colText, fmt.Sprintf("%.1f", msf(r.WaitP50)))
		text(img, waitX0+w99+4, top+27, colText, fmt.Sprintf("%.1f", msf(r.WaitP99)))

		rt := per(r.RoundTrips, r.Succeeded)
		wrt := scale(rt, rtScale, rtX1-rtX0)
		bar(img, rtX0, top+9, wrt, 16, colRoundTrips)
		text(img, rtX0+wrt+4, top+22, colText, fmt.Sprintf("%.2f", rt))
	}
	return img
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten, so that the grid
// has round numbers; at least 1.
func niceCeil(v float64) float64 {
	if v <= 1 {
		return 1
	}
	mag := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*mag {
			return m * mag
		}
	}
	return 10 * mag
}

// scale maps v in [0, max] to [0, width] pixels.
func scale(v, max float64, width int) int {
	if max <= 0 || v <= 0 {
		return 0
	}
	return int(math.Round(math.Min(v/max, 1) * float64(width)))
}

// grid draws five vertical lines across a panel with their values below it.
func grid(img *image.RGBA, x0, x1, y0, y1 int, max float64, format string) {
	for i := 0; i <= 4; i++ {
		x := x0 + (x1-x0)*i/4
		bar(img, x, y0, 1, y1-y0, colGrid)
		text(img, x-8, y1+16, colText, fmt.Sprintf(format, max*float64(i)/4))
	}
}

func legend(img *image.RGBA, x, y int, c color.Color, label string) {
	bar(img, x, y-9, 12, 10, c)
	text(img, x+16, y, colText, label)
}

func bar(img *image.RGBA, x, y, w, h int, c color.Color) {
	if w <= 0 || h <= 0 {
		return
	}
	draw.Draw(img, image.Rect(x, y, x+w, y+h), image.NewUniform(c), image.Point{}, draw.Src)
}

// text writes s with its baseline at y.
func text(img *image.RGBA, x, y int, c color.Color, s string) {
	d := &font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}
