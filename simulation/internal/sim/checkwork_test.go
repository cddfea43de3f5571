package sim

import (
	"slices"
	"testing"
	"time"
)

func TestStuckHandoverBound(t *testing.T) {
	w := Work{BeatWindow: 10 * s, Cooldown: time.Minute}.withDefaults()
	capped := Work{BeatWindow: 10 * s, Cooldown: time.Minute, MaxCooldown: 2 * time.Minute}.withDefaults()
	for _, tc := range []struct {
		w    Work
		span time.Duration
		want int
	}{
		{w, 0, 1},
		{w, time.Minute - 1, 1},
		{w, time.Minute, 2},
		{w, 3 * time.Minute, 3},
		{w, 10 * time.Minute, 4}, // ⌊log2(10 + 1)⌋ + 1
		{w, time.Hour, 6},        // ⌊log2(60 + 1)⌋ + 1
		{capped, 10 * time.Minute, 6},
	} {
		if got := tc.w.StuckHandoverBound(tc.span); got != tc.want {
			t.Errorf("cooldown %v, max %v, span %v: bound %d, want %d", tc.w.Cooldown, tc.w.MaxCooldown, tc.span, got, tc.want)
		}
	}
}

// TestWorkPromise: the checkers' figures are the documented ones — the
// defaults of WorkOptions' zero fields, "4 in 10 minutes, 6 in an hour"
// with the default minute (docs/design.md), the hold of streak k — and the
// bound in a span agrees with the least spans it counts.
func TestWorkPromise(t *testing.T) {
	w := Work{BeatWindow: 10 * s}.withDefaults() // every default
	if w.Cooldown != time.Minute || w.MaxCooldown != time.Hour {
		t.Errorf("defaults: cooldown %v, max %v; documented: 1 minute, 1 hour", w.Cooldown, w.MaxCooldown)
	}
	if c := (Work{Check: true}).withDefaults(); c.CheckInterval != 10*s || c.CheckTimeout != 5*s || c.CheckFailures != 3 {
		t.Errorf("defaults: check every %v, timeout %v, %d failures; documented: 10 s, 5 s, 3", c.CheckInterval, c.CheckTimeout, c.CheckFailures)
	}
	for span, want := range map[time.Duration]int{10 * time.Minute: 4, time.Hour: 6} {
		if got := w.StuckHandoverBound(span); got != want {
			t.Errorf("default work: %d stuck handovers in %v, documented %d", got, span, want)
		}
	}
	for k, want := range map[int]time.Duration{0: 0, 1: time.Minute, 2: 2 * time.Minute, 6: 32 * time.Minute, 7: time.Hour, 100: time.Hour} {
		if got := w.hold(k); got != want {
			t.Errorf("hold of streak %d: %v, want %v", k, got, want)
		}
	}
	// leastSpan(k) is the holds of the k−1 leaders before the k-th, and
	// the bound in a span the last k whose least span fits in it.
	for _, w := range []Work{w, Work{BeatWindow: 10 * s, Cooldown: 20 * s, MaxCooldown: 100 * s}.withDefaults(),
		Work{BeatWindow: 10 * s, Cooldown: time.Minute, MaxCooldown: time.Minute}.withDefaults()} {
		var sum time.Duration
		for k := 1; k <= 12; k++ {
			if got := w.leastSpan(k); got != sum {
				t.Errorf("cooldown %v, max %v: least span to the %d-th handover %v, the holds before it sum to %v", w.Cooldown, w.MaxCooldown, k, got, sum)
			}
			for _, span := range []time.Duration{sum, sum + w.hold(k) - 1} {
				if got := w.StuckHandoverBound(span); got != k {
					t.Errorf("cooldown %v, max %v: bound in %v is %d, want %d", w.Cooldown, w.MaxCooldown, span, got, k)
				}
			}
			sum += w.hold(k)
		}
	}
}

