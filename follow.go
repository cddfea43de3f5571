package relect

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/relect/relect/internal/leaserecord"
	"github.com/relect/relect/internal/leasewatch"
	"github.com/relect/relect/internal/linelease"
	"github.com/relect/relect/internal/pace"
	"github.com/relect/relect/internal/succession"
	"github.com/relect/relect/internal/wire"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// errWatchForbidden ends following when the candidate may not watch the
// Lease; the Elector then polls as client-go does.
var errWatchForbidden = errors.New("relect: not allowed to watch the Lease; polling instead")

// never is a wait longer than any follower waits for: a year.
const never = 365 * 24 * time.Hour

// followerReports is what a follower tells the Elector's state, and asks of
// it.
type followerReports interface {
	observed(rec *record, l *coordinationv1.Lease) (stranger bool)
	observedMissing(restart bool)
	createAllowedAt() time.Time
	ours(rec *record) bool
	recreatedTransitions() int32
	checkFailing() bool
	observedLine(line wire.Line)
	wardenBeat()
}

// follower is one follow phase: what this candidate knows of the Lease and
// since when. It is used by one goroutine.
type follower struct {
	cfg   *config
	gw    *gateway
	up    followerReports
	retry *pace.Backoff // after failed calls; reset once watching

	w        watch.Interface       // open watch, or nil
	needRead bool                  // read the Lease before anything else
	wrote    bool                  // an acquiring write was sent
	known    bool                  // lease reflects a read or a watch event
	lease    *coordinationv1.Lease // last observed; nil if missing or unknown
	key      []byte                // its leaserecord.Key, to tell a change
	// observedAt is the local time the record last changed: client-go's
	// expiry rule counts from it.
	observedAt time.Time
	rv         string // where a new watch resumes
	// listRead: the next read lists the one Lease, for the list's version
	// to watch from — a watch from the Lease's own version failed with
	// 410 Gone: unchanged for longer than the apiserver's watch cache
	// keeps (75 s), a Lease's own version is too old to resume from.
	listRead bool
	// listForbidden: that list was refused (403: RBAC without list, as
	// --disable-registry allows); reads stay Gets, as before.
	listForbidden bool
	// watchedMissing: the Lease is missing and a watch has seen it so,
	// without a gap, since the state's missing-Lease wait began; only then
	// may it be created (see observe).
	watchedMissing bool
	// After an acquiring write failed: stale (a conflict) waits for the
	// watch to show what won, until staleUntil, then reads; retryAt (the
	// API shed or failed the write) holds the next try back while the
	// watch goes on.
	stale      bool
	staleUntil time.Time
	retryAt    time.Time
	// standby: never acquire (Options.Standby), only observe.
	standby bool
	// The line Lease (internal/linelease): lineRetryAt holds back the next try to
	// follow it after one that did not match, by lineRetry's backoff;
	// sawPosted: a record observed in this follow phase posted its line;
	// withdrawAt: since a record that posts none was observed, when the
	// line is withdrawn if such a record is still there (zero: not due).
	lineRetry   *pace.Backoff
	lineRetryAt time.Time
	sawPosted   bool
	withdrawAt  time.Time
	// lineHold counts down the records to observe before the line may be
	// followed again (after it went stale: the record read, then a
	// renewal).
	lineHold int
}

// follow is a follower's campaign when relect has the Lease client (Config
// or Client): instead of client-go's poll every RetryPeriod, it watches the
// one Lease, and tries to acquire it the moment it is released or deleted,
// or when (its observation of the last change + the lease duration) passes
// — client-go's expiry rule on the local clock, with relect's floor of its
// own LeaseDuration and its rule for records naming it that it did not
// write. The acquisition is a write conditional on the resourceVersion
// observed, so a renewal missed by the watch makes it fail with a conflict,
// never succeed.
//
// follow returns once this candidate holds the lease, with its watch still
// open (or nil if it had none) and the resourceVersion of its acquiring
// write: client-go then resumes the lease (its acquire loop sees our record)
// and renews it, and the leader keeps reading the watch (watchTerm). It
// returns ctx's error when ctx is done, and errWatchForbidden on a 403 to
// the watch; wrote reports whether it sent an acquiring write, which may
// have been applied even if it failed here.
func follow(ctx context.Context, cfg *config, gw *gateway, up followerReports) (w watch.Interface, rv string, wrote bool, err error) {
	f := &follower{cfg: cfg, gw: gw, up: up, retry: newRetryBackoff(cfg), needRead: true, standby: cfg.Standby,
		lineRetry: pace.NewBackoff(cfg.RetryPeriod, lineRefresh(cfg))}
	if err := f.run(ctx); err != nil {
		f.stopWatch()
		return nil, "", f.wrote, err
	}
	return f.w, f.rv, true, nil // the leader keeps watching; w may be nil
}

