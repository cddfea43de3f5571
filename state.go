package relect

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/relect/relect/internal/leaserecord"
	"github.com/relect/relect/internal/linelease"
	"github.com/relect/relect/internal/logq"
	"github.com/relect/relect/internal/notify"
	"github.com/relect/relect/internal/registry"
	"github.com/relect/relect/internal/succession"
	"github.com/relect/relect/internal/wire"
	"github.com/relect/relect/internal/work"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// state is what an Elector knows and counts: what it observed of the Lease,
// what it last wrote, the campaign in progress and its term, and the
// counters of Stats. The gateway, the follower and the leader's watch
// report to it; the public methods read it. One mutex guards all of it,
// and nothing done under that mutex calls code outside this package or
// waits: events go to the eventQueue and logs to the log queue (internal/logq), neither of
// which blocks, and new leaders to the notifier's queue (internal/notify).
type state struct {
	cfg    *config
	events *eventQueue
	logs   *logq.Queue

	mu sync.Mutex // guards every field below

	leader  string  // the holder identity last observed
	written *record // our last successful write
	// sent is the last record naming us that we sent, applied or not: a
	// write whose answer was lost may have been applied (see mine).
	sent *record
	// published is the client-go view of our last write (leaserecord.ClientGoView),
	// publishedAt when the first write with that view was sent: the last
	// change a client-go follower could see, which bounds its takeover.
	published   []byte
	publishedAt time.Time
	// missingSince is when the Lease began to be seen missing, without a
	// gap in the observation: a missing Lease is created no sooner than
	// createWait after it (createAllowedAt). Zero while it is seen to
	// exist, or before any observation in this campaign.
	missingSince time.Time
	// maxTransitions is the highest leaseTransitions read, watched or
	// written; -1 before any.
	maxTransitions int

	// The campaign in progress, once client-go runs it (all zero between
	// campaigns): stopCampaign ends it; followed says it acquired by
	// following, so that client-go only resumes our write; term is its
	// term, from the acquiring write on.
	stopCampaign context.CancelCauseFunc
	followed     bool
	term         *term

	// reg is this Run's registration, nil without one: the line's warden
	// renews it at each beat (wardenBeat).
	reg *registry.Registration

	// pollOnly: the Lease may not be watched (403), so campaigns poll
	// through client-go's acquire loop, as with a Lock, from then on.
	pollOnly bool
	// seenRV and seenAt are the resourceVersion of the Lease last
	// observed and the local time it was first observed at it: when a
	// polling campaign saw the current record appear (acquireAllowedAt).
	seenRV string
	seenAt time.Time

	// succession is what this candidate knows of the line of succession
	// and, as leader, of the registry (internal/succession); line is the
	// line it wants posted to the line Lease as leader (internal/linelease).
	succession *succession.Book
	line       linelease.Want
	// changed is closed, and replaced, at every change of leader, at the
	// start and end of every term, and when the leader lists the registry:
	// WaitForLeader, WaitForTerm and HandOver wait on it.
	changed chan struct{}

	// refused is the last Request refused, reported once.
	refused wire.Request
	// work is the work liveness component (internal/work; its port is
	// workPort, below), guarded by mu.
	work *work.Liveness
	// registryOffCtx is done when the registry turns off
	// (succession.Book.TurnRegistryOff, offRegistry); warnedDelete: a
	// registration could not be deleted (warned once).
	registryOffCtx context.Context
	offRegistry    context.CancelFunc
	warnedDelete   bool
	// stranger is the last record naming this identity that this Elector
	// did not write; duplicateAt when a duplicate identity was last
	// reported, by what showed it.
	stranger    *record
	duplicateAt map[string]time.Time

	notify *notify.Notifier // queues OnNewLeader calls during Run; nil outside
	stats  Stats            // the counters; snapshot adds the rest
}

func newState(cfg *config, events *eventQueue, logs *logq.Queue) *state {
	off, offRegistry := context.WithCancel(context.Background())
	s := &state{cfg: cfg, events: events, logs: logs, maxTransitions: -1, changed: make(chan struct{}), registryOffCtx: off, offRegistry: offRegistry}
	s.work = work.New(cfg.Work.resolved(), workPort{s})
	s.succession = succession.New(cfg.succession)
	return s
}

