package relect

import (
	"cmp"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/relect/relect/internal/warden"
	"github.com/relect/relect/internal/wire"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Succession: who tries to take the lease first when it is released or
// expires. The leader names its next few successors in the Lease itself
// (wire.AnnotationSuccession), chosen from the registry by priority; every
// follower learns them from the watch it already has, and waits its turn:
// the first in line at once, each next one a succession step later, and
// everyone else after them, spread over a retry period. So a change of
// leader is one acquiring write, not one from every follower; a dead
// successor delays it by one step. The rules here are pure: they decide
// when to try, never whether a takeover is safe — that stays client-go's
// expiry rule and the conditional write.
//
// This file is succession's one home, in three parts:
//
//  1. the wire format: the two annotations a relect leader writes into the
//     election's Lease beside its record, and the registrations — one
//     small Lease per candidate beside the election's — as written and as
//     read (candidate); the registry component (internal/registry) keeps
//     them, with API calls;
//  2. the ordering: who goes first (chooseSuccessors, turn,
//     sortCandidates);
//  3. lineage: what one candidate knows of the line and, as leader, of the
//     registry, which the state holds under its mutex.

// 1. The wire format: internal/wire's, under the names this package uses.

type (
	succession = wire.Succession
	successor  = wire.Successor
	cooling    = wire.Cooling
	handOver   = wire.HandOver
)

const (
	maxSuccessors = wire.MaxSuccessors
	maxKeepers    = wire.MaxKeepers
	maxPassed     = wire.MaxPassed
)

func successionOf(l *coordinationv1.Lease) *succession { return wire.SuccessionOf(l) }
func handOverOf(l *coordinationv1.Lease) *handOver     { return wire.HandOverOf(l) }
func registrationName(lease, identity string) string   { return wire.RegistrationName(lease, identity) }

// candidate is one registration as read from the API.
type candidate struct {
	Candidate
	name string // the registration's object name
	// seconds is its lease duration: it lapses that long after its last
	// change was observed.
	seconds int
	rv      string
	// shardWeight is its ShardOptions.Weight; 0 if it takes no part.
	shardWeight int32
	shardSet    string // its wire.AnnotationShardSet; "" if none
	instance    string // its wire.AnnotationInstance
	// wards: it can be the line's warden (wire.AnnotationWards).
	wards bool
}

// candidateFrom decodes a registration; ok is false if it is not one (no
// holder: departed).
func candidateFrom(l *coordinationv1.Lease) (c candidate, ok bool) {
	r, ok := wire.RegistrationOf(l)
	if !ok {
		return c, false
	}
	return candidateOf(r), true
}

// candidateOf is a registration as read, as a candidate.
func candidateOf(r wire.Registration) candidate {
	return candidate{
		Candidate: Candidate{Identity: r.Identity, Priority: r.Priority, Standby: r.Standby, RenewedAt: r.RenewedAt},
		name:      r.Name, seconds: r.Seconds, rv: r.RV, shardWeight: r.ShardWeight,
		shardSet: r.ShardSet, instance: r.Instance, wards: r.Wards,
	}
}

// registration is this candidate's own registration object, as it wants it
// written now.
func registration(cfg *config, from *coordinationv1.Lease, now time.Time) *coordinationv1.Lease {
	l := &coordinationv1.Lease{}
	if from != nil {
		l = from.DeepCopy()
	}
	l.Namespace, l.Name = cfg.Namespace, registrationName(cfg.Name, cfg.identity)
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[wire.LabelCandidateOf] = wire.CandidateOf(cfg.Name)
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[wire.AnnotationLease] = cfg.Name
	l.Annotations[wire.AnnotationPriority] = strconv.Itoa(int(cfg.Priority))
	delete(l.Annotations, wire.AnnotationStandby)
	if cfg.Standby {
		l.Annotations[wire.AnnotationStandby] = "true"
	}
	l.Annotations[wire.AnnotationInstance] = cfg.instance
	delete(l.Annotations, wire.AnnotationWards)
	if !cfg.Standby {
		l.Annotations[wire.AnnotationWards] = "true"
	}
	delete(l.Annotations, wire.AnnotationShardWeight)
	delete(l.Annotations, wire.AnnotationShardSet)
	if cfg.shards != nil && !cfg.Standby {
		l.Annotations[wire.AnnotationShardWeight] = strconv.Itoa(int(cfg.Shards.Weight))
		l.Annotations[wire.AnnotationShardSet] = wire.EncodeShardSet(cfg.shards)
	}
	id := cfg.identity
	seconds := int32(cfg.RegistrationRenewal / time.Second * registrationLives)
	t := metav1.NewMicroTime(now)
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &id, &seconds, &t
	if l.Spec.AcquireTime == nil {
		l.Spec.AcquireTime = &t
	}
	return l
}

// 2. The ordering: who goes first.

// Candidate is a candidate for the lease as an Elector knows it
// (Elector.Candidates).
type Candidate struct {
	// Identity is the candidate's holder identity.
	Identity string
	// Priority is its Options.Priority: higher goes first in succession.
	// A follower knows the leader's and the successors' from the line of
	// succession the leader publishes; where no line says it (a plain
	// client-go leader, a leader with the registry off or nobody to name),
	// the leader's is 0.
	Priority int32
	// Standby reports that it never campaigns (Options.Standby).
	Standby bool
	// Leader reports that it holds the lease, as last observed.
	Leader bool
	// Successor is its place in the leader's line of succession: 1 for the
	// next in line, 0 if it is not in it.
	Successor int
	// RenewedAt is when its registration was last renewed, by its own
	// clock (operator.ListCandidates); zero where unknown (Elector.Candidates).
	RenewedAt time.Time
}

// chooseSuccessors returns the line of succession a leader publishes: the
// candidates that may lead (not standing by, not the leader itself), the
// highest priority first, then by identity; at most maxSuccessors.
func chooseSuccessors(cs []Candidate, leader string) []successor {
	var next []Candidate
	for _, c := range cs {
		if !c.Standby && c.Identity != leader {
			next = append(next, c)
		}
	}
	slices.SortFunc(next, func(a, b Candidate) int {
		if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
			return c
		}
		return cmp.Compare(a.Identity, b.Identity)
	})
	out := make([]successor, 0, min(len(next), maxSuccessors))
	for _, c := range next[:min(len(next), maxSuccessors)] {
		out = append(out, successor{Identity: c.Identity, Priority: c.Priority})
	}
	return out
}

