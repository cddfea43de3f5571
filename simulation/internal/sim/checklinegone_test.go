package sim

import (
	"slices"
	"testing"
	"time"
)

// lineGoneHistory returns a history of six candidates with the default
// timing: c0 leads (renewing at 98 s and 100 s, its last writes) with the
// line c1, c2, c3 and keeper c4; c5 is the only one left out. At 101 s the
// whole line leaves as leave says.
func lineGoneHistory(leave Kind) *History {
	h := history()
	h.Candidates, h.Standby, h.End = 6, make([]bool, 6), 300*s
	for c := range 6 {
		h.Runs = append(h.Runs, Run{Candidate: c, ID: c, Start: 0, Cancelled: h.End})
	}
	h.Changes = []Change{{At: 98 * s, Holder: "c0"}, {At: 100 * s, Holder: "c0"}}
	h.Leading = []Span{{Candidate: 0, Run: 0, From: 10 * s, To: 101 * s}}
	h.Actions = []Applied{{Action: Action{At: 101 * s, Kind: LineLeaves, Target: -1, Leave: leave}, At: 101 * s,
		Line: &LineGone{Holder: "c0", Successors: []string{"c1", "c2", "c3"}, Keepers: []string{"c4"}, Warden: "c5",
			Named: []int{0, 1, 2, 3, 4}, Gone: []int{0, 1, 2, 3, 4}}}}
	return h
}

// The bound: 5 RP (10 s) after a graceful stop, counted from the stop;
// LD + 5 RP (25 s) after a kill or a partition, counted from the holder's
// last renewal (100 s), not from the crash (101 s).
func TestCheckLineGone(t *testing.T) {
	for _, tc := range []struct {
		name  string
		leave Kind
		led   time.Duration // when c5 leads; 0: never
		edit  func(h *History)
		want  []string
	}{
		{"stop, led in time", Stop, 111 * s, nil, nil},
		{"stop, led late", Stop, 111*s + 1, nil, []string{"liveness/line-gone-late"}},
		{"stop, nobody led", Stop, 0, nil, []string{"liveness/line-gone-late"}},
		{"kill, led in time", Kill, 125 * s, nil, nil},
		{"kill, counted from the last renewal", Kill, 125*s + 1, nil, []string{"liveness/line-gone-late"}},
		{"partition, led in time", Partition, 125 * s, nil, nil},
		{"partition, led late", Partition, 126 * s, nil, []string{"liveness/line-gone-late"}},
		{"a named candidate leading does not count", Stop, 0, func(h *History) {
			h.Leading = append(h.Leading, Span{Candidate: 1, Run: 1, From: 105 * s, To: 300 * s})
		}, []string{"liveness/line-gone-late"}},
		{"excused: the only outsider partitioned meanwhile", Stop, 0, func(h *History) {
			h.Actions = append(h.Actions, Applied{Action: Action{At: 105 * s, Kind: Partition, Target: 5}, At: 105 * s})
		}, nil},
		{"excused: the only outsider stands by", Stop, 0, func(h *History) { h.Standby[5] = true }, nil},
		{"excused: the only outsider stopped meanwhile", Stop, 0, func(h *History) { h.Runs[5].Cancelled = 108 * s }, nil},
		{"excused: a hand edit of the Lease meanwhile", Stop, 0, func(h *History) {
			h.Changes = append(h.Changes, Change{At: 104 * s, Holder: "intruder", ByHand: true})
		}, nil},
		{"not excused: a fault on an outsider healed before", Stop, 0, func(h *History) {
			h.Actions = append(h.Actions, Applied{Action: Action{At: 90 * s, Kind: Partition, Target: 5}, At: 90 * s},
				Applied{Action: Action{At: 95 * s, Kind: Heal, Target: 5}, At: 95 * s})
		}, []string{"liveness/line-gone-late"}},
		{"not excused: a fault on one outsider of two", Stop, 0, func(h *History) {
			h.Candidates, h.Standby = 7, append(h.Standby, false)
			h.Runs = append(h.Runs, Run{Candidate: 6, ID: 6, Start: 0, Cancelled: h.End})
			h.Actions = append(h.Actions, Applied{Action: Action{At: 105 * s, Kind: Partition, Target: 5}, At: 105 * s})
		}, []string{"liveness/line-gone-late"}},
		{"excused: the warden killed within its window (3 LD + 2 RP = 49 s)", Stop, 0, func(h *History) {
			wardenC6(h)
			h.Runs[6].Cancelled = 101*s - 49*s
		}, nil},
		{"not excused: the warden killed before its window", Stop, 0, func(h *History) {
			wardenC6(h)
			h.Runs[6].Cancelled = 101*s - 49*s - 1
		}, []string{"liveness/line-gone-late"}},
		{"excused: the warden cut off within its window", Kill, 0, func(h *History) {
			wardenC6(h)
			h.Actions = append(h.Actions, Applied{Action: Action{At: 60 * s, Kind: Partition, Target: 6}, At: 60 * s})
		}, nil},
		{"not excused: the warden cut off before its window", Kill, 0, func(h *History) {
			wardenC6(h)
			h.Actions = append(h.Actions, Applied{Action: Action{At: 50 * s, Kind: Partition, Target: 6}, At: 50 * s})
		}, []string{"liveness/line-gone-late"}},
		{"excused: a warden long gone, named within its window", Stop, 0, func(h *History) {
			wardenC6(h)
			h.Runs[6].Cancelled = 20 * s
			h.Changes = []Change{{At: 60 * s, Holder: "c0", Warden: "c5"}, {At: 98 * s, Holder: "c0", Warden: "c6"}, {At: 100 * s, Holder: "c0", Warden: "c6"}}
		}, nil},
		{"not excused: a warden long gone, named before its window", Stop, 0, func(h *History) {
			wardenC6(h)
			h.Runs[6].Cancelled = 20 * s
			h.Changes = []Change{{At: 51 * s, Holder: "c0", Warden: "c6"}, {At: 98 * s, Holder: "c0", Warden: "c6"}, {At: 100 * s, Holder: "c0", Warden: "c6"}}
		}, []string{"liveness/line-gone-late"}},
		{"not excused: the warden's fault healed before the line left", Kill, 0, func(h *History) {
			wardenC6(h)
			h.Actions = append(h.Actions, Applied{Action: Action{At: 90 * s, Kind: Partition, Target: 6}, At: 90 * s},
				Applied{Action: Action{At: 95 * s, Kind: Heal, Target: 6}, At: 95 * s})
		}, []string{"liveness/line-gone-late"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := lineGoneHistory(tc.leave)
			if tc.led > 0 {
				h.Leading = append(h.Leading, Span{Candidate: 5, Run: 5, From: tc.led, To: h.End})
			}
			if tc.edit != nil {
				tc.edit(h)
			}
			if got := rules(CheckLineGone(h)); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v; outcomes %+v", got, tc.want, LineGoneOutcomes(h))
			}
		})
	}
}