// setRegistration gives the state this Run's registration (nil: none,
// or Run ends), for the warden's beats.
func (s *state) setRegistration(r *registry.Registration) {
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
		r.RenewNow()
	}
}

// changedLocked wakes whoever waits for a change of leader or term.
// Requires mu.
func (s *state) changedLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// emit reports ev: see emitLocked.
func (s *state) emit(ev Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.emitLocked(ev)
}

// emitLocked stamps ev, queues it on the Events channel and its log record
// on the log queue. Holding mu orders events with the state changes they
// report. Requires mu.
func (s *state) emitLocked(ev Event) {
	ev.Time = time.Now()
	s.events.Send(ev)
	attrs := []any{"lease", s.cfg.describe}
	if ev.Leader != "" {
		attrs = append(attrs, "leader", ev.Leader)
	}
	switch ev.Kind {
	case EventNewLeader, EventStartedLeading, EventStoppedLeading, EventReleased, EventHandedOver, EventWorkStuck:
		attrs = append(attrs, "term", ev.Term)
	case EventWorkRecovered:
		attrs = append(attrs, "term", ev.Term, "stuckFor", ev.Delay.Round(time.Millisecond))
	case EventBackoff, EventLeaseMissing:
		attrs = append(attrs, "delay", ev.Delay)
	}
	if ev.Fence != "" {
		attrs = append(attrs, "fence", string(ev.Fence))
	}
	if ev.Err != nil {
		attrs = append(attrs, "err", ev.Err)
	}
	msg, level := "relect: "+ev.Kind.String(), slog.LevelInfo
	switch ev.Kind {
	case EventLeaseMissing:
		msg = "relect: waiting for the missing Lease: a candidate creates it once it has watched it missing for " +
			"LeaseDuration, in case it was deleted while someone held it, and leads then"
		attrs = append(attrs, "notBefore", ev.Time.Add(ev.Delay).Format(time.RFC3339Nano))
	case EventError:
		level = slog.LevelDebug // API errors can be many; they are Events too (runs of them: called warns)
	case EventDegraded, EventWorkStuck:
		level = slog.LevelWarn
	}
	s.logs.Log(level, msg, attrs...)
}

// setNotifier makes n receive new leaders (nil: none).
func (s *state) setNotifier(n *notify.Notifier) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notify = n
}

// setLeaderLocked records the holder observed; a different, non-empty one is
// a new leader. Requires mu.
func (s *state) setLeaderLocked(holder string, transitions int) {
	if holder == s.leader {
		return
	}
	s.leader = holder
	s.changedLocked()
	if holder == "" {
		return
	}
	s.emitLocked(Event{Kind: EventNewLeader, Leader: holder, Term: int64(transitions)})
	if s.notify != nil {
		s.notify.Push(holder)
	}
}

// observed records a record read or watched, with the Lease object it came
// from if known (l; nil through a Lock). It ends the current term if the
// record names another holder, and the campaign if it acquired by
// following and the Lease moved on before client-go resumed it; a Lease
// that names another preferred holder while we lead asks for a handover
// (KEP-4355's spec.preferredHolder), unless the registry shows that
// candidate standing by or unknown (as HandOver refuses it). It reports whether, outside a term,
// the record names us although this Elector did not write it: a stranger's
// (see leaserecord.Disguise).
func (s *state) observed(rec *record, l *coordinationv1.Lease) (stranger bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l != nil {
		if l.ResourceVersion != s.seenRV {
			s.seenRV, s.seenAt = l.ResourceVersion, time.Now()
		}
		s.succession.Observe(l, s.seenAt)
		if linelease.PostedFor(l) != nil {
			s.line.Seen()
		}
	}
	if p := rec.PreferredHolder; p != "" && p != s.cfg.identity && rec.HolderIdentity == s.cfg.identity &&
		s.term.leading(time.Now()) && s.term.stepDown == nil && s.mayHandOverLocked(p) {
		s.stepDownLocked(p)
	}
	if l != nil {
		s.requestedLocked(l)
	}
	s.missingSince = time.Time{}
	s.maxTransitions = max(s.maxTransitions, rec.LeaderTransitions)
	holder := rec.HolderIdentity
	if l != nil && handOverOf(l) != nil {
		holder = "" // named, but not leading yet: no leader until it takes the lease
	}
	s.setLeaderLocked(holder, rec.LeaderTransitions)
	mine := rec.HolderIdentity == s.cfg.identity
	switch {
	case s.term != nil && !mine:
		s.endTermLocked(s.term, ErrLeaseLost)
	case s.term == nil && s.followed && !mine:
		s.stopCampaign(ErrLeaseLost) // the lease we acquired moved on before client-go resumed it
	}
	stranger = s.term == nil && mine && !leaserecord.Same(rec, s.written)
	if stranger {
		s.strangerLocked(rec)
	}
	return stranger
}

