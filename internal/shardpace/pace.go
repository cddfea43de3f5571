// Package shardpace is the rule by which a relect leader paces a shard
// whose work keeps failing — its work stuck, its check failing, or its Run
// returning or panicking, each seen as a release by the holder the shard
// table names — so that it does not bounce between candidates for good.
// It makes no API call and reads no clock: every method takes the time.
// See docs/design.md, "A shard whose work keeps failing".
//
// The rule, stated once: the k-th failure in a row of a shard passes its
// holder over for that shard for Cooldown × 2^(k−1), at most MaxCooldown
// (internal/work's Doubling, the one rule of relect's cooldowns) — the
// cooldown the shard's own release record publishes for a stuck holder
// (Options.Work's rule). A shard that is passed over by
// every candidate waits, unassigned, until the first of them is due. A
// term of the shard that lasts twice the cooldown of the streak it started
// in ends the streak. Nothing else changes: the holder keeps its other
// shards, and stays a taker of them.
package shardpace

import (
	"slices"
	"time"

	"github.com/relect/relect/internal/work"
)

// Pace is the leader's record of the shards that fail, for one term. The
// zero value is not usable: use New. A Pace is not safe for concurrent use.
type Pace struct {
	base, max time.Duration
	shards    map[string]*shard
	failedAt  map[string]time.Time // shard → its last failure, kept for the term
}

type shard struct {
	streak  int
	passed  map[string]time.Time // identity → passed over until
	holder  string               // who holds it since heldAt ("": nobody known)
	heldAt  time.Time
	streakK int // the streak heldAt's term started in
	// pending is a release not judged yet (Released), at pendingAt, by
	// the holder's instance pendingOf.
	pending   string
	pendingOf string
	pendingAt time.Time
}

// Failure is one failure of a shard, as Failed records it.
type Failure struct {
	Shard, Holder string
	// Streak is the shard's failures in a row, this one included; Until
	// is when Holder may be given the shard again.
	Streak int
	Until  time.Time
}

// New returns a Pace whose first cooldown is base, doubling up to max
// (max ≥ base > 0).
func New(base, max time.Duration) *Pace {
	return &Pace{base: base, max: max, shards: map[string]*shard{}, failedAt: map[string]time.Time{}}
}

func (p *Pace) of(sh string) *shard {
	s := p.shards[sh]
	if s == nil {
		s = &shard{passed: map[string]time.Time{}}
		p.shards[sh] = s
	}
	return s
}

// Failed records that holder gave shard sh up at now, its work failing;
// record is the streak the shard's release record carries (0 if none),
// which the count follows when it is ahead. It returns the failures in a
// row, and until when holder is passed over for sh.
func (p *Pace) Failed(sh, holder string, record int, now time.Time) (streak int, until time.Time) {
	s := p.of(sh)
	s.streak = max(s.streak+1, record)
	p.failedAt[sh] = now
	until = now.Add(work.Doubling(p.base, p.max, s.streak))
	s.passed[holder] = until
	s.holder, s.heldAt = "", time.Time{}
	return s.streak, until
}

// Released records that holder (instance: its incarnation, another after
// a restart), which the table gives shard sh, released it at now. A
// release whose record carries a streak (record ≥ 1: its work was stuck)
// is a failure at once; any other is one only if the same instance of
// holder is still live a grace later (Settle): a holder that stops
// gracefully releases its shards too, and deregisters right after (or
// comes back as another instance).
func (p *Pace) Released(sh, holder, instance string, record int, now time.Time) *Failure {
	if record >= 1 {
		k, until := p.Failed(sh, holder, record, now)
		return &Failure{Shard: sh, Holder: holder, Streak: k, Until: until}
	}
	s := p.of(sh)
	s.pending, s.pendingOf, s.pendingAt = holder, instance, now
	return nil
}