// workHistory: relect's c0 leads from 1 s (acquiring a released record
// whose line carries streak), renewing every 2 s, and its work hangs at
// 20 s for good; c1 runs, follows and is registered. With a BeatWindow of
// 10 s, relect must decide by 30 s (with streak 0) and the lease leave c0
// by 30 s + StuckAllowance (2 × 2 s + 2 tokens of 1 s + 10 ms): 36.01 s.
// c0 releases at released (0: never).
func workHistory(streak int, released time.Duration) *History {
	h := history()
	h.Impl = Relect.String()
	h.Work = Work{BeatWindow: 10 * s, BeatEvery: 5 * s, Cooldown: 20 * s}.withDefaults()
	h.Runs = []Run{{Candidate: 0, ID: 0, Elector: 1, Identity: "c0", Cancelled: 200 * s, Returned: 200 * s},
		{Candidate: 1, ID: 1, Elector: 2, Identity: "c1", Cancelled: 200 * s, Returned: 200 * s}}
	h.Calls = []Call{
		{Candidate: 1, Run: 1, Elector: 2, Verb: "create", Start: 2 * s, End: 2*s + ms, Registry: true, Name: "reg-c1"},
		{Candidate: 0, Run: 0, Elector: 1, Verb: "list", Start: 2 * s, End: 2*s + ms, Registry: true},
		{Candidate: 1, Run: 1, Elector: 2, Verb: "watch", Start: 0, End: 200 * s, Name: LeaseName},
	}
	h.Actions = []Applied{{Action: Action{At: 20 * s, Kind: HangWork, Target: 0}, At: 20 * s, Run: -1}}
	h.Changes = []Change{{At: 900 * ms, Streak: streak, Line: []string{"c0"}}}
	end := 200 * s
	if released > 0 {
		end = released
	}
	for at := 1 * s; at < end; at += 2 * s {
		h.Changes = append(h.Changes, Change{At: at, Holder: "c0", Transitions: 1, Streak: streak})
	}
	h.Terms = []Term{{Candidate: 0, Run: 0, Number: 1, Start: 1 * s, Cancelled: end}}
	h.Leading = []Span{{Candidate: 0, Run: 0, From: 1 * s, To: end}}
	if released > 0 {
		h.Changes = append(h.Changes, Change{At: released, Transitions: 1, Streak: streak + 1})
		h.Events = append(h.Events, Event{Candidate: 0, Run: 0, At: released - ms, Kind: Stopped, Term: 1, Cause: CauseWorkStuck})
		h.Leading = append(h.Leading, Span{Candidate: 1, Run: 1, From: released + 3*ms, To: 200 * s})
	}
	return h
}

func TestCheckWorkStuckKept(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    *History
		mod  func(*History)
		want []string
	}{
		{"handed over in time", workHistory(0, 31*s), nil, nil},
		{"just in time", workHistory(0, 36*s), nil, nil},
		{"late", workHistory(0, 37*s), nil, []string{"stuck-work/stuck-kept"}},
		{"never", workHistory(0, 0), nil, []string{"stuck-work/stuck-kept"}},
		{"holding for the streak", workHistory(2, 45*s), nil, nil}, // hold 40 s from 1 s: by 41 s + 6.01 s
		{"beyond the hold", workHistory(2, 48*s), nil, []string{"stuck-work/stuck-kept"}},
		{"recovered in time", workHistory(0, 0), func(h *History) {
			h.Actions = append(h.Actions, Applied{Action: Action{At: 35 * s, Kind: UnhangWork, Target: 0}, At: 35 * s})
		}, nil},
		{"the other is stuck too", workHistory(0, 0), func(h *History) {
			h.Actions = append(h.Actions, Applied{Action: Action{At: 0, Kind: HangWork, Target: 1}, At: 0})
		}, nil},
		{"the other is not registered", workHistory(0, 0), func(h *History) { h.Calls = h.Calls[1:] }, nil},
		{"the leader has not listed the registry", workHistory(0, 0), func(h *History) {
			h.Calls = slices.Delete(h.Calls, 1, 2)
			h.Changes[0].Line = nil
		}, nil},
		{"an API fault on the leader", workHistory(0, 0), func(h *History) {
			h.Actions = append(h.Actions, Applied{Action: Action{At: 25 * s, Kind: Partition, Target: 0}, At: 25 * s},
				Applied{Action: Action{At: 40 * s, Kind: Heal, Target: 0}, At: 40 * s})
		}, nil},
		{"healthy work ended as stuck", workHistory(0, 31*s), func(h *History) { h.Actions = nil },
			[]string{"stuck-work/stuck-unfounded"}},
		{"ended as stuck after it recovered", workHistory(0, 50*s), func(h *History) {
			h.Actions = append(h.Actions, Applied{Action: Action{At: 33 * s, Kind: UnhangWork, Target: 0}, At: 33 * s}) // 15 s before, 10 + 5 back
		}, []string{"stuck-work/stuck-unfounded"}},
		{"the other starts late", workHistory(0, 60*s), func(h *History) {
			h.Runs[1].Start = 50 * s
			h.Calls[0].Start, h.Calls[0].End = 51*s, 51*s+ms // by 51 s + 6.01 s
		}, []string{"stuck-work/stuck-kept"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.mod != nil {
				tc.mod(tc.h)
			}
			if got := rules(CheckWork(tc.h)); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v; episodes %v", got, tc.want, StuckEpisodes(tc.h))
			}
		})
	}
	// The client-go loop is not judged: its figures are reported.
	h := workHistory(0, 0)
	h.Impl = ClientGoLoop.String()
	if got := CheckWork(h); got != nil {
		t.Errorf("client-go loop: %v", got)
	}
	if es := StuckEpisodes(h); len(es) != 1 || es[0].Beyond() <= 0 {
		t.Errorf("client-go loop: episodes %v, want one kept beyond its deadline", es)
	}
}

