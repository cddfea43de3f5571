package fleetbench

import (
	"math"
	"strings"

	"github.com/relect/relect/internal/bench"
)

// Plot returns an SVG image of the calls per change against N, on a
// logarithmic N axis: on the left the calls beyond the steady background,
// on the right every call of the window; the median of each
// implementation's graceful and crash changes (429 left out).
func Plot(rs []*Result) string {
	all := results(rs)
	ns := all.sizes()
	var b strings.Builder
	bench.Begin(&b, "Changes of leader at fleet size, in memory: calls per change (median of each N), relect and the client-go loop")
	left, right := bench.Left, bench.Right
	left.Title, right.Title = "calls beyond the steady background", "all calls in the window (background included)"
	draw(&b, left, beyond, false, all, ns)
	draw(&b, right, total, true, all, ns)
	for i, s := range plotted {
		bench.Key(&b, 110+float64(i)*215, 50, s.stroke(), s.marker(), s.impl.String()+", "+s.sc.String())
	}
	bench.End(&b)
	return b.String()
}

// series is one line of a panel.
type series struct {
	impl   bench.Impl
	sc     Scenario
	color  string
	dashed bool
}

var plotted = []series{
	{bench.Relect, Scenario{}, "#1f77b4", false},
	{bench.Relect, Scenario{Crash: true}, "#1f77b4", true},
	{bench.ClientGoLoop, Scenario{}, "#d62728", false},
	{bench.ClientGoLoop, Scenario{Crash: true}, "#d62728", true},
}

func (s series) stroke() string       { return bench.Stroke(s.color, s.dashed) }
func (s series) marker() bench.Marker { return bench.Marker{Color: s.color, Square: s.sc.Crash} }

// draw draws panel p: the median of m over each series' changes against
// N, on a logarithmic y axis if logY.
func draw(b *strings.Builder, p bench.Panel, m measure, logY bool, all results, ns []int) {
	if len(ns) == 0 {
		return
	}
	// The values first, for the y range.
	xs := make([]float64, len(ns))
	vals := make([][]float64, len(plotted))
	top := 1.0
	for j, n := range ns {
		xs[j] = float64(n)
	}
	for i, s := range plotted {
		for _, n := range ns {
			med, _, ok := stats(m, all.changes(s.impl, n, s.sc))
			if !ok {
				med = math.NaN()
			}
			vals[i] = append(vals[i], med)
			if ok {
				top = max(top, med)
			}
		}
	}
	p.XScale = bench.LogRange(xs[0]/1.5, xs[len(xs)-1]*1.5, xs)
	p.XLabel = "candidates N (log scale)"
	if logY {
		p.YScale = bench.Log(top)
	} else {
		p.YScale = bench.Linear(top, 1.2)
	}
	p.Frame(b)
	for i, s := range plotted {
		p.Line(b, xs, vals[i], s.stroke(), s.marker())
	}
}