// Settle judges the releases pending for grace or longer at now: each
// whose holder is live then (live) is a failure (Failed), the others are
// forgotten. It returns the failures, in no order.
func (p *Pace) Settle(now time.Time, grace time.Duration, live func(identity, instance string) bool) []Failure {
	var out []Failure
	for sh, s := range p.shards {
		if s.pending == "" || now.Before(s.pendingAt.Add(grace)) {
			continue
		}
		holder, of, at := s.pending, s.pendingOf, s.pendingAt
		s.pending = ""
		if live(holder, of) {
			k, until := p.Failed(sh, holder, 0, at)
			out = append(out, Failure{Shard: sh, Holder: holder, Streak: k, Until: until})
		}
		p.forget(sh, now)
	}
	return out
}

// Held records that holder holds shard sh at now (a term in progress, as
// the leader observes its Lease): a term that lasts twice the cooldown of
// the streak it started in ends the streak — not once: a holder whose
// work is stuck holds for that cooldown (Options.Work's rule) before it
// hands over.
func (p *Pace) Held(sh, holder string, now time.Time) {
	s := p.shards[sh]
	if s == nil || s.streak == 0 {
		return
	}
	if s.holder != holder {
		s.holder, s.heldAt, s.streakK = holder, now, s.streak
		return
	}
	if !now.Before(s.heldAt.Add(2 * work.Doubling(p.base, p.max, s.streakK))) {
		s.streak = 0
		p.forget(sh, now)
	}
}

// Passed returns, at now, the candidates passed over for shard sh — the
// holder of a release not judged yet among them — and when the first
// cooldown ends (zero if none).
func (p *Pace) Passed(sh string, now time.Time) (ids []string, next time.Time) {
	p.forget(sh, now)
	s := p.shards[sh]
	if s == nil {
		return nil, time.Time{}
	}
	for id, until := range s.passed {
		ids = append(ids, id)
		if next.IsZero() || until.Before(next) {
			next = until
		}
	}
	if s.pending != "" && s.passed[s.pending].IsZero() {
		ids = append(ids, s.pending) // until its release is judged
	}
	return ids, next
}

// Pending returns the holders whose release is not judged yet: until it
// is, the leader gives them no new shard (shardplan.Assign's resting), so
// that a holder stopping gracefully — still registered for a moment — is
// not given the shards its takers took.
func (p *Pace) Pending() map[string]bool {
	out := map[string]bool{}
	for _, s := range p.shards {
		if s.pending != "" {
			out[s.pending] = true
		}
	}
	return out
}

// KeepOrder returns shards in the order a holder over its quota keeps
// them (shardplan.Assign keeps the first): those that never failed in
// this term first, in their order, then the others, the most recent
// failure last — so that when a shard that failed comes back among the
// healthy ones, its holder sheds it, not a shard that never failed.
func (p *Pace) KeepOrder(shards []string) []string {
	out := slices.Clone(shards)
	slices.SortStableFunc(out, func(a, b string) int {
		return p.failedAt[a].Compare(p.failedAt[b])
	})
	return out
}

// Streak returns the failures in a row of shard sh (0: it is healthy).
func (p *Pace) Streak(sh string) int {
	if s := p.shards[sh]; s != nil {
		return s.streak
	}
	return 0
}

// Failing returns the failures in a row of every shard with a streak.
func (p *Pace) Failing() map[string]int {
	out := map[string]int{}
	for sh, s := range p.shards {
		if s.streak > 0 {
			out[sh] = s.streak
		}
	}
	return out
}

// forget drops the cooldowns over at now, and the shard once it has
// neither a streak nor a cooldown.
func (p *Pace) forget(sh string, now time.Time) {
	s := p.shards[sh]
	if s == nil {
		return
	}
	for id, until := range s.passed {
		if !now.Before(until) {
			delete(s.passed, id)
		}
	}
	if s.streak == 0 && len(s.passed) == 0 && s.pending == "" {
		delete(p.shards, sh)
	}
}
