package succession

import (
	"fmt"
	"testing"
	"time"

	"github.com/relect/relect/internal/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The Book's port is its Config and what the core tells it: these tests
// give it both, as the core would, and read what it publishes.

const leaseDuration = 10 * time.Second // a warden lapses after 3 of them

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// leaderConfig is the Config of the candidate "me", the registry on and
// the line Lease postable; a cooldown of k minutes after the k-th stuck
// handover in a row.
func leaderConfig() Config {
	return Config{Identity: "me", Priority: 1, LeaseDuration: leaseDuration, Registry: true, Posts: true,
		Cooldown: func(k int) time.Duration { return time.Duration(k) * time.Minute }}
}

// reg is a registration of id, live for an hour from its sighting, that
// can ward.
func reg(id string, priority int32, rv string) Registration {
	return Registration{Candidate: Candidate{Identity: id, Priority: priority}, Name: "reg-" + id, Seconds: 3600, RV: rv, Wards: true}
}

// fleet is "me" and n others, o0 (priority n) to o<n-1> (priority 1).
func fleet(n int) []Registration {
	rs := []Registration{reg("me", 1, "1")}
	for i := range n {
		rs = append(rs, reg(fmt.Sprintf("o%d", i), int32(n-i), "1"))
	}
	return rs
}

func ids(s *wire.Succession) []string {
	var out []string
	for _, c := range s.Next {
		out = append(out, c.Identity)
	}
	return out
}

func TestViewLapses(t *testing.T) {
	b := New(leaderConfig())
	assert.False(t, b.HasView())
	_, loaded := b.MayLead("a", t0)
	assert.False(t, loaded, "no view before a list")

	a := reg("a", 0, "1")
	a.Seconds = 60
	b.Listed([]Registration{a, reg("s", 0, "1")}, t0)
	b.Changed(Registration{Candidate: Candidate{Identity: "sb", Standby: true}, Name: "reg-sb", Seconds: 60, RV: "1"}, t0)
	require.True(t, b.HasView())
	assert.True(t, b.StandingBy("sb"))
	ok, loaded := b.MayLead("a", t0.Add(59*time.Second))
	assert.True(t, ok && loaded, "live within its lease duration")
	ok, _ = b.MayLead("a", t0.Add(60*time.Second))
	assert.False(t, ok, "lapsed after its lease duration unrenewed")
	ok, _ = b.MayLead("sb", t0)
	assert.False(t, ok, "standing by: may not lead")

	assert.Empty(t, b.LapsedLongAgo(t0.Add(119*time.Second)))
	lapsed := b.LapsedLongAgo(t0.Add(120 * time.Second))
	require.Len(t, lapsed, 2, "twice its lease duration unchanged: a and sb")
	assert.Equal(t, []string{"reg-a", "reg-sb"}, []string{lapsed[0].Name, lapsed[1].Name}, "in name order")

	// A new term's view sees a registration at the version seen before as
	// seen then: not renewed since.
	b.DropView()
	assert.False(t, b.HasView())
	b.Listed([]Registration{a}, t0.Add(100*time.Second))
	assert.Len(t, b.LapsedLongAgo(t0.Add(120*time.Second)), 1, "the sighting is kept across terms")
	a.RV = "2"
	b.Changed(a, t0.Add(110*time.Second))
	assert.Empty(t, b.LapsedLongAgo(t0.Add(120*time.Second)), "renewed: seen anew")
	assert.Equal(t, t0.Add(110*time.Second), b.Viewed("a").SeenAt)
	b.Gone("reg-a")
	assert.Nil(t, b.Viewed("a"))
}

func TestNextFromTheView(t *testing.T) {
	b := New(leaderConfig())
	assert.Nil(t, b.Next(3, t0), "nobody known, no streak: no line")

	rs := fleet(5)
	rs = append(rs, Registration{Candidate: Candidate{Identity: "sb", Priority: 99, Standby: true}, Name: "reg-sb", Seconds: 3600, RV: "1"})
	b.Listed(rs, t0)
	s := b.Next(3, t0)
	require.NotNil(t, s)
	assert.Equal(t, []string{"o0", "o1", "o2"}, ids(s), "the highest priorities, neither itself nor a standby")
	assert.Equal(t, wire.Succession{Term: 3, From: "me", Priority: 1, Next: s.Next, Keepers: s.Keepers}, *s,
		"a small fleet: no line posted, nobody passed over or cooling")
	require.Len(t, s.Keepers, 1)
	assert.Contains(t, []string{"o3", "o4"}, s.Keepers[0], "a keeper beside the successors")

	s = b.Next(3, t0, "o1")
	assert.Equal(t, []string{"o0", "o2"}, ids(s), "the excepted (a handover's target) is left out of the three chosen")
	assert.NotContains(t, s.Keepers, "o1", "and is no keeper")

	// A keeper stays one while it qualifies: once observed, a new term
	// names it again.
	s = b.Next(3, t0)
	b.Observe(leaseWith("me", 3, s), t0)
	for term := int32(4); term < 20; term++ {
		assert.Equal(t, s.Keepers, b.Next(term, t0).Keepers, "term %d", term)
	}
}

func TestNextBeforeTheView(t *testing.T) {
	b := New(leaderConfig())
	observed := &wire.Succession{From: "old", Priority: 7, Next: []wire.Successor{{Identity: "me"}, {Identity: "a"}, {Identity: "b"}}, Keepers: []string{"k"}}
	b.Observe(leaseWith("", 4, observed), t0) // released by old
	b.Acquired("", t0)
	s := b.Next(5, t0)
	require.NotNil(t, s)
	assert.Equal(t, []wire.Successor{{Identity: "a"}, {Identity: "b"}, {Identity: "old", Priority: 7}}, s.Next,
		"the line taken over, and the leader that published it behind it")
	assert.Equal(t, []string{"k"}, s.Keepers, "the keepers observed, before a view")
	assert.True(t, b.SomeoneElse(t0), "without a view: the line names others")
}

func TestAcquiredPassesOver(t *testing.T) {
	observed := &wire.Succession{From: "old", Next: []wire.Successor{{Identity: "a"}, {Identity: "b"}, {Identity: "me"}},
		Keepers: []string{"k"}, Passed: []string{"p"}}

	b := New(leaderConfig())
	b.Observe(leaseWith("old", 4, observed), t0)
	b.Acquired("old", t0)
	b.Listed(append(fleet(0), reg("a", 9, "1"), reg("b", 9, "1"), reg("c", 1, "1"), reg("k", 9, "1"), reg("p", 9, "1"), reg("old", 9, "1")), t0)
	s := b.Next(5, t0)
	assert.Equal(t, []string{"k", "c"}, ids(s), "the successors before it, the expired holder and the line's passed over are left out")
	assert.Equal(t, []string{"a", "b", "old", "p"}, s.Passed, "and published as passed over")

	// Seen renewed — a version other than the first seen since — it is
	// back in line.
	b.Changed(reg("a", 9, "2"), t0.Add(time.Second))
	assert.Equal(t, []string{"a", "k", "c"}, ids(b.Next(5, t0.Add(time.Second))))

	// A handover to this candidate passes nobody over.
	h := New(leaderConfig())
	l := leaseWith("me", 4, observed)
	l.Annotations[wire.AnnotationHandOver] = (&wire.HandOver{Term: 4, From: "old", To: "me"}).Encode()
	h.Observe(l, t0)
	h.Acquired("", t0)
	h.Listed(append(fleet(0), reg("a", 9, "1"), reg("b", 9, "1"), reg("k", 9, "1"), reg("p", 9, "1")), t0)
	s = h.Next(5, t0)
	assert.Equal(t, []string{"a", "b", "k"}, ids(s))
	assert.Equal(t, []string{"p"}, s.Passed, "only whom the line named passed over")

	// Taken after the keepers' turn: the keepers are passed over too.
	o := New(Config{Identity: "outsider", Registry: true, LeaseDuration: leaseDuration})
	o.Observe(leaseWith("", 4, observed), t0)
	o.Acquired("", t0)
	assert.Equal(t, []string{"a", "b", "k", "me", "p"}, o.Next(5, t0).Passed)
}

func TestPostedWithOutsidersAndAWarden(t *testing.T) {
	// 3 successors and a keeper: a line is posted once it leaves
	// minOutsiders (4) live candidates out, one of which wards.
	b := New(leaderConfig())
	b.Listed(fleet(4+minOutsiders-1), t0)
	assert.False(t, b.Next(3, t0).Posted, "too few outsiders")
	b.Changed(reg("o9", 0, "1"), t0)
	s := b.Next(3, t0)
	assert.True(t, s.Posted, "enough outsiders")
	assert.NotEmpty(t, s.Warden)
	assert.False(t, s.Names(s.Warden), "the warden is an outsider")

	b.LinePosted("77")
	assert.Equal(t, "77", b.Next(3, t0).LineVersion, "the line Lease's version as this leader wrote it")
	b.TurnLineOff()
	assert.True(t, b.LineOff())
	assert.False(t, b.Next(3, t0).Posted, "the line Lease forbidden: not posted")

	noPost := leaderConfig()
	noPost.Posts = false
	c := New(noPost)
	c.Listed(fleet(12), t0)
	assert.False(t, c.Next(3, t0).Posted, "no Leases client: not posted")

	nobodyWards := New(leaderConfig())
	rs := fleet(12)
	for i := range rs {
		rs[i].Wards = false
	}
	nobodyWards.Listed(rs, t0)
	s = nobodyWards.Next(3, t0)
	assert.False(t, s.Posted, "no line posted without a warden")
	assert.Empty(t, s.Warden)
}

func TestWardenReplacedWhenSilent(t *testing.T) {
	lapse := 3 * leaseDuration
	b := New(leaderConfig())
	b.Listed(fleet(12), t0)
	s := b.Next(3, t0)
	w := s.Warden
	require.NotEmpty(t, w)
	b.Observe(leaseWith("me", 3, s), t0)

	assert.Equal(t, w, b.Next(3, t0.Add(lapse-time.Second)).Warden, "kept within a lapse of being named")
	b.Changed(reg(w, b.Viewed(w).Priority, "2"), t0.Add(lapse-time.Second)) // it beats: its registration renewed
	assert.Equal(t, w, b.Next(3, t0.Add(2*lapse-2*time.Second)).Warden, "kept within a lapse of its renewal")

	next := b.Next(3, t0.Add(2*lapse)).Warden
	assert.NotEqual(t, w, next, "replaced a lapse after its last renewal")
	assert.NotEmpty(t, next)
	b.Observe(leaseWith("me", 3, b.Next(3, t0.Add(2*lapse))), t0.Add(2*lapse))
	assert.Equal(t, next, b.Next(3, t0.Add(2*lapse)).Warden, "the new warden is kept")
}

func TestStuckReleasingPublishesTheStreak(t *testing.T) {
	b := New(leaderConfig())
	observed := &wire.Succession{From: "old", Streak: 2, Cooling: []wire.Cooling{{Identity: "old", Seconds: 120}}}
	b.Observe(leaseWith("", 4, observed), t0)
	b.Acquired("", t0)
	assert.Equal(t, 2, b.Streak(), "the fleet's streak, as the line acquired under says")
	assert.Equal(t, map[string]time.Time{"old": t0.Add(2 * time.Minute)}, b.CoolingAt(t0.Add(time.Minute)),
		"the cooldown counted from when its record was observed")

	b.StuckReleasing(t0.Add(time.Minute))
	s := b.Next(5, t0.Add(time.Minute))
	require.NotNil(t, s, "a streak is published with nobody to name")
	assert.Equal(t, int32(3), s.Streak, "one longer")
	assert.Equal(t, []wire.Cooling{{Identity: "me", Seconds: 180}, {Identity: "old", Seconds: 60}}, s.Cooling,
		"this candidate cooling for the 3rd handover's cooldown (Config.Cooldown), and the line's, what is left of it")
	assert.Nil(t, b.CoolingAt(t0.Add(5*time.Minute)), "all ended")

	b.EndStreak()
	assert.Zero(t, b.Streak())
}

func TestRegistryOff(t *testing.T) {
	b := New(leaderConfig())
	b.Listed(fleet(5), t0)
	require.NotEmpty(t, b.Next(3, t0).Next)
	b.TurnRegistryOff()
	assert.True(t, b.RegistryOff())
	assert.Nil(t, b.Next(3, t0), "nobody named")
	assert.True(t, b.SomeoneElse(t0), "without the registry, anyone may take a released lease")

	b.StuckReleasing(t0)
	s := b.Next(3, t0)
	require.NotNil(t, s, "the streak and the cooldowns are carried all the same")
	assert.Empty(t, s.Next)
	assert.Equal(t, int32(1), s.Streak)
}

func TestSomeoneElse(t *testing.T) {
	b := New(leaderConfig())
	assert.False(t, b.SomeoneElse(t0), "nobody known")
	b.Listed([]Registration{reg("me", 1, "1"), {Candidate: Candidate{Identity: "sb", Standby: true}, Name: "reg-sb", Seconds: 60, RV: "1"}}, t0)
	assert.False(t, b.SomeoneElse(t0), "only a standby")
	b.Changed(reg("a", 0, "1"), t0)
	assert.True(t, b.SomeoneElse(t0))
	assert.False(t, b.SomeoneElse(t0.Add(time.Hour)), "a lapsed")
}

func TestKnown(t *testing.T) {
	follower := New(Config{Identity: "f", Registry: true, LeaseDuration: leaseDuration})
	line := &wire.Succession{From: "L", Priority: 4, Next: []wire.Successor{{Identity: "s1", Priority: 2}, {Identity: "f", Priority: 1}}}
	follower.Observe(leaseWith("L", 2, line), t0)
	got := follower.Known(Candidate{Identity: "f", Priority: 1}, "L", t0)
	assert.Equal(t, []Candidate{
		{Identity: "L", Priority: 4, Leader: true},
		{Identity: "s1", Priority: 2, Successor: 1},
		{Identity: "f", Priority: 1, Successor: 2},
	}, got, "itself, the leader with the line's priority, and the line")

	b := New(leaderConfig())
	b.Listed(fleet(4), t0)
	got = b.Known(Candidate{Identity: "me", Priority: 1}, "me", t0)
	require.Len(t, got, 5)
	assert.Equal(t, Candidate{Identity: "me", Priority: 1, Leader: true}, got[0])
	assert.Equal(t, []int{0, 1, 2, 3, 0}, []int{got[0].Successor, got[1].Successor, got[2].Successor, got[3].Successor, got[4].Successor},
		"the leader, the line it would publish now, then the others")
	assert.Equal(t, "o3", got[4].Identity)
}