// turn returns how long after l's lease becomes free — released, or
// expired — identity waits before it tries to take it: nothing if l
// carries no line of succession (a client-go leader, or the registry off:
// everyone tries at once, as before succession); its place in line times
// step if it is in it, the keepers after the successors, and the warden
// after the keepers; else, after everyone in line, a delay spread over
// two steps by a hash of its identity and the term, so that the others do
// not all try at once either. A candidate that stands back (back: its own
// work check fails, or the line has it cooling after a stuck handover)
// waits two more steps than the others outside the line: it still takes
// the lease when nobody else does.
func turn(l *coordinationv1.Lease, identity string, step time.Duration, back bool) time.Duration {
	s := successionOf(l)
	if s == nil {
		return 0
	}
	if r := s.Rank(identity); r >= 0 && !back {
		return time.Duration(r) * step
	}
	if k := s.KeeperRank(identity); k >= 0 && !back {
		return time.Duration(len(s.Next)+k) * step
	}
	if s.Warden == identity && !back {
		return time.Duration(len(s.Next)+len(s.Keepers)) * step
	}
	spread := time.Duration(keeperHash(identity, s.Term) % uint64(2*step+1))
	if back {
		spread += 2 * step
	}
	return time.Duration(len(s.Next)+len(s.Keepers))*step + spread
}

// Compare orders candidates for people (Elector.Candidates, relect
// status): the leader first, then the line of succession in order, then
// the others by priority, highest first, and identity. It returns -1, 0 or
// +1, for slices.SortFunc(cs, Candidate.Compare).
func (c Candidate) Compare(d Candidate) int {
	switch {
	case c.Leader != d.Leader:
		if c.Leader {
			return -1
		}
		return 1
	case (c.Successor == 0) != (d.Successor == 0):
		if c.Successor == 0 {
			return 1
		}
		return -1
	case c.Successor != d.Successor:
		return cmp.Compare(c.Successor, d.Successor)
	case c.Priority != d.Priority:
		return cmp.Compare(d.Priority, c.Priority)
	}
	return cmp.Compare(c.Identity, d.Identity)
}

