package relect

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/relect/relect/internal/warden"
	"github.com/relect/relect/internal/wire"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

// Only the line watches (docs/design.md): the election's Lease is renewed
// every RetryPeriod, and each renewal reaches everyone who watches it. So
// only those who may act next watch it — the leader, its successors and
// its keepers (succession.go) — and every other candidate follows the
// line Lease (wire.LineName) instead, which the leader writes only when it
// or its line changes, and every lineRefresh. This file is that feature's
// one home:
//
//  1. the leader's side: postLine keeps the line Lease as the state wants
//     it (state.annotate sets what it wants with every write of the
//     election's Lease);
//  2. the outsider's side: a follower whose observed record posts a line
//     that does not name it reads the line Lease, and once it matches,
//     stops watching the election's Lease and watches the line Lease
//     (followLine), until the line names it, is withdrawn, or goes stale;
//  3. withdrawal: a follower that watches the election's Lease and sees
//     it held by a holder that posts no line — a plain client-go leader, a
//     relect leader with the registry off, a hand edit — withdraws the
//     line, so that those who follow it watch the election's Lease again.
//
// Safety does not depend on any of it: a candidate acquires only from what
// it observed of the election's Lease itself, with a conditional write.

// lineRefresh is how often a leader writes its line Lease when nothing
// changed: a third of the registration renewal (5 minutes by default), at
// least the lease duration. A line not written for twice that is stale.
func lineRefresh(cfg *config) time.Duration {
	return max(cfg.RegistrationRenewal/3, cfg.LeaseDuration)
}

// postedFor reports whether l's record posts its line: held by the leader
// that published its succession, not a handover, with Posted set. Its
// line is then in the line Lease, or soon will be.
func postedFor(l *coordinationv1.Lease) *succession {
	if l == nil {
		return nil
	}
	sc := successionOf(l)
	if sc == nil || !sc.Posted || sc.From == "" || sc.From != wire.Holder(l) || handOverOf(l) != nil {
		return nil
	}
	return sc
}

// sameLine reports whether a and b post the same line for the same term:
// what a follower of the line Lease would do differently (the seconds of
// cooldowns left aside, which change with every write).
func sameLine(a, b wire.Line) bool {
	if a.Holder != b.Holder || a.Term != b.Term || a.Withdrawn() != b.Withdrawn() {
		return false
	}
	if a.Withdrawn() {
		return true
	}
	x, y := a.Succession, b.Succession
	coolingIDs := func(s *succession) []string {
		var ids []string
		for _, c := range s.Cooling {
			ids = append(ids, c.Identity)
		}
		return ids
	}
	return x.From == y.From && x.Priority == y.Priority && x.Streak == y.Streak && x.Warden == y.Warden &&
		slices.Equal(x.Next, y.Next) && slices.Equal(x.Keepers, y.Keepers) &&
		slices.Equal(x.Passed, y.Passed) && slices.Equal(coolingIDs(x), coolingIDs(y))
}

// linePost is the leader's side of the line Lease, under the state's mutex:
// the line it wants posted.
type linePost struct {
	want     wire.Line
	wanted   bool      // want is set
	posted   wire.Line // the last line written in this term (zero: none)
	withView bool      // want was chosen from the leader's view of the registry
	// handOver is the line to post once a handover to a candidate outside
	// the line is written (handOverLine); handingOver: it is set.
	handOver    wire.Line
	handingOver bool
	wake        chan struct{} // signalled (cap 1) when want changes
	// mayBePosted: the line Lease may post a line — this Elector observed
	// a record that posts one, or wanted one posted — so a leader that
	// posts none withdraws it; else it writes nothing.
	mayBePosted bool
}

// lineReports is what posting the line tells the Elector's state, and asks
// of it.
type lineReports interface {
	lineWanted() (line wire.Line, ok, withView bool, changed <-chan struct{})
	lineVersion() string
	linePosted(line wire.Line, rv string)
	lineForbidden(err error)
}

