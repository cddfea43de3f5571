package sim

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// Class groups the rules a history is checked against.
type Class string

// The classes of rules.
const (
	Safety   Class = "safety"
	Liveness Class = "liveness"
	Budget   Class = "budget"
	Events   Class = "events"
)

// Classes lists every class, in report order.
var Classes = []Class{Safety, Liveness, Budget, Events}

// Violation is one breach of a rule in a history.
type Violation struct {
	Class      Class
	Rule       string
	At         time.Duration
	Candidates []int
	Detail     string
}

func (v Violation) String() string {
	var names []string
	for _, c := range v.Candidates {
		names = append(names, CandidateName(c))
	}
	return fmt.Sprintf("%s/%s at %s %v: %s", v.Class, v.Rule, fmtDur(v.At), names, v.Detail)
}

// Check runs every checker over h and returns the violations, in class
// order.
func Check(h *History) []Violation {
	var out []Violation
	out = append(out, CheckSafety(h)...)
	out = append(out, CheckLiveness(h)...)
	out = append(out, CheckBudget(h)...)
	out = append(out, CheckEvents(h)...)
	return out
}

// CheckSafety: no two candidates have IsLeader true at the same instant,
// and no two candidates have a term context alive and not cancelled at the
// same instant. Intervals are half-open, so one ending at the very instant
// another begins does not overlap it; anything longer does.
func CheckSafety(h *History) []Violation {
	var out []Violation
	var leading []interval
	for _, s := range h.Leading {
		leading = append(leading, interval{s.Candidate, s.From, s.To})
	}
	for _, o := range overlaps(leading) {
		out = append(out, Violation{Class: Safety, Rule: "two-leaders", At: o.from,
			Candidates: []int{o.a, o.b}, Detail: fmt.Sprintf("both IsLeader for %v", o.to-o.from)})
	}
	var terms []interval
	for _, t := range h.Terms {
		end := t.Cancelled
		if end < 0 {
			end = math.MaxInt64
		}
		terms = append(terms, interval{t.Candidate, t.Start, end})
	}
	for _, o := range overlaps(terms) {
		d := "until the end"
		if o.to != math.MaxInt64 {
			d = fmt.Sprintf("for %v", o.to-o.from)
		}
		out = append(out, Violation{Class: Safety, Rule: "two-term-contexts", At: o.from,
			Candidates: []int{o.a, o.b}, Detail: "both term contexts alive and not cancelled " + d})
	}
	return out
}

type interval struct {
	who      int
	from, to time.Duration
}

type overlap struct {
	a, b     int
	from, to time.Duration
}

// overlaps returns every pair of intervals of different owners that share
// a positive length of time.
func overlaps(iv []interval) []overlap {
	iv = slices.Clone(iv)
	slices.SortFunc(iv, func(x, y interval) int { return cmp.Compare(x.from, y.from) })
	var out []overlap
	for i, x := range iv {
		for _, y := range iv[i+1:] {
			if y.from >= x.to {
				break
			}
			if y.who == x.who || y.to <= y.from || x.to <= x.from {
				continue
			}
			out = append(out, overlap{x.who, y.who, y.from, min(x.to, y.to)})
		}
	}
	return out
}

// CampaignGap is the longest a run may go, while its context is alive and
// it does not lead, without a Lease call started or in flight: the backoff
// cap, plus the longest acquire poll interval (2.2·RetryPeriod, client-go's
// jitter), plus one token-bucket wait (1/Rate).
func CampaignGap(h *History) time.Duration {
	return h.BackoffCap + time.Duration(2.2*float64(h.Timing.RetryPeriod)) +
		time.Duration(float64(time.Second)/h.Budget.Rate) + time.Millisecond
}