// strangerLocked looks at a record naming this identity that this Elector
// did not write: an operator's edit, a previous process's last record —
// or another process with this identity, if the same tenure is seen
// renewed (the same acquire time and transitions, a later renew time):
// nobody but a leader renews. Requires mu.
func (s *state) strangerLocked(rec *record) {
	prev, seen := s.stranger, *rec
	s.stranger = &seen
	if prev != nil && prev.LeaderTransitions == rec.LeaderTransitions &&
		prev.AcquireTime.Equal(&rec.AcquireTime) && rec.RenewTime.After(prev.RenewTime.Time) {
		s.duplicateLocked("the Lease it holds is renewed by a process that is not this one")
	}
}

// duplicateLocked reports that another process seems to run with this
// Elector's identity (how says what showed it): an EventError wrapping
// ErrDuplicateIdentity and a warning, at most once per RegistrationRenewal
// for each way it shows. Requires mu.
func (s *state) duplicateLocked(how string) {
	now := time.Now()
	if at, ok := s.duplicateAt[how]; ok && now.Sub(at) < s.cfg.RegistrationRenewal {
		return
	}
	if s.duplicateAt == nil {
		s.duplicateAt = map[string]time.Time{}
	}
	s.duplicateAt[how] = now
	e := fmt.Errorf("%w %q: %s; give every candidate its own Identity (in a pod, its name)", ErrDuplicateIdentity, s.cfg.identity, how)
	s.logs.Log(slog.LevelWarn, "relect: "+e.Error(), "lease", s.cfg.describe)
	s.emitLocked(Event{Kind: EventError, Err: e})
}

// observedMissing records that a read or a watch found no Lease. The
// missing-Lease wait starts then if it had not, or over if restart: the
// observer had a gap, and what happened in it is unseen. A Lease missing
// during a term ends it, and the campaign of a follower whose acquisition
// client-go has yet to resume.
func (s *state) observedMissing(restart bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	first := s.missingSince.IsZero()
	if restart || first {
		s.missingSince = time.Now()
	}
	if first {
		s.emitLocked(Event{Kind: EventLeaseMissing, Delay: s.cfg.createWait})
	}
	s.setLeaderLocked("", 0)
	switch {
	case s.term != nil:
		s.endTermLocked(s.term, ErrLeaseLost)
	case s.followed:
		s.stopCampaign(ErrLeaseLost) // deleted before client-go resumed what we acquired
	}
}

// acquireAllowedAt is when a campaign that polls (pollOnly: client-go's
// acquire loop, with no follower to wait its turn) may acquire l, the
// Lease it last read: at once, unless this candidate stands back — its
// work check fails, or l's line of succession has it cooling after a stuck
// handover (internal/work) — and then when a follower that stands back would
// try: after everyone else's turn (succession.Turn), from when l's record became free
// as this Elector observed it. Zero: at once; also for a record of ours (a
// renewal or a resumption), and with a term or a followed acquisition.
func (s *state) acquireAllowedAt(l *coordinationv1.Lease) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.pollOnly || s.term != nil || s.followed || l == nil || l.ResourceVersion != s.seenRV {
		return time.Time{}
	}
	rec := leaserecord.Of(l)
	if rec.HolderIdentity == s.cfg.identity {
		return time.Time{}
	}
	failing := s.work.Failing()
	cool := successionOf(l).CooldownOf(s.cfg.identity)
	if !failing && (cool <= 0 || !time.Now().Before(s.seenAt.Add(cool))) {
		return time.Time{}
	}
	free := s.seenAt
	if !leaserecord.Released(rec) {
		own := time.Duration(s.cfg.leaseSeconds) * time.Second
		free = free.Add(max(time.Duration(rec.LeaseDurationSeconds)*time.Second, own))
	}
	return free.Add(succession.Turn(l, s.cfg.identity, s.cfg.successionStep, true))
}