// postLine keeps the line Lease as the state wants it while ctx (the
// term's) lasts: at once when the want changes, and every lineRefresh. A
// failed write is retried after the follower's backoff; a 403 stops it
// and turns posting off for this Elector (its lines no longer say Posted).
func postLine(ctx context.Context, cfg *config, gw *gateway, up lineReports) {
	defer up.linePosted(wire.Line{}, "") // the next term starts from the line it observes
	// The line Lease as last read or written: to begin with, as the line
	// observed says the last leader wrote it (an Update replaces all of
	// it; a conflict reads it).
	own := lineAt(cfg, up.lineVersion())
	retry := newRetryBackoff(cfg)
	refresh := time.NewTimer(lineRefresh(cfg))
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
		want, ok, withView, changed := up.lineWanted()
		if wait := time.Until(firstBy); ok && !posted && !withView && wait > 0 {
			if sleepUntilChanged(ctx, changed, wait) != nil {
				return
			}
			continue // look again; past firstBy, post what there is
		}
		if ok && (!written || !sameLine(want, last)) {
			l, err := writeLine(ctx, cfg, gw, own, want)
			switch {
			case err == nil:
				own, last, written, posted = l, want, true, true
				up.linePosted(want, l.ResourceVersion)
				retry.reset()
				refresh.Reset(lineRefresh(cfg))
			case apierrors.IsForbidden(err):
				up.lineForbidden(err)
				return
			default:
				own = nil // read it again
				if sleep(ctx, retry.next()) != nil {
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

// sleepUntilChanged waits for changed or d, whichever comes first; it
// returns ctx's error if ctx ends first.
func sleepUntilChanged(ctx context.Context, changed <-chan struct{}, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-changed:
	case <-t.C:
	}
	return nil
}

// lineAt is the line Lease as a record said the last leader wrote it, at
// resourceVersion rv, to write it without reading it first (an Update
// replaces all of it; a conflict reads it); nil if rv is "".
func lineAt(cfg *config, rv string) *coordinationv1.Lease {
	if rv == "" {
		return nil
	}
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: wire.LineName(cfg.Name), ResourceVersion: rv}}
}

// writeLine writes line into the line Lease: an Update of own, conditional
// on its resourceVersion; without own (or when it is stale), a read, then
// a Create if there is none, or an Update of what is there.
func writeLine(ctx context.Context, cfg *config, gw *gateway, own *coordinationv1.Lease, line wire.Line) (*coordinationv1.Lease, error) {
	name := wire.LineName(cfg.Name)
	line.Seconds = int32(2 * lineRefresh(cfg) / time.Second)
	var out *coordinationv1.Lease
	update := func(from *coordinationv1.Lease) error {
		l := from.DeepCopy()
		wire.SetLine(l, cfg.Name, line, time.Now())
		return gw.doSpare(ctx, verbPostLine, true, func(ctx context.Context) error {
			var err error
			out, err = cfg.leases.Update(ctx, l, metav1.UpdateOptions{})
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
	err := gw.doSpare(ctx, verbPostLine, true, func(ctx context.Context) error {
		var err error
		there, err = cfg.leases.Get(ctx, name, metav1.GetOptions{})
		return err
	})
	switch {
	case apierrors.IsNotFound(err):
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: name}}
		wire.SetLine(l, cfg.Name, line, time.Now())
		err = gw.doSpare(ctx, verbPostLine, true, func(ctx context.Context) error {
			var err error
			out, err = cfg.leases.Create(ctx, l, metav1.CreateOptions{})
			return err
		})
		return out, err
	case err != nil:
		return nil, err
	}
	return out, update(there)
}

// readLine reads the line Lease; a missing one reads as withdrawn.
func readLine(ctx context.Context, cfg *config, gw *gateway) (*coordinationv1.Lease, wire.Line, error) {
	var l *coordinationv1.Lease
	err := gw.do(ctx, verbGetLine, true, func(ctx context.Context) error {
		var err error
		l, err = cfg.leases.Get(ctx, wire.LineName(cfg.Name), metav1.GetOptions{})
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

// listLine reads the line Lease by a list of it alone (nil: missing), and
// returns the list's resourceVersion, current even when the line Lease has
// not changed for longer than the apiserver's watch cache keeps. Counted
// as a get-line.
func listLine(ctx context.Context, cfg *config, gw *gateway) (*coordinationv1.Lease, wire.Line, string, error) {
	var list *coordinationv1.LeaseList
	name := wire.LineName(cfg.Name)
	err := gw.do(ctx, verbGetLine, true, func(ctx context.Context) error {
		var err error
		list, err = cfg.leases.List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
		return err
	})
	if err != nil {
		return nil, wire.Line{}, "", err
	}
	for i := range list.Items {
		if l := &list.Items[i]; l.Name == name {
			return l, wire.LineOf(l), list.ResourceVersion, nil
		}
	}
	return nil, wire.Line{}, list.ResourceVersion, nil
}

// The outsider's side, on the follower (follow.go).

// mayFollowLine reports whether the follower may stop watching the
// election's Lease and follow the line Lease: the registry is on, the
// record it observed posts a line that names neither this candidate nor
// anyone it could not be told of (the holder is the line's leader, not
// this candidate), nothing is due, a try that did not match is not being
// held back, the record observed has not expired (its holder may be gone
// with its whole line: the follower stays for its turn), and, after a line
// that went stale, the follower has seen the election's Lease change since
// it came back.
func (f *follower) mayFollowLine() bool {
	if !f.cfg.registry || f.lease == nil || f.stale || f.needRead || f.lineHold > 0 || time.Now().Before(f.lineRetryAt) {
		return false
	}
	if free, turns := f.freeAt(); turns && !time.Now().Before(free) {
		return false // the holder may be gone, with its line: stay for the turn
	}
	sc := postedFor(f.lease)
	return sc != nil && !sc.Names(f.cfg.identity) && sc.From != f.cfg.identity && !f.due()
}

// followLine follows the line Lease instead of the election's: it reads
// it, and if it posts the line of the record observed, stops the
// election's watch and watches the line Lease, reporting each line to the
// state (observedLine), until the line names this candidate, is withdrawn
// or deleted, is not written for its lifetime (stale: the leader and its
// whole line may be gone), or its watch fails. It then returns nil with a
// read of the election's Lease due (needRead): the follower watches it
// again. It returns ctx's error when ctx is done. A line that does not
// match yet (the leader has not posted it) is tried again after a backoff
// that grows to the refresh period.
func (f *follower) followLine(ctx context.Context) error {
	l, line, err := readLine(ctx, f.cfg, f.gw)
	if err != nil || l == nil || !sameLine(line, wire.Line{Holder: wire.Holder(f.lease), Term: wire.Transitions(f.lease), Succession: postedFor(f.lease)}) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		f.lineRetryAt = time.Now().Add(f.lineRetry.next())
		return nil
	}
	f.lineRetry.reset()
	f.stopWatch()
	// Named the warden, it reads the election's Lease from here on; the
	// record it watched counts from when it first saw it (Seed).
	ward := warden.New(f.cfg.identity, warden.Period(f.cfg.RetryPeriod), warden.Beat(f.cfg.LeaseDuration), line,
		func(l *coordinationv1.Lease) string { return string(recordKey(recordOf(l))) })
	defer ward.Stop()
	ward.Seed(f.lease, f.observedAt)
	// What it knew of the election's Lease ages from here: it is read
	// again before anything is done with it.
	f.known, f.lease, f.key, f.needRead = false, nil, nil, true
	f.up.observedLine(line)
	rv := l.ResourceVersion
	listed := false
	for {
		w, err := f.gw.watchNamed(ctx, wire.LineName(f.cfg.Name), rv, verbWatchLine)
		if apierrors.IsResourceExpired(err) && !listed {
			// Written every refresh period (minutes), the line Lease's
			// own version soon ages out of the apiserver's watch cache
			// (75 s): 410 Gone. A list of it alone gives a current one.
			listed = true
			l, now, listRV, err := listLine(ctx, f.cfg, f.gw)
			if err != nil || l == nil || !sameLine(now, line) {
				return ctx.Err() // the election's Lease is read again
			}
			rv = listRV
			continue
		}
		if err != nil {
			return ctx.Err()
		}
		listed = false
		out, err := f.readLineWatch(ctx, w, &rv, line, ward)
		w.Stop()
		switch {
		case out.silent != nil:
			f.wardenBack(out.silent, out.since)
		case out.stale:
			// The leader may be gone, with its whole line: the follower
			// does not follow the line again before it has seen the
			// election's Lease change (a renewal).
			f.lineHold = 2
		}
		if !out.more || err != nil {
			return err
		}
	}
}

// wardenBack makes l, which this candidate's read as the line's warden
// found released, or unchanged since since, its observation of the
// election's Lease, observed since then: it was that record then already,
// so the follower's expiry may count from there, as a watcher's would. The
// follower then watches the election's Lease from l, and does not follow
// the line again before it has seen the Lease change (a renewal, or a
// takeover).
func (f *follower) wardenBack(l *coordinationv1.Lease, since time.Time) {
	f.lineHold = 2
	f.observe(l, false)
	f.needRead = false
	if since.Before(f.observedAt) {
		f.observedAt = since
	}
}

// setRegistration gives the state this Run's registration (nil: none,
// or Run ends), for the warden's beats.
func (s *state) setRegistration(r *registrar) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reg = r
}

// wardenBeat renews this candidate's registration now, as the line's
// warden (warden.Beat): the leader sees its warden alive by it.
func (s *state) wardenBeat() {
	s.mu.Lock()
	r := s.reg
	s.mu.Unlock()
	if r != nil {
		r.renewNow()
	}
}

// lineExit is why readLineWatch returned: more, the server closed the
// watch (resume it); stale, the line was not written for its lifetime;
// silent, a warden read the election's Lease released, or unchanged since
// since (its holder has not renewed for two retry periods), or, with
// stale, the warden's last read, of a record seen since since. Else the
// follower watches the election's Lease again with a read.
type lineExit struct {
	more, stale bool
	silent      *coordinationv1.Lease
	since       time.Time
}

// readLineWatch reads the line Lease's watch w until the follower must
// watch the election's Lease again, the server closes the watch (resume
// from *rv), or ctx is done (its error); see lineExit. line is the line
// last observed. While the line names this candidate its warden (ward,
// the follow phase's, kept across the watch's resumptions), it also reads
// the election's Lease every warden.Period.
func (f *follower) readLineWatch(ctx context.Context, w watch.Interface, rv *string, line wire.Line, ward *warden.Warden) (lineExit, error) {
	// Spread by up to a tenth of the refresh, so that the followers of a
	// line gone stale do not all come back at one instant.
	staleAfter := func(line wire.Line) time.Duration {
		spread := time.Duration(rand.Int64N(int64(lineRefresh(f.cfg)/10) + 1))
		return max(time.Duration(line.Seconds)*time.Second, 2*lineRefresh(f.cfg)) + spread
	}
	timer := time.NewTimer(staleAfter(line))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return lineExit{}, ctx.Err()
		case <-timer.C:
			// A warden keeps what its reads observed: its observation of
			// the record may be older than the stale line's comeback.
			last, since := ward.Last()
			return lineExit{stale: true, silent: last, since: since}, nil
		case <-ward.Due():
			silent, since, back, beat := ward.Probe(ctx, f.gw.getLease)
			if beat {
				f.up.wardenBeat()
			}
			if back {
				return lineExit{silent: silent, since: since}, ctx.Err()
			}
		case ev, open := <-w.ResultChan():
			e := f.gw.event(ev, open)
			if e.lease != nil {
				*rv = e.lease.ResourceVersion
			}
			switch e.kind {
			case watchClosed:
				return lineExit{more: true}, nil
			case leaseDeleted, watchBroken:
				return lineExit{}, nil
			case leaseChanged:
				line = wire.LineOf(e.lease)
				f.up.observedLine(line)
				if line.Withdrawn() || line.Holder == "" || line.Succession.Names(f.cfg.identity) {
					return lineExit{}, nil
				}
				timer.Reset(staleAfter(line))
				ward.Follow(line)
			}
		}
	}
}

// withdrawLine withdraws the line Lease for l, the record this follower
// watched, if l is held and posts no line while the line Lease still posts
// one (see the file's comment): a conditional Update, which a concurrent
// withdrawal by another watcher makes fail harmlessly.
func (f *follower) withdrawLine(ctx context.Context, l *coordinationv1.Lease) {
	if !f.cfg.registry {
		return
	}
	line := wire.Line{}
	if l != nil {
		line.Holder, line.Term = wire.Holder(l), wire.Transitions(l)
	}
	there, posted, err := readLine(ctx, f.cfg, f.gw)
	if err != nil || there == nil || posted.Withdrawn() || posted.Term > line.Term {
		return // nothing to withdraw, or posted by a later term than l's
	}
	line.Seconds = posted.Seconds
	out := there.DeepCopy()
	wire.SetLine(out, f.cfg.Name, line, time.Now())
	_ = f.gw.doSpare(ctx, verbPostLine, true, func(ctx context.Context) error {
		_, err := f.cfg.leases.Update(ctx, out, metav1.UpdateOptions{})
		return err
	})
}

// noteLine looks at l, a record (nil: missing) that this follower observed
// while it watches the election's Lease, for a withdrawal (see the file's
// comment): once a record posted a line in this follow phase, a record that
// is missing, or held by a holder that posts none (not a release, not a
// handover in progress), makes the line due for withdrawal two lease
// durations later — unless a record that posts a line comes first: a hand
// edit is followed, once the edited record expires (a lease duration and a
// turn in line), by a relect leader's term, which posts its line, and the
// candidates following the line need not come back meanwhile. Only
// those who watch see it, and they are few: the line, a newcomer, a
// candidate that had to read again.
func (f *follower) noteLine(l *coordinationv1.Lease) {
	if !f.cfg.registry {
		return
	}
	switch {
	case postedFor(l) != nil:
		f.sawPosted, f.withdrawAt = true, time.Time{}
	case !f.sawPosted:
	case l == nil || (wire.Holder(l) != "" && handOverOf(l) == nil):
		if f.withdrawAt.IsZero() {
			f.withdrawAt = time.Now().Add(2 * f.cfg.LeaseDuration)
		}
	default: // released, or a handover: the next holder's record will say
		f.withdrawAt = time.Time{}
	}
}

// watchNamed opens a watch on the Lease named name, resuming after rv; the
// call is counted as verb.
func (g *gateway) watchNamed(ctx context.Context, name, rv, verb string) (watch.Interface, error) {
	var w watch.Interface
	err := g.do(ctx, verb, false, func(ctx context.Context) error {
		var err error
		w, err = g.cfg.leases.Watch(ctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
			ResourceVersion: rv,
		})
		return err
	})
	return w, err
}

