// Package warden is the warden's side of the line Lease (docs/design.md,
// "Only the line watches"): a candidate outside the line of succession
// that follows the line Lease, as every outsider does, and reads the
// election's Lease every Period besides, so that someone outside the line
// notices when the leader, its successors and its keepers are all gone at
// once — stopped (the lease released) or crashed (the lease no longer
// renewed). It then watches the election's Lease again and takes its turn
// after the keepers.
//
// A warden decides only when its candidate watches the election's Lease
// again, never whether it acquires: that is decided, as for every
// follower, from what it observes of the election's Lease itself.
package warden

import (
	"context"
	"time"

	"github.com/relect/relect/internal/wire"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Reader is the warden's port: a read of the election's Lease, paced and
// counted by the caller. It returns the Lease, or an error (NotFound for
// a missing Lease).
type Reader func(ctx context.Context) (*coordinationv1.Lease, error)

// Key identifies a Lease's leader-election record (its holder, times,
// durations and transitions; not its labels, annotations or
// resourceVersion): two reads that find the same key found the same
// record, whatever else was written between them. It is the caller's rule
// for a new record, the one its followers' observations use.
type Key func(*coordinationv1.Lease) string

// Period is how often a warden reads the election's Lease: two retry
// periods. A leader renews every retry period (plus its call's time), so
// two reads a period apart that find the same record mean that it missed
// a renewal; a shorter period would call a slow renewal silence.
func Period(retryPeriod time.Duration) time.Duration { return 2 * retryPeriod }

// Beat is how often a warden renews its registration while the line names
// it, so that the leader sees it alive: the lease duration (15 s by
// default). A leader names another warden when it has not seen one renew
// for three beats.
func Beat(leaseDuration time.Duration) time.Duration { return leaseDuration }

// Warden is one follow of the line Lease by a candidate that the line may
// name its warden. It is used by one goroutine; the zero value is not
// usable: use New.
type Warden struct {
	identity string
	period   time.Duration
	keyOf    Key
	on       bool                  // the line followed names identity its warden
	timer    *time.Timer           // the next read, while on
	key      string                // the record's key at the last read ("": none)
	since    time.Time             // when a read first found key
	last     *coordinationv1.Lease // the Lease the last read found
	beat     time.Duration
	beatAt   time.Time // the last beat (zero: none since named)
}

// New returns the warden of identity for the line first followed, which
// reads every period while line names identity its warden, tells records
// apart by key, and beats every beat (Probe).
func New(identity string, period, beat time.Duration, line wire.Line, key Key) *Warden {
	w := &Warden{identity: identity, period: period, beat: beat, keyOf: key}
	w.Follow(line)
	return w
}

// Follow takes a new line from the line Lease into account: it starts the
// reads when line names this candidate its warden, and stops them when it
// no longer does.
func (w *Warden) Follow(line wire.Line) {
	on := line.Succession != nil && !line.Withdrawn() && line.Succession.Warden == w.identity && w.identity != ""
	switch {
	case on && !w.on:
		// The first read at once: a warden named just before the line
		// leaves has a record to count from a period sooner.
		w.timer = time.NewTimer(0)
	case !on && w.on:
		w.Stop()
		w.key, w.beatAt, w.last = "", time.Time{}, nil
	}
	w.on = on
}

// Due is a channel that receives when the next read is due — at once when
// the line names this candidate warden, then every period; nil (never)
// while it does not.
func (w *Warden) Due() <-chan time.Time {
	if w.timer == nil {
		return nil
	}
	return w.timer.C
}

// Probe reads the election's Lease through read and reports whether the
// candidate must renew its registration now (beat: the read succeeded, and
// the last beat since it was named is a beat period ago, or there was
// none), and whether it must watch the election's Lease again (back): the Lease is missing (l nil), or
// released (l, since now), or holds the same record (by key) as the last
// read (or Seed) found, a period ago or more (l, and since: when a read
// first found that record — the follower's observation of it may start
// there, as it was already that record then). A write that changes no record (a label,
// an annotation) does not hide a leader that stopped renewing. A failed
// read is tried again a period later.
func (w *Warden) Probe(ctx context.Context, read Reader) (l *coordinationv1.Lease, since time.Time, back, beat bool) {
	defer func() {
		if w.timer != nil {
			w.timer.Reset(w.period)
		}
	}()
	got, err := read(ctx)
	now := time.Now()
	if err == nil || apierrors.IsNotFound(err) {
		if beat = w.beatAt.IsZero() || now.Sub(w.beatAt) >= w.beat; beat {
			w.beatAt = now
		}
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, now, true, beat
	case err != nil:
		return nil, time.Time{}, false, false
	case wire.Released(got):
		return got, now, true, beat
	}
	key := w.keyOf(got)
	switch {
	case w.key == "" || key != w.key:
		w.key, w.since, w.last = key, now, got
	case now.Sub(w.since) >= w.period:
		return got, w.since, true, beat
	}
	return nil, time.Time{}, false, beat
}

// Seed gives the warden what its candidate observed of the election's
// Lease before it followed the line: l, a record it watched unchanged
// since since. A first read that finds the same record counts from there
// — it was that record then already — instead of from the read: a
// candidate named warden just as the line leaves (it watched the Lease
// when the line was posted, and followed the line a few seconds later)
// loses none of its observation. Nil l, or a released one, seeds nothing.
func (w *Warden) Seed(l *coordinationv1.Lease, since time.Time) {
	if l == nil || wire.Released(l) || since.IsZero() {
		return
	}
	w.key, w.since, w.last = w.keyOf(l), since, l
}

// Last returns the Lease the last successful read found, and since when
// that record has been seen; nil if there was none since the line named
// this candidate warden. A warden that must watch the election's Lease
// again for another reason (its line went stale) starts from there, not
// from a read of its own: its observation of the record is that old.
func (w *Warden) Last() (*coordinationv1.Lease, time.Time) {
	if !w.on || w.last == nil {
		return nil, time.Time{}
	}
	return w.last, w.since
}

// Stop stops the reads.
func (w *Warden) Stop() {
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
}
