package e2e

import (
	"fmt"
	"github.com/relect/relect/internal/bench"
	"slices"
	"strings"
)

// Two more sections of the report: relect speaking protobuf (its default)
// and JSON side by side (rows e and g), and row e at every N of the run —
// the slope of the apiserver's steady CPU in N, its least-squares line,
// what that line gives at N = 5,000, and a plot of it (slopeSVG).

// ---- protobuf and JSON ----

// jsonRows are the rows of the protobuf-and-JSON section: its cells read
// relect's samples (protobuf) as the first column and relect-JSON's as
// the second (table's convention: the ratio is the second ÷ the first).
func (r *perfResults) jsonRows() []perfRow {
	idle := func(q string) []float64 { return r.get(idleOf(q), "") }
	var rows []perfRow
	for _, n := range r.p.scaleNs {
		if !slices.Contains(r.p.scaleJSONNs, n) {
			continue
		}
		rows = append(rows,
			perfRow{"e", fmt.Sprintf("N = %d: kube-apiserver CPU seconds per minute, steady state, above the idle baseline", n),
				scaleOf(n, loadAPIServerCPU), aboveIdle(idle(loadAPIServerCPU), "%.2f")},
			perfRow{"e", fmt.Sprintf("N = %d: bytes of Lease watch events the apiserver sent, KB per second (apiserver_watch_events_sizes)", n),
				scaleOf(n, loadWatchBytes), scaled(1e-3, "%.1f")},
			perfRow{"e", fmt.Sprintf("N = %d: bytes per watch event", n), scaleOf(n, loadWatchBytes), r.perEvent(n)},
			perfRow{"e", fmt.Sprintf("N = %d: the candidates' own CPU seconds per minute (the test process)", n),
				scaleOf(n, loadOwnCPU), value("%.2f")})
	}
	for _, n := range r.p.fleetNs {
		if !slices.Contains(r.p.fleetJSONNs, n) {
			continue
		}
		s := func(q string) series { return fleetSeries(n, false, q) }
		rows = append(rows,
			perfRow{"g", fmt.Sprintf("N = %d: kube-apiserver CPU ms per change of leader, beyond the background ³", n), s("CPU ms"), meanWithError},
			perfRow{"g", fmt.Sprintf("N = %d: KB of Lease watch events sent per change, beyond the background ³", n), s("watch bytes"), scaledMean(1e-3)},
			perfRow{"g", fmt.Sprintf("N = %d: handover, the leader's Run cancelled → the next OnStartedLeading, p50 / p99 (successors apart ⁵)", n),
				s("latency"), medianP99})
	}
	return rows
}

// scaled is one sample times factor, formatted with verb.
func scaled(factor float64, verb string) format {
	return func(a, b []float64) (string, string, string) {
		x, y := first(a)*factor, first(b)*factor
		return fmt.Sprintf(verb, x), fmt.Sprintf(verb, y), ratioOf(y, x)
	}
}

// scaledMean is meanWithError of the samples times factor.
func scaledMean(factor float64) format {
	return func(a, b []float64) (string, string, string) {
		mul := func(xs []float64) []float64 {
			out := make([]float64, len(xs))
			for i, x := range xs {
				out[i] = x * factor
			}
			return out
		}
		return meanWithError(mul(a), mul(b))
	}
}

// perEvent is the bytes per Lease watch event of row e at n (the bytes
// sent over the events sent, both per second): the cells ignore the
// row's own samples.
func (r *perfResults) perEvent(n int) format {
	per := func(impl string) (float64, bool) {
		events := first(r.get(scaleOf(n, loadWatchEvents), impl))
		return first(r.get(scaleOf(n, loadWatchBytes), impl)) / events, events > 0
	}
	return func(_, _ []float64) (string, string, string) {
		a, aok := per(modeRelect)
		b, bok := per(implRelectJSON)
		cell := func(x float64, ok bool) string {
			if !ok {
				return "— (no event)"
			}
			return fmt.Sprintf("%.0f", x)
		}
		ratio := "—"
		if aok && bok {
			ratio = ratioOf(b, a)
		}
		return cell(a, aok), cell(b, bok), ratio
	}
}

