package linelease

import (
	"testing"

	"github.com/relect/relect/internal/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// signalled reports whether c holds a signal, and takes it.
func signalled(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// A leader that never saw a line posted wants nothing written; once it
// publishes a posted line it wants it, for its own record of that term
// only, and is woken at each change that a follower would see — not at a
// cooldown's seconds. Its record says Posted only once the line Lease
// posts the line.
func TestWant(t *testing.T) {
	var w Want
	assert.False(t, w.Set(wire.Line{Holder: "a", Term: 4}, true), "no line: not posted")
	_, ok, _, changed := w.Current(true, 4)
	assert.False(t, ok, "a line Lease that never posted a line is not withdrawn")
	assert.False(t, signalled(changed))

	sc := line(4, "w", "b")
	sc.Cooling = []wire.Cooling{{Identity: "x", Seconds: 30}}
	l := wire.Line{Holder: "a", Term: 4, Succession: sc}
	assert.False(t, w.Set(l, false), "wanted, not written yet")
	got, ok, withView, changed := w.Current(true, 4)
	assert.True(t, ok)
	assert.False(t, withView)
	assert.Equal(t, l, got)
	assert.True(t, signalled(changed), "a new want wakes Post")
	_, ok, _, _ = w.Current(false, 4)
	assert.False(t, ok, "not for a record of someone else's")
	_, ok, _, _ = w.Current(true, 5)
	assert.False(t, ok, "not for a record of another term")

	later := *sc
	later.Cooling = []wire.Cooling{{Identity: "x", Seconds: 12}}
	w.Set(wire.Line{Holder: "a", Term: 4, Succession: &later}, false)
	got, _, _, changed = w.Current(true, 4)
	assert.False(t, signalled(changed), "the cooldown's seconds alone wake nothing")
	assert.Equal(t, int32(12), got.Succession.Cooling[0].Seconds, "but are written next")
	w.Set(wire.Line{Holder: "a", Term: 4, Succession: &later}, true)
	assert.True(t, signalled(changed), "chosen from the view now: worth a write")

	w.Wrote(l)
	assert.True(t, w.Set(l, true), "the line Lease posts it: the record may say Posted")
	w.Wrote(wire.Line{})
	assert.False(t, w.Set(l, true), "the term ended")

	assert.False(t, w.Set(wire.Line{Holder: "a", Term: 5}, true), "a record that posts no line")
	got, ok, _, _ = w.Current(true, 5)
	require.True(t, ok, "once a line was posted, a leader that posts none withdraws it")
	assert.True(t, got.Withdrawn())
}

// A record observed that posts a line makes a later leader of this
// Elector that posts none withdraw it.
func TestWantSeen(t *testing.T) {
	var w Want
	w.Seen()
	w.Set(wire.Line{Holder: "a", Term: 6}, true)
	got, ok, _, _ := w.Current(true, 6)
	assert.True(t, ok)
	assert.True(t, got.Withdrawn())
}

// A handover to a candidate outside the posted line is posted once, after
// the handover is written: the line names it holder and first in line,
// at most three successors.
func TestWantHandOver(t *testing.T) {
	var w Want
	w.SetHandOver("z", 4, *line(4, "w", "b"))
	_, ok := w.HandOver()
	assert.False(t, ok, "no line was ever posted: nothing to tell")

	sc := line(4, "w", "b", "c", "d")
	w.Set(wire.Line{Holder: "a", Term: 4, Succession: sc}, true)
	w.SetHandOver("z", 4, *sc)
	got, ok := w.HandOver()
	require.True(t, ok)
	assert.Equal(t, "z", got.Holder)
	assert.Equal(t, int32(4), got.Term)
	assert.True(t, got.Succession.Posted)
	assert.Equal(t, []wire.Successor{{Identity: "z"}, {Identity: "b"}, {Identity: "c"}}, got.Succession.Next)
	assert.Len(t, sc.Next, 3, "the leader's own line is unchanged")
	_, ok = w.HandOver()
	assert.False(t, ok, "posted once")

	w.SetHandOver("c", 4, *sc)
	_, ok = w.HandOver()
	assert.False(t, ok, "c follows the election's Lease: it is in line")
	unposted := wire.Succession{Term: 4, From: "a"}
	w.SetHandOver("z", 4, unposted)
	got, ok = w.HandOver()
	require.True(t, ok, "the leader's own line without successors")
	assert.True(t, got.Succession.Posted)
	assert.Equal(t, []wire.Successor{{Identity: "z"}}, got.Succession.Next)
}