// createAllowedAt is when this Elector may create the Lease it sees
// missing: createWait after missingSince (zero if it is not seen missing).
// Whoever held a Lease deleted by hand may lead on, unaware, until its next
// renewal fails — at most RenewDeadline after its last successful one,
// which was before the deletion, so before the Lease was first seen
// missing.
func (s *state) createAllowedAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.missingSince.IsZero() {
		return time.Time{}
	}
	return s.missingSince.Add(s.cfg.createWait)
}

// recreatedTransitions is the leaseTransitions for a Lease this Elector
// creates: one more than the highest it ever saw, so that term numbers keep
// growing across a deletion by hand, or 0 if it saw none.
func (s *state) recreatedTransitions() int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return leaserecord.ClampTransitions(s.maxTransitions + 1)
}

// sending records rec, a record naming us, as about to be sent.
func (s *state) sending(rec *record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := *rec
	s.sent = &w
}

// mine reports whether rec carries the stamps of a record naming us that
// this Elector wrote, or sent without learning whether it was applied
// (leaserecord.StampedAs; an edit may have changed other fields since): only such a
// record may be released or handed over after a conflict, or without a
// term that holds it. A record that names us otherwise — an operator's
// edit naming us, a handover naming us — may have been written while
// another candidate leads, unaware until its next renewal: releasing it
// would let a third lead meanwhile. It is left to expire, as a stranger's.
func (s *state) mine(rec *record) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return rec.HolderIdentity == s.cfg.identity && (leaserecord.StampedAs(rec, s.written) || leaserecord.StampedAs(rec, s.sent))
}

// ours reports whether rec is the record this Elector last wrote: then it
// may be resumed at once.
func (s *state) ours(rec *record) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return rec.HolderIdentity == s.cfg.identity && leaserecord.Same(rec, s.written)
}

// wrote records a successful write of ours, sent at sent, that left the
// Lease at resourceVersion rv ("" if unknown: a Lock). The first write
// naming us in a campaign that client-go runs is the acquisition
// (client-go's acquire loop stops at its first success and then starts
// OnStartedLeading): it makes the campaign's term, whose fence is rv. Later
// ones are renewals.
//
// A client-go follower restarts its expiry clock only when the record's
// client-go view changes, and that view has the renew time in whole
// seconds: a renewal in the same second as the one before is invisible to
// it. So the instant that bounds every follower's takeover is when the
// first write with the current view was sent (publishedAt), and the term's
// validity counts from there.
func (s *state) wrote(sent time.Time, rec *record, rv string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := *rec
	s.written = &w
	s.missingSince = time.Time{} // the Lease exists: we just wrote it
	s.maxTransitions = max(s.maxTransitions, rec.LeaderTransitions)
	if view := leaserecord.ClientGoView(rec); string(view) != string(s.published) {
		s.published, s.publishedAt = view, sent
	}
	if rec.HolderIdentity == s.cfg.identity && (s.stopCampaign == nil || s.term == nil && !s.followed) {
		// An acquisition: by following, or client-go's own (a campaign
		// that polls), not its resumption of the follower's. The holder
		// observed until now is someone else's only if its lease
		// expired: a release and a handover are observed as no leader.
		expired := s.leader
		if expired == s.cfg.identity {
			expired = ""
		}
		s.succession.Acquired(expired, time.Now())
	}
	holder := rec.HolderIdentity
	if holder != s.cfg.identity {
		holder = "" // a release, or a handover: its successor leads once it takes the lease
	}
	s.setLeaderLocked(holder, rec.LeaderTransitions)
	if rec.HolderIdentity != s.cfg.identity || s.stopCampaign == nil {
		return
	}
	valid := s.publishedAt.Add(s.cfg.RenewDeadline)
	s.stats.LastRenewal = sent
	if s.term == nil {
		s.term = newTerm(rec.LeaderTransitions, newFence(rv), sent, valid, s.stopCampaign)
		return
	}
	s.term.renew(rec.LeaderTransitions, valid)
}

