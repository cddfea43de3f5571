package warden_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect/internal/warden"
	"github.com/relect/relect/internal/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	rp = 2 * time.Second
	ld = 15 * time.Second
)

// lineNaming is a posted line whose warden is id.
func lineNaming(id string) wire.Line {
	return wire.Line{Holder: "leader", Term: 3, Succession: &wire.Succession{Term: 3, From: "leader", Posted: true, Warden: id}}
}

// fakeLease is the election's Lease as the port reads it: a leader that
// renews every retry period until stopped (renewing false), or released;
// labels, edited by hand (a write that is no renewal), bump rv alone.
type fakeLease struct {
	// stopAt and releaseAt, if set, are when the leader stops renewing,
	// and when it releases (run applies them on its own goroutine).
	stopAt, releaseAt time.Time
	rv                int
	editing           bool // a label is edited before every read
	labels            int
	renewing          bool
	released          bool
	missing           bool
	fail              error
	reads             int
	beats             []time.Time
}

func (f *fakeLease) read(context.Context) (*coordinationv1.Lease, error) {
	f.reads++
	switch {
	case f.fail != nil:
		return nil, f.fail
	case f.missing:
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "e")
	}
	l := &coordinationv1.Lease{}
	if f.editing {
		f.labels++
	}
	l.ResourceVersion = strconv.Itoa(f.rv)
	if f.labels > 0 {
		l.ResourceVersion += "." + strconv.Itoa(f.labels)
	}
	holder, seconds := "leader", int32(15)
	if f.released {
		holder, seconds = "", 1
	}
	renewed := metav1.NewMicroTime(time.Unix(int64(f.rv), 0))
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &holder, &seconds, &renewed
	return l, nil
}

// key is the record's key for the warden: its holder and renew time, as
// relect's recordKey includes them (not the resourceVersion).
func key(l *coordinationv1.Lease) string {
	return *l.Spec.HolderIdentity + " " + l.Spec.RenewTime.String()
}

// run plays the warden for d against f, whose leader renews every retry
// period, half a period off the warden's reads, while renewing; it returns
// what the warden reported when it came back, and when (ok false: it did
// not). f.beats counts the beats.
func run(t *testing.T, w *warden.Warden, f *fakeLease, d time.Duration) (l *coordinationv1.Lease, since, at time.Time, ok bool) {
	t.Helper()
	end := time.After(d)
	renew := time.NewTimer(rp / 2) // renewals fall between the warden's reads
	defer renew.Stop()
	for {
		select {
		case <-renew.C:
			now := time.Now()
			if !f.stopAt.IsZero() && !now.Before(f.stopAt) {
				f.renewing = false
			}
			if !f.releaseAt.IsZero() && !now.Before(f.releaseAt) && !f.released {
				f.renewing, f.released = false, true
				f.rv++
			}
			if f.renewing {
				f.rv++
			}
			renew.Reset(rp)
		case <-w.Due():
			l, since, back, beat := w.Probe(t.Context(), f.read)
			if beat {
				f.beats = append(f.beats, time.Now())
			}
			if back {
				return l, since, time.Now(), true
			}
		case <-end:
			return nil, time.Time{}, time.Time{}, false
		}
	}
}

func TestNotTheWardenReadsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := warden.New("me", warden.Period(rp), warden.Beat(ld), lineNaming("someone else"), key)
		defer w.Stop()
		f := &fakeLease{renewing: true}
		_, _, _, back := run(t, w, f, time.Hour)
		assert.False(t, back)
		assert.Zero(t, f.reads, "a candidate that is not the warden does not read the election's Lease")
	})
}

func TestALeaderThatRenewsIsNeverSilent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := warden.New("me", warden.Period(rp), warden.Beat(ld), lineNaming("me"), key)
		defer w.Stop()
		f := &fakeLease{renewing: true}
		start := time.Now()
		_, _, _, back := run(t, w, f, time.Hour+rp/2)
		assert.False(t, back, "a renewal every retry period is seen between two reads two retry periods apart")
		assert.Equal(t, 1+int(time.Hour/warden.Period(rp)), f.reads, "one read at once, then one every two retry periods")
		require.NotEmpty(t, f.beats)
		assert.Equal(t, start, f.beats[0], "a beat at its first read, at once")
		// Then one at the first read a beat or more after the last:
		// every 16 s, with reads every 4 s and a beat of 15 s.
		every := (warden.Beat(ld) + warden.Period(rp) - 1) / warden.Period(rp) * warden.Period(rp)
		for i := 1; i < len(f.beats); i++ {
			assert.Equal(t, every, f.beats[i].Sub(f.beats[i-1]))
		}
		assert.Len(t, f.beats, 1+int(time.Hour/every))
	})
}

func TestASilentLeaseBringsTheWardenBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := warden.New("me", warden.Period(rp), warden.Beat(ld), lineNaming("me"), key)
		defer w.Stop()
		f := &fakeLease{renewing: true, rv: 7}
		start := time.Now()
		f.stopAt = start.Add(time.Minute + rp) // the leader's last renewal at 61 s
		l, since, at, back := run(t, w, f, time.Hour)
		require.True(t, back)
		assert.Equal(t, strconv.Itoa(f.rv), l.ResourceVersion, "the last record")
		assert.Equal(t, start.Add(time.Minute+2*rp), since, "observed since the first read that found the last record")
		assert.Equal(t, since.Add(warden.Period(rp)), at, "back at the next read, which found it unchanged")
	})
}