func sortCandidates(cs []Candidate) { slices.SortFunc(cs, Candidate.Compare) }

// 3. Lineage.

// lineage is what a candidate knows of succession: the line published with
// the Lease it last observed, and, as leader, its view of the registry.
// The state holds it under its mutex.
type lineage struct {
	// line is the line of succession published with the Lease last
	// observed (nil: none), and lineAt when this candidate first observed
	// the record that carries it: its cooldowns' seconds count from there
	// (not from when they are read), as a follower's do (standsBack).
	line   *succession
	lineAt time.Time
	// handOverTo is whom the record that carried line hands over to ("":
	// it is no handover).
	handOverTo string
	// view is the leader's view of the registry, by registration name;
	// nil while it has none (not leading, or not listed yet).
	view map[string]*seenCandidate
	// off: a registry call was forbidden; no more for this Elector.
	off bool
	// lineOff: a write of the line Lease was forbidden: the lines this
	// candidate publishes are not posted (line.go); linePostedRV is the
	// line Lease's resourceVersion as this candidate last wrote it, in
	// its current term (see lineVersion).
	lineOff      bool
	linePostedRV string
	// wardenNamed is the warden this leader last named, since
	// wardenNamedSince (lineage.warden); wardenChosen whether this leader
	// chose it, rather than took it over from the line it observed.
	wardenNamed      string
	wardenNamedSince time.Time
	wardenChosen     bool
	// silentWardens are the wardens this leader replaced for not beating:
	// identity → their registration's resourceVersion then, and when. One
	// is named again only after every other candidate, until its
	// registration is seen at another version (it wrote since: it lives),
	// so that two dead registrations are not named in turn for as long as
	// they stay in view.
	silentWardens map[string]silence
	// passedOver are the successors that were in line before this
	// candidate when it acquired, and so did not take their turn: likely
	// dead. They are left out of the lines it publishes until their
	// registration is seen renewed: identity → the resourceVersion of the
	// registration first seen since ("" before).
	passedOver map[string]string
	// streak is the fleet's stuck handovers in a row, as the line of
	// succession this candidate acquired under said (internal/work); cooling the
	// candidates in their cooldown after one, until the local time given;
	// stuckRelease: this candidate is handing over for stuck work, so its
	// release publishes the streak, one longer, and its own cooldown.
	streak       int
	cooling      map[string]time.Time
	stuckRelease bool
	// sightings is when this candidate first saw each registration at its
	// current resourceVersion, by registration name, kept across terms:
	// every write changes the resourceVersion, so a registration seen at
	// the same version in a later term has not been renewed since. A
	// registration's age is judged from here, on the local clock, never
	// from the renew time its candidate stamped with its own.
	sightings map[string]sighting
}

// sighting is the first local sight of a registration at version rv.
type sighting struct {
	rv string
	at time.Time
}

// seenCandidate is a registration in the leader's view, with the local time
// its current version was first seen: it lapses lease-duration seconds
// later, unless renewed (client-go's expiry rule, on the local clock).
type seenCandidate struct {
	candidate
	seenAt time.Time
}

func (c *seenCandidate) live(now time.Time) bool {
	return now.Before(c.seenAt.Add(time.Duration(c.seconds) * time.Second))
}

// lapsedLongAgo reports whether c has been seen unchanged for twice its
// lease duration: its candidate died without deregistering.
func (c *seenCandidate) lapsedLongAgo(now time.Time) bool {
	return !now.Before(c.seenAt.Add(2 * time.Duration(c.seconds) * time.Second))
}

// listed replaces the view with a fresh list, seen at now.
func (g *lineage) listed(cs []candidate, now time.Time) {
	g.view = map[string]*seenCandidate{}
	registered := map[string]bool{}
	for _, c := range cs {
		g.view[c.name] = g.seen(c, now)
		g.renewed(c)
		registered[c.Identity] = true
	}
	// What is not listed is gone: its sighting too.
	maps.DeleteFunc(g.sightings, func(name string, _ sighting) bool { return g.view[name] == nil })
	// A passed-over candidate that is no longer registered is out of every
	// line anyway; if it registers again, it is a new process.
	maps.DeleteFunc(g.passedOver, func(id, _ string) bool { return !registered[id] })
}