// run follows until it acquired (nil) or cannot go on.
func (f *follower) run(ctx context.Context) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if f.needRead && !time.Now().Before(f.retryAt) {
			if err := f.read(ctx); err != nil {
				if err := f.backOff(ctx); err != nil {
					return err
				}
				continue
			}
			f.needRead = false
		}
		if !f.withdrawAt.IsZero() && !time.Now().Before(f.withdrawAt) {
			f.withdrawAt, f.sawPosted = time.Time{}, false
			f.withdrawLine(ctx, f.lease)
		}
		if f.due() {
			err := f.acquire(ctx)
			if err == nil {
				return nil
			}
			if err := f.acquireFailed(ctx, err); err != nil {
				return err
			}
			continue
		}
		if f.mayFollowLine() {
			if err := f.followLine(ctx); err != nil {
				return err
			}
			continue
		}
		if f.w == nil {
			if err := f.openWatch(ctx); err != nil {
				if apierrors.IsForbidden(err) && f.standby {
					return f.poll(ctx) // a standby never falls back on client-go, which writes
				}
				if apierrors.IsForbidden(err) {
					return errWatchForbidden
				}
				f.needRead = true
				if apierrors.IsResourceExpired(err) && !f.listRead && !f.listForbidden {
					f.listRead = true // read again at once, by a list
					continue
				}
				if err := f.backOff(ctx); err != nil {
					return err
				}
				continue
			}
			f.retry.Reset() // watching: the follower's steady state
			f.listRead = false
		}
		if err := f.await(ctx); err != nil {
			return err
		}
	}
}

// acquireFailed decides what follows an acquiring write that failed with
// err. A conflict means someone else won, or the Lease moved on: the watch
// will show it, so the follower waits for its next event (no read), or
// reads if it has no watch, or the watch shows nothing within a retry
// period. A 429 or 5xx means the API shed or failed the write: the
// follower tries again after a backoff, reading its healthy watch
// meanwhile (no new read, no new watch). Anything else (a timeout, a dead
// connection) may have killed the watch too: it starts over with a read
// and a new watch, after a backoff.
func (f *follower) acquireFailed(ctx context.Context, err error) error {
	switch {
	case (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)) && f.w != nil:
		f.stale, f.staleUntil = true, time.Now().Add(f.cfg.RetryPeriod)
		return nil
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
		f.needRead = true
		return nil
	case f.w != nil && (apierrors.IsTooManyRequests(err) || callResult(ctx, err) == resultServerError):
		return f.backOff(ctx)
	}
	f.needRead = true
	f.stopWatch()
	return f.backOff(ctx)
}

// backOff waits before the next try after a failed call: with a watch
// open, it only holds the next try back (retryAt) and the loop goes on
// reading the watch, whose next event may make the try needless — a
// follower must not sleep through a release or a handover; without one,
// it sleeps.
func (f *follower) backOff(ctx context.Context) error {
	if f.w != nil {
		f.retryAt = time.Now().Add(f.retry.Next())
		return nil
	}
	return pace.Sleep(ctx, f.retry.Next())
}