// Labels written by hand between the reads change the resourceVersion, not
// the record: they do not hide a leader that stopped renewing.
func TestALabelEditDoesNotHideSilence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := warden.New("me", warden.Period(rp), warden.Beat(ld), lineNaming("me"), key)
		defer w.Stop()
		f := &fakeLease{renewing: true, rv: 7, editing: true}
		start := time.Now()
		f.stopAt = start.Add(time.Minute + rp) // the leader's last renewal at 61 s
		_, since, at, back := run(t, w, f, time.Hour)
		require.True(t, back, "a label edited at every read")
		assert.Equal(t, start.Add(time.Minute+2*rp), since, "observed since the first read that found the last record")
		assert.Equal(t, since.Add(warden.Period(rp)), at)
	})
}

func TestAReleaseBringsTheWardenBackAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := warden.New("me", warden.Period(rp), warden.Beat(ld), lineNaming("me"), key)
		defer w.Stop()
		f := &fakeLease{renewing: true}
		start := time.Now()
		f.releaseAt = start.Add(time.Minute + rp) // released at 61 s, the renewal's instant
		l, since, at, back := run(t, w, f, time.Hour)
		require.True(t, back)
		assert.True(t, wire.Released(l))
		assert.Equal(t, at, since)
		assert.Equal(t, start.Add(time.Minute+2*rp), at, "at the first read after the release")
	})
}

func TestAMissingLeaseBringsTheWardenBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := warden.New("me", warden.Period(rp), warden.Beat(ld), lineNaming("me"), key)
		defer w.Stop()
		f := &fakeLease{missing: true}
		start := time.Now()
		l, _, at, back := run(t, w, f, time.Hour)
		require.True(t, back)
		assert.Nil(t, l, "nothing observed: the follower reads it again")
		assert.Equal(t, start, at, "at the first read, at once")
	})
}

func TestAFailedReadIsTriedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := warden.New("me", warden.Period(rp), warden.Beat(ld), lineNaming("me"), key)
		defer w.Stop()
		f := &fakeLease{fail: errors.New("connection refused")}
		_, _, _, back := run(t, w, f, time.Minute+rp/2)
		assert.False(t, back, "a failed read says nothing of the lease")
		assert.Equal(t, 1+int(time.Minute/warden.Period(rp)), f.reads, "tried again every period")
		assert.Empty(t, f.beats, "a warden that cannot read does not beat: the leader names another")
	})
}

func TestALineThatNamesAnotherWardenStopsTheReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := warden.New("me", warden.Period(rp), warden.Beat(ld), lineNaming("me"), key)
		defer w.Stop()
		f := &fakeLease{renewing: true}
		time.Sleep(time.Minute)
		_, _, _, _ = run(t, w, f, time.Minute)
		before := f.reads
		require.NotZero(t, before)
		w.Follow(lineNaming("another"))
		_, _, _, back := run(t, w, f, time.Hour)
		assert.False(t, back)
		assert.Equal(t, before, f.reads, "no read once the line names another warden")
		w.Follow(wire.Line{Holder: "leader", Term: 4}) // withdrawn
		assert.Nil(t, w.Due())
	})
}

// Seed: a candidate named warden just as the line leaves had watched the
// election's Lease before it followed the line. A first read that finds
// the record it watched counts from when it first saw it — at once if
// that is a period ago or more, else at the next read — and a read that
// finds another record counts from the read.
func TestSeed(t *testing.T) {
	for _, tc := range []struct {
		name      string
		seenAgo   time.Duration // the seed's since, before the first read
		same      bool          // the first read finds the seeded record
		wantReads int           // reads until back
		wantSince time.Duration // since, before the first read
	}{
		{"seen long ago: back at the first read, since the seed", 5 * rp, true, 1, 5 * rp},
		{"seen just now: back at the second, since the seed", rp / 2, true, 2, rp / 2},
		{"another record: back at the second, since the first read", 5 * rp, false, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeLease{rv: 7}
				seeded, _ := f.read(context.Background())
				if !tc.same {
					f.rv = 8 // the leader renewed once more, then stopped
				}
				w := warden.New("w", warden.Period(rp), warden.Beat(ld), lineNaming("w"), key)
				defer w.Stop()
				start := time.Now()
				w.Seed(seeded, start.Add(-tc.seenAgo))
				for reads := 1; reads <= 3; reads++ {
					<-w.Due()
					l, since, back, _ := w.Probe(context.Background(), f.read)
					if !back {
						continue
					}
					require.NotNil(t, l)
					assert.Equal(t, tc.wantReads, reads, "reads until back")
					assert.Equal(t, start.Add(-tc.wantSince), since, "since")
					return
				}
				t.Fatal("never back")
			})
		})
	}
}

// A released or missing seed seeds nothing.
func TestSeedNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeLease{rv: 7}
		w := warden.New("w", warden.Period(rp), warden.Beat(ld), lineNaming("w"), key)
		defer w.Stop()
		w.Seed(nil, time.Now().Add(-time.Hour))
		<-w.Due()
		_, _, back, _ := w.Probe(context.Background(), f.read)
		assert.False(t, back, "the first read of a record is no silence")
	})
}