// ---- the slope ----

// slopeImpls are the implementations of the slope, in column order.
var slopeImpls = []struct{ impl, name, color string }{
	{modeRelect, "relect", "#1f77b4"},
	{implRelectJSON, "relect, JSON", "#2ca02c"},
	{modeClientGo, "client-go loop", "#d62728"},
}

// slopeN is the fleet size the slope is extrapolated to.
const slopeN = 5000

// steadyCPU is row e's kube-apiserver CPU seconds per minute above the
// idle baseline at n candidates of impl, and whether it was measured.
func (r *perfResults) steadyCPU(n int, impl string) (float64, bool) {
	xs := r.get(scaleOf(n, loadAPIServerCPU), impl)
	if len(xs) == 0 {
		return 0, false
	}
	idle := r.get(idleOf(loadAPIServerCPU), "")
	return xs[0] - (first(idle)+second(idle))/2, true
}

// line is a least-squares line y = a + b·n.
type line struct {
	a, b float64
	ok   bool // fitted through at least two sizes
}

func (l line) at(n int) float64 { return l.a + l.b*float64(n) }

// slopeLine fits the steady CPU of impl against N.
func (r *perfResults) slopeLine(impl string) line {
	var xs, ys []float64
	for _, n := range r.p.scaleNs {
		if y, ok := r.steadyCPU(n, impl); ok {
			xs, ys = append(xs, float64(n)), append(ys, y)
		}
	}
	if len(xs) < 2 {
		return line{}
	}
	mx, my := bench.Mean(xs), bench.Mean(ys)
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	b := sxy / sxx
	return line{a: my - b*mx, b: b, ok: true}
}

