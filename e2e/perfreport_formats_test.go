package e2e

import (
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
