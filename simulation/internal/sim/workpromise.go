package sim

import (
	"math/bits"
	"time"
)

// What relect promises of work liveness, written from its documentation —
// the field docs of relect.WorkOptions and docs/design.md ("Work
// liveness", "Safety, and the bound on handovers") — and not from its
// code: the checkers of stuck work judge relect by these. A change to
// relect's defaults or to its doubling that breaks the documented promise
// is then a violation, where an oracle copied from the code would follow
// it. Each figure is quoted with the sentence it comes from; change one
// only with the documentation it quotes.

// The defaults of WorkOptions' zero fields, as their docs state them.
const (
	// "CheckInterval is the time between calls of Check. Zero means 10 s."
	promisedCheckInterval = 10 * time.Second
	// "CheckFailures is how many failures of Check in a row mean the work
	// is stuck. Zero means 3."
	promisedCheckFailures = 3
	// "Cooldown ... Zero means 1 minute."
	promisedCooldown = time.Minute
	// "MaxCooldown caps the doubling. Zero means 1 hour; at least
	// Cooldown."
	promisedMaxCooldown = time.Hour
)

// withDefaults applies the documented defaults to the zero fields of w
// (relect applies its own in New: the two meet only if relect keeps its
// word); w unchanged if it is off.
func (w Work) withDefaults() Work {
	if !w.On() {
		return w
	}
	if w.Check {
		if w.CheckInterval == 0 {
			w.CheckInterval = promisedCheckInterval
		}
		if w.CheckTimeout == 0 {
			w.CheckTimeout = w.CheckInterval / 2 // "Zero means half of CheckInterval"
		}
		if w.CheckFailures == 0 {
			w.CheckFailures = promisedCheckFailures
		}
	}
	if w.Cooldown == 0 {
		w.Cooldown = promisedCooldown
	}
	if w.MaxCooldown == 0 {
		w.MaxCooldown = max(promisedMaxCooldown, w.Cooldown)
	}
	return w
}

// hold is how long a leader that takes the lease from a record of streak
// k must hold it before it may hand over for stuck work: "A leader that
// takes the lease from a record of streak k ≥ 1 must hold it for Cooldown
// × 2^(k−1) (at most MaxCooldown, 1 h)" (docs/design.md, "No flapping:
// the streak"); zero for k < 1. w must have its defaults applied.
func (w Work) hold(k int) time.Duration {
	if k < 1 {
		return 0
	}
	if k-1 >= bits.LeadingZeros64(uint64(w.Cooldown))-1 {
		return w.MaxCooldown // Cooldown × 2^(k−1) is past any cap
	}
	return min(w.Cooldown<<(k-1), w.MaxCooldown)
}

// uncapped is how many stuck handovers in a row are held Cooldown ×
// 2^(k−1) in full, below MaxCooldown: the k with Cooldown × 2^(k−1) <
// MaxCooldown. w must have its defaults applied.
func (w Work) uncapped() int {
	n := 0
	for d := w.Cooldown; d < w.MaxCooldown; d *= 2 {
		n++
	}
	return n
}

// leastSpan is the least time from the first stuck handover of an outage
// to the k-th: "the k-th stuck handover of an outage comes no sooner than
// Cooldown × (2^(k−1) − 1) after the first" (WorkOptions.Cooldown), "and
// once the doubling reaches MaxCooldown, one per MaxCooldown"
// (docs/design.md, "Safety, and the bound on handovers"): with j the
// handovers held in full (uncapped), Cooldown × (2^(k−1) − 1) for k ≤
// j + 1, and beyond it Cooldown × (2^j − 1) + (k − 1 − j) × MaxCooldown;
// zero for k ≤ 1. w must have its defaults applied.
func (w Work) leastSpan(k int) time.Duration {
	if k <= 1 {
		return 0
	}
	j := w.uncapped()
	if k-1 <= j {
		return w.Cooldown * (1<<(k-1) - 1)
	}
	return w.Cooldown*(1<<j-1) + time.Duration(k-1-j)*w.MaxCooldown
}

// StuckHandoverBound is the most stuck handovers in a row that the
// promise allows within a span t when the work fails everywhere: the
// largest k with leastSpan(k) ≤ t. While the doubling is below
// MaxCooldown that is "⌊log₂(T/C + 1)⌋ + 1 stuck handovers — with the
// default minute, 4 in 10 minutes, 6 in an hour" (docs/design.md), and
// one more per MaxCooldown after it. w must have its defaults applied.
func (w Work) StuckHandoverBound(t time.Duration) int {
	if t < 0 {
		return 1
	}
	j := w.uncapped()
	if t < w.leastSpan(j+2) {
		return bits.Len64(uint64(t/w.Cooldown) + 1) // ⌊log₂(⌊t/C⌋ + 1)⌋ + 1
	}
	return j + 2 + int((t-w.leastSpan(j+2))/w.MaxCooldown)
}