// wardenC6 adds c6 to a lineGoneHistory as the line's warden, c5 staying
// the outsider who could lead.
func wardenC6(h *History) {
	h.Candidates, h.Standby = 7, append(h.Standby, false)
	h.Runs = append(h.Runs, Run{Candidate: 6, ID: 6, Identity: "c6", Start: 0, Cancelled: h.End})
	h.Actions[0].Line.Warden = "c6"
}

// A LineLeaves that was skipped (no line to read) is not judged; a
// partition by one counts as a fault on whom it cut off, until LineHeal.
func TestCheckLineGoneSkippedAndFaults(t *testing.T) {
	h := lineGoneHistory(Stop)
	h.Actions[0].Line, h.Actions[0].Skipped = nil, "no line"
	if got := LineGoneOutcomes(h); len(got) != 0 {
		t.Errorf("a skipped LineLeaves judged: %+v", got)
	}
	h = lineGoneHistory(Partition)
	h.Actions = append(h.Actions, Applied{Action: Action{At: 150 * s, Kind: LineHeal, Target: -1}, At: 150 * s,
		Line: &LineGone{Gone: []int{0, 1, 2, 3, 4}}})
	f := faultWindows(h)
	for c := range 5 {
		if want := [][2]time.Duration{{101 * s, 150 * s}}; !slices.Equal(f[c], want) {
			t.Errorf("c%d: fault windows %v, want %v", c, f[c], want)
		}
	}
	if len(f[5]) != 0 {
		t.Errorf("c5 was not cut off: fault windows %v", f[5])
	}
}

// GenerateLineGone: one LineLeaves after Generate's span, a LineHeal after
// a partition, every last incarnation keeping its lease before a kill, and
// a run long enough for both rules.
func TestGenerateLineGone(t *testing.T) {
	ways := map[Kind]int{}
	for seed := range uint64(300) {
		base, s := Generate(seed), GenerateLineGone(seed)
		if s.String() != GenerateLineGone(seed).String() {
			t.Fatalf("seed %d: two schedules", seed)
		}
		tm := s.Timing.withDefaults()
		var leaves []Action
		heals := 0
		for _, a := range s.Actions {
			switch a.Kind {
			case LineLeaves:
				leaves = append(leaves, a)
			case LineHeal:
				heals++
			}
		}
		if len(leaves) != 1 || s.Candidates != base.Candidates+LineGoneWidening {
			t.Fatalf("seed %d: %d line-leaves, %d candidates", seed, len(leaves), s.Candidates)
		}
		a := leaves[0]
		ways[a.Leave]++
		if a.At < base.Span || a.At > base.Span+tm.LeaseDuration {
			t.Errorf("seed %d: line leaves at %v, not within a LeaseDuration after %v", seed, a.At, base.Span)
		}
		if (heals == 1) != (a.Leave == Partition) || heals > 1 {
			t.Errorf("seed %d: %d line-heals after a line-leaves by %v", seed, heals, a.Leave)
		}
		if min := a.At + tm.LeaseDuration + LineGoneAllowance(tm); s.Span < min {
			t.Errorf("seed %d: span %v, before the deadline %v", seed, s.Span, min)
		}
		for c := range s.Candidates {
			if i := lastStart(s.Actions, c); i >= 0 && s.Actions[i].KeepLease != (a.Leave == Kill) {
				t.Errorf("seed %d: c%d's last start keeps its lease: %v, line leaves by %v", seed, c, s.Actions[i].KeepLease, a.Leave)
			}
		}
	}
	for _, k := range []Kind{Stop, Kill, Partition} {
		if ways[k] < 60 {
			t.Errorf("line-leaves by %v in %d of 300 schedules", k, ways[k])
		}
	}
}
