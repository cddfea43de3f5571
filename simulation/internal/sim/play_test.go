package sim

import (
	"testing"
	"testing/synctest"
)

// Both implementations play a schedule to the end: every run returns, a
// leader is elected, calls, spans and lease changes are recorded.
func TestPlay(t *testing.T) {
	sch := Generate(3)
	for _, impl := range Impls {
		t.Run(impl.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := Play(sch, impl)
				if len(h.Runs) < sch.Candidates {
					t.Errorf("%d runs for %d candidates", len(h.Runs), sch.Candidates)
				}
				for _, r := range h.Runs {
					if r.Returned < 0 || r.Cancelled < 0 {
						t.Errorf("run %+v did not end", r)
					}
				}
				if len(h.Leading) == 0 || len(h.Terms) == 0 || len(h.Calls) == 0 || len(h.Changes) == 0 {
					t.Errorf("empty history: %d spans, %d terms, %d calls, %d changes",
						len(h.Leading), len(h.Terms), len(h.Calls), len(h.Changes))
				}
				if h.End != sch.Span || len(h.Actions) != len(sch.Actions) {
					t.Errorf("end %v (want %v), %d actions applied of %d", h.End, sch.Span, len(h.Actions), len(sch.Actions))
				}
				if impl == Relect {
					for _, v := range Check(h) {
						if Explain(h, v) == "" {
							t.Errorf("%v", v)
						}
					}
				}
			})
		})
	}
}
