package history

import (
	"fmt"
	"slices"
	"time"

	"github.com/relect/relect"

	"github.com/relect/relect/internal/leadership"
)

// Interval is a stretch of time during which one candidate may have believed
// it led, in one view: from the first sample that saw it lead to the first
// sample that saw it not lead, or to MaxSampleGap after the last sample that
// saw it lead if that is sooner (the process was stopped or starved in
// between: it could not act while stopped, and a starved process may have
// acted for up to a sampling interval).
type Interval struct {
	Candidate string
	View      string
	// Shard is the shard of a ViewShard interval (ShardIntervals).
	Shard string
	// Term is the term number the candidate held (relect's
	// leaseTransitions; a shard's, for ViewShard), or -1 if the view does
	// not know it (client-go's).
	Term int64
	// Fence is the relect term's fencing token (relect.Fence), "" if not
	// known (client-go's views, or a term that ended as it was sampled).
	Fence      string
	Start, End time.Time
	// SurelyFrom and SurelyUntil bound what the samples prove: the view
	// was true at some instant of the first true sample, which ended at
	// SurelyFrom, and at some instant of the last true sample, which began
	// at SurelyUntil. [Start, End] is what the candidate may have
	// believed, widened by the sampler's own delays; a bound checked
	// against SurelyFrom or SurelyUntil fails only on what the candidate
	// really did (see OnlyAfter and DoneBy). Zero where unknown: the
	// interval is still open, or the view is not sampled (then they are
	// Start and End).
	SurelyFrom, SurelyUntil time.Time
	// Open reports that the history ended while leading (the process was
	// killed, or still runs); End is then the instant the caller knew it
	// was dead, or the time Intervals was called.
	Open bool
}

func (iv Interval) String() string {
	open := ""
	if iv.Open {
		open = " (open)"
	}
	fence := ""
	if iv.Fence != "" {
		fence = " fence " + iv.Fence
	}
	view := iv.View
	if iv.Shard != "" {
		view += " " + iv.Shard
	}
	return fmt.Sprintf("%s[%s] term %d%s %s..%s (%v)%s", iv.Candidate, view, iv.Term, fence,
		iv.Start.Format("15:04:05.000000"), iv.End.Format("15:04:05.000000"), iv.End.Sub(iv.Start).Round(time.Millisecond), open)
}

// Intervals returns the leader intervals of one candidate's history in view.
// An interval still open when the history ends is closed at dead, the
// earliest instant the caller knows the process no longer ran (after its
// Wait returned); a zero dead leaves it open until now.
func Intervals(candidate string, recs []Record, view string, dead time.Time) []Interval {
	var out []Interval
	var cur *Interval
	for _, r := range recs {
		if r.View != view {
			continue
		}
		switch r.Kind {
		case KindOn:
			if cur != nil {
				continue // already leading: a repeated "on" extends it
			}
			term := r.Term
			if view != ViewRelect && view != ViewShard {
				term = -1
			}
			cur = &Interval{Candidate: candidate, View: view, Term: term, Fence: r.Fence, Start: r.Time(), SurelyFrom: r.Time()}
			if r.Until != 0 {
				cur.SurelyFrom = time.Unix(0, r.Until)
			}
		case KindOff:
			if cur == nil {
				continue
			}
			end := r.T
			if r.LastTrue != 0 && r.LastTrue+int64(MaxSampleGap) < end {
				end = r.LastTrue + int64(MaxSampleGap)
			}
			cur.End = time.Unix(0, end)
			cur.SurelyUntil = cur.End
			if r.LastTrueFrom != 0 {
				cur.SurelyUntil = time.Unix(0, r.LastTrueFrom)
			}
			out = append(out, *cur)
			cur = nil
		}
	}
	if cur != nil {
		cur.Open = true
		cur.End = dead
		if dead.IsZero() {
			cur.End = time.Now()
		}
		out = append(out, *cur)
	}
	return out
}

// ShardIntervals returns the shard terms of one candidate's history
// (ViewShard), by shard, each as Intervals returns them for a view of its
// own: an interval still open when the history ends is closed at dead.
func ShardIntervals(candidate string, recs []Record, dead time.Time) map[string][]Interval {
	by := map[string][]Record{}
	for _, r := range recs {
		if r.View == ViewShard && r.Shard != "" {
			by[r.Shard] = append(by[r.Shard], r)
		}
	}
	out := map[string][]Interval{}
	for sh, rs := range by {
		ivs := Intervals(candidate, rs, ViewShard, dead)
		for i := range ivs {
			ivs[i].Shard = sh
		}
		out[sh] = ivs
	}
	return out
}