// gaveUp forgets our last write (written, sent): a release or handover of
// it failed, so the Lease may still hold it, and it must not be resumed at
// once — by the follower (ours), or by client-go (observed shows it as a
// stranger's). It is taken over once it expires, like a crashed leader's,
// by the candidates in line first, and by this one, if at all, with a new
// term.
func (s *state) gaveUp() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.written, s.sent = nil, nil
}

// startCampaign forgets what was seen of a missing Lease before this
// campaign: it is stale. It reports whether the campaign may follow the
// Lease with a watch: relect has a Lease client (not a Lock), and watching
// was not forbidden.
func (s *state) startCampaign() (mayWatch bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.missingSince = time.Time{}
	return s.cfg.leases != nil && !s.pollOnly
}

// watchForbidden records that the Lease may not be watched: err is
// reported, and campaigns poll from now on.
func (s *state) watchForbidden(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pollOnly = true
	s.emitLocked(Event{Kind: EventError, Err: err})
}

// electing records that client-go now runs the campaign that stop ends;
// followed says the campaign acquired by following.
func (s *state) electing(stop context.CancelCauseFunc, followed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopCampaign, s.followed, s.term = stop, followed, nil
}

// electionOver records that client-go's Run returned, and returns the
// campaign's term, if it acquired one.
func (s *state) electionOver() *term {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.term
	s.stopCampaign, s.followed, s.term = nil, false, nil
	return t
}

// liveTerm returns the campaign's term while client-go runs it, or nil.
func (s *state) liveTerm() *term {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.term
}

// The term's transitions (term.go), made under mu and reported as events.

// startServing starts t's work, if t is still pending and valid (term.start).
func (s *state) startServing(t *term, ctx context.Context, cancel context.CancelCauseFunc) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if !t.start(ctx, cancel, now) {
		return false
	}
	// If the fleet's last stuck handovers were in a row (the streak), t
	// holds before handing over for stuck work in turn.
	t.work = s.work.Start(termLeader{s, t}, t.value.beats, now, s.succession.Streak())
	s.stats.TermsStarted++
	s.emitLocked(Event{Kind: EventStartedLeading, Leader: s.cfg.identity, Term: t.number, Fence: t.fence})
	s.changedLocked()
	return true
}

// endTerm ends t for cause (term.end).
func (s *state) endTerm(t *term, cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endTermLocked(t, cause)
}

// endTermLocked ends t for cause (term.end). Requires mu.
func (s *state) endTermLocked(t *term, cause error) {
	s.stats.WorkStuck, s.stats.WorkStuckSince = false, time.Time{} // not leading: no work of a term to be stuck
	if t.end(cause, time.Now()) {
		s.emitLocked(Event{Kind: EventStoppedLeading, Leader: s.cfg.identity, Term: t.number, Fence: t.fence, Err: cause})
		s.changedLocked()
	}
}

// expireIfPast ends t if its validity has passed, and returns that
// validity.
func (s *state) expireIfPast(t *term) (validUntil time.Time, expired bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.expired(time.Now()) {
		s.endTermLocked(t, ErrLeaseExpired)
		return t.validUntil, true
	}
	return t.validUntil, false
}

// workReturned records that t's OnStartedLeading returned: a panic it raised
// is reported, the term ends for cause if it had not ended already, and it
// is done.
func (s *state) workReturned(t *term, p *PanicError, cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p != nil {
		s.emitLocked(Event{Kind: EventError, Err: p})
	}
	s.endTermLocked(t, cause)
	t.finish()
}

// leadingLocked returns the current term's number and whether this
// candidate leads at now. Requires mu.
func (s *state) leadingLocked(now time.Time) (number int64, leading bool) {
	if !s.term.leading(now) {
		return 0, false
	}
	return s.term.number, true
}

