package e2e

import (
	"fmt"
	"math"
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
	mx, my := mean(xs), mean(ys)
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
	const width, height = 960, 430
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="22" text-anchor="middle" font-size="15">kube-apiserver CPU in steady state, above its idle baseline, against N candidates on one Lease (row e)</text>`+"\n", width/2)
	ns := r.p.scaleNs
	if len(ns) == 0 {
		b.WriteString("</svg>\n")
		return b.String()
	}
	maxN := slices.Max(ns)
	r.slopePanel(&b, slopePanel{x: 70, y: 100, w: 380, h: 260, maxN: maxN,
		title: fmt.Sprintf("relect and the client-go loop, N ≤ %d (measured)", maxN), impls: slopeImpls})
	r.slopePanel(&b, slopePanel{x: 550, y: 100, w: 380, h: 260, maxN: slopeN, measured: maxN,
		title: fmt.Sprintf("relect: least-squares lines to N = %d (dashed: extrapolated)", slopeN), impls: slopeImpls[:2]})
	for i, im := range slopeImpls {
		x := 120 + float64(i)*250
		fmt.Fprintf(&b, `<line x1="%.1f" y1="50" x2="%.1f" y2="50" stroke="%s" stroke-width="2"/>`+"\n", x, x+30, im.color)
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="50" r="4" fill="%s"/>`+"\n", x+15, im.color)
		fmt.Fprintf(&b, `<text x="%.1f" y="54">%s</text>`+"\n", x+38, im.name)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// slopePanel is one chart of slopeSVG.
type slopePanel struct {
	x, y, w, h float64
	maxN       int // the x axis ends there
	// measured, if not zero: the lines are drawn to maxN, dashed beyond
	// measured; else the points are joined.
	measured int
	title    string
	impls    []struct{ impl, name, color string }
}

func (r *perfResults) slopePanel(b *strings.Builder, p slopePanel) {
	top := 0.1
	for _, im := range p.impls {
		for _, n := range r.p.scaleNs {
			if y, ok := r.steadyCPU(n, im.impl); ok {
				top = max(top, y)
			}
		}
		if l := r.slopeLine(im.impl); p.measured > 0 && l.ok {
			top = max(top, l.at(p.maxN))
		}
	}
	step := niceStep(top / 5)
	ceil := math.Ceil(top*1.1/step) * step
	xOf := func(n float64) float64 { return p.x + n/float64(p.maxN)*p.w }
	yOf := func(v float64) float64 { return p.y + p.h - math.Max(v, 0)/ceil*p.h }
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="13">%s</text>`+"\n", p.x+p.w/2, p.y-10, p.title)
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#888"/>`+"\n", p.x, p.y, p.w, p.h)
	for v := 0.0; v <= ceil+step/2; v += step {
		y := yOf(v)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", p.x, y, p.x+p.w, y)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%g</text>`+"\n", p.x-6, y+4, v)
	}
	xstep := niceStep(float64(p.maxN) / 5)
	for n := 0.0; n <= float64(p.maxN)+xstep/2; n += xstep {
		x := xOf(n)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x, p.y, x, p.y+p.h)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%g</text>`+"\n", x, p.y+p.h+16, n)
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">candidates N</text>`+"\n", p.x+p.w/2, p.y+p.h+34)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" transform="rotate(-90 %.1f %.1f)">CPU seconds per minute</text>`+"\n",
		p.x-45, p.y+p.h/2, p.x-45, p.y+p.h/2)
	for _, im := range p.impls {
		var pts []string
		for _, n := range r.p.scaleNs {
			if y, ok := r.steadyCPU(n, im.impl); ok {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", xOf(float64(n)), yOf(y)))
				fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s"/>`+"\n", xOf(float64(n)), yOf(y), im.color)
			}
		}
		l := r.slopeLine(im.impl)
		switch {
		case p.measured == 0:
			fmt.Fprintf(b, `<polyline points="%s" stroke="%s" stroke-width="2" fill="none"/>`+"\n", strings.Join(pts, " "), im.color)
		case l.ok:
			fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>`+"\n",
				xOf(0), yOf(l.at(0)), xOf(float64(p.measured)), yOf(l.at(p.measured)), im.color)
			fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2" stroke-dasharray="6 4"/>`+"\n",
				xOf(float64(p.measured)), yOf(l.at(p.measured)), xOf(float64(p.maxN)), yOf(l.at(p.maxN)), im.color)
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="%s">%.1f at N = %d</text>`+"\n",
				xOf(float64(p.maxN))-4, yOf(l.at(p.maxN))-6, im.color, l.at(p.maxN), p.maxN)
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
