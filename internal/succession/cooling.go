package succession

import (
	"maps"
	"time"

	"github.com/relect/relect/internal/wire"
)

// Acquired records, at this candidate's acquiring write at now, the
// fleet's streak of stuck handovers and the candidates cooling after one,
// as the line it observed carries them (internal/work), and who is likely
// dead (passedOver): the successors that were in line before it, since
// they did not take their turn (none if the record was a handover to it);
// the holder whose lease it took over once it expired (expired; "" if it
// was released, handed over, or missing), since it did not renew; and
// whoever the line it observed names as passed over already, so that a
// dead candidate is not put back in line by every new leader until its
// registration lapses.
func (b *Book) Acquired(expired string, now time.Time) {
	b.stuckRelease, b.streak = false, 0
	maps.DeleteFunc(b.cooling, func(_ string, until time.Time) bool { return !now.Before(until) })
	if b.line != nil {
		b.streak = int(b.line.Streak)
		for _, c := range b.line.Cooling {
			if b.cooling == nil {
				b.cooling = map[string]time.Time{}
			}
			if until := b.coolingEnd(c, now); until.After(b.cooling[c.Identity]) {
				b.cooling[c.Identity] = until
			}
		}
	}
	if expired != "" {
		b.pass(expired)
	}
	if b.line != nil {
		b.passLine()
	}
}

// pass records id as passed over, unless it is this candidate or is
// already.
func (b *Book) pass(id string) {
	if b.passedOver == nil {
		b.passedOver = map[string]string{}
	}
	if _, ok := b.passedOver[id]; !ok && id != b.cfg.Identity {
		b.passedOver[id] = ""
	}
}

// passLine passes over, at an acquisition, whom the line observed had
// before this candidate, and whom it names as passed over (Acquired).
func (b *Book) passLine() {
	identity := b.cfg.Identity
	r := b.line.Rank(identity)
	switch {
	case b.handOverTo == identity:
		r = 0 // handed over to: nobody in line missed a turn
	case r < 0:
		r = len(b.line.Next)
	}
	for _, c := range b.line.Next[:r] {
		b.pass(c.Identity)
	}
	if b.handOverTo != identity && b.line.Rank(identity) < 0 && b.line.KeeperRank(identity) < 0 {
		// Taken after the keepers' turn (by the warden, or an outsider):
		// they missed it too, as likely dead as the successors.
		for _, id := range b.line.Keepers {
			b.pass(id)
		}
	}
	for _, id := range b.line.Passed {
		b.pass(id)
	}
}

// CoolingAt returns the cooldowns that have not ended at now, as this
// candidate knows them (relect's Stats.WorkCooling): its own (cooling, kept
// from the lines it acquired under and its stuck releases) and the line
// observed's; nil when none. It changes nothing.
func (b *Book) CoolingAt(now time.Time) map[string]time.Time {
	var out map[string]time.Time
	add := func(id string, until time.Time) {
		if !until.After(now) || !until.After(out[id]) {
			return
		}
		if out == nil {
			out = map[string]time.Time{}
		}
		out[id] = until
	}
	for id, until := range b.cooling {
		add(id, until)
	}
	if b.line != nil {
		for _, c := range b.line.Cooling {
			add(c.Identity, b.coolingEnd(c, now))
		}
	}
	return out
}

// coolingEnd is when c, a cooldown of the line observed, ends on the local
// clock: its seconds counted from when the record carrying them was first
// observed (lineAt; now if unknown). One clock rule for every candidate,
// the next leader included: counted from its acquisition instead, every
// takeover by expiry during a cooldown would lengthen it by up to a lease
// duration.
func (b *Book) coolingEnd(c wire.Cooling, now time.Time) time.Time {
	from := b.lineAt
	if from.IsZero() || from.After(now) {
		from = now
	}
	return from.Add(time.Duration(c.Seconds) * time.Second)
}

// published is the streak and the cooldowns (identity → local end, none
// ended at now) that a line this candidate writes at now carries: its own
// (cooling, with its stuck release's streak one longer), and, on an
// acquiring write, those of the line it observed, another leader's, which
// Acquired takes once the write is done: a term that ends before its
// first renewal — its renewals fail, say — does not drop them, and the
// next leader must hold as this one had to. It changes nothing.
func (b *Book) published(now time.Time) (streak int, cools map[string]time.Time) {
	streak = b.streak
	if b.stuckRelease {
		streak++
	}
	cools = map[string]time.Time{}
	for id, until := range b.cooling {
		if now.Before(until) {
			cools[id] = until
		}
	}
	if l := b.line; l != nil && l.From != b.cfg.Identity && (l.Streak > 0 || len(l.Cooling) > 0) {
		streak = max(streak, int(l.Streak))
		for _, c := range l.Cooling {
			if until := b.coolingEnd(c, now); c.Seconds > 0 && now.Before(until) && until.After(cools[c.Identity]) {
				cools[c.Identity] = until
			}
		}
	}
	return streak, cools
}

// StuckReleasing records that this candidate hands over for stuck work at
// now: the release's line publishes the streak one longer, and this
// candidate cooling for the cooldown of that streak (Config.Cooldown).
func (b *Book) StuckReleasing(now time.Time) {
	b.stuckRelease = true
	if b.cooling == nil {
		b.cooling = map[string]time.Time{}
	}
	b.cooling[b.cfg.Identity] = now.Add(b.cfg.Cooldown(b.streak + 1))
}
