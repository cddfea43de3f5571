package sim

import (
	"slices"
	"testing"
	"time"
)

const s = time.Second

// history returns a history of two candidates with the default timing
// (15 s, 10 s, 2 s) and budget, quiet at 100 s and ending at 200 s.
func history() *History {
	h := &History{Candidates: 2, Quiet: 100 * s, End: 200 * s,
		Timing: Timing{LeaseDuration: 15 * s, RenewDeadline: 10 * s, RetryPeriod: 2 * s}.withDefaults()}
	h.Budget.Rate, h.Budget.Burst = 1, 4
	h.BackoffCap = 15 * s
	return h
}

func rules(vs []Violation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, string(v.Class)+"/"+v.Rule)
	}
	return out
}

func TestCheckSafety(t *testing.T) {
	for _, tc := range []struct {
		name    string
		leading []Span
		terms   []Term
		want    []string
	}{
		{"handover at one instant", []Span{{0, 0, 0, 10 * s}, {1, 1, 10 * s, 20 * s}},
			[]Term{{0, 0, 0, 0, 10 * s}, {1, 1, 1, 10 * s, 20 * s}}, nil},
		{"one candidate, two runs", []Span{{0, 0, 0, 10 * s}, {0, 1, 5 * s, 20 * s}}, nil, nil},
		{"overlap", []Span{{0, 0, 0, 10 * s}, {1, 1, 10*s - 1, 20 * s}}, nil, []string{"safety/two-leaders"}},
		{"term never cancelled", nil, []Term{{0, 0, 0, 0, -1}, {1, 1, 1, 150 * s, 160 * s}},
			[]string{"safety/two-term-contexts"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := history()
			h.Leading, h.Terms = tc.leading, tc.terms
			if got := rules(CheckSafety(h)); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// relect's bound has room for its turn in a line of succession: five
// steps of half a RetryPeriod (5 s here) more than the client-go loop's.
func TestCheckLivenessLeaderSuccessionAllowance(t *testing.T) {
	for _, tc := range []struct {
		impl  Impl
		start time.Duration
		want  []string
	}{
		{Relect, 139 * s, nil},
		{Relect, 140 * s, []string{"liveness/late-leader"}},
		{ClientGoLoop, 135 * s, []string{"liveness/late-leader"}},
	} {
		h := history()
		h.Impl = tc.impl.String()
		h.Leading = []Span{{1, 1, tc.start, 200 * s}}
		if got := rules(checkLeader(h)); !slices.Equal(got, tc.want) {
			t.Errorf("%v leading from %v: got %v, want %v", tc.impl, tc.start, got, tc.want)
		}
	}
}

func TestCheckLivenessLeader(t *testing.T) {
	// bound: 15 s + 4.4 s + 15 s = 34.4 s after Quiet (100 s).
	for _, tc := range []struct {
		name    string
		leading []Span
		want    []string
	}{
		{"leads through the quiet time", []Span{{0, 0, 50 * s, 200 * s}}, nil},
		{"handover without a gap", []Span{{0, 0, 50 * s, 120 * s}, {1, 1, 120 * s, 200 * s}}, nil},
		{"established just in time", []Span{{1, 1, 134 * s, 200 * s}}, nil},
		{"established late", []Span{{1, 1, 135 * s, 200 * s}}, []string{"liveness/late-leader"}},
		{"lapse after the bound", []Span{{0, 0, 50 * s, 150 * s}, {1, 1, 151 * s, 200 * s}},
			[]string{"liveness/late-leader"}},
		{"nobody at the end", []Span{{0, 0, 50 * s, 199 * s}}, []string{"liveness/no-leader"}},
		{"nobody ever", nil, []string{"liveness/no-leader"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := history()
			h.Leading = tc.leading
			if got := rules(CheckLiveness(h)); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCheckLivenessCampaigning(t *testing.T) {
	// gap: 15 s cap + 4.4 s poll + 1 s bucket + 1 ms.
	gap := CampaignGap(history())
	if want := 20*s + 400*time.Millisecond + time.Millisecond; gap != want {
		t.Fatalf("CampaignGap = %v, want %v", gap, want)
	}
	run := Run{Candidate: 1, ID: 1, Start: 10 * s, Cancelled: 60 * s}
	for _, tc := range []struct {
		name  string
		calls []Call
		lead  []Span
		want  []string
	}{
		{"polls", []Call{{1, 1, 1, "get", 10 * s, 10 * s, "", false, false, ""}, {1, 1, 1, "get", 30 * s, 30 * s, "", false, false, ""},
			{1, 1, 1, "get", 50 * s, 50 * s, "", false, false, ""}}, nil, nil},
		{"a long watch is in flight", []Call{{1, 1, 1, "watch", 11 * s, 59 * s, "", false, false, ""}}, nil, nil},
		{"leads in between", []Call{{1, 1, 1, "get", 10 * s, 10 * s, "", false, false, ""}}, []Span{{1, 1, 12 * s, 58 * s}}, nil},
		{"stops", []Call{{1, 1, 1, "get", 10 * s, 10 * s, "", false, false, ""}, {1, 1, 1, "get", 31 * s, 31 * s, "", false, false, ""}}, nil,
			[]string{"liveness/stopped-campaigning", "liveness/stopped-campaigning"}},
		{"another run's calls do not count", []Call{{1, 2, 2, "get", 20 * s, 55 * s, "", false, false, ""}}, nil,
			[]string{"liveness/stopped-campaigning"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := history()
			h.Runs = []Run{run}
			h.Calls, h.Leading = tc.calls, tc.lead
			h.Leading = append(h.Leading, Span{0, 0, 0, 200 * s}) // a leader all along
			if got := rules(CheckLiveness(h)); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCheckBudget(t *testing.T) {
	calls := func(at ...time.Duration) []Call {
		var out []Call
		for _, a := range at {
			out = append(out, Call{Candidate: 0, Run: 0, Elector: 1, Verb: "get", Start: a, End: a})
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		calls []Call
		want  int
	}{
		{"burst", calls(0, 0, 0, 0), 0},
		{"burst + 1", calls(0, 0, 0, 0, 0), 1},
		{"burst, then the rate", calls(0, 0, 0, 0, 1*s, 2*s, 3*s), 0},
		{"a token early", calls(0, 0, 0, 0, 1*s, 2*s, 3*s-time.Millisecond), 1},
		{"refilled", calls(0, 0, 0, 0, 4*s, 4*s, 4*s, 4*s), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := history()
			h.Calls = tc.calls
			if got := CheckBudget(h); len(got) != tc.want {
				t.Errorf("got %v, want %d violations", got, tc.want)
			}
		})
	}
	// Two electors have two buckets.
	h := history()
	h.Calls = append(calls(0, 0, 0, 0), calls(0, 0, 0, 0)...)
	for i := range 4 {
		h.Calls[i].Elector = 2
	}
	if got := CheckBudget(h); len(got) != 0 {
		t.Errorf("two electors: %v", got)
	}
}

func TestCheckEvents(t *testing.T) {
	ev := func(c, run int, at time.Duration, k EventKind, term int64) Event {
		return Event{Candidate: c, Run: run, At: at, Kind: k, Term: term}
	}
	for _, tc := range []struct {
		name   string
		events []Event
		resets []time.Duration
		want   []string
	}{
		{"terms", []Event{ev(0, 0, 1*s, Started, 1), ev(0, 0, 2*s, Stopped, 1), ev(0, 0, 3*s, Started, 1),
			ev(0, 0, 4*s, Stopped, 1), ev(0, 1, 5*s, Started, 3)}, nil, nil},
		{"stopped without started", []Event{ev(0, 0, 1*s, Stopped, -1)}, nil,
			[]string{"events/stopped-without-started"}},
		{"started twice", []Event{ev(0, 0, 1*s, Started, 1), ev(0, 0, 2*s, Started, 2)}, nil,
			[]string{"events/started-twice"}},
		{"stopped another term", []Event{ev(0, 0, 1*s, Started, 1), ev(0, 0, 2*s, Stopped, 2)}, nil,
			[]string{"events/stopped-other-term"}},
		{"term went down", []Event{ev(0, 0, 1*s, Started, 5), ev(0, 0, 2*s, Stopped, 5), ev(0, 1, 3*s, Started, 4)},
			nil, []string{"events/term-decreased"}},
		{"term went down across a deletion", []Event{ev(0, 0, 1*s, Started, 5), ev(0, 0, 2*s, Stopped, 5),
			ev(0, 1, 3*s, Started, 0)}, []time.Duration{2500 * time.Millisecond}, nil},
		{"unknown terms", []Event{ev(0, 0, 1*s, Started, -1), ev(0, 0, 2*s, Stopped, -1)}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := history()
			h.Events, h.Resets = tc.events, tc.resets
			if got := rules(CheckEvents(h)); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	h := history()
	h.Runs = []Run{{ID: 0, Dropped: 2}}
	if got := rules(CheckEvents(h)); !slices.Equal(got, []string{"events/dropped"}) {
		t.Errorf("dropped: got %v", got)
	}
}

func TestExplain(t *testing.T) {
	const rec0, rec1 = `{"holderIdentity":"c0","renewTime":"…:00Z"}`, `{"holderIdentity":"c0","renewTime":"…:01Z"}`
	base := func() *History {
		h := history()
		h.Runs = []Run{{Candidate: 0, ID: 0, Identity: "c0"}, {Candidate: 1, ID: 1, Identity: "c1"}}
		h.Leading = []Span{{0, 0, 1 * s, 20 * s}, {1, 1, 10 * s, 30 * s}}
		return h
	}
	v := Violation{Class: Safety, Rule: "two-leaders", At: 10 * s, Candidates: []int{0, 1}}
	for _, tc := range []struct {
		name    string
		changes []Change
		actions []Applied
		want    Finding
	}{
		{"visible renewal", []Change{{At: 1 * s, Holder: "c0", Visible: rec0}, {At: 2 * s, Holder: "c0", Visible: rec1}}, nil, ""},
		{"invisible renewal", []Change{{At: 1 * s, Holder: "c0", Visible: rec0}, {At: 2 * s, Holder: "c0", Visible: rec0}}, nil,
			InvisibleRenewal},
		{"revoked after the last write", []Change{{At: 1 * s, Holder: "c0", Visible: rec0}, {At: 5 * s, Deleted: true}},
			[]Applied{{Action: Action{Kind: DeleteLease, Target: -1}, At: 5 * s}}, RevokingEdit},
		{"revoked before the last write", []Change{{At: 1 * s, Deleted: true}, {At: 2 * s, Holder: "c0", Visible: rec1}},
			[]Applied{{Action: Action{Kind: DeleteLease, Target: -1}, At: 1 * s}}, ""},
		{"a defended edit", []Change{{At: 1 * s, Holder: "c0", Visible: rec0}, {At: 5 * s, Holder: "c0", Duration: "0", Visible: rec1}},
			[]Applied{{Action: Action{Kind: ZeroDuration, Target: -1}, At: 5 * s}}, ""},
		{"a skipped edit", []Change{{At: 1 * s, Holder: "c0", Visible: rec0}},
			[]Applied{{Action: Action{Kind: EmptyHolder, Target: -1}, At: 5 * s, Skipped: "no Lease"}}, ""},
		{"a harmless edit", []Change{{At: 1 * s, Holder: "c0", Visible: rec0}, {At: 5 * s, Holder: "x", Visible: rec1}},
			[]Applied{{Action: Action{Kind: SetStranger, Target: -1}, At: 5 * s}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := base()
			h.Changes, h.Actions = tc.changes, tc.actions
			if got := Explain(h, v); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	if got := Explain(base(), Violation{Class: Liveness, Rule: "no-leader"}); got != "" {
		t.Errorf("liveness explained as %q", got)
	}
}

func TestCheckStandbyAndHandOver(t *testing.T) {
	// c0 hands the lease over to c1 at 10 s with a handover record of 4 s.
	handover := []Change{
		{At: 1 * s, Holder: "c0", Duration: "15"},
		{At: 10 * s, Holder: "c1", Duration: "4", HandOverTo: "c1"},
	}
	for _, tc := range []struct {
		name    string
		changes []Change
		leading []Span
		standby []bool
		want    []string
	}{
		{"a standby leads", nil, []Span{{1, 1, 5 * s, 6 * s}}, []bool{false, true, false}, []string{"safety/standby-led"}},
		{"the named successor leads", handover, []Span{{0, 0, 1 * s, 10 * s}, {1, 1, 10 * s, 20 * s}}, nil, nil},
		{"another leads first", handover, []Span{{0, 0, 1 * s, 10 * s}, {2, 2, 12 * s, 20 * s}}, nil,
			[]string{"safety/handover-usurped"}},
		{"the handing leader leads again", handover, []Span{{0, 0, 1 * s, 10 * s}, {0, 0, 13 * s, 20 * s}}, nil,
			[]string{"safety/handover-usurped"}},
		{"another leads once the record lapsed", handover, []Span{{2, 2, 14 * s, 20 * s}}, nil, nil},
		{"another leads after the successor did", handover, []Span{{1, 1, 11 * s, 12 * s}, {2, 2, 12 * s, 20 * s}}, nil, nil},
		{"another leads after the successor declined", append(slices.Clone(handover), Change{At: 11 * s, Duration: "1"}),
			[]Span{{2, 2, 11 * s, 20 * s}}, nil, nil},
		{"another leads once the successor's own record expired", append(slices.Clone(handover), Change{At: 11 * s, Holder: "c1", Duration: "2"}),
			[]Span{{2, 2, 13 * s, 20 * s}}, nil, nil},
		{"another leads after a hand edit", append(slices.Clone(handover), Change{At: 11 * s, Holder: "c2", ByHand: true}),
			[]Span{{2, 2, 12 * s, 20 * s}}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := history()
			h.Candidates = 3
			h.Runs = []Run{{Candidate: 0, ID: 0, Identity: "c0"}, {Candidate: 1, ID: 1, Identity: "c1"}, {Candidate: 2, ID: 2, Identity: "c2"}}
			h.Changes, h.Leading, h.Standby = tc.changes, tc.leading, tc.standby
			if got := rules(CheckSafety(h)); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCheckHandOverTaken(t *testing.T) {
	watch := Call{Candidate: 1, Run: 1, Verb: "watch", Start: 2 * s, End: 200 * s}
	for _, tc := range []struct {
		name    string
		calls   []Call
		leading []Span
		faults  []Applied
		want    []string
	}{
		{"taken", []Call{watch}, []Span{{1, 1, 10 * s, 200 * s}}, nil, nil},
		{"not taken", []Call{watch}, nil, nil, []string{"liveness/handover-not-taken"}},
		{"taken too late", []Call{watch}, []Span{{1, 1, 14 * s, 200 * s}}, nil, []string{"liveness/handover-not-taken"}},
		{"not following", nil, nil, nil, nil},
		{"following the registry only", []Call{{Candidate: 1, Run: 1, Verb: "watch", Start: 2 * s, End: 200 * s, Registry: true}}, nil, nil, nil},
		{"partitioned", []Call{watch}, nil, []Applied{{Action: Action{Kind: Partition, Target: 1}, At: 5 * s}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := history()
			h.Runs = []Run{{Candidate: 0, ID: 0, Identity: "c0", Cancelled: 200 * s}, {Candidate: 1, ID: 1, Identity: "c1", Cancelled: 200 * s}}
			h.Changes = []Change{{At: 10 * s, Holder: "c1", Duration: "4", HandOverTo: "c1"}}
			h.Actions = append([]Applied{{Action: Action{Kind: HandOver, Target: -1, Holder: 1}, At: 10 * s, Run: 0,
				Result: "ok", To: "c1", ToState: TargetLive}}, tc.faults...)
			h.Calls = tc.calls
			h.Leading = append(tc.leading, Span{0, 0, 0, 10 * s})
			var got []string
			for _, r := range rules(CheckLiveness(h)) {
				if r == "liveness/handover-not-taken" {
					got = append(got, r)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCheckStepDowns(t *testing.T) {
	ev := func(k EventKind, term int64, detail, cause string) Event {
		return Event{Candidate: 0, Run: 0, At: 5 * s, Kind: k, Term: term, Detail: detail, Cause: cause}
	}
	yield := Applied{Action: Action{Kind: Yield, Target: -1}, At: 5 * s, Run: 0, Result: "ok"}
	handOver := Applied{Action: Action{Kind: HandOver, Target: -1, Holder: 1}, At: 5 * s, Run: 0, Result: "ok", To: "c1", ToState: TargetLive}
	for _, tc := range []struct {
		name    string
		events  []Event
		actions []Applied
		want    []string
	}{
		{"yielded", []Event{ev(Started, 1, "", ""), ev(Stopped, 1, "", CauseYielded), ev(Released, 1, "c0", "")},
			[]Applied{yield}, nil},
		{"yielded unasked", []Event{ev(Started, 1, "", ""), ev(Stopped, 1, "", CauseYielded)}, nil,
			[]string{"events/unasked-step-down"}},
		{"handed over", []Event{ev(Started, 1, "", ""), ev(Stopped, 1, "", CauseHandedOver), ev(HandedOver, 1, "c1", "")},
			[]Applied{handOver}, nil},
		{"handed over to another", []Event{ev(Started, 1, "", ""), ev(Stopped, 1, "", CauseHandedOver), ev(HandedOver, 1, "c2", "")},
			[]Applied{handOver}, []string{"events/unasked-step-down"}},
		{"handed over before it stopped", []Event{ev(Started, 1, "", ""), ev(HandedOver, 1, "c1", ""), ev(Stopped, 1, "", CauseHandedOver)},
			[]Applied{handOver}, []string{"events/handed-over-before-stop"}},
		{"handed over to itself", nil, []Applied{{Action: handOver.Action, At: 5 * s, Run: 0, Result: "ok", To: "c0", ToState: TargetSelf}},
			[]string{"events/handover-not-refused"}},
		{"handed over to a known standby", nil, []Applied{{Action: handOver.Action, At: 5 * s, Run: 0, Result: "ok", To: "c1",
			ToState: TargetStandby, StandbyKnown: true}}, []string{"events/handover-not-refused"}},
		{"handed over to a standby not known yet", nil, []Applied{{Action: handOver.Action, At: 5 * s, Run: 0, Result: "ok", To: "c1",
			ToState: TargetStandby}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := history()
			h.Events, h.Actions = tc.events, tc.actions
			if got := rules(CheckEvents(h)); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
