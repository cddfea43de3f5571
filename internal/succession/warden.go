package succession

import (
	"slices"
	"time"

	"github.com/relect/relect/internal/wire"
)

// warden is the warden that s, a line to be posted, names
// (wire.Succession.Warden): from the leader's view, a live candidate that
// can ward (it registered so: wire.AnnotationWards) and may lead, and that
// s does not name (neither this candidate, the passed over, the cooling
// nor the excepted): the line observed's warden while it qualifies and
// beats (wardenBeats), else the first by wardenBefore. Before a view, the
// line observed's, if it qualifies. "" if there is none. It records whom
// it named, and when (wardenNamed): a warden that stops beating — crashed,
// or cut off from the Lease API — is replaced within wardenLapse.
func (b *Book) warden(term int32, now time.Time, s *wire.Succession, except []string) string {
	qualifies := func(id string) bool {
		_, cool := b.cooling[id]
		return id != "" && id != b.cfg.Identity && !b.isPassedOver(id) && !cool && !slices.Contains(except, id) && !s.Names(id)
	}
	var kept string
	if b.line != nil && qualifies(b.line.Warden) {
		kept = b.line.Warden
	}
	if b.view == nil {
		return kept
	}
	if c := b.Viewed(kept); c != nil && c.Wards && !c.Standby && c.Live(now) {
		if b.wardenBeats(c, now) {
			return kept
		}
		b.silenced(c, now)
	}
	var best *Seen
	for _, c := range b.view {
		if c.Wards && !c.Standby && c.Live(now) && qualifies(c.Identity) && c.Identity != kept &&
			(best == nil || b.wardenBefore(c, best, term)) {
			best = c
		}
	}
	if best == nil {
		return ""
	}
	b.wardenNamed, b.wardenNamedSince, b.wardenChosen = best.Identity, now, true
	return best.Identity
}

// silenced records c, the warden of the line observed, as replaced for not
// beating at now (once per version of its registration), and forgets the
// wardens so recorded that left the view.
func (b *Book) silenced(c *Seen, now time.Time) {
	if b.silentWardens == nil {
		b.silentWardens = map[string]silence{}
	}
	for id := range b.silentWardens {
		if b.Viewed(id) == nil {
			delete(b.silentWardens, id)
		}
	}
	if sl, ok := b.silentWardens[c.Identity]; !ok || sl.rv != c.RV {
		b.silentWardens[c.Identity] = silence{rv: c.RV, at: now}
	}
}

// silentSince returns when c was replaced as the warden for not beating,
// if it has not written its registration since (else zero).
func (b *Book) silentSince(c *Seen) time.Time {
	sl, ok := b.silentWardens[c.Identity]
	if ok && sl.rv != c.RV {
		delete(b.silentWardens, c.Identity)
		return time.Time{}
	}
	return sl.at
}

// wardenBefore orders the candidates a leader may name its warden: one
// not replaced for silence since it last wrote its registration before
// one that was (the one replaced longest ago first), then the one whose
// registration was renewed last (by renewTime, its own clock: the one
// most recently known alive), then by identity hashed with the term,
// apart from priority, as the keeper is.
func (b *Book) wardenBefore(x, y *Seen, term int32) bool {
	sx, sy := b.silentSince(x), b.silentSince(y)
	if !sx.Equal(sy) {
		return sx.IsZero() || (!sy.IsZero() && sx.Before(sy))
	}
	if !x.RenewedAt.Equal(y.RenewedAt) {
		return x.RenewedAt.After(y.RenewedAt)
	}
	return keeperHash(x.Identity, term) < keeperHash(y.Identity, term)
}

// wardenBeats reports whether c, the warden of the line observed, beats:
// named by this leader within lapse (its time to read and beat once), or
// its registration renewed within lapse. A renewal counts when this
// leader saw the registration change (on its own clock); for a warden it
// took over from the line observed, only if the registration's renewTime
// (the warden's clock) is within lapse too. A new leader's view sees every
// registration anew at its start, and without renewTime a warden that had
// stopped beating before would get a fresh lapse from each new leader and
// stay named through a change of leader — the very time the line may all
// be gone (the simulation's seed 11587). A warden whose clock lags by most
// of a lapse may be replaced once by a new leader; that costs one line
// write, not safety. (A newly named warden beats at its first read, but
// the leader waits a lapse for it all the same: a warden that cannot read
// the line Lease — shed by the apiserver — never learns it is named, and a
// shorter wait would change wardens, and bring the shed followers back
// together, more often under that very load: TestShedLineReadsAreSpread.)
func (b *Book) wardenBeats(c *Seen, now time.Time) bool {
	if b.wardenNamed != c.Identity {
		b.wardenNamed, b.wardenNamedSince, b.wardenChosen = c.Identity, now, false
	}
	lapse := wardenLapse(b.cfg.LeaseDuration)
	switch {
	case b.wardenChosen:
		return now.Sub(b.wardenNamedSince) < lapse || now.Sub(c.SeenAt) < lapse
	case now.Sub(c.SeenAt) >= lapse:
		return false
	}
	return c.RenewedAt.IsZero() || now.Sub(c.RenewedAt) < lapse
}
