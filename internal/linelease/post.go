package linelease

import (
	"context"
	"time"

	"github.com/relect/relect/internal/pace"
	"github.com/relect/relect/internal/wire"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Post keeps the line Lease as the leader's state wants it (up.Wanted)
// while ctx (the term's) lasts: at once when the want changes, and every
// cfg.Refresh. The term's first post waits for a line chosen from the
// leader's view of the registry, two retry periods at most. A failed write
// is retried after up's retry backoff; a 403 is reported (up.Forbidden)
// and ends Post. It blocks until then, or until ctx is done, and reports
// the zero Line as posted when it returns: the next term starts from the
// line it observes. One Post runs at a time per Elector.
func Post(ctx context.Context, cfg Config, up Leader) {
	defer up.Posted(wire.Line{}, "")
	// The line Lease as last read or written: to begin with, as the line
	// observed says the last leader wrote it (an Update replaces all of
	// it; a conflict reads it).
	own := at(cfg, up.Version())
	retry := up.NewRetry()
	refresh := time.NewTimer(cfg.Refresh)
	defer refresh.Stop()
	var last wire.Line // what own posts
	written := false
	// The term's first post waits for a line chosen from the leader's view
	// of the registry (listed half a retry period in, written with the
	// renewal that follows), two retry periods at most: the line carried
	// over from the last leader's would be posted again a moment later,
	// and a change of leader is one post, one event per outsider.
	firstBy := time.Now().Add(2 * cfg.RetryPeriod)
	posted := false // in this term
	for {
		want, ok, withView, changed := up.Wanted()
		if wait := time.Until(firstBy); ok && !posted && !withView && wait > 0 {
			if pace.SleepUntil(ctx, changed, wait) != nil {
				return
			}
			continue // look again; past firstBy, post what there is
		}
		if ok && (!written || !Same(want, last)) {
			l, err := write(ctx, cfg, up, own, want)
			switch {
			case err == nil:
				own, last, written, posted = l, want, true, true
				up.Posted(want, l.ResourceVersion)
				retry.Reset()
				refresh.Reset(cfg.Refresh)
			case apierrors.IsForbidden(err):
				up.Forbidden(err)
				return
			default:
				own = nil // read it again
				if pace.Sleep(ctx, retry.Next()) != nil {
					return
				}
				continue
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-refresh.C:
			written = false // write it again, unchanged: a refresh
		}
	}
}

// PostHandOver posts line, the line of a handover just written
// (Want.HandOver), within ctx, to the line Lease last known at
// resourceVersion rv ("" if unknown): a failure leaves the named candidate
// to take the lease by its turn, as after a release. It blocks for the
// calls it makes.
func PostHandOver(ctx context.Context, cfg Config, calls Calls, line wire.Line, rv string) {
	_, _ = write(ctx, cfg, calls, at(cfg, rv), line)
}

// at is the line Lease as a record said the last leader wrote it, at
// resourceVersion rv, to write it without reading it first (an Update
// replaces all of it; a conflict reads it); nil if rv is "".
func at(cfg Config, rv string) *coordinationv1.Lease {
	if rv == "" {
		return nil
	}
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: wire.LineName(cfg.Name), ResourceVersion: rv}}
}

// write writes line into the line Lease: an Update of own, conditional on
// its resourceVersion; without own (or when it is stale), a read, then a
// Create if there is none, or an Update of what is there. The line lives
// twice the refresh.
func write(ctx context.Context, cfg Config, calls Calls, own *coordinationv1.Lease, line wire.Line) (*coordinationv1.Lease, error) {
	name := wire.LineName(cfg.Name)
	line.Seconds = int32(2 * cfg.Refresh / time.Second)
	var out *coordinationv1.Lease
	update := func(from *coordinationv1.Lease) error {
		l := from.DeepCopy()
		wire.SetLine(l, cfg.Name, line, time.Now())
		return calls.DoSpare(ctx, VerbPost, true, func(ctx context.Context) error {
			var err error
			out, err = cfg.Leases.Update(ctx, l, metav1.UpdateOptions{})
			return err
		})
	}
	if own != nil {
		err := update(own)
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return out, err
		}
	}
	var there *coordinationv1.Lease
	err := calls.DoSpare(ctx, VerbPost, true, func(ctx context.Context) error {
		var err error
		there, err = cfg.Leases.Get(ctx, name, metav1.GetOptions{})
		return err
	})
	switch {
	case apierrors.IsNotFound(err):
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: name}}
		wire.SetLine(l, cfg.Name, line, time.Now())
		err = calls.DoSpare(ctx, VerbPost, true, func(ctx context.Context) error {
			var err error
			out, err = cfg.Leases.Create(ctx, l, metav1.CreateOptions{})
			return err
		})
		return out, err
	case err != nil:
		return nil, err
	}
	return out, update(there)
}
