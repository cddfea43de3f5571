package leadership

import (
	"cmp"
	"slices"
)

// Term is the beginning of a term: Who began to lead at At (an instant as
// in Span) holding the fencing token Number, or an unknown one if Number is
// negative.
type Term[W comparable, T ~int64] struct {
	Who    W
	Number int64
	At     T
}

// Regression is a term whose number breaks the fencing rule against the
// term of known number before it: terms[Cur] after terms[Prev].
type Regression struct {
	Prev, Cur int // indexes into the terms given
	// NewHolder: Cur's holder is not Prev's, and its number is not larger
	// (it did not grow across a change of holder). Otherwise Cur's holder
	// is Prev's and its number is smaller (it went back).
	NewHolder bool
}

// TermRegressions checks the fencing tokens of terms, in order of At (ties:
// in the order given): a term of another holder than the term of known
// number before it must carry a larger number, a term of the same holder
// at least the same. Terms of unknown number are skipped. Numbers start
// over when the Lease is deleted: pass only the terms after a deletion, or
// drop the regressions one explains. To check each holder's numbers alone
// (they never decrease), pass each holder's terms alone.
func TermRegressions[W comparable, T ~int64](terms []Term[W, T]) []Regression {
	order := make([]int, 0, len(terms))
	for i, t := range terms {
		if t.Number >= 0 {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(i, j int) int { return cmp.Compare(terms[i].At, terms[j].At) })
	var out []Regression
	for k := 1; k < len(order); k++ {
		prev, cur := terms[order[k-1]], terms[order[k]]
		switch {
		case cur.Who != prev.Who && cur.Number <= prev.Number:
			out = append(out, Regression{Prev: order[k-1], Cur: order[k], NewHolder: true})
		case cur.Number < prev.Number:
			out = append(out, Regression{Prev: order[k-1], Cur: order[k]})
		}
	}
	return out
}
