package bench

import (
	"fmt"
	"math"
	"strings"
)

// The plots: an SVG sheet of two panels side by side under a title and a
// legend, each panel a measure against N.

// Sheet sizes, in pixels.
const (
	sheetWidth, sheetHeight = 960, 430
)

// Left and Right are the two panels' places on the sheet; a plot sets
// their scales and titles.
var (
	Left  = Panel{X: 70, Y: 100, W: 380, H: 260}
	Right = Panel{X: 550, Y: 100, W: 380, H: 260}
)

// Begin starts a sheet in b: the SVG element, a white ground, title
// centred on top. End closes it.
func Begin(b *strings.Builder, title string) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		sheetWidth, sheetHeight, sheetWidth, sheetHeight)
	fmt.Fprintf(b, `<rect width="%d" height="%d" fill="white"/>`+"\n", sheetWidth, sheetHeight)
	fmt.Fprintf(b, `<text x="%d" y="22" text-anchor="middle" font-size="15">%s</text>`+"\n", sheetWidth/2, title)
}

// End closes the sheet Begin started.
func End(b *strings.Builder) { b.WriteString("</svg>\n") }

// Scale places the values of one axis: Frac maps a value to its share of
// the axis (0 at its start, 1 at its end); Ticks are the values with a
// grid line and a label.
type Scale struct {
	Ticks []float64
	Frac  func(v float64) float64
}

// Linear is a linear scale from 0 to at least top × headroom, ticked
// every NiceStep(top / 5); negative values sit at 0.
func Linear(top, headroom float64) Scale {
	step := NiceStep(top / 5)
	ceil := math.Ceil(top*headroom/step) * step
	s := Scale{Frac: func(v float64) float64 { return math.Max(v, 0) / ceil }}
	for v := 0.0; v <= ceil+step/2; v += step {
		s.Ticks = append(s.Ticks, v)
	}
	return s
}

// Log is a logarithmic scale from 1 to the power of ten at or above top
// (10 at least), ticked at each power; values below 1 sit at 1.
func Log(top float64) Scale {
	decades := max(1, math.Ceil(math.Log10(top)))
	s := Scale{Frac: func(v float64) float64 { return math.Log10(math.Max(v, 1)) / decades }}
	for d := 0.0; d <= decades; d++ {
		s.Ticks = append(s.Ticks, math.Pow(10, d))
	}
	return s
}

// LogRange is a logarithmic scale from lo to hi (both > 0), ticked at
// ticks.
func LogRange(lo, hi float64, ticks []float64) Scale {
	l, h := math.Log10(lo), math.Log10(hi)
	return Scale{Ticks: ticks, Frac: func(v float64) float64 { return (math.Log10(v) - l) / (h - l) }}
}

// NiceStep returns 1, 2 or 5 times a power of ten, at least v (1 if v ≤
// 0).
func NiceStep(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// Panel is one chart of a sheet: its box (X, Y: its top left corner; W,
// H), its title, its axes' captions (YLabel may be empty) and scales.
type Panel struct {
	X, Y, W, H     float64
	Title          string
	XLabel         string
	YLabel         string
	XScale, YScale Scale
}

// At is where the point (x, y) lands on the sheet.
func (p Panel) At(x, y float64) (px, py float64) {
	return p.X + p.XScale.Frac(x)*p.W, p.Y + p.H - p.YScale.Frac(y)*p.H
}

// Frame draws the panel's title, box, grid lines with their labels and
// the axes' captions.
func (p Panel) Frame(b *strings.Builder) {
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="13">%s</text>`+"\n", p.X+p.W/2, p.Y-10, p.Title)
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#888"/>`+"\n", p.X, p.Y, p.W, p.H)
	for _, t := range p.YScale.Ticks {
		y := p.Y + p.H - p.YScale.Frac(t)*p.H
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", p.X, y, p.X+p.W, y)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%g</text>`+"\n", p.X-6, y+4, t)
	}
	for _, t := range p.XScale.Ticks {
		x := p.X + p.XScale.Frac(t)*p.W
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x, p.Y, x, p.Y+p.H)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%g</text>`+"\n", x, p.Y+p.H+16, t)
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", p.X+p.W/2, p.Y+p.H+34, p.XLabel)
	if p.YLabel != "" {
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" transform="rotate(-90 %.1f %.1f)">%s</text>`+"\n",
			p.X-45, p.Y+p.H/2, p.X-45, p.Y+p.H/2, p.YLabel)
	}
}

// Line draws the points (xs[i], ys[i]) joined, with stroke (Stroke), and
// a marker at each; points with a NaN are left out.
func (p Panel) Line(b *strings.Builder, xs, ys []float64, stroke string, marker Marker) {
	var pts []string
	var at [][2]float64
	for i := range xs {
		if math.IsNaN(xs[i]) || math.IsNaN(ys[i]) {
			continue
		}
		x, y := p.At(xs[i], ys[i])
		pts, at = append(pts, fmt.Sprintf("%.1f,%.1f", x, y)), append(at, [2]float64{x, y})
	}
	fmt.Fprintf(b, `<polyline points="%s" %s/>`+"\n", strings.Join(pts, " "), stroke)
	for _, xy := range at {
		marker.Draw(b, xy[0], xy[1])
	}
}

// Segment draws a straight line from (x0, y0) to (x1, y1) with stroke.
func (p Panel) Segment(b *strings.Builder, x0, y0, x1, y1 float64, stroke string) {
	ax, ay := p.At(x0, y0)
	bx, by := p.At(x1, y1)
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" %s/>`+"\n", ax, ay, bx, by, stroke)
}

// Stroke is the style of a line of color, dashed or not.
func Stroke(color string, dashed bool) string {
	st := fmt.Sprintf(`stroke="%s" stroke-width="2" fill="none"`, color)
	if dashed {
		st += ` stroke-dasharray="6 4"`
	}
	return st
}

// Marker is how a point of a line is drawn: a dot of Color, or a square.
type Marker struct {
	Color  string
	Square bool
}

// Draw draws the marker at (x, y) of the sheet.
func (m Marker) Draw(b *strings.Builder, x, y float64) {
	if m.Square {
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="7" height="7" fill="%s"/>`+"\n", x-3.5, y-3.5, m.Color)
		return
	}
	fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s"/>`+"\n", x, y, m.Color)
}

// Key draws one entry of a legend at (x, y) of the sheet: a stretch of
// line with stroke, its marker, and text.
func Key(b *strings.Builder, x, y float64, stroke string, marker Marker, text string) {
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" %s/>`+"\n", x, y, x+30, y, stroke)
	marker.Draw(b, x+15, y)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", x+38, y+4, text)
}