// poll is a standby's follow when it may not watch: it reads the Lease
// every RetryPeriod, with the follower's backoff while reads fail, until
// ctx is done.
func (f *follower) poll(ctx context.Context) error {
	for {
		wait := f.cfg.RetryPeriod
		if err := f.read(ctx); err != nil {
			wait = f.retry.Next()
		}
		if err := pace.Sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// wakeAt is when the follower acts next without a watch event: when a
// held-back read is due; when the Lease may be taken over, or a held-back
// try is due; after a conflict, when it gives up waiting for the watch to
// show what won; when a held-back try to follow the line is due.
func (f *follower) wakeAt() time.Time {
	switch {
	case f.needRead:
		return f.retryAt // a read held back (backOff)
	case f.stale:
		return f.staleUntil
	}
	at := time.Now().Add(never)
	if !f.standby {
		at = f.expiry()
		if f.retryAt.After(at) {
			at = f.retryAt
		}
	}
	if w := f.withdrawAt; !w.IsZero() && w.Before(at) {
		at = w
	}
	// A try to follow the line held back (followLine) is made when its
	// backoff ends, not at the next renewal: the renewal reaches every
	// follower at once, and the followers whose tries were shed (429)
	// together would all try again on it, together, and be shed again.
	if r := f.lineRetryAt; time.Now().Before(r) && r.Before(at) {
		at = r
	}
	return at
}

// await waits for the next watch event, or until the follower acts next
// (wakeAt).
func (f *follower) await(ctx context.Context) error {
	expiry := time.NewTimer(time.Until(f.wakeAt()))
	defer expiry.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-expiry.C:
		if f.stale { // the watch showed nothing since the conflict: read
			f.stale, f.needRead = false, true
		}
		return nil // else due() now holds: the loop tries to acquire
	case ev, open := <-f.w.ResultChan():
		switch e := f.gw.event(ev, open); e.Kind {
		case leasewatch.Closed:
			f.w = nil // closed by the server: resume from f.rv
		case leasewatch.Changed:
			f.observe(e.Lease, true)
		case leasewatch.Deleted:
			if e.Lease != nil {
				f.rv = e.Lease.ResourceVersion // a resumed watch goes on from here
			}
			f.observe(nil, true)
		case leasewatch.Progress:
			f.rv = e.Lease.ResourceVersion
		case leasewatch.Broken:
			f.stopWatch() // start over with a read
			f.needRead = true
		}
		return nil
	}
}

func (f *follower) stopWatch() {
	if f.w != nil {
		f.w.Stop()
		f.w = nil
	}
}

// read gets the Lease — by a list of it alone after a watch from its own
// version got 410 Gone (listRead). NotFound is an observation (no Lease),
// not an error.
func (f *follower) read(ctx context.Context) error {
	if f.listRead {
		l, rv, err := f.gw.listLease(ctx)
		switch {
		case err == nil:
			f.observe(l, false)
			f.rv = rv // the list's version: current, unlike a Lease's own
			return nil
		case !apierrors.IsForbidden(err):
			return err
		}
		f.listRead, f.listForbidden = false, true
	}
	l, err := f.gw.getLease(ctx)
	switch {
	case err == nil:
		f.observe(l, false)
	case apierrors.IsNotFound(err):
		f.observe(nil, false)
		f.rv = ""
	default:
		return err
	}
	return nil
}

// openWatch opens a watch on the one Lease, resuming after f.rv. A watch
// that cannot resume (no resourceVersion known: the last read found no
// Lease) starts a missing Lease's wait over from the moment it is open:
// what happened before is unseen.
func (f *follower) openWatch(ctx context.Context) error {
	w, err := f.gw.watch(ctx, f.rv)
	if err != nil {
		return err
	}
	f.w = w
	if f.known && f.lease == nil && (f.rv == "" || !f.watchedMissing) {
		f.watchedMissing = true
		f.up.observedMissing(true)
	}
	return nil
}

// observe records a Lease read, or shown by the watch if fromWatch (nil: it
// does not exist). The observation time moves only when the record changes,
// as in client-go.
func (f *follower) observe(l *coordinationv1.Lease, fromWatch bool) {
	f.noteLine(l)
	f.known, f.stale = true, false
	if fromWatch {
		f.needRead = false // the watch shows the Lease as it is now
	}
	if l == nil {
		// A missing Lease may have been deleted by hand while held, and
		// its holder lead on, unaware, until its next renewal fails:
		// RenewDeadline at most after its last successful one, which was
		// before the deletion. So it is created only once this follower
		// has watched it missing, without a gap, for createWait (our
		// LeaseDuration, not the deleted record's: that may be absurd) —
		// also when this process never saw it: it cannot tell a Lease
		// that never existed from one deleted a moment ago, nor see a
		// Lease created and deleted again while it was not watching. A
		// deletion the watch shows, or a read while a watch is open,
		// starts that wait over at once; any other read starts it when a
		// watch opens (see openWatch).
		f.watchedMissing = fromWatch || f.w != nil
		f.lease, f.key, f.observedAt = nil, nil, time.Now()
		f.up.observedMissing(f.watchedMissing)
		return
	}
	f.watchedMissing = false
	f.lease, f.rv = l, l.ResourceVersion
	rec := leaserecord.Of(l)
	if key := leaserecord.Key(rec); !bytes.Equal(key, f.key) {
		// A new record: a new situation, which a try held back after a
		// failure (retryAt) must not miss — a release, or a handover to
		// us. The backoff itself goes on growing until a watch opens.
		f.key, f.observedAt, f.retryAt = key, time.Now(), time.Time{}
		f.lineHold = max(f.lineHold-1, 0)
	}
	f.up.observed(rec, l)
}

// record returns the observed record, or nil.
func (f *follower) record() *record {
	if f.lease == nil {
		return nil
	}
	return leaserecord.Of(f.lease)
}

// expiry is when the observed lease may be taken over: if there is none,
// when it may be created (never before a watch saw it missing; see
// observe); at once if it is ours, or handed over to us; otherwise when it
// is free — released; or expired: the observation time plus the longer of
// the record's lease duration and ours (a handover's own duration, which
// is nobody's term) — plus this candidate's turn in the line of succession
// (succession.Turn).
func (f *follower) expiry() time.Time {
	free, turns := f.freeAt()
	if !turns {
		return free
	}
	return free.Add(succession.Turn(f.lease, f.cfg.identity, f.cfg.successionStep, f.standsBack()))
}

// freeAt is when the record observed leaves the lease free (expiry's
// terms); turns reports whether this candidate's turn in line counts from
// there (else freeAt is expiry itself).
func (f *follower) freeAt() (_ time.Time, turns bool) {
	rec := f.record()
	switch {
	case !f.known:
		return time.Time{}, false
	case rec == nil:
		if at := f.up.createAllowedAt(); f.watchedMissing && !at.IsZero() {
			return at, false
		}
		return time.Now().Add(never), false // not watched missing yet
	case f.up.ours(rec):
		return time.Time{}, false
	}
	own := time.Duration(f.cfg.leaseSeconds) * time.Second
	var free time.Time
	switch h := handOverOf(f.lease); {
	case h != nil && h.To == f.cfg.identity:
		return time.Time{}, false
	case h != nil:
		// Nobody leads during a handover: its record's short duration is
		// the named successor's time to take the lease, then succession
		// resumes.
		free = f.observedAt.Add(time.Duration(rec.LeaseDurationSeconds) * time.Second)
	case leaserecord.Released(rec):
		free = f.observedAt
	case rec.HolderIdentity == "":
		// Emptied by hand: our own lease duration, whatever the record
		// says (it may be absurd, and no holder is left to repair it).
		free = f.observedAt.Add(own)
	default:
		free = f.observedAt.Add(max(time.Duration(rec.LeaseDurationSeconds)*time.Second, own))
	}
	return free, true
}

// standsBack reports whether this candidate lets the others go first when
// the lease is free (internal/work): its own work check fails, or the line of
// succession has it cooling after a stuck handover — for the seconds it
// gave, from when this follower observed it.
func (f *follower) standsBack() bool {
	if f.cfg.Work.Check != nil && f.up.checkFailing() {
		return true
	}
	cool := successionOf(f.lease).CooldownOf(f.cfg.identity)
	return cool > 0 && time.Now().Before(f.observedAt.Add(cool))
}

// due reports whether the follower tries to acquire now.
func (f *follower) due() bool {
	now := time.Now()
	return f.known && !f.standby && !f.stale && !now.Before(f.retryAt) && !now.Before(f.expiry())
}

// acquire writes a record naming this candidate: a Create if there is no
// Lease (leaseTransitions: recreatedTransitions), else an Update conditional
// on the observed resourceVersion, with leaseTransitions + 1 unless it
// resumes its own record. The write is not the start of a term: client-go's
// elector, run next, resumes it with a write of its own, and the term
// begins there.
func (f *follower) acquire(ctx context.Context) error {
	var transitions int32
	if rec := f.record(); rec != nil {
		transitions = leaserecord.NextTransitions(rec, f.up.ours(rec))
	} else {
		transitions = f.up.recreatedTransitions()
	}
	seconds, id := int32(f.cfg.leaseSeconds), f.cfg.identity
	spec := func(sent time.Time) coordinationv1.LeaseSpec {
		now := metav1.NewMicroTime(sent)
		return coordinationv1.LeaseSpec{
			HolderIdentity:       &id,
			LeaseDurationSeconds: &seconds,
			AcquireTime:          &now,
			RenewTime:            &now,
			LeaseTransitions:     &transitions,
		}
	}
	l, sent, err := f.gw.acquire(ctx, f.lease, spec)
	if !sent.IsZero() {
		f.wrote = true
	}
	if err == nil {
		f.rv = l.ResourceVersion
	}
	return err
}

// The line Lease (internal/linelease, lineport.go): the follower decides
// when it follows the line Lease instead of the election's, and what it
// does when it comes back; the component reads, watches and withdraws it.

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
	sc := linelease.PostedFor(f.lease)
	return sc != nil && !sc.Names(f.cfg.identity) && sc.From != f.cfg.identity && !f.due()
}

