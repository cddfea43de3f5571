package fleetbench

import (
	"fmt"
	"math"
	"strings"
)

// Plot returns an SVG image of the calls per change against N, on a
// logarithmic N axis: on the left the calls beyond the steady background,
// on the right every call of the window; the median of each
// implementation's graceful and crash changes (429 left out).
func Plot(rs []*Result) string {
	all := results(rs)
	ns := all.sizes()
	var b strings.Builder
	const width, height = 960, 430
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="22" text-anchor="middle" font-size="15">Changes of leader at fleet size, in memory: calls per change (median of each N), relect and the client-go loop</text>`+"\n", width/2)
	panels := []panel{
		{x: 70, y: 100, w: 380, h: 260, m: beyond, title: "calls beyond the steady background", log: false},
		{x: 550, y: 100, w: 380, h: 260, m: total, title: "all calls in the window (background included)", log: true},
	}
	for _, p := range panels {
		p.draw(&b, all, ns)
	}
	legend(&b, 110, 50)
	b.WriteString("</svg>\n")
	return b.String()
}

// series is one line of a panel.
type series struct {
	impl   Impl
	sc     Scenario
	color  string
	dashed bool
}

var plotted = []series{
	{Relect, Scenario{}, "#1f77b4", false},
	{Relect, Scenario{Crash: true}, "#1f77b4", true},
	{ClientGoLoop, Scenario{}, "#d62728", false},
	{ClientGoLoop, Scenario{Crash: true}, "#d62728", true},
}

func (s series) style() string {
	st := fmt.Sprintf(`stroke="%s" stroke-width="2" fill="none"`, s.color)
	if s.dashed {
		st += ` stroke-dasharray="6 4"`
	}
	return st
}

func (s series) marker(b *strings.Builder, x, y float64) {
	if s.sc.Crash {
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="7" height="7" fill="%s"/>`+"\n", x-3.5, y-3.5, s.color)
		return
	}
	fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s"/>`+"\n", x, y, s.color)
}

func legend(b *strings.Builder, x, y float64) {
	for i, s := range plotted {
		lx := x + float64(i)*215
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" %s/>`+"\n", lx, y, lx+30, y, s.style())
		s.marker(b, lx+15, y)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f">%s, %s</text>`+"\n", lx+38, y+4, s.impl, s.sc)
	}
}

// panel is one chart: a measure against N.
type panel struct {
	x, y, w, h float64
	m          measure
	title      string
	log        bool // logarithmic y axis
}

func (p panel) draw(b *strings.Builder, all results, ns []int) {
	if len(ns) == 0 {
		return
	}
	// The values first, for the y range.
	vals := map[int][]float64{}
	top := 1.0
	for i, s := range plotted {
		for _, n := range ns {
			med, _, ok := stats(p.m, all.changes(s.impl, n, s.sc))
			if !ok {
				med = math.NaN()
			}
			vals[i] = append(vals[i], med)
			if ok {
				top = max(top, med)
			}
		}
	}
	lo, hi := math.Log10(float64(ns[0])/1.5), math.Log10(float64(ns[len(ns)-1])*1.5)
	xOf := func(n int) float64 { return p.x + (math.Log10(float64(n))-lo)/(hi-lo)*p.w }
	var yOf func(v float64) float64
	var ticks []float64
	if p.log {
		decades := math.Ceil(math.Log10(top))
		yOf = func(v float64) float64 { return p.y + p.h - math.Log10(max(v, 1))/decades*p.h }
		for d := 0.0; d <= decades; d++ {
			ticks = append(ticks, math.Pow(10, d))
		}
	} else {
		step := niceStep(top / 5)
		ceil := math.Ceil(top*1.2/step) * step
		yOf = func(v float64) float64 { return p.y + p.h - v/ceil*p.h }
		for v := 0.0; v <= ceil+step/2; v += step {
			ticks = append(ticks, v)
		}
	}

	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="13">%s</text>`+"\n", p.x+p.w/2, p.y-10, p.title)
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#888"/>`+"\n", p.x, p.y, p.w, p.h)
	for _, t := range ticks {
		y := yOf(t)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", p.x, y, p.x+p.w, y)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%g</text>`+"\n", p.x-6, y+4, t)
	}
	for _, n := range ns {
		x := xOf(n)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x, p.y, x, p.y+p.h)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n", x, p.y+p.h+16, n)
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">candidates N (log scale)</text>`+"\n", p.x+p.w/2, p.y+p.h+34)
	for i, s := range plotted {
		var pts []string
		for j, n := range ns {
			if v := vals[i][j]; !math.IsNaN(v) {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", xOf(n), yOf(v)))
			}
		}
		fmt.Fprintf(b, `<polyline points="%s" %s/>`+"\n", strings.Join(pts, " "), s.style())
		for j, n := range ns {
			if v := vals[i][j]; !math.IsNaN(v) {
				s.marker(b, xOf(n), yOf(v))
			}
		}
	}
}

// niceStep returns 1, 2 or 5 times a power of ten, at least v.
func niceStep(v float64) float64 {
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
