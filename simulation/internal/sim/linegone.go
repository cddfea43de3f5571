package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	leasewire "github.com/relect/relect/internal/wire"
)

// The whole line gone (issue 48): everyone the line of succession names
// leaves at one instant, and an outsider must take the lease
// (docs/design.md, "Only the line watches": the line's warden notices).
// Who the line names is known only when the action is played, so the
// action names nobody: the runner reads the election's Lease then.
const (
	// LineLeaves: the candidates the election's Lease names when it is
	// applied — its holder, and the successors and keepers of the line of
	// succession published with its record (relect.io/succession) — leave
	// at once, as Leave says: Stop (gracefully: the lease released), Kill
	// (a crash: the lease kept; every incarnation running then was built
	// to keep it, see GenerateLineGone) or Partition (their calls hang,
	// until LineHeal). Skipped if the Lease is missing, has no holder or
	// carries no line of its term. Applied.Line records whom it resolved.
	LineLeaves Kind = TableClear + 1 + iota
	// LineHeal heals the candidates the last LineLeaves partitioned.
	LineHeal
)

func init() {
	kindNames[LineLeaves] = "line-leaves"
	kindNames[LineHeal] = "line-heal"
}

// LineGoneWidening is how many quiet candidates GenerateLineGone adds to
// Generate's schedule (Widen): a fleet of 12 to 17, in which the line
// names at most five (the leader, three successors and a keeper) and
// leaves at least seven out, so that it is posted and names a warden.
const LineGoneWidening = 10

// LineGone is what a LineLeaves resolved when it was applied.
type LineGone struct {
	// Term is the leaseTransitions of the record whose line was read;
	// Holder its holder; Successors and Keepers the identities the line
	// names; Warden the outsider it names to read the election's Lease
	// ("" if none), and Posted whether it is posted to the line Lease.
	Term       int32
	Holder     string
	Successors []string
	Keepers    []string
	Warden     string
	Posted     bool
	// Named are the candidates whose identity at that instant is the
	// holder, a successor or a keeper; Gone those of them that were
	// running and were made to leave (the others had left already).
	Named, Gone []int
}

// Names returns every identity the line names: holder, successors,
// keepers.
func (g *LineGone) Names() []string {
	return append(append([]string{g.Holder}, g.Successors...), g.Keepers...)
}

// GenerateLineGone returns Generate(seed) widened by LineGoneWidening quiet
// candidates (Widen), followed, once its faults are over and its
// leadership has settled, by one LineLeaves: at the Span Generate gave the
// schedule (its liveness bound and a LeaseDuration after its last fault)
// plus up to a LeaseDuration, so that it falls anywhere between two
// renewals and two reads of the warden. The way the line leaves (Stop,
// Kill or Partition, one in three each) and the instant draw from a stream
// of their own, so Generate's draws are unchanged. For Kill, every
// candidate's last incarnation (none follows it in the schedule) is built
// to keep its lease when cancelled, as a Start before a Kill is; for
// Partition, a LineHeal follows two LeaseDurations and LineGoneAllowance
// later, so that the run also sees the old line come back. Quiet is the
// last action; the run lasts long enough to judge both the line-gone rule
// (CheckLineGone) and the liveness bound from Quiet (CheckLiveness).
func GenerateLineGone(seed uint64) *Schedule {
	s := Widen(Generate(seed), LineGoneWidening)
	r := rand.New(rand.NewPCG(seed, 0x6c696e65676f6e65)) // "linegone"
	t := s.Timing.withDefaults()
	ld := t.LeaseDuration
	leave := []Kind{Stop, Kill, Partition}[r.IntN(3)]
	at := roundMs(s.Span + scale(ld, r.Float64()))
	s.Actions = append(s.Actions, Action{At: at, Kind: LineLeaves, Target: -1, Leave: leave})
	if leave == Partition {
		s.Actions = append(s.Actions, Action{At: at + 2*ld + LineGoneAllowance(t), Kind: LineHeal, Target: -1})
	}
	if leave == Kill {
		for c := range s.Candidates {
			if i := lastStart(s.Actions, c); i >= 0 {
				s.Actions[i].KeepLease = true
			}
		}
	}
	s.Quiet = s.Actions[len(s.Actions)-1].At
	s.Span = max(s.Quiet+LivenessBound(t, t.BackoffMax)+SuccessionAllowance(t)+ld,
		at+ld+LineGoneAllowance(t)+ld)
	return s
}