// followLine follows the line Lease instead of the election's: it reads
// it, and if it posts the line of the record observed, stops the
// election's watch and follows the line Lease (linelease.Follow) until the
// follower must watch the election's Lease again. It then returns nil with
// a read of the election's Lease due (needRead), unless the line's warden
// brought a record back (wardenBack). It returns ctx's error when ctx is
// done. A line that does not match yet (the leader has not posted it) is
// tried again after a backoff that grows to the refresh period.
func (f *follower) followLine(ctx context.Context) error {
	cfg := lineConfigOf(f.cfg)
	l, line, err := linelease.Read(ctx, cfg, gatewayCalls{f.gw})
	if err != nil || l == nil || !linelease.Same(line, linelease.RecordLine(f.lease)) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		f.lineRetryAt = time.Now().Add(f.lineRetry.Next())
		return nil
	}
	f.lineRetry.Reset()
	f.stopWatch()
	seed, seedAt := f.lease, f.observedAt
	// What it knew of the election's Lease ages from here: it is read
	// again before anything is done with it.
	f.known, f.lease, f.key, f.needRead = false, nil, nil, true
	out, err := linelease.Follow(ctx, cfg, lineOutsider{gatewayCalls{f.gw}, f}, l, seed, seedAt)
	switch {
	case out.Silent != nil:
		f.wardenBack(out.Silent, out.Since)
	case out.Stale:
		// The leader may be gone, with its whole line: the follower does
		// not follow the line again before it has seen the election's
		// Lease change (a renewal).
		f.lineHold = 2
	}
	return err
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

