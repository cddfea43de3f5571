package leaserecord

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func held(holder string, at time.Time, transitions int) *Record {
	return &Record{HolderIdentity: holder, LeaseDurationSeconds: 15, LeaderTransitions: transitions,
		AcquireTime: metav1.NewTime(t0), RenewTime: metav1.NewTime(at)}
}

// TestSameTellsRenewalsWithinASecond: two renewals 100 ms apart are two
// records to relect, though client-go's view (whole seconds) is the same;
// times beyond the microsecond do not count; nil is never the same.
func TestSameTellsRenewalsWithinASecond(t *testing.T) {
	a, b := held("a", t0.Add(100*time.Millisecond), 1), held("a", t0.Add(200*time.Millisecond), 1)
	assert.Equal(t, ClientGoView(a), ClientGoView(b), "client-go sees one record")
	assert.False(t, Same(a, b), "relect sees two")
	assert.True(t, Same(a, held("a", t0.Add(100*time.Millisecond+999), 1)), "below the microsecond")
	assert.False(t, Same(a, nil))
	assert.False(t, Same(nil, nil))
}

// TestStampedAs: an edit of other fields keeps our stamps; another holder,
// term or renew time does not.
func TestStampedAs(t *testing.T) {
	ours := held("a", t0.Add(time.Second), 3)
	edited := *ours
	edited.LeaseDurationSeconds = 1
	edited.PreferredHolder = "b"
	assert.True(t, StampedAs(&edited, ours))
	assert.False(t, StampedAs(held("b", t0.Add(time.Second), 3), ours), "holder")
	assert.False(t, StampedAs(held("a", t0.Add(time.Second), 4), ours), "term")
	assert.False(t, StampedAs(held("a", t0.Add(2*time.Second), 3), ours), "renew time")
	assert.False(t, StampedAs(nil, ours))
	assert.False(t, StampedAs(ours, nil))
}

// TestReleaseAndHandOver: a release has no holder, 1 s, the term kept, and
// is Released; a handover names the successor for its seconds.
func TestReleaseAndHandOver(t *testing.T) {
	r := Release(7)
	assert.True(t, Released(&r))
	assert.Equal(t, "", r.HolderIdentity)
	assert.Equal(t, 1, r.LeaseDurationSeconds)
	assert.Equal(t, 7, r.LeaderTransitions)
	h := HandOver(7, "b", 30)
	assert.False(t, Released(&h))
	assert.Equal(t, "b", h.HolderIdentity)
	assert.Equal(t, 30, h.LeaseDurationSeconds)
	assert.Equal(t, 7, h.LeaderTransitions)
	emptied := Record{LeaseDurationSeconds: 15}
	assert.False(t, Released(&emptied), "a holder emptied by hand is not a release")
}

// TestTransitionsSaturate: leaseTransitions stay within 0..MaxInt32; an
// acquisition adds one unless it resumes our own record.
func TestTransitionsSaturate(t *testing.T) {
	assert.Equal(t, int32(0), ClampTransitions(-5))
	assert.Equal(t, int32(42), ClampTransitions(42))
	assert.Equal(t, int32(math.MaxInt32), ClampTransitions(math.MaxInt32+10))
	assert.Equal(t, int32(4), NextTransitions(held("x", t0, 3), false))
	assert.Equal(t, int32(3), NextTransitions(held("a", t0, 3), true), "resuming ours")
	assert.Equal(t, int32(math.MaxInt32), NextTransitions(held("x", t0, math.MaxInt32), false))
	assert.Equal(t, int32(1), NextTransitions(held("x", t0, -2), false))
}

// TestDisguise: what client-go is shown where its rules would let it take
// over while the holder may still act; a release and a plain held record
// are shown as stored.
func TestDisguise(t *testing.T) {
	const ours = 15
	cases := []struct {
		name     string
		rec      *Record
		stranger bool
		want     *Record // nil: not disguised
	}{
		{"held", held("x", t0, 1), false, nil},
		{"released", func() *Record { r := Release(1); return &r }(), false, nil},
		{"stranger", held("a", t0, 1), true, func() *Record { r := held("a"+StrangerSuffix, t0, 1); return r }()},
		{"short", &Record{HolderIdentity: "x", LeaseDurationSeconds: 0}, false, &Record{HolderIdentity: "x", LeaseDurationSeconds: ours}},
		{"emptied", &Record{LeaseDurationSeconds: -3}, false, &Record{HolderIdentity: EmptiedHolder, LeaseDurationSeconds: ours}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stored := *c.rec
			assert.Equal(t, c.want != nil, Disguised(c.rec, c.stranger, ours))
			if c.want != nil {
				assert.Equal(t, c.want, Disguise(c.rec, c.stranger, ours))
			}
			assert.Equal(t, stored, *c.rec, "the record itself is unchanged")
		})
	}
}