// CheckLiveness:
//
//   - leader: by Quiet + LivenessBound some candidate leads, and from then
//     until End some candidate always leads;
//   - campaigning: no run stops campaigning while its context is alive:
//     while it does not lead, it always has a Lease call in flight or
//     starts one within CampaignGap.
func CheckLiveness(h *History) []Violation {
	var out []Violation
	bound := LivenessBound(h.Timing, h.BackoffCap)
	deadline := h.Quiet + bound
	// Merge leading spans of anyone; find the segment that reaches End.
	segs := mergeSpans(h.Leading, func(Span) bool { return true })
	var last *[2]time.Duration
	if n := len(segs); n > 0 && segs[n-1][1] >= h.End {
		last = &segs[n-1]
	}
	switch {
	case h.End < deadline:
		// The run is too short to judge; the schedule generator never
		// makes one.
		out = append(out, Violation{Class: Liveness, Rule: "too-short", At: h.End,
			Detail: fmt.Sprintf("run ends at %s, before quiet+bound %s", fmtDur(h.End), fmtDur(deadline))})
	case last == nil:
		at := h.Quiet
		if n := len(segs); n > 0 {
			at = max(at, segs[n-1][1])
		}
		out = append(out, Violation{Class: Liveness, Rule: "no-leader", At: at,
			Detail: fmt.Sprintf("nobody leads from %s to the end %s (faults healed at %s, bound %v)",
				fmtDur(at), fmtDur(h.End), fmtDur(h.Quiet), bound)})
	case last[0] > deadline:
		out = append(out, Violation{Class: Liveness, Rule: "late-leader", At: last[0],
			Detail: fmt.Sprintf("steady leadership only from %s, %v after faults healed at %s (bound %v)",
				fmtDur(last[0]), last[0]-h.Quiet, fmtDur(h.Quiet), bound)})
	}

	gap := CampaignGap(h)
	for _, r := range h.Runs {
		end := min(r.Cancelled, h.End)
		var busy [][2]time.Duration
		for _, c := range h.Calls {
			if c.Run == r.ID {
				busy = append(busy, [2]time.Duration{c.Start, c.End})
			}
		}
		for _, s := range h.Leading {
			if s.Run == r.ID {
				busy = append(busy, [2]time.Duration{s.From, s.To})
			}
		}
		slices.SortFunc(busy, func(a, b [2]time.Duration) int { return cmp.Compare(a[0], b[0]) })
		at := r.Start
		check := func(until time.Duration) bool {
			if until-at > gap {
				out = append(out, Violation{Class: Liveness, Rule: "stopped-campaigning", At: at,
					Candidates: []int{r.Candidate},
					Detail:     fmt.Sprintf("run %d: no Lease call and not leading for %v (limit %v)", r.ID, until-at, gap)})
				return false
			}
			return true
		}
		for _, b := range busy {
			if b[0] >= end {
				break
			}
			if b[0] > at && !check(b[0]) {
				break
			}
			at = max(at, b[1])
		}
		if at < end {
			check(end)
		}
	}
	return out
}

// mergeSpans merges the spans that keep, touching ones included, into
// sorted disjoint segments.
func mergeSpans(spans []Span, keep func(Span) bool) [][2]time.Duration {
	var iv [][2]time.Duration
	for _, s := range spans {
		if keep(s) && s.To > s.From {
			iv = append(iv, [2]time.Duration{s.From, s.To})
		}
	}
	slices.SortFunc(iv, func(a, b [2]time.Duration) int { return cmp.Compare(a[0], b[0]) })
	var out [][2]time.Duration
	for _, x := range iv {
		if n := len(out); n > 0 && x[0] <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], x[1])
			continue
		}
		out = append(out, x)
	}
	return out
}