// outageHistory: relect's c0 and c1, the downstream failing from 10 s to
// 610 s, Cooldown 1 minute (bound 4 in 600 s plus the slack); a term ends
// for stuck work at each of at, and its release is written unless it is
// in lost.
func outageHistory(at []time.Duration, lost ...time.Duration) *History {
	h := history()
	h.Impl = Relect.String()
	h.End = 700 * s
	h.Work = Work{BeatWindow: 10 * s, BeatEvery: 5 * s, Cooldown: time.Minute}.withDefaults()
	h.Runs = []Run{{Candidate: 0, ID: 0, Identity: "c0", Cancelled: 700 * s}, {Candidate: 1, ID: 1, Identity: "c1", Cancelled: 700 * s}}
	h.Actions = []Applied{{Action: Action{At: 10 * s, Kind: FailDownstream, Target: -1}, At: 10 * s},
		{Action: Action{At: 610 * s, Kind: HealDownstream, Target: -1}, At: 610 * s}}
	for i, a := range at {
		c := i % 2
		h.Terms = append(h.Terms, Term{Candidate: c, Run: c, Number: int64(i), Start: a - 5*s, Cancelled: a})
		h.Events = append(h.Events, Event{Candidate: c, Run: c, At: a, Kind: Stopped, Term: int64(i), Cause: CauseWorkStuck})
		h.Changes = append(h.Changes, Change{At: a - 5*s, Holder: CandidateName(c), Transitions: int32(i)})
		if !slices.Contains(lost, a) {
			h.Changes = append(h.Changes, Change{At: a + ms, Transitions: int32(i), Streak: i + 1})
		}
	}
	return h
}

func TestCheckWorkOutage(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    *History
		want []string
	}{
		{"doubling holds", outageHistory([]time.Duration{20 * s, 80 * s, 200 * s, 440 * s}), nil},
		{"one too many", outageHistory([]time.Duration{20 * s, 80 * s, 200 * s, 440 * s, 600 * s}),
			[]string{"stuck-work/stuck-handovers"}},
		{"flapping", outageHistory([]time.Duration{20 * s, 35 * s, 50 * s}), []string{"stuck-work/stuck-handovers"}},
		// A release that failed loses the streak: the count starts over.
		{"the streak lost to a failed release", outageHistory([]time.Duration{20 * s, 30 * s, 90 * s, 210 * s, 450 * s}, 20*s), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rules(CheckWork(tc.h)); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v; outages %+v", got, tc.want, Outages(tc.h))
			}
		})
	}
	// A deletion of the Lease by hand loses the streak: the count starts
	// over at it, and the handovers after it are judged as a chain of
	// their own.
	for _, tc := range []struct {
		name string
		at   []time.Duration
		want []string
	}{
		{"the streak lost to a deletion", []time.Duration{20 * s, 35 * s, 100 * s}, nil},
		{"too soon after the deletion's chain began", []time.Duration{20 * s, 35 * s, 50 * s}, []string{"stuck-work/stuck-handovers"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := outageHistory(tc.at)
			h.Resets = []time.Duration{30 * s}
			if got := rules(CheckWork(h)); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v; outages %+v", got, tc.want, Outages(h))
			}
		})
	}
}

// TestCheckWorkOutageCatchesABrokenRelect: handovers spaced as a relect
// that broke its documented promise would space them are reported — the
// checker's bound is its own, not relect's code.
func TestCheckWorkOutageCatchesABrokenRelect(t *testing.T) {
	for _, tc := range []struct {
		name string
		work Work // what the schedule asked of relect (its zero fields: the defaults)
		at   []time.Duration
		want time.Duration // the handover reported
	}{
		// relect's default Cooldown broken to 30 s: the documented minute
		// is what the checker holds it to.
		{"a default cooldown of 30 s", Work{BeatWindow: 10 * s, BeatEvery: 5 * s},
			[]time.Duration{20 * s, 50 * s, 110 * s, 230 * s, 470 * s}, 50 * s},
		// The cooldown growing by one Cooldown, not doubling: 1, 2, 3
		// minutes where 1, 2, 4 are promised.
		{"linear, not doubling", Work{BeatWindow: 10 * s, BeatEvery: 5 * s, Cooldown: time.Minute},
			[]time.Duration{20 * s, 80 * s, 200 * s, 380 * s}, 380 * s},
		// MaxCooldown of 4 minutes capping at 2: 1, 2, 2 minutes where 1,
		// 2, 4 are promised.
		{"capped too soon", Work{BeatWindow: 10 * s, BeatEvery: 5 * s, Cooldown: time.Minute, MaxCooldown: 4 * time.Minute},
			[]time.Duration{20 * s, 80 * s, 200 * s, 320 * s}, 320 * s},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := outageHistory(tc.at)
			h.Work = tc.work.withDefaults()
			got := CheckWork(h)
			if len(got) != 1 || got[0].Rule != "stuck-handovers" || got[0].At != tc.want {
				t.Fatalf("got %v, want stuck-handovers at %v", got, tc.want)
			}
			t.Logf("reported: %s", got[0].Detail)
		})
	}
}