// slopeSection is the report's section on row e at every N.
func (r *perfResults) slopeSection() string {
	var b strings.Builder
	ns := r.p.scaleNs
	fmt.Fprintf(&b, "Row e at every N: N candidates on one Lease (%s; windows of %s at N = %d, %s at the others), kube-apiserver CPU seconds per minute above the idle baseline ²; and the bytes of Lease watch events it sent per second.\n\n",
		productionTiming, roundDur(r.p.scaleWindow), r.p.scaleN, roundDur(r.p.slopeWindow))
	b.WriteString("| N |")
	for _, im := range slopeImpls {
		fmt.Fprintf(&b, " CPU s/min, %s |", im.name)
	}
	b.WriteString(" client-go ÷ relect | watch KB/s, relect | watch KB/s, relect, JSON |\n|---:|")
	b.WriteString(strings.Repeat("---:|", len(slopeImpls)+3) + "\n")
	for _, n := range ns {
		fmt.Fprintf(&b, "| %d |", n)
		for _, im := range slopeImpls {
			if y, ok := r.steadyCPU(n, im.impl); ok {
				fmt.Fprintf(&b, " %.2f |", y)
			} else {
				b.WriteString(" — |")
			}
		}
		rel, _ := r.steadyCPU(n, modeRelect)
		cg, _ := r.steadyCPU(n, modeClientGo)
		fmt.Fprintf(&b, " %s |", ratioOf(cg, rel))
		for _, impl := range []string{modeRelect, implRelectJSON} {
			if xs := r.get(scaleOf(n, loadWatchBytes), impl); len(xs) > 0 {
				fmt.Fprintf(&b, " %.1f |", xs[0]/1e3)
			} else {
				b.WriteString(" — |")
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	var fits, at []string
	for _, im := range slopeImpls {
		l := r.slopeLine(im.impl)
		if !l.ok {
			continue
		}
		fits = append(fits, fmt.Sprintf("%s %.3f + %.3f per 1,000 candidates", im.name, l.a, l.b*1000))
		at = append(at, fmt.Sprintf("%s %.1f CPU s/min (%.2f cores)", im.name, l.at(slopeN), l.at(slopeN)/60))
	}
	if len(fits) > 0 {
		fmt.Fprintf(&b, "Least-squares lines through the %d sizes, CPU s/min: %s. At N = %d, an extrapolation of these lines far beyond the largest N measured, not a measurement: %s.\n\n",
			len(ns), strings.Join(fits, "; "), slopeN, strings.Join(at, "; "))
	}
	return b.String()
}

// slopeSVG returns a plot of the steady apiserver CPU against N: on the
// left every implementation at the sizes measured, on the right relect's
// two lines (protobuf and JSON) extended to slopeN, dashed beyond the
// largest size measured.
func (r *perfResults) slopeSVG() string {
	var b strings.Builder
	bench.Begin(&b, "kube-apiserver CPU in steady state, above its idle baseline, against N candidates on one Lease (row e)")
	ns := r.p.scaleNs
	if len(ns) == 0 {
		bench.End(&b)
		return b.String()
	}
	maxN := slices.Max(ns)
	left, right := bench.Left, bench.Right
	left.Title = fmt.Sprintf("relect and the client-go loop, N ≤ %d (measured)", maxN)
	right.Title = fmt.Sprintf("relect: least-squares lines to N = %d (dashed: extrapolated)", slopeN)
	r.slopePanel(&b, left, maxN, 0, slopeImpls)
	r.slopePanel(&b, right, slopeN, maxN, slopeImpls[:2])
	for i, im := range slopeImpls {
		bench.Key(&b, 120+float64(i)*250, 50, bench.Stroke(im.color, false), bench.Marker{Color: im.color}, im.name)
	}
	bench.End(&b)
	return b.String()
}

// slopePanel draws one chart of slopeSVG, its x axis to maxN: the steady
// CPU of impls at each size measured, joined if measured is zero, else
// with their least-squares lines drawn to maxN, dashed beyond measured.
func (r *perfResults) slopePanel(b *strings.Builder, p bench.Panel, maxN, measured int, impls []struct{ impl, name, color string }) {
	top := 0.1
	for _, im := range impls {
		for _, n := range r.p.scaleNs {
			if y, ok := r.steadyCPU(n, im.impl); ok {
				top = max(top, y)
			}
		}
		if l := r.slopeLine(im.impl); measured > 0 && l.ok {
			top = max(top, l.at(maxN))
		}
	}
	p.XScale, p.YScale = bench.Linear(float64(maxN), 1), bench.Linear(top, 1.1)
	p.XLabel, p.YLabel = "candidates N", "CPU seconds per minute"
	p.Frame(b)
	for _, im := range impls {
		var xs, ys []float64
		for _, n := range r.p.scaleNs {
			if y, ok := r.steadyCPU(n, im.impl); ok {
				xs, ys = append(xs, float64(n)), append(ys, y)
			}
		}
		solid, dot := bench.Stroke(im.color, false), bench.Marker{Color: im.color}
		l := r.slopeLine(im.impl)
		switch {
		case measured == 0:
			p.Line(b, xs, ys, solid, dot)
		case l.ok:
			for i := range xs {
				x, y := p.At(xs[i], ys[i])
				dot.Draw(b, x, y)
			}
			p.Segment(b, 0, l.at(0), float64(measured), l.at(measured), solid)
			p.Segment(b, float64(measured), l.at(measured), float64(maxN), l.at(maxN), bench.Stroke(im.color, true))
			x, y := p.At(float64(maxN), l.at(maxN))
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="%s">%.1f at N = %d</text>`+"\n", x-4, y-6, im.color, l.at(maxN), maxN)
		default:
			for i := range xs {
				x, y := p.At(xs[i], ys[i])
				dot.Draw(b, x, y)
			}
		}
	}
}