// changed records a registration added or renewed, seen at now.
func (g *lineage) changed(c candidate, now time.Time) {
	seen := g.seen(c, now)
	if g.view != nil {
		g.view[c.name] = seen
	}
	g.renewed(c)
}

// gone records a registration deleted (or departed: its holder emptied).
func (g *lineage) gone(name string) {
	delete(g.view, name)
	delete(g.sightings, name)
}

// seen is c as seen at now: since its first sighting at its version
// (sightings), which it becomes if it is new.
func (g *lineage) seen(c candidate, now time.Time) *seenCandidate {
	s, ok := g.sightings[c.name]
	if !ok || s.rv != c.rv {
		if g.sightings == nil {
			g.sightings = map[string]sighting{}
		}
		s = sighting{rv: c.rv, at: now}
		g.sightings[c.name] = s
	}
	return &seenCandidate{candidate: c, seenAt: s.at}
}

// lapsedLongAgo returns, in name order, the registrations of the view seen
// unchanged for twice their lease duration at now (seenCandidate).
func (g *lineage) lapsedLongAgo(now time.Time) []candidate {
	var out []candidate
	for _, name := range slices.Sorted(maps.Keys(g.view)) {
		if c := g.view[name]; c.lapsedLongAgo(now) {
			out = append(out, c.candidate)
		}
	}
	return out
}

// acquired records, at this candidate's acquiring write, the fleet's streak
// of stuck handovers and the candidates cooling after one, as the line it
// observed carries them (internal/work), and who is likely dead (passedOver): the
// successors that were in line before it, since they did not take their
// turn (none if the record was a handover to it); the holder whose lease it took over once
// it expired (expired; "" if it was released, handed over, or missing),
// since it did not renew; and whoever the line it observed names as
// passed over already, so that a dead candidate is not put back in line by
// every new leader until its registration lapses.
func (g *lineage) acquired(identity, expired string, now time.Time) {
	g.stuckRelease, g.streak = false, 0
	maps.DeleteFunc(g.cooling, func(_ string, until time.Time) bool { return !now.Before(until) })
	if g.line != nil {
		g.streak = int(g.line.Streak)
		for _, c := range g.line.Cooling {
			if g.cooling == nil {
				g.cooling = map[string]time.Time{}
			}
			if until := g.coolingEnd(c, now); until.After(g.cooling[c.Identity]) {
				g.cooling[c.Identity] = until
			}
		}
	}
	pass := func(id string) {
		if g.passedOver == nil {
			g.passedOver = map[string]string{}
		}
		if _, ok := g.passedOver[id]; !ok && id != identity {
			g.passedOver[id] = ""
		}
	}
	if expired != "" {
		pass(expired)
	}
	if g.line == nil {
		return
	}
	r := g.line.Rank(identity)
	switch {
	case g.handOverTo == identity:
		r = 0 // handed over to: nobody in line missed a turn
	case r < 0:
		r = len(g.line.Next)
	}
	for _, c := range g.line.Next[:r] {
		pass(c.Identity)
	}
	if g.handOverTo != identity && g.line.Rank(identity) < 0 && g.line.KeeperRank(identity) < 0 {
		// Taken after the keepers' turn (by the warden, or an outsider):
		// they missed it too, as likely dead as the successors.
		for _, id := range g.line.Keepers {
			pass(id)
		}
	}
	for _, id := range g.line.Passed {
		pass(id)
	}
}

