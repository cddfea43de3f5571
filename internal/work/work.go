// Package work is relect's work liveness component (docs/design.md,
// "Stuck work", and the architecture's "The work liveness component"): a
// leader whose work is stuck — no beat within BeatWindow, or the user's
// check failing CheckFailures times in a row — ends its term and hands the
// lease to the line of succession, unless it must hold (the fleet's streak
// of stuck handovers) or nobody else is known to take over.
//
// It holds the checks (RunChecks), the beats (Beats), the check's failing
// streak, the cooldowns' rule (Doubling, shared with the shards' pacing,
// internal/shardpace), and the stuck handover decision (Liveness). It
// knows the election core only through its port: Port, and Leader for a
// leading term. It never imports the root package; the root package
// imports it.
package work

import (
	"context"
	"errors"
	"time"
)

// ErrStuck is relect.ErrWorkStuck: the leader's work is stuck.
var ErrStuck = errors.New("relect: the leader's work is stuck")

// Options are relect.WorkOptions with their defaults applied (the root
// package resolves and validates them); the fields mean what
// WorkOptions' do. The zero value is work liveness off.
type Options struct {
	BeatWindow    time.Duration
	Check         func(ctx context.Context) error
	CheckInterval time.Duration
	CheckTimeout  time.Duration
	CheckFailures int
	Cooldown      time.Duration
	MaxCooldown   time.Duration
}

// Enabled reports whether o asks for work liveness at all.
func (o Options) Enabled() bool { return o.BeatWindow > 0 || o.Check != nil }

// CooldownOf is the cooldown of the k-th stuck handover in a row (k ≥ 1):
// Cooldown × 2^(k−1), at most MaxCooldown; zero for k < 1.
func (o Options) CooldownOf(k int) time.Duration { return Doubling(o.Cooldown, o.MaxCooldown, k) }

// judge is the time it takes to judge work stuck: BeatWindow, or
// CheckFailures × CheckInterval + CheckTimeout, whichever is longer.
func (o Options) judge() time.Duration {
	judge := o.BeatWindow
	if o.Check != nil {
		judge = max(judge, o.CheckInterval*time.Duration(o.CheckFailures)+o.CheckTimeout)
	}
	return judge
}

// Doubling returns the cooldown of the k-th failure in a row (k ≥ 1):
// base × 2^(k−1), at most max; zero for k < 1. It is the one rule of
// relect's cooldowns: a stuck leader's (Options.CooldownOf), and a
// failing shard's (internal/shardpace).
func Doubling(base, max time.Duration, k int) time.Duration {
	if k < 1 {
		return 0
	}
	d := base
	for i := 1; i < k && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}
