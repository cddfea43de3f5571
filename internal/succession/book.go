package succession

import (
	"iter"
	"maps"
	"slices"
	"time"

	"github.com/relect/relect/internal/wire"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// Config is what the component reads of the Elector's configuration: the
// port on the core's side, built once from the resolved options. The
// Book reads it, and Config.Registration writes this candidate's
// registration from it.
type Config struct {
	// Identity is this candidate's holder identity.
	Identity string
	// Priority is its Options.Priority, published with its lines and
	// written in its registration.
	Priority int32
	// LeaseDuration is the election's: a warden that the leader has not
	// seen renew its registration for three warden beats of it
	// (warden.Beat) is replaced.
	LeaseDuration time.Duration
	// Registry: this candidate registers, and names successors as leader.
	// Without it, its lines name nobody.
	Registry bool
	// Posts: the line Lease may be posted (the core has a Leases client);
	// without it, no line says Posted.
	Posts bool
	// Cooldown is how long a candidate cools after the k-th stuck handover
	// in a row (work.Options.CooldownOf). Required.
	Cooldown func(k int) time.Duration

	// What the registration carries (Config.Registration). Namespace and
	// Lease are the election Lease's; Standby is Options.Standby;
	// Instance names this Elector (another process with the same
	// identity has another); RegistrationSeconds is the registration's
	// lease duration, in seconds. ShardWeight and ShardSet
	// (wire.EncodeShardSet) are its shards' weight and names, "" when it
	// has no shards.
	Namespace, Lease    string
	Standby             bool
	Instance            string
	RegistrationSeconds int32
	ShardWeight         int32
	ShardSet            string
}

// Book is what one candidate knows of succession: the line published with
// the Lease it last observed, and, as leader, its view of the registry.
// Create it with New. A Book is not safe for concurrent use: the core
// holds it under its state's mutex.
type Book struct {
	cfg Config
	// line is the line of succession published with the Lease last
	// observed (nil: none), and lineAt when this candidate first observed
	// the record that carries it: its cooldowns' seconds count from there
	// (not from when they are read), as a follower's do (standsBack).
	line   *wire.Succession
	lineAt time.Time
	// handOverTo is whom the record that carried line hands over to ("":
	// it is no handover).
	handOverTo string
	// view is the leader's view of the registry, by registration name;
	// nil while it has none (not leading, or not listed yet).
	view map[string]*Seen
	// off: a registry call was forbidden; no more for this Elector.
	off bool
	// lineOff: a write of the line Lease was forbidden: the lines this
	// candidate publishes are not posted; linePostedRV is the line
	// Lease's resourceVersion as this candidate last wrote it, in its
	// current term (see LineVersion).
	lineOff      bool
	linePostedRV string
	// wardenNamed is the warden this leader last named, since
	// wardenNamedSince (Book.warden); wardenChosen whether this leader
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
	// succession this candidate acquired under said (internal/work);
	// cooling the candidates in their cooldown after one, until the local
	// time given; stuckRelease: this candidate is handing over for stuck
	// work, so its release publishes the streak, one longer, and its own
	// cooldown.
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

// New returns the Book of a candidate configured by cfg, which knows no
// line and has no view.
func New(cfg Config) *Book { return &Book{cfg: cfg} }

// Observe records l, the election's Lease as observed, first at at: the
// line of succession it carries (none without one), and whom it hands
// over to.
func (b *Book) Observe(l *coordinationv1.Lease, at time.Time) {
	b.line, b.lineAt = wire.SuccessionOf(l), at
	b.handOverTo = ""
	if h := wire.HandOverOf(l); h != nil {
		b.handOverTo = h.To
	}
}

// ObserveLine records line, read from the line Lease at at, as the line
// observed.
func (b *Book) ObserveLine(line *wire.Succession, at time.Time) { b.line, b.lineAt = line, at }

// Line returns the line of succession last observed; nil if none.
func (b *Book) Line() *wire.Succession { return b.line }

// RegistryOff reports whether the registry was turned off (TurnRegistryOff).
func (b *Book) RegistryOff() bool { return b.off }

// TurnRegistryOff records that a registry call was forbidden: no more for
// this Elector, and its lines name nobody.
func (b *Book) TurnRegistryOff() { b.off = true }

// LineOff reports whether posting the line Lease was turned off.
func (b *Book) LineOff() bool { return b.lineOff }

// TurnLineOff records that a write of the line Lease was forbidden: the
// lines this candidate publishes from now on do not say Posted.
func (b *Book) TurnLineOff() { b.lineOff = true }

// LinePosted records the line Lease's resourceVersion after this leader
// wrote it ("" at the end of its term): the lines it publishes carry it
// (LineVersion).
func (b *Book) LinePosted(rv string) { b.linePostedRV = rv }

// LineVersion is the line Lease's resourceVersion that the lines this
// candidate publishes carry (wire.Succession.LineVersion): as it last wrote
// it in its term, or as the line observed says.
func (b *Book) LineVersion() string {
	if b.linePostedRV != "" {
		return b.linePostedRV
	}
	if b.line != nil {
		return b.line.LineVersion
	}
	return ""
}

// Streak returns the fleet's stuck handovers in a row, as the line this
// candidate acquired under said.
func (b *Book) Streak() int { return b.streak }

// EndStreak ends the streak: the work of this leader's term is healthy.
func (b *Book) EndStreak() { b.streak = 0 }

// HasView reports whether the leader has a view of the registry (it listed
// it in its term).
func (b *Book) HasView() bool { return b.view != nil }

// DropView drops the leader's view: the term ended. When each registration
// was first seen at its version is kept (sightings).
func (b *Book) DropView() { b.view = nil }

// View returns the registrations of the leader's view, in no order; none
// without a view.
func (b *Book) View() iter.Seq[*Seen] { return maps.Values(b.view) }

// Listed replaces the view with a fresh list, seen at now.
func (b *Book) Listed(rs []Registration, now time.Time) {
	b.view = map[string]*Seen{}
	registered := map[string]bool{}
	for _, r := range rs {
		b.view[r.Name] = b.seen(r, now)
		b.renewed(r)
		registered[r.Identity] = true
	}
	// What is not listed is gone: its sighting too.
	maps.DeleteFunc(b.sightings, func(name string, _ sighting) bool { return b.view[name] == nil })
	// A passed-over candidate that is no longer registered is out of every
	// line anyway; if it registers again, it is a new process.
	maps.DeleteFunc(b.passedOver, func(id, _ string) bool { return !registered[id] })
}

// Changed records a registration added or renewed, seen at now.
func (b *Book) Changed(r Registration, now time.Time) {
	seen := b.seen(r, now)
	if b.view != nil {
		b.view[r.Name] = seen
	}
	b.renewed(r)
}

// Gone records a registration, by name, deleted (or departed: its holder
// emptied).
func (b *Book) Gone(name string) {
	delete(b.view, name)
	delete(b.sightings, name)
}

// seen is r as seen at now: since its first sighting at its version
// (sightings), which it becomes if it is new.
func (b *Book) seen(r Registration, now time.Time) *Seen {
	s, ok := b.sightings[r.Name]
	if !ok || s.rv != r.RV {
		if b.sightings == nil {
			b.sightings = map[string]sighting{}
		}
		s = sighting{rv: r.RV, at: now}
		b.sightings[r.Name] = s
	}
	return &Seen{Registration: r, SeenAt: s.at}
}

// renewed ends r's being passed over once its registration is seen
// renewed: a resourceVersion other than the first seen since.
func (b *Book) renewed(r Registration) {
	rv, ok := b.passedOver[r.Identity]
	switch {
	case !ok:
	case rv == "":
		b.passedOver[r.Identity] = r.RV
	case rv != r.RV:
		delete(b.passedOver, r.Identity)
	}
}

// LapsedLongAgo returns, in name order, the registrations of the view seen
// unchanged for twice their lease duration at now: their candidates died
// without deregistering.
func (b *Book) LapsedLongAgo(now time.Time) []Registration {
	var out []Registration
	for _, name := range slices.Sorted(maps.Keys(b.view)) {
		if c := b.view[name]; c.lapsedLongAgo(now) {
			out = append(out, c.Registration)
		}
	}
	return out
}

// StandingBy reports whether the view knows identity as standing by.
func (b *Book) StandingBy(identity string) bool {
	for _, c := range b.view {
		if c.Identity == identity && c.Standby {
			return true
		}
	}
	return false
}

// Viewed returns the view's registration of identity, nil if it has none.
func (b *Book) Viewed(identity string) *Seen {
	for _, c := range b.view {
		if c.Identity == identity {
			return c
		}
	}
	return nil
}

// MayLead says what the leader's view knows of identity at now: whether
// it is a live registered candidate that may lead, and whether the view is
// loaded at all (ok is meaningless before).
func (b *Book) MayLead(identity string, now time.Time) (ok, loaded bool) {
	if b.view == nil {
		return false, false
	}
	for _, c := range b.view {
		if c.Identity == identity && !c.Standby && c.Live(now) {
			return true, true
		}
	}
	return false, true
}

// live returns the live candidates of the view at now, in registration
// name order.
func (b *Book) live(now time.Time) []Candidate {
	var cs []Candidate
	for _, name := range slices.Sorted(maps.Keys(b.view)) {
		if c := b.view[name]; c.Live(now) {
			cs = append(cs, c.Candidate)
		}
	}
	return cs
}

// isPassedOver reports whether id is passed over (passedOver).
func (b *Book) isPassedOver(id string) bool {
	_, ok := b.passedOver[id]
	return ok
}

// SomeoneElse reports whether a candidate other than this one is known who
// may take the lease over: one the leader's view has live and able to lead
// (cooling ones too), or, without a view, one the line names; or anyone,
// when the registry is off (followers race for a released lease).
func (b *Book) SomeoneElse(now time.Time) bool {
	if !b.cfg.Registry || b.off {
		return true
	}
	if b.view == nil {
		return b.line != nil && slices.ContainsFunc(b.line.Next, func(c wire.Successor) bool { return c.Identity != b.cfg.Identity })
	}
	return slices.ContainsFunc(b.live(now), func(c Candidate) bool { return c.Identity != b.cfg.Identity && !c.Standby })
}

// Known returns the candidates as this candidate, self, knows them with
// leader the holder observed: the leader's view of the registry, or, on a
// follower, itself, the leader and the line of succession last observed;
// sorted by Compare.
func (b *Book) Known(self Candidate, leader string, now time.Time) []Candidate {
	byID := map[string]Candidate{}
	add := func(c Candidate) {
		if _, ok := byID[c.Identity]; !ok && c.Identity != "" {
			byID[c.Identity] = c
		}
	}
	for _, c := range b.live(now) {
		add(c)
	}
	if b.line != nil {
		for _, c := range b.line.Next {
			add(Candidate{Identity: c.Identity, Priority: c.Priority})
		}
	}
	add(self)
	leaderPriority := int32(0)
	if b.line != nil {
		leaderPriority = b.line.Priority // the line is the holder's: bound to its record's term
	}
	add(Candidate{Identity: leader, Priority: leaderPriority})
	line := b.line
	if b.view != nil && leader == self.Identity {
		line = b.Next(0, now)
	}
	out := make([]Candidate, 0, len(byID))
	for _, c := range byID {
		c.Leader = c.Identity == leader
		c.Successor = line.Rank(c.Identity) + 1
		out = append(out, c)
	}
	slices.SortFunc(out, Candidate.Compare)
	return out
}
