package relect

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/relect/relect/internal/leaserecord"
	"github.com/relect/relect/internal/leasewatch"
	"github.com/relect/relect/internal/pace"
)

// A watch on the one Lease: the follower reads one while it waits to
// acquire, and the leader goes on reading the same one during its term
// (watchTerm). Both open it through the gateway (gateway.watch) and read
// its events through it (gateway.event, which decodes them:
// internal/leasewatch).

// event decodes what a watch opened through the gateway delivered (open is
// false once it is closed; see leasewatch.Decode), and reports an event
// that carries an object — a change, a deletion, a bookmark — as contact
// with the API, exactly as an answer to a call is: a follower learns by
// watching.
func (g *gateway) event(ev watch.Event, open bool) leasewatch.Event {
	e := leasewatch.Decode(ev, open)
	if e.CarriesObject() {
		g.up.heard()
	}
	return e
}

// termWatchReports is what the leader's watch tells the Elector's state.
type termWatchReports interface {
	observed(rec *record, l *coordinationv1.Lease) (stranger bool)
	observedMissing(restart bool)
}

// watchTerm reads the leader's watch w until ctx (the campaign's) is done:
// a record naming another holder, an emptied holder or a deletion — an
// operator's hand edit, say — ends the term the moment it is seen, instead
// of at the next renewal (up to RetryPeriod later). Our own renewals come
// back as events naming us and change nothing. If the watch ends, renewals
// alone detect a loss, as with client-go.
//
// rv is the resourceVersion of the acquiring write. The follower's watch
// may still hold events from before it — queued while the follower was cut
// off, say — which show the Lease as it was before we took it: they are
// skipped until the event of our own write; a loss can only come after
// it. (If that event never comes, the watch shows nothing, and renewals
// detect a loss, as without a watch.)
//
// A nil w is a follower that acquired before it watched (it found the lease
// free at its first read): watchTerm opens one from rv, so that an edit
// made after our write but before the watch opens is still shown — at once
// if the bucket has a token to spare beyond the next renewal's, else after
// a RetryPeriod, so as not to delay a renewal. A failure to open leaves
// the renewals to detect a loss.
func watchTerm(ctx context.Context, gw *gateway, up termWatchReports, w watch.Interface, rv string) {
	caughtUp := w == nil // a watch opened from rv shows only what followed it
	if w == nil {
		if !gw.hasTokens(2) && pace.Sleep(ctx, gw.cfg.RetryPeriod) != nil {
			return
		}
		var err error
		if w, err = gw.watch(ctx, rv); err != nil {
			return
		}
	}
	defer w.Stop()
	r := leasewatch.Reader{Decode: gw.event, Handle: func(e leasewatch.Event) {
		if !caughtUp && e.Lease != nil {
			caughtUp = e.Lease.ResourceVersion == rv
			return // before our write, or our write itself
		}
		switch e.Kind {
		case leasewatch.Changed:
			up.observed(leaserecord.Of(e.Lease), e.Lease)
		case leasewatch.Deleted:
			up.observedMissing(false)
		}
	}}
	var seen string // the resourceVersion read up to, which nothing resumes from
	r.Read(ctx, w, &seen)
}