// leading returns the current term's number and whether this candidate
// leads now.
func (s *state) leading() (number int64, leading bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leadingLocked(time.Now())
}

// currentLeader returns the holder identity last observed.
func (s *state) currentLeader() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leader
}

// called counts one Lease API call of verb that ended with result (see
// string) that waited waited on the bucket, and keeps the degraded signal:
// a failure is an EventError, and DegradedAfter of them in a row an
// EventDegraded until a call succeeds. A call abandoned because its
// campaign stopped is counted, and is no failure; nor is a conflict (409,
// or AlreadyExists): the API answered (see heard), and a lost race — two candidates
// creating a missing Lease, a write on a resourceVersion someone else's
// write replaced — is how election works.
func (s *state) called(verb string, result string, err error, waited time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stats.Calls == nil {
		s.stats.Calls = map[CallKey]uint64{}
	}
	s.stats.Calls[CallKey{verb, result}]++
	s.stats.BucketWait += waited
	switch result {
	case resultCanceled:
		return
	case resultOK, resultNotFound, resultConflict:
		s.heardLocked()
		return
	}
	s.emitLocked(Event{Kind: EventError, Err: &CallError{Verb: verb, Err: err}})
	if s.stats.ConsecutiveFailures == 0 {
		s.stats.FailingSince = time.Now()
	}
	s.stats.ConsecutiveFailures++
	// A failure or two is routine (an apiserver restarting); a run of them
	// is worth a warning — at the threshold, then each time the run has
	// doubled, so that an outage does not flood the log.
	if n := s.stats.ConsecutiveFailures; n >= warnFailuresAfter && n&(n-1) == 0 {
		s.logs.Log(slog.LevelWarn, "relect: Lease API calls are failing", "lease", s.cfg.describe, "failuresInARow", n,
			"since", s.stats.FailingSince.Format(time.RFC3339), "verb", verb, "err", err)
	}
	if !s.stats.Degraded && s.stats.ConsecutiveFailures >= s.cfg.DegradedAfter {
		s.stats.Degraded = true
		s.emitLocked(Event{Kind: EventDegraded, Err: &CallError{Verb: verb, Err: err}})
	}
}

// heard records contact with the API through a watch: an event it
// delivered. Like an answer to a call, it ends a run of failures, and a
// degraded state (EventRecovered). A follower whose calls failed while its
// watch stayed open (the apiserver's watch cache serves while etcd refuses
// writes) makes no call once the watch shows a leader again: without
// this, it would stay degraded, and fail its health check, until its next
// call — a registration renewal, minutes later.
func (s *state) heard() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.heardLocked()
}

// heardLocked is heard. Requires mu.
func (s *state) heardLocked() {
	s.stats.LastContact = time.Now()
	s.stats.ConsecutiveFailures = 0
	s.stats.FailingSince = time.Time{}
	if s.stats.Degraded {
		s.stats.Degraded = false
		s.emitLocked(Event{Kind: EventRecovered})
	}
}

// backedOff counts a backoff wait of d before the next campaign.
func (s *state) backedOff(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Backoffs++
	s.stats.BackoffTime += d
	s.emitLocked(Event{Kind: EventBackoff, Delay: d})
}

// snapshot is Stats and what the health check needs beyond it, read at one
// instant under mu.
type snapshot struct {
	Stats
	// overrun: the term whose OnStartedLeading still runs although it
	// ended (or its validity passed) at ended; zero when none.
	working      bool
	workingTerm  int64
	workingEnded time.Time
	// stuck: why the leading term's work is stuck, since stuckAt; nil
	// when it is not (or not leading).
	stuck   error
	stuckAt time.Time
}