// DoneBy reports whether the candidate had stopped leading by deadline, as
// far as the samples prove: no sample that began after deadline saw it
// leading. The sampler's delays (the end of a true sample, or a first false
// sample, recorded late because the sampler was starved) are not counted
// against it; they cannot hide a real violation for longer than one
// sample, since a view still true after deadline is read true again by the
// next sample, which begins after deadline. An open interval was not done
// by any deadline.
func (iv Interval) DoneBy(deadline time.Time) bool {
	return !iv.Open && !iv.SurelyUntil.After(deadline)
}

// OnlyAfter reports whether the candidate began to lead no sooner than t,
// as far as the samples prove: the first sample that saw it leading ended
// at or after t. A late start of that sample is not counted against it;
// that can hide only a violation shorter than the sample itself (a view
// true before t is read true by a sample that ends before t).
func (iv Interval) OnlyAfter(t time.Time) bool {
	return !iv.SurelyFrom.Before(t)
}

// Overlap is two candidates leading at the same time.
type Overlap struct{ A, B Interval }

// Duration is how long both led.
func (o Overlap) Duration() time.Duration {
	start := o.A.Start
	if o.B.Start.After(start) {
		start = o.B.Start
	}
	end := o.A.End
	if o.B.End.Before(end) {
		end = o.B.End
	}
	return end.Sub(start)
}

func (o Overlap) String() string {
	return fmt.Sprintf("overlap of %v: %v and %v", o.Duration(), o.A, o.B)
}

// Overlaps returns every pair of intervals of different candidates that
// share an instant (leadership.Overlaps): intervals are closed, touching
// counts, since a sample places an instant only to its own precision.
func Overlaps(ivs []Interval) []Overlap {
	spans := make([]leadership.Span[string, int64], len(ivs))
	for i, iv := range ivs {
		spans[i] = leadership.Span[string, int64]{Who: iv.Candidate, From: iv.Start.UnixNano(), To: iv.End.UnixNano()}
	}
	var out []Overlap
	for _, o := range leadership.Overlaps(spans, leadership.Closed) {
		out = append(out, Overlap{A: ivs[o.A], B: ivs[o.B]})
	}
	return out
}

// TermRegressions checks the term numbers (leadership.TermRegressions): in
// start order, an interval of a different candidate than the one before it
// must carry a larger term, and one of the same candidate at least the same
// term. Intervals with an unknown term (-1) are skipped. Each violation is
// described in one string. Terms start over when the Lease is deleted, so
// pass only the intervals after the last deletion.
func TermRegressions(ivs []Interval) []string {
	terms := make([]leadership.Term[string, int64], len(ivs))
	for i, iv := range ivs {
		terms[i] = leadership.Term[string, int64]{Who: iv.Candidate, Number: iv.Term, At: iv.Start.UnixNano()}
	}
	var out []string
	for _, r := range leadership.TermRegressions(terms) {
		what := "term went back"
		if r.NewHolder {
			what = "term did not grow across a change of leader"
		}
		out = append(out, fmt.Sprintf("%s: %v after %v", what, ivs[r.Cur], ivs[r.Prev]))
	}
	return out
}

// FenceRegressions checks the fences of relect terms: in start order, every
// interval with a known fence must carry a fence above every fence before
// it, or the same fence as the interval before it of the same candidate
// (one term seen leading twice). Unlike term numbers, fences never start
// over: not when the Lease is deleted, nor across restarts, nor for one
// candidate's consecutive terms. Intervals of unknown fence are skipped.
// Each violation is described in one string.
func FenceRegressions(ivs []Interval) []string {
	order := make([]Interval, 0, len(ivs))
	for _, iv := range ivs {
		if iv.Fence != "" {
			order = append(order, iv)
		}
	}
	slices.SortStableFunc(order, func(a, b Interval) int { return a.Start.Compare(b.Start) })
	var out []string
	for k := 1; k < len(order); k++ {
		prev, cur, highest := order[k-1], order[k], order[k-1]
		for _, iv := range order[:k] {
			if relect.Fence(iv.Fence).Compare(relect.Fence(highest.Fence)) > 0 {
				highest = iv
			}
		}
		sameTerm := cur.Candidate == prev.Candidate && cur.Fence == prev.Fence && cur.Fence == highest.Fence
		if !sameTerm && relect.Fence(cur.Fence).Compare(relect.Fence(highest.Fence)) <= 0 {
			out = append(out, fmt.Sprintf("fence did not grow: %v after %v", cur, highest))
		}
	}
	return out
}