// coolingAt returns the cooldowns that have not ended at now, as this
// candidate knows them (Stats.WorkCooling): its own (cooling, kept from
// the lines it acquired under and its stuck releases) and the line
// observed's; nil when none. It changes nothing.
func (g *lineage) coolingAt(now time.Time) map[string]time.Time {
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
	for id, until := range g.cooling {
		add(id, until)
	}
	if g.line != nil {
		for _, c := range g.line.Cooling {
			add(c.Identity, g.coolingEnd(c, now))
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
func (g *lineage) coolingEnd(c cooling, now time.Time) time.Time {
	from := g.lineAt
	if from.IsZero() || from.After(now) {
		from = now
	}
	return from.Add(time.Duration(c.Seconds) * time.Second)
}

// renewed ends c's being passed over once its registration is seen
// renewed: a resourceVersion other than the first seen since.
func (g *lineage) renewed(c candidate) {
	rv, ok := g.passedOver[c.Identity]
	switch {
	case !ok:
	case rv == "":
		g.passedOver[c.Identity] = c.rv
	case rv != c.rv:
		delete(g.passedOver, c.Identity)
	}
}

// standingBy reports whether the view knows identity as standing by.
func (g *lineage) standingBy(identity string) bool {
	for _, c := range g.view {
		if c.Identity == identity && c.Standby {
			return true
		}
	}
	return false
}

// viewed returns the view's registration of identity, nil if it has none.
func (g *lineage) viewed(identity string) *seenCandidate {
	for _, c := range g.view {
		if c.Identity == identity {
			return c
		}
	}
	return nil
}

// mayLead says what the leader's view knows of identity at now: whether
// it is a live registered candidate that may lead, and whether the view is
// loaded at all (known is meaningless before).
func (g *lineage) mayLead(identity string, now time.Time) (ok, loaded bool) {
	if g.view == nil {
		return false, false
	}
	for _, c := range g.view {
		if c.Identity == identity && !c.Standby && c.live(now) {
			return true, true
		}
	}
	return false, true
}

// live returns the live candidates of the view at now.
func (g *lineage) live(now time.Time) []Candidate {
	var cs []Candidate
	for _, name := range slices.Sorted(maps.Keys(g.view)) {
		if c := g.view[name]; c.live(now) {
			cs = append(cs, c.Candidate)
		}
	}
	return cs
}

// next is the line of succession this candidate publishes with a record of
// term's leaseTransitions, leaving out the identities in except: chosen
// from the leader's view of the registry (without the passed over), or,
// before it has one, carried over from the line last observed; nil when
// nobody is known and there is no streak of stuck handovers or cooldown to
// carry (internal/work). With the registry off it names nobody, and carries the
// streak and the cooldowns all the same: they are the fleet's, not the
// registry's, and a leader that dropped them would let the next one hand
// over at once.
func (g *lineage) next(cfg *config, term int32, now time.Time, except ...string) *succession {
	registry := cfg.registry && !g.off
	streak, cools := g.published(cfg, now)
	next := slices.DeleteFunc(g.candidatesForLine(cfg, registry, now), func(c successor) bool {
		_, cool := cools[c.Identity]
		return c.Identity == cfg.identity || g.isPassedOver(c.Identity) || cool || slices.Contains(except, c.Identity)
	})
	next = next[:min(len(next), maxSuccessors)]
	if len(next) == 0 && streak == 0 && len(cools) == 0 {
		return nil
	}
	s := &succession{Term: term, From: cfg.identity, Priority: cfg.Priority, Next: next, Streak: int32(streak)}
	if registry {
		s.Keepers = g.keepers(cfg, term, now, next, except)
		s.Posted = cfg.leases != nil && !g.lineOff && len(next) > 0 && g.outsiders(cfg, s, now)
		s.LineVersion = g.lineVersion()
		if s.Posted {
			// No line is posted without a warden: with nobody outside
			// the line reading the election's Lease, a line gone at once
			// would leave the fleet waiting for the line Lease to go
			// stale. Every candidate then watches, as in a small fleet.
			s.Warden = g.warden(cfg, term, now, s, except)
			s.Posted = s.Warden != ""
		}
	}
	for _, id := range slices.Sorted(maps.Keys(g.passedOver)) {
		if len(s.Passed) == maxPassed || !registry { // without the registry, nobody is named, passed over or not
			break
		}
		s.Passed = append(s.Passed, id)
	}
	for _, id := range slices.Sorted(maps.Keys(cools)) {
		if len(s.Cooling) == maxPassed {
			break
		}
		left := int32((cools[id].Sub(now) + time.Second - 1) / time.Second)
		s.Cooling = append(s.Cooling, cooling{Identity: id, Seconds: left})
	}
	return s
}

// keepers are the keepers that next names beside the successors next:
// from the leader's view, the live candidates that may lead and that next
// could name but does not (neither this candidate, the passed over, the
// cooling nor the excepted), the one whose identity hashed with the term
// is lowest first — chosen apart from priority, so that they are not the
// successors' likeliest peers (the same kind of node, the same zone) —
// after the keepers of the line observed that still qualify, which are
// all it names before a view.
func (g *lineage) keepers(cfg *config, term int32, now time.Time, next []successor, except []string) []string {
	skip := func(id string) bool {
		_, cool := g.cooling[id]
		return id == cfg.identity || g.isPassedOver(id) || cool || slices.Contains(except, id) ||
			slices.ContainsFunc(next, func(c successor) bool { return c.Identity == id })
	}
	var kept []string // the line observed's keepers, if they still qualify
	if g.line != nil {
		kept = slices.DeleteFunc(slices.Clone(g.line.Keepers), skip)
	}
	if g.view == nil {
		return kept[:min(len(kept), maxKeepers)]
	}
	var ids []string
	for _, c := range g.live(now) {
		if !c.Standby && !skip(c.Identity) {
			ids = append(ids, c.Identity)
		}
	}
	// A keeper stays one while it qualifies, so that a change of leader
	// or line does not move the watch to another candidate.
	rank := func(id string) int {
		if slices.Contains(kept, id) {
			return 0
		}
		return 1
	}
	slices.SortFunc(ids, func(a, b string) int {
		if c := cmp.Compare(rank(a), rank(b)); c != 0 {
			return c
		}
		return cmp.Compare(keeperHash(a, term), keeperHash(b, term))
	})
	return ids[:min(len(ids), maxKeepers)]
}

// warden is the warden that s, a line to be posted, names (wire.Succession.Warden):
// from the leader's view, a live candidate that can ward (it registered
// so: wire.AnnotationWards) and may lead, and that s does not name
// (neither this candidate, the passed over, the cooling nor the excepted):
// the line observed's warden while it qualifies and beats (wardenBeats),
// else the first by wardenBefore. Before a view, the line observed's, if
// it qualifies. "" if there is none. It records whom it named, and when
// (wardenNamed): a warden that stops beating — crashed, or cut off from
// the Lease API — is replaced within wardenLapse.
func (g *lineage) warden(cfg *config, term int32, now time.Time, s *succession, except []string) string {
	qualifies := func(id string) bool {
		_, cool := g.cooling[id]
		return id != "" && id != cfg.identity && !g.isPassedOver(id) && !cool && !slices.Contains(except, id) && !s.Names(id)
	}
	var kept string
	if g.line != nil && qualifies(g.line.Warden) {
		kept = g.line.Warden
	}
	if g.view == nil {
		return kept
	}
	if c := g.viewed(kept); c != nil && c.wards && !c.Standby && c.live(now) {
		if g.wardenBeats(cfg, c, now) {
			return kept
		}
		g.silenced(c, now)
	}
	var best *seenCandidate
	for _, c := range g.view {
		if c.wards && !c.Standby && c.live(now) && qualifies(c.Identity) && c.Identity != kept &&
			(best == nil || g.wardenBefore(c, best, term)) {
			best = c
		}
	}
	if best == nil {
		return ""
	}
	g.wardenNamed, g.wardenNamedSince, g.wardenChosen = best.Identity, now, true
	return best.Identity
}

// silence is when a warden was replaced for not beating, and its
// registration's resourceVersion then.
type silence struct {
	rv string
	at time.Time
}

// silenced records c, the warden of the line observed, as replaced for not
// beating at now (once per version of its registration), and forgets the
// wardens so recorded that left the view.
func (g *lineage) silenced(c *seenCandidate, now time.Time) {
	if g.silentWardens == nil {
		g.silentWardens = map[string]silence{}
	}
	for id := range g.silentWardens {
		if g.viewed(id) == nil {
			delete(g.silentWardens, id)
		}
	}
	if sl, ok := g.silentWardens[c.Identity]; !ok || sl.rv != c.rv {
		g.silentWardens[c.Identity] = silence{rv: c.rv, at: now}
	}
}

// silentSince returns when c was replaced as the warden for not beating,
// if it has not written its registration since (else zero).
func (g *lineage) silentSince(c *seenCandidate) time.Time {
	sl, ok := g.silentWardens[c.Identity]
	if ok && sl.rv != c.rv {
		delete(g.silentWardens, c.Identity)
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
func (g *lineage) wardenBefore(a, b *seenCandidate, term int32) bool {
	sa, sb := g.silentSince(a), g.silentSince(b)
	if !sa.Equal(sb) {
		return sa.IsZero() || (!sb.IsZero() && sa.Before(sb))
	}
	if !a.RenewedAt.Equal(b.RenewedAt) {
		return a.RenewedAt.After(b.RenewedAt)
	}
	return keeperHash(a.Identity, term) < keeperHash(b.Identity, term)
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
func (g *lineage) wardenBeats(cfg *config, c *seenCandidate, now time.Time) bool {
	if g.wardenNamed != c.Identity {
		g.wardenNamed, g.wardenNamedSince, g.wardenChosen = c.Identity, now, false
	}
	lapse := wardenLapse(cfg)
	switch {
	case g.wardenChosen:
		return now.Sub(g.wardenNamedSince) < lapse || now.Sub(c.seenAt) < lapse
	case now.Sub(c.seenAt) >= lapse:
		return false
	}
	return c.RenewedAt.IsZero() || now.Sub(c.RenewedAt) < lapse
}

// wardenLapse is how long a warden may go without a renewal of its
// registration the leader sees before the leader names another: three
// beats (warden.Beat).
func wardenLapse(cfg *config) time.Duration { return 3 * warden.Beat(cfg.LeaseDuration) }

// minOutsiders is how many candidates a line must leave out for it to be
// posted: as many as a line names (successors and keepers). In a smaller
// fleet the watches it would save cost less than the line Lease's writes
// and the joins and leaves around a change of leader, so a fleet of up to
// 2 × (MaxSuccessors + MaxKeepers) candidates posts no line, and every
// candidate watches the election's Lease.
const minOutsiders = maxSuccessors + maxKeepers

// lineVersion is the line Lease's resourceVersion that the lines this
// candidate publishes carry (wire.Succession.LineVersion): as it last wrote
// it in its term, or as the line observed says.
func (g *lineage) lineVersion() string {
	if g.linePostedRV != "" {
		return g.linePostedRV
	}
	if g.line != nil {
		return g.line.LineVersion
	}
	return ""
}

// outsiders reports whether a line s leaves enough candidates out to be
// posted (minOutsiders): live registered candidates of the view, standing
// by or not, that s names neither as successor nor as keeper; before a
// view, whether the line observed was posted.
func (g *lineage) outsiders(cfg *config, s *succession, now time.Time) bool {
	if g.view == nil {
		return g.line != nil && g.line.Posted
	}
	n := 0
	for _, c := range g.live(now) {
		if c.Identity != cfg.identity && !s.Names(c.Identity) {
			n++
		}
	}
	return n >= minOutsiders
}

// keeperHash orders the candidates for keeper in a term.
func keeperHash(identity string, term int32) uint64 {
	h := fnv.New64a()
	h.Write([]byte(identity))
	h.Write([]byte{byte(term), byte(term >> 8), byte(term >> 16), byte(term >> 24)})
	return h.Sum64()
}

// isPassedOver reports whether id is passed over (passedOver).
func (g *lineage) isPassedOver(id string) bool {
	_, ok := g.passedOver[id]
	return ok
}

// candidatesForLine are who next may name, before it leaves out this
// candidate, the passed over, the cooling and the excepted: chosen from
// the leader's view of the registry, or, before it has one, carried over
// from the line last observed; none with the registry off.
func (g *lineage) candidatesForLine(cfg *config, registry bool, now time.Time) []successor {
	switch {
	case !registry:
		return nil
	case g.view != nil:
		live := slices.DeleteFunc(g.live(now), func(c Candidate) bool { return g.isPassedOver(c.Identity) })
		return chooseSuccessors(live, cfg.identity)
	case g.line != nil:
		// Before its own list: the line it took over, and behind it the
		// leader that published it — alive, since it released or handed
		// over (one whose lease expired is passed over). So a chain of
		// short terms, none of which lives to list the registry, does not
		// wear the line down to nobody.
		next := slices.Clone(g.line.Next)
		if from := g.line.From; from != "" && !slices.ContainsFunc(next, func(c successor) bool { return c.Identity == from }) {
			next = append(next, successor{Identity: from, Priority: g.line.Priority})
		}
		return next[:min(len(next), maxSuccessors+1)] // cut to maxSuccessors once this one is out
	}
	return nil
}

// published is the streak and the cooldowns (identity → local end, none
// ended at now) that a line this candidate writes at now carries: its own
// (cooling, with its stuck release's streak one longer), and, on an
// acquiring write, those of the line it observed, another leader's, which
// acquired takes once the write is done: a term that ends before its
// first renewal — its renewals fail, say — does not drop them, and the
// next leader must hold as this one had to. It changes nothing.
func (g *lineage) published(cfg *config, now time.Time) (streak int, cools map[string]time.Time) {
	streak = g.streak
	if g.stuckRelease {
		streak++
	}
	cools = map[string]time.Time{}
	for id, until := range g.cooling {
		if now.Before(until) {
			cools[id] = until
		}
	}
	if l := g.line; l != nil && l.From != cfg.identity && (l.Streak > 0 || len(l.Cooling) > 0) {
		streak = max(streak, int(l.Streak))
		for _, c := range l.Cooling {
			if until := g.coolingEnd(c, now); c.Seconds > 0 && now.Before(until) && until.After(cools[c.Identity]) {
				cools[c.Identity] = until
			}
		}
	}
	return streak, cools
}

// stuckReleasing records that this candidate hands over for stuck work at
// now: the release's line publishes the streak one longer, and this
// candidate cooling for the cooldown of that streak (WorkOptions).
func (g *lineage) stuckReleasing(cfg *config, now time.Time) {
	g.stuckRelease = true
	if g.cooling == nil {
		g.cooling = map[string]time.Time{}
	}
	g.cooling[cfg.identity] = now.Add(cfg.Work.cooldown(g.streak + 1)) // work.Options.CooldownOf
}

// someoneElse reports whether a candidate other than this one is known who
// may take the lease over: one the leader's view has live and able to lead
// (cooling ones too), or, without a view, one the line names; or anyone,
// when the registry is off (followers race for a released lease).
func (g *lineage) someoneElse(cfg *config, now time.Time) bool {
	if !cfg.registry || g.off {
		return true
	}
	if g.view == nil {
		return g.line != nil && slices.ContainsFunc(g.line.Next, func(c successor) bool { return c.Identity != cfg.identity })
	}
	return slices.ContainsFunc(g.live(now), func(c Candidate) bool { return c.Identity != cfg.identity && !c.Standby })
}

// known returns the candidates as this candidate, self, knows them with
// leader the holder observed: the leader's view of the registry, or, on a
// follower, itself, the leader and the line of succession last observed;
// sorted (sortCandidates).
func (g *lineage) known(cfg *config, self Candidate, leader string, now time.Time) []Candidate {
	byID := map[string]Candidate{}
	add := func(c Candidate) {
		if _, ok := byID[c.Identity]; !ok && c.Identity != "" {
			byID[c.Identity] = c
		}
	}
	for _, c := range g.live(now) {
		add(c)
	}
	if g.line != nil {
		for _, c := range g.line.Next {
			add(Candidate{Identity: c.Identity, Priority: c.Priority})
		}
	}
	add(self)
	leaderPriority := int32(0)
	if g.line != nil {
		leaderPriority = g.line.Priority // the line is the holder's: bound to its record's term
	}
	add(Candidate{Identity: leader, Priority: leaderPriority})
	line := g.line
	if g.view != nil && leader == self.Identity {
		line = g.next(cfg, 0, now)
	}
	out := make([]Candidate, 0, len(byID))
	for _, c := range byID {
		c.Leader = c.Identity == leader
		c.Successor = line.Rank(c.Identity) + 1
		out = append(out, c)
	}
	sortCandidates(out)
	return out
}