// The state's side, under mu.

// lineWanted returns the line this leader wants posted, whether it was
// chosen from its view of the registry, and a channel signalled when that
// changes; ok is false while it wants none for the record it last wrote
// (another term's: the term's first write is not annotated yet, or it
// handed over).
func (s *state) lineWanted() (line wire.Line, ok, withView bool, changed <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := &s.line
	if p.wake == nil {
		p.wake = make(chan struct{}, 1)
	}
	w := s.written
	ok = p.wanted && w != nil && w.HolderIdentity == s.cfg.identity && p.want.Term == clampTransitions(w.LeaderTransitions)
	return p.want, ok, p.withView, p.wake
}

// lineVersion returns the line Lease's resourceVersion as the line
// observed (or this leader's last post) says.
func (s *state) lineVersion() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.succession.lineVersion()
}

// linePosted records line, and the line Lease's resourceVersion, after
// this leader's write of it (zero and "" at the end of its term), for the
// records it writes next: they say Posted once the line Lease posts their
// line (wantLineLocked).
func (s *state) linePosted(line wire.Line, rv string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.succession.linePostedRV = rv
	s.line.posted = line
}

// lineForbidden turns posting off for this Elector: the lines it publishes
// from now on do not say Posted, so every candidate keeps watching the
// election's Lease, as without the line Lease. Reported once.
func (s *state) lineForbidden(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.succession.lineOff {
		return
	}
	s.succession.lineOff = true
	s.logs.log(slog.LevelWarn, "relect: this candidate may not write its line Lease; every candidate keeps watching the election's Lease",
		"lease", s.cfg.describe, "line", wire.LineName(s.cfg.Name), "err", err)
}