// snapshot returns the state at now.
func (s *state) snapshot(now time.Time) snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := snapshot{Stats: s.stats}
	snap.Calls = maps.Clone(s.stats.Calls)
	snap.Identity, snap.Leader = s.cfg.identity, s.leader
	snap.Term, snap.Leading = s.leadingLocked(now)
	if snap.Leading {
		snap.ValidUntil, snap.Fence = s.term.validUntil, s.term.fence
	}
	snap.DroppedEvents = s.events.Dropped()
	snap.WorkCooling = s.succession.CoolingAt(now)
	if t := s.term; t.leading(now) {
		snap.stuckAt, snap.stuck = s.work.Stuck(t.work, now)
		if streak, until := t.work.Hold(); streak > 0 {
			snap.WorkStreak, snap.WorkHoldUntil = streak, until
		}
	}
	if t := s.term; t.working() {
		snap.LastBeat = t.value.beats.Last()
		snap.working, snap.workingTerm, snap.workingEnded = true, t.number, t.validUntil
		if t.phase == termSteppingDown && t.endedAt.Before(t.validUntil) {
			snap.workingEnded = t.endedAt
		}
	}
	return snap
}

// The work liveness component's port (internal/work): the component is
// guarded by mu, and its port is the state.

// workPort is the work liveness component's port (work.Port, and
// work.Checker for its checks): the Elector's state, whose mutex guards
// the component. The Port's methods are called with mu held.
type workPort struct{ s *state }

var (
	_ work.Port    = workPort{}
	_ work.Checker = workPort{}
	_ work.Leader  = termLeader{}
)

func (p workPort) Log(level slog.Level, msg string, args ...any) {
	p.s.logs.Log(level, msg, append([]any{"lease", p.s.cfg.describe}, args...)...)
}

func (p workPort) SomeoneElse(now time.Time) bool { return p.s.succession.SomeoneElse(now) }
func (p workPort) EndStreak()                     { p.s.succession.EndStreak() }
func (p workPort) CheckFailures(n int)            { p.s.stats.WorkCheckFailures = n }

func (p workPort) StuckSince(at time.Time) {
	p.s.stats.WorkStuck, p.s.stats.WorkStuckSince = !at.IsZero(), at
}

// Wanted reports whether the work check should run now: this candidate
// leads, or the line of succession names it (a successor, a keeper, or
// the warden: each may take the lease at its turn, and stands back if its
// check fails).
func (p workPort) Wanted() bool {
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	line, id := s.succession.Line(), s.cfg.identity
	return s.term.leading(time.Now()) || (!s.cfg.Standby && line != nil && (line.Names(id) || line.Warden == id))
}

// Checked records one call of the work check (nil: healthy) and, on a
// leader, what it means for its term.
func (p workPort) Checked(err error) {
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var t *work.Term
	if s.term.leading(time.Now()) {
		t = s.term.work
	}
	s.work.Checked(err, t, time.Now())
}

// due judges term t's work now and returns when the watchdog must look
// again (work.Liveness.Due); zero when nothing is due.
func (p workPort) due(t *term) time.Time {
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if !t.leading(time.Now()) {
		return time.Time{}
	}
	return s.work.Due(t.work, time.Now())
}

// checkFailing reports whether this candidate's own work check is failing:
// then it stands back in the line of succession (follower.expiry).
func (s *state) checkFailing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.work.Failing()
}

// termLeader is the work liveness component's side of leading term t
// (work.Leader). Its methods are called with the state's mu held.
type termLeader struct {
	s *state
	t *term
}

func (l termLeader) Number() int64      { return l.t.number }
func (l termLeader) SteppingDown() bool { return l.t.stepDown != nil }

func (l termLeader) Stuck(why error) {
	l.s.emitLocked(Event{Kind: EventWorkStuck, Leader: l.s.cfg.identity, Term: l.t.number, Fence: l.t.fence, Err: why})
}

func (l termLeader) Recovered(stuckFor time.Duration) {
	l.s.emitLocked(Event{Kind: EventWorkRecovered, Leader: l.s.cfg.identity, Term: l.t.number, Fence: l.t.fence, Delay: stuckFor})
}

// HandOver publishes the streak one longer and this candidate cooling
// (succession.Book.StuckReleasing), and ends the current term to release the
// lease.
func (l termLeader) HandOver(why error, now time.Time) {
	s := l.s
	s.succession.StuckReleasing(now)
	s.stats.WorkStuckHandovers++
	s.stepDownForLocked("", why)
}
