package e2e

import (
	"encoding/xml"
	"io"
	"math"
	"strings"
	"testing"
	"time"
)

// The table's formats, on the cases that change a cell's shape: a lower
// bound when relect sent nothing, relect within the idle noise, no samples
// (a run that failed), rows the loop has no counterpart for.
func TestPerfFormats(t *testing.T) {
	ms := func(vs ...float64) []float64 {
		for i := range vs {
			vs[i] *= float64(time.Millisecond)
		}
		return vs
	}
	for _, tc := range []struct {
		name    string
		f       format
		rel, cg []float64
		want    [3]string
	}{
		{"per minute", perMinute(time.Minute), []float64{1, 2}, []float64{30, 30}, [3]string{"1.5", "30.0", "20×"}},
		{"per minute, relect silent: a lower bound", perMinute(30 * time.Second), []float64{0, 0}, []float64{18, 18}, [3]string{"0.0", "18.0", "> 9.0× ¹"}},
		{"p50", quantile(0.5), ms(10, 20, 30), ms(300, 400, 500), [3]string{"20 ms", "400 ms", "20×"}},
		{"no samples", quantile(0.5), nil, nil, [3]string{"—", "—", "—"}},
		{"p50 / max", medianMax, ms(1, 2, 3), ms(4000, 5000, 6000), [3]string{"2.0 ms / 3.0 ms", "5.000 s / 6.000 s", "2500×"}},
		{"within", within(4100 * time.Millisecond), ms(4000, 4200), ms(5000), [3]string{"1 of 2", "0 of 1", ""}},
		{"above idle", aboveIdle([]float64{1, 1.2}, "%.2f"), []float64{2.1}, []float64{8.1}, [3]string{"1.00", "7.00", "7.0×"}},
		{"above idle, relect within the noise", aboveIdle([]float64{0.05, 0.15}, "%.2f"), []float64{0.15}, []float64{60.1},
			[3]string{"0.05", "60.00", "— (relect within the idle noise, 0.10)"}},
		{"relect only", relectOnly(share, "no such call"), []float64{1, 0, 1}, nil, [3]string{"2 of 3", "no such call", ""}},
		{"budget", relectOnly(budget(budgetUse{rate: 1, burst: 10}), "no budget"), []float64{3, 7.9}, nil,
			[3]string{"7.9 of 10: never exceeded", "no budget", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rel, cg, ratio := tc.f(tc.rel, tc.cg)
			if got := [3]string{rel, cg, ratio}; got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// The slope's least-squares line, its extrapolation, and the plot: a line
// through points on a line is that line; the SVG is well-formed XML that
// names the extrapolated size; the section names it as an extrapolation.
func TestPerfSlope(t *testing.T) {
	r := &perfResults{p: perfParams{scaleN: 200, scaleNs: []int{50, 200, 1000}, scaleJSONNs: []int{200, 1000}}}
	r.addLoad("idle", "", loadRates{apiCPU: 1})
	r.addLoad("idle", "", loadRates{apiCPU: 1.2})
	for _, n := range r.p.scaleNs {
		r.addLoad(scaleRunName(n), modeRelect, loadRates{apiCPU: 1.1 + 0.001*float64(n)})
		r.addLoad(scaleRunName(n), modeClientGo, loadRates{apiCPU: 1.1 + 0.03*float64(n)})
	}
	r.addLoad(scaleRunName(200), implRelectJSON, loadRates{apiCPU: 1.5})
	r.addLoad(scaleRunName(1000), implRelectJSON, loadRates{apiCPU: 2.5})
	l := r.slopeLine(modeRelect)
	if !l.ok || math.Abs(l.a) > 1e-9 || math.Abs(l.b-0.001) > 1e-12 {
		t.Errorf("relect's line: %+v, want 0 + 0.001·N", l)
	}
	if got := r.slopeLine(implRelectJSON).at(5000); math.Abs(got-6.4) > 1e-9 {
		t.Errorf("JSON's line at 5000: %v, want 6.4", got)
	}
	svg := r.slopeSVG()
	d := xml.NewDecoder(strings.NewReader(svg))
	for {
		if _, err := d.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("the plot is not well-formed XML: %v\n%s", err, svg)
		}
	}
	if !strings.Contains(svg, "at N = 5000") {
		t.Errorf("the plot does not name the extrapolated size:\n%s", svg)
	}
	if sec := r.slopeSection(); !strings.Contains(sec, "an extrapolation") {
		t.Errorf("the section does not say it extrapolates:\n%s", sec)
	}
}

// A run of only some rows (RELECT_PERF_ROWS) prints those rows and their
// footnotes, and leaves out the others, in every mode.
func TestPerfRowsLeftOut(t *testing.T) {
	for _, size := range []string{"short", "dev", "full"} {
		r := &perfResults{size: size, p: perfModes[size]}
		r.addLoad(scaleRunName(r.p.scaleN), modeRelect, loadRates{apiCPU: 1})
		r.addLoad(scaleRunName(r.p.scaleN), modeClientGo, loadRates{apiCPU: 2})
		table := r.table("machine", time.Minute)
		_ = r.slopeSVG()
		if !strings.Contains(table, "| e | kube-apiserver CPU seconds per minute, raw | 1.00 | 2.00 |") {
			t.Errorf("%s: row e is missing:\n%s", size, table)
		}
		for _, line := range strings.Split(table, "\n") {
			if strings.HasPrefix(line, "| g |") || strings.HasPrefix(line, "| b |") || strings.Contains(line, "NaN") {
				t.Errorf("%s: a row that was not run is printed: %s", size, line)
			}
			if strings.HasPrefix(line, "Cross-check of rows a and d") || strings.HasPrefix(line, "³") || strings.HasPrefix(line, "⁴") {
				t.Errorf("%s: the footnote of a row that was not run is printed: %s", size, line)
			}
		}
	}
}