// withdrawLine withdraws the line Lease for l, the record this follower
// watched (linelease.Withdraw), with the registry on.
func (f *follower) withdrawLine(ctx context.Context, l *coordinationv1.Lease) {
	if f.cfg.registry {
		linelease.Withdraw(ctx, lineConfigOf(f.cfg), gatewayCalls{f.gw}, l)
	}
}

// noteLine looks at l, a record (nil: missing) that this follower observed
// while it watches the election's Lease, for a withdrawal: once a record
// posted a line in this follow phase, a record that is missing, or held by
// a holder that posts none (not a release, not a handover in progress),
// makes the line due for withdrawal two lease durations later — unless a
// record that posts a line comes first: a hand edit is followed, once the
// edited record expires (a lease duration and a turn in line), by a
// relect leader's term, which posts its line, and the candidates following
// the line need not come back meanwhile. Only those who watch see it, and
// they are few: the line, a newcomer, a candidate that had to read again.
func (f *follower) noteLine(l *coordinationv1.Lease) {
	if !f.cfg.registry {
		return
	}
	switch {
	case linelease.PostedFor(l) != nil:
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

// lineOutsider is a follower's port to the line Lease component
// (linelease.Outsider).
type lineOutsider struct {
	gatewayCalls
	f *follower
}

var _ linelease.Outsider = lineOutsider{}

func (o lineOutsider) ReadLease(ctx context.Context) (*coordinationv1.Lease, error) {
	return o.f.gw.getLease(ctx)
}

func (o lineOutsider) RecordKey(l *coordinationv1.Lease) string {
	return string(leaserecord.Key(leaserecord.Of(l)))
}

func (o lineOutsider) Observed(line wire.Line) { o.f.up.observedLine(line) }
func (o lineOutsider) WardenBeat()             { o.f.up.wardenBeat() }