// wantLineLocked sets the line this leader wants posted, with a record of
// its own of term term carrying sc (nil: none). A line that is not posted
// (sc without Posted) is wanted withdrawn, so that candidates following
// an earlier leader's line watch the election's Lease again. It reports
// whether the line Lease posts sc's line already: until it does, the
// record says Posted false (annotate), so that no candidate reads the line
// Lease before the leader wrote it, and none backs off for finding it
// stale. Requires mu.
func (s *state) wantLineLocked(term int32, sc *succession) (posted bool) {
	line := wire.Line{Holder: s.cfg.identity, Term: term}
	p := &s.line
	if sc != nil && sc.Posted {
		line.Succession, p.mayBePosted = sc, true
	}
	posted = line.Succession != nil && sameLine(p.posted, line)
	if !p.mayBePosted {
		return posted
	}
	withView := s.succession.view != nil
	if p.wanted && sameLine(p.want, line) && p.withView == withView {
		p.want = line // the cooldowns' seconds, for the next write
		return posted
	}
	p.want, p.wanted, p.withView = line, true, withView
	if p.wake == nil {
		p.wake = make(chan struct{}, 1)
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return posted
}

// wantHandOverLineLocked prepares, for a handover record of term term to
// to carrying sc, the line that tells to of it when to follows the line
// Lease: the line posted does not name it, so it does not watch the
// election's Lease. The line names to as holder and first in line; the
// leader posts it once the handover is written (campaign.release), and to,
// named, reads the election's Lease and takes the lease at once. Nothing
// when no line was posted, or the posted one names to. Requires mu.
func (s *state) wantHandOverLineLocked(to string, term int32, sc *succession) {
	p := &s.line
	p.handingOver = false
	if !p.mayBePosted || (p.wanted && p.want.Succession.Names(to)) {
		return
	}
	line := succession{Term: term, From: s.cfg.identity, Priority: s.cfg.Priority, Posted: true}
	if sc != nil {
		line = *sc
		line.Posted = true
	}
	line.Next = append([]successor{{Identity: to}}, line.Next...)
	line.Next = line.Next[:min(len(line.Next), maxSuccessors)]
	p.handOver, p.handingOver = wire.Line{Holder: to, Term: term, Succession: &line}, true
}

// handOverLine returns the line to post after a handover was written
// (wantHandOverLineLocked), once; ok is false if there is none.
func (s *state) handOverLine() (line wire.Line, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	line, ok = s.line.handOver, s.line.handingOver
	s.line.handingOver = false
	return line, ok
}

// postHandOverLine posts the line of a handover just written, if it needs
// one (state.handOverLine), within ctx: a failure leaves the named
// candidate to take the lease by its turn, as after a release.
func postHandOverLine(ctx context.Context, cfg *config, gw *gateway, st *state) {
	line, ok := st.handOverLine()
	if !ok {
		return
	}
	_, _ = writeLine(ctx, cfg, gw, lineAt(cfg, st.lineVersion()), line)
}

// observedLine records a line read from the line Lease by a follower that
// follows it: its holder leads (or holds, if withdrawn), and its
// succession is the line observed.
func (s *state) observedLine(line wire.Line) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.term != nil {
		return
	}
	if line.Succession != nil {
		s.succession.line, s.succession.lineAt = line.Succession, time.Now()
	}
	s.maxTransitions = max(s.maxTransitions, int(line.Term))
	s.setLeaderLocked(line.Holder, int(line.Term))
}