// lastStart returns the index in acts of candidate c's last Start if no
// Kill or Stop of c follows it, else −1.
func lastStart(acts []Action, c int) int {
	for i := len(acts) - 1; i >= 0; i-- {
		switch a := acts[i]; {
		case a.Target != c:
		case a.Kind == Start:
			return i
		case a.Kind == Kill || a.Kind == Stop:
			return -1
		}
	}
	return -1
}

// LineGoneAllowance is how long after the whole line is gone relect's
// design lets an outsider take the lease, beyond the lease's own expiry
// after a crash: five retry periods, 10 s at the defaults (issue 48's
// bound). The warden reads the election's Lease every two retry periods:
// the first read after a release finds it released (2 RP); after a crash,
// the first read after the last renewal (within 2 RP of it) starts the
// expiry clock the warden follows the Lease with, and the next finds the
// record unchanged. The warden's turn then comes after the three
// successors and the keeper: four succession steps of half a retry
// period (2 RP). One retry period more covers its read, its watch and its
// acquiring write.
func LineGoneAllowance(t Timing) time.Duration { return 5 * t.RetryPeriod }

// lineLeaves applies a LineLeaves: it reads the election's Lease, resolves
// the line it carries to candidates, and makes the running ones leave as
// a.Leave says.
func (r *runner) lineLeaves(applied *Applied) {
	l := r.api.Lease(Namespace, LeaseName)
	if l == nil {
		applied.Skipped = "no Lease"
		return
	}
	holder, line := leasewire.Holder(l), leasewire.SuccessionOf(l)
	switch {
	case holder == "":
		applied.Skipped = "no holder"
		return
	case line == nil:
		applied.Skipped = "no line"
		return
	}
	g := &LineGone{Term: leasewire.Transitions(l), Holder: holder, Keepers: slices.Clone(line.Keepers),
		Warden: line.Warden, Posted: line.Posted}
	for _, n := range line.Next {
		g.Successors = append(g.Successors, n.Identity)
	}
	names := g.Names()
	r.mu.Lock()
	for i, sl := range r.slots {
		if !slices.Contains(names, sl.identity) {
			continue
		}
		g.Named = append(g.Named, i)
		if sl.runID >= 0 && r.h.Runs[sl.runID].Cancelled < 0 {
			if keep := r.h.Runs[sl.runID].KeepLease; keep != (applied.Leave == Kill) {
				panic("sim: a line-leaves " + applied.Leave.String() + " of a run built with keep lease " +
					map[bool]string{true: "on", false: "off"}[keep])
			}
			g.Gone = append(g.Gone, i)
		}
	}
	r.mu.Unlock()
	r.lineCut = nil
	applied.Line = g
	for _, i := range g.Gone {
		sl := r.slots[i]
		switch applied.Leave {
		case Stop, Kill:
			sl.cmds <- command{stop: true}
		case Partition:
			sl.client.Partition()
			sl.wire.partition()
			r.lineCut = append(r.lineCut, i)
		}
	}
}

// lineHeal applies a LineHeal: the candidates the last LineLeaves
// partitioned are healed.
func (r *runner) lineHeal(applied *Applied) {
	if len(r.lineCut) == 0 {
		applied.Skipped = "nobody partitioned"
		return
	}
	applied.Line = &LineGone{Gone: slices.Clone(r.lineCut)}
	for _, i := range r.lineCut {
		sl := r.slots[i]
		sl.client.Heal()
		sl.client.SetLatency(RoundTrip)
		sl.wire.heal()
	}
	r.lineCut = nil
}

// cut returns the candidates a LineLeaves by Partition cut off, or a
// LineHeal healed; nil for any other action.
func (a Applied) cut() []int {
	if a.Line == nil || (a.Kind == LineLeaves && a.Leave != Partition) {
		return nil
	}
	return a.Line.Gone
}

// describe is the resolution for the timeline.
func (g *LineGone) describe() string {
	if g.Holder == "" {
		return fmt.Sprintf(": %v", names(g.Gone))
	}
	return fmt.Sprintf(": term %d holder %s successors %v keepers %v warden %q posted %v: named %v, gone %v",
		g.Term, g.Holder, g.Successors, g.Keepers, g.Warden, g.Posted, names(g.Named), names(g.Gone))
}

func names(cs []int) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, CandidateName(c))
	}
	return out
}
