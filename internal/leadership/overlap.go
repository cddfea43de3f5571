package leadership

import (
	"cmp"
	"slices"
)

// Span is a stretch of time during which Who led (or, in a sampled record,
// may have led). From and To are instants on one clock of the caller's
// choosing, in one unit (the simulation: nanoseconds since the run began;
// the e2e suite: Unix nanoseconds).
type Span[W comparable, T ~int64] struct {
	Who      W
	From, To T
}

// Bounds says which instants of [From, To] a Span covers.
type Bounds int

const (
	// HalfOpen spans cover [From, To): two overlap only if they share a
	// positive length of time, so one that ends at the instant another
	// begins does not, and an empty span overlaps nothing. For records of
	// exact instants, where a handover at one instant is fine.
	HalfOpen Bounds = iota
	// Closed spans cover [From, To]: two overlap if they share an instant,
	// touching included, and a span of one instant counts. For sampled
	// records, whose instants are known only to a sample's precision.
	Closed
)

// Overlap is two spans of different holders that overlap: spans[A] begins
// no later than spans[B], and they share [From, To] (for Closed spans a
// single instant, From == To, counts).
type Overlap[T ~int64] struct {
	A, B     int // indexes into the spans given
	From, To T
}

// Overlaps returns every pair of spans of different holders that overlap,
// ordered by the From of A, then of B (ties: in the order given).
func Overlaps[W comparable, T ~int64](spans []Span[W, T], b Bounds) []Overlap[T] {
	order := make([]int, len(spans))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int { return cmp.Compare(spans[i].From, spans[j].From) })
	var out []Overlap[T]
	for k, i := range order {
		x := spans[i]
		for _, j := range order[k+1:] {
			y := spans[j]
			if y.From > x.To || b == HalfOpen && y.From == x.To {
				break // sorted by From: no later span overlaps x either
			}
			if y.Who == x.Who || b == HalfOpen && (x.To <= x.From || y.To <= y.From) {
				continue
			}
			out = append(out, Overlap[T]{A: i, B: j, From: y.From, To: min(x.To, y.To)})
		}
	}
	return out
}
