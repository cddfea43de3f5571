package linelease

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/relect/relect/internal/leasewatch"
	"github.com/relect/relect/internal/warden"
	"github.com/relect/relect/internal/wire"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

// Read reads the line Lease, counted as VerbGet; a missing one reads as
// withdrawn (a nil Lease, the zero Line, no error). It returns the call's
// error otherwise. It blocks for the call.
func Read(ctx context.Context, cfg Config, calls Calls) (*coordinationv1.Lease, wire.Line, error) {
	var l *coordinationv1.Lease
	err := calls.Do(ctx, VerbGet, true, func(ctx context.Context) error {
		var err error
		l, err = cfg.Leases.Get(ctx, wire.LineName(cfg.Name), metav1.GetOptions{})
		return err
	})
	switch {
	case apierrors.IsNotFound(err):
		return nil, wire.Line{}, nil
	case err != nil:
		return nil, wire.Line{}, err
	}
	return l, wire.LineOf(l), nil
}

// list reads the line Lease by a list of it alone (nil: missing), and
// returns the list's resourceVersion, current even when the line Lease has
// not changed for longer than the apiserver's watch cache keeps. Counted
// as VerbGet.
func list(ctx context.Context, cfg Config, calls Calls) (*coordinationv1.Lease, wire.Line, string, error) {
	var ls *coordinationv1.LeaseList
	name := wire.LineName(cfg.Name)
	err := calls.Do(ctx, VerbGet, true, func(ctx context.Context) error {
		var err error
		ls, err = cfg.Leases.List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
		return err
	})
	if err != nil {
		return nil, wire.Line{}, "", err
	}
	for i := range ls.Items {
		if l := &ls.Items[i]; l.Name == name {
			return l, wire.LineOf(l), ls.ResourceVersion, nil
		}
	}
	return nil, wire.Line{}, ls.ResourceVersion, nil
}

// watchLine opens a watch on the line Lease, resuming after rv; counted as
// VerbWatch.
func watchLine(ctx context.Context, cfg Config, calls Calls, rv string) (watch.Interface, error) {
	var w watch.Interface
	err := calls.Do(ctx, VerbWatch, false, func(ctx context.Context) error {
		var err error
		w, err = cfg.Leases.Watch(ctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", wire.LineName(cfg.Name)).String(),
			ResourceVersion: rv,
		})
		return err
	})
	return w, err
}

// Exit is why Follow returned, when the follower watches the election's
// Lease again: Stale, the line was not written for its lifetime (the
// leader may be gone, with its whole line); Silent, the line's warden read
// the election's Lease released, or unchanged since Since (its holder has
// not renewed for two retry periods), or, with Stale, the warden's last
// read, of a record seen since Since. The zero Exit: the line names this
// candidate, was withdrawn or deleted, or its watch failed.
type Exit struct {
	Stale  bool
	Silent *coordinationv1.Lease
	Since  time.Time
	more   bool // the server closed the watch: resume it
}

// Follow follows the line Lease from l, as Read returned it — the caller
// checked that it posts the line of the record it observed — instead of
// the election's Lease: it watches it from l's resourceVersion, reporting
// each line to up (Observed; l's first), until the line names this
// candidate, is withdrawn or deleted, is not written for its lifetime, or
// its watch fails; see Exit. A watch that may not resume from an old
// version (410 Gone) resumes once from a list. Named the line's warden,
// the candidate also reads the election's Lease every warden.Period and
// beats (up.WardenBeat); what its candidate observed of the election's
// Lease, seed (nil: nothing) since seedAt, counts for its reads. Follow
// blocks until then, and returns ctx's error when ctx is done.
func Follow(ctx context.Context, cfg Config, up Outsider, l, seed *coordinationv1.Lease, seedAt time.Time) (Exit, error) {
	line := wire.LineOf(l)
	// Named the warden, it reads the election's Lease from here on; the
	// record it watched counts from when it first saw it (Seed).
	ward := warden.New(cfg.Identity, warden.Period(cfg.RetryPeriod), warden.Beat(cfg.LeaseDuration), line, up.RecordKey)
	defer ward.Stop()
	ward.Seed(seed, seedAt)
	up.Observed(line)
	rv := l.ResourceVersion
	listed := false
	for {
		w, err := watchLine(ctx, cfg, up, rv)
		if apierrors.IsResourceExpired(err) && !listed {
			// Written every refresh period (minutes), the line Lease's
			// own version soon ages out of the apiserver's watch cache
			// (75 s): 410 Gone. A list of it alone gives a current one.
			listed = true
			l, now, listRV, err := list(ctx, cfg, up)
			if err != nil || l == nil || !Same(now, line) {
				return Exit{}, ctx.Err() // the election's Lease is read again
			}
			rv = listRV
			continue
		}
		if err != nil {
			return Exit{}, ctx.Err()
		}
		listed = false
		out, err := readWatch(ctx, cfg, up, w, &rv, line, ward)
		w.Stop()
		if !out.more || err != nil {
			return out, err
		}
	}
}