// CheckBudget: for every elector (the scope of one token bucket), the calls
// counted in any window [a, b] are at most Burst + Rate·(b − a).
func CheckBudget(h *History) []Violation {
	var out []Violation
	byElector := map[int][]Call{}
	for _, c := range h.Calls {
		byElector[c.Elector] = append(byElector[c.Elector], c)
	}
	for _, el := range slices.Sorted(mapsKeys(byElector)) {
		calls := byElector[el]
		slices.SortStableFunc(calls, func(a, b Call) int { return cmp.Compare(a.Start, b.Start) })
		rate, burst := h.Budget.Rate, float64(h.Budget.Burst)
		// Calls i..j exceed the budget iff
		// (j − rate·t_j) − (i − rate·t_i) + 1 > burst.
		minVal, minIdx := math.Inf(1), 0
		worst, wi, wj := 0.0, 0, -1
		for j, c := range calls {
			v := float64(j) - rate*c.Start.Seconds()
			if v < minVal {
				minVal, minIdx = v, j
			}
			if excess := v - minVal + 1 - burst; excess > 1e-6 && excess > worst {
				worst, wi, wj = excess, minIdx, j
			}
		}
		if wj >= 0 {
			w := calls[wj].Start - calls[wi].Start
			out = append(out, Violation{Class: Budget, Rule: "over-budget", At: calls[wi].Start,
				Candidates: []int{calls[wi].Candidate},
				Detail: fmt.Sprintf("elector %d: %d calls in %v, budget %.1f (burst %d + %.3g/s)",
					el, wj-wi+1, w, burst+rate*w.Seconds(), h.Budget.Burst, rate)})
		}
	}
	return out
}

func mapsKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// CheckEvents: within each run, every stopped-leading follows a
// started-leading and names its term, and no started-leading comes while a
// term is open; per candidate, term numbers never decrease, except across a
// deletion of the Lease (which starts the count over).
func CheckEvents(h *History) []Violation {
	var out []Violation
	evs := slices.Clone(h.Events)
	slices.SortStableFunc(evs, func(a, b Event) int { return cmp.Compare(a.At, b.At) })
	type state struct {
		open     bool
		term     int64
		lastTerm int64
		lastAt   time.Duration
	}
	runs := map[int]*state{}
	last := map[int]*state{} // per candidate
	for _, e := range evs {
		if e.Kind != Started && e.Kind != Stopped {
			continue
		}
		r := runs[e.Run]
		if r == nil {
			r = &state{}
			runs[e.Run] = r
		}
		bad := func(rule, format string, args ...any) {
			out = append(out, Violation{Class: Events, Rule: rule, At: e.At, Candidates: []int{e.Candidate},
				Detail: fmt.Sprintf("run %d: ", e.Run) + fmt.Sprintf(format, args...)})
		}
		switch e.Kind {
		case Started:
			if r.open {
				bad("started-twice", "started term %d while term %d was open", e.Term, r.term)
			}
			r.open, r.term = true, e.Term
			c := last[e.Candidate]
			if c != nil && e.Term >= 0 && c.lastTerm >= 0 && e.Term < c.lastTerm && !resetBetween(h, c.lastAt, e.At) {
				bad("term-decreased", "term %d after term %d, no deletion in between", e.Term, c.lastTerm)
			}
			last[e.Candidate] = &state{lastTerm: e.Term, lastAt: e.At}
		case Stopped:
			switch {
			case !r.open:
				bad("stopped-without-started", "stopped leading without having started")
			case e.Term >= 0 && r.term >= 0 && e.Term != r.term:
				bad("stopped-other-term", "stopped term %d, started term %d", e.Term, r.term)
			}
			r.open = false
		}
	}
	for _, r := range h.Runs {
		if r.Dropped > 0 {
			out = append(out, Violation{Class: Events, Rule: "dropped", At: r.Start, Candidates: []int{r.Candidate},
				Detail: fmt.Sprintf("run %d dropped %d events", r.ID, r.Dropped)})
		}
	}
	return out
}

func resetBetween(h *History, from, to time.Duration) bool {
	for _, t := range h.Resets {
		if t >= from && t <= to {
			return true
		}
	}
	return false
}
