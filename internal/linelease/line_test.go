package linelease

import (
	"testing"

	"github.com/relect/relect/internal/wire"
	"github.com/stretchr/testify/assert"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// record is the election's Lease held by holder in term, publishing sc
// (nil: no succession), and a handover to holder from "x" if handOver.
func record(holder string, term int32, sc *wire.Succession, handOver bool) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: testLease, Annotations: map[string]string{}}}
	l.Spec.HolderIdentity, l.Spec.LeaseTransitions = &holder, &term
	if sc != nil {
		l.Annotations[wire.AnnotationSuccession] = sc.Encode()
	}
	if handOver {
		l.Annotations[wire.AnnotationHandOver] = (&wire.HandOver{Term: term, From: "x", To: holder}).Encode()
	}
	return l
}

// A record posts its line only when its holder published it with Posted,
// and it is not a handover: only then may an outsider follow the line
// Lease instead of it.
func TestPostedFor(t *testing.T) {
	posted := line(4, "w", "b")
	unposted := line(4, "w", "b")
	unposted.Posted = false
	for _, c := range []struct {
		name  string
		l     *coordinationv1.Lease
		posts bool
	}{
		{"missing", nil, false},
		{"no succession", record("a", 4, nil, false), false},
		{"posted by its holder", record("a", 4, posted, false), true},
		{"not posted", record("a", 4, unposted, false), false},
		{"published by another holder", record("b", 4, posted, false), false},
		{"of another term", record("a", 5, posted, false), false},
		{"a handover", record("a", 4, posted, true), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := PostedFor(c.l)
			assert.Equal(t, c.posts, sc != nil)
			if c.posts {
				assert.Equal(t, wire.Line{Holder: "a", Term: 4, Succession: sc}, RecordLine(c.l))
			}
		})
	}
}

// Two lines are the same when a follower of the line Lease would do the
// same with either: the holder, the term, and every name; the seconds of
// the cooldowns, which change with every write, are not compared.
func TestSame(t *testing.T) {
	base := func() wire.Line {
		sc := line(4, "w", "b", "c")
		sc.Passed, sc.Cooling, sc.Streak = []string{"p"}, []wire.Cooling{{Identity: "x", Seconds: 30}}, 1
		return wire.Line{Holder: "a", Term: 4, Succession: sc, Seconds: 600}
	}
	for _, c := range []struct {
		name string
		edit func(*wire.Line)
		same bool
	}{
		{"identical", func(*wire.Line) {}, true},
		{"cooldown seconds", func(l *wire.Line) { l.Succession.Cooling[0].Seconds = 12 }, true},
		{"lifetime", func(l *wire.Line) { l.Seconds = 1 }, true},
		{"holder", func(l *wire.Line) { l.Holder = "b" }, false},
		{"term", func(l *wire.Line) { l.Term = 5 }, false},
		{"withdrawn", func(l *wire.Line) { l.Succession = nil }, false},
		{"from", func(l *wire.Line) { l.Succession.From = "z" }, false},
		{"priority", func(l *wire.Line) { l.Succession.Priority = 3 }, false},
		{"streak", func(l *wire.Line) { l.Succession.Streak = 2 }, false},
		{"warden", func(l *wire.Line) { l.Succession.Warden = "v" }, false},
		{"successors", func(l *wire.Line) { l.Succession.Next = l.Succession.Next[:1] }, false},
		{"keepers", func(l *wire.Line) { l.Succession.Keepers = []string{"j"} }, false},
		{"passed", func(l *wire.Line) { l.Succession.Passed = nil }, false},
		{"cooling", func(l *wire.Line) { l.Succession.Cooling[0].Identity = "y" }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := base(), base()
			c.edit(&b)
			assert.Equal(t, c.same, Same(a, b))
			assert.Equal(t, c.same, Same(b, a))
		})
	}
	assert.True(t, Same(wire.Line{Holder: "a", Term: 4}, wire.Line{Holder: "a", Term: 4, Seconds: 9}), "two withdrawals of one term")
}

// Refresh is a third of the registration renewal, at least the lease
// duration: 5 minutes by default.
func TestRefresh(t *testing.T) {
	assert.Equal(t, refresh, Refresh(15*60e9, ld))
	assert.Equal(t, ld, Refresh(30e9, ld))
}