// staleAfter is how long line lives without a write: its own lifetime, at
// least twice the refresh, spread by up to a tenth of the refresh, so that
// the followers of a line gone stale do not all come back at one instant.
func staleAfter(cfg Config, line wire.Line) time.Duration {
	spread := time.Duration(rand.Int64N(int64(cfg.Refresh/10) + 1))
	return max(time.Duration(line.Seconds)*time.Second, 2*cfg.Refresh) + spread
}

// readWatch reads the line Lease's watch w until the follower must watch
// the election's Lease again, the server closes the watch (resume from
// *rv), or ctx is done (its error); see Exit. line is the line last
// observed. While the line names this candidate its warden (ward, the
// follow's, kept across the watch's resumptions), it also reads the
// election's Lease every warden.Period.
func readWatch(ctx context.Context, cfg Config, up Outsider, w watch.Interface, rv *string, line wire.Line, ward *warden.Warden) (Exit, error) {
	timer := time.NewTimer(staleAfter(cfg, line))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return Exit{}, ctx.Err()
		case <-timer.C:
			// A warden keeps what its reads observed: its observation of
			// the record may be older than the stale line's comeback.
			last, since := ward.Last()
			return Exit{Stale: true, Silent: last, Since: since}, nil
		case <-ward.Due():
			silent, since, back, beat := ward.Probe(ctx, up.ReadLease)
			if beat {
				up.WardenBeat()
			}
			if back {
				return Exit{Silent: silent, Since: since}, ctx.Err()
			}
		case ev, open := <-w.ResultChan():
			e := up.Decode(ev, open)
			if e.Lease != nil {
				*rv = e.Lease.ResourceVersion
			}
			switch e.Kind {
			case leasewatch.Closed:
				return Exit{more: true}, nil
			case leasewatch.Deleted, leasewatch.Broken:
				return Exit{}, nil
			case leasewatch.Changed:
				line = wire.LineOf(e.Lease)
				up.Observed(line)
				if line.Withdrawn() || line.Holder == "" || line.Succession.Names(cfg.Identity) {
					return Exit{}, nil
				}
				timer.Reset(staleAfter(cfg, line))
				ward.Follow(line)
			}
		}
	}
}

// Withdraw withdraws the line Lease for l, the record of the election's
// Lease a follower watched (nil: missing), if the line Lease still posts
// a line of l's term or an earlier one: a read (VerbGet), then a
// conditional Update (VerbPost), which a concurrent withdrawal by another
// watcher makes fail harmlessly. The caller decides that l posts no line, and for how long
// it stood so (docs/design.md, "Withdrawal"). It blocks for the calls it
// makes; failures are not reported (the next watcher withdraws).
func Withdraw(ctx context.Context, cfg Config, calls Calls, l *coordinationv1.Lease) {
	line := wire.Line{}
	if l != nil {
		line.Holder, line.Term = wire.Holder(l), wire.Transitions(l)
	}
	there, posted, err := Read(ctx, cfg, calls)
	if err != nil || there == nil || posted.Withdrawn() || posted.Term > line.Term {
		return // nothing to withdraw, or posted by a later term than l's
	}
	line.Seconds = posted.Seconds
	out := there.DeepCopy()
	wire.SetLine(out, cfg.Name, line, time.Now())
	_ = calls.DoSpare(ctx, VerbPost, true, func(ctx context.Context) error {
		_, err := cfg.Leases.Update(ctx, out, metav1.UpdateOptions{})
		return err
	})
}