func TestCheckStepDownGap(t *testing.T) {
	// c0 yields at 50 s; c1 follows. GapBound: 3.5 × 2 s + 4 tokens of 1 s + 10 ms.
	gapHistory := func(next time.Duration) *History {
		h := history()
		h.Impl = Relect.String()
		h.Runs = []Run{{Candidate: 0, ID: 0, Identity: "c0", Cancelled: 200 * s}, {Candidate: 1, ID: 1, Identity: "c1", Cancelled: 200 * s}}
		h.Calls = []Call{{Candidate: 1, Run: 1, Verb: "watch", Start: 0, End: 200 * s, Name: LeaseName}}
		h.Events = []Event{{Candidate: 0, Run: 0, At: 50 * s, Kind: Stopped, Term: 1, Cause: CauseYielded}}
		h.Leading = []Span{{0, 0, 10 * s, 50 * s}, {1, 1, next, 200 * s}}
		return h
	}
	if b := GapBound(gapHistory(0)); b != 11*s+10*ms {
		t.Fatalf("GapBound = %v", b)
	}
	for _, tc := range []struct {
		name string
		h    *History
		want []string
	}{
		{"at once", gapHistory(50*s + 3*ms), nil},
		{"within the bound", gapHistory(61 * s), nil},
		{"late", gapHistory(62 * s), []string{"liveness/step-down-gap"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rules(checkStepDownGaps(tc.h)); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v; gaps %+v", got, tc.want, StepDownGaps(tc.h))
			}
		})
	}
	// With the release record: c1 first in line takes it at once (4
	// tokens and 10 ms); cooling, it stands back: 1 + 2 + 2 steps more.
	withLine := func(next time.Duration, cooling ...string) *History {
		h := gapHistory(next)
		h.Changes = []Change{{At: 10 * s, Holder: "c0", Transitions: 1}, {At: 50*s + ms, Transitions: 1, Line: []string{"c1"}, Cooling: cooling}}
		return h
	}
	for _, tc := range []struct {
		name string
		h    *History
		want []string
	}{
		{"first in line", withLine(54 * s), nil},
		{"first in line, late", withLine(55 * s), []string{"liveness/step-down-gap"}},
		{"first in line, cooling", withLine(59*s, "c1"), nil},
		{"first in line, cooling, late", withLine(60*s, "c1"), []string{"liveness/step-down-gap"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rules(checkStepDownGaps(tc.h)); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v; gaps %+v", got, tc.want, StepDownGaps(tc.h))
			}
		})
	}
	h := gapHistory(62 * s)
	h.Calls = nil // nobody follows
	if got := checkStepDownGaps(h); len(got) != 0 {
		t.Errorf("nobody followed: %v", got)
	}
	h = gapHistory(62 * s)
	h.Actions = []Applied{{Action: Action{At: 40 * s, Kind: Latency, Target: 1}, At: 40 * s}}
	if got := checkStepDownGaps(h); len(got) != 0 {
		t.Errorf("a fault on the follower: %v", got)
	}
	// Seed 16360: the Lease edited by hand 0.2 s before the term ended
	// (renewTime in the future), so the release conflicted and was given
	// up; the lease expired, and nobody led for an expiry and a turn.
	h = gapHistory(62 * s)
	h.Changes = []Change{{At: 10 * s, Holder: "c0", Transitions: 1}, {At: 49*s + 800*ms, Holder: "c0", Transitions: 1, ByHand: true}}
	h.Actions = []Applied{{Action: Action{At: 49*s + 800*ms, Kind: FutureRenew, Target: -1}, At: 49*s + 800*ms}}
	if got := checkStepDownGaps(h); len(got) != 0 {
		t.Errorf("a release that conflicted with a hand edit: %v", got)
	}
}
