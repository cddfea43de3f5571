package relect

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"time"
)

// state is what an Elector knows and counts: what it observed of the Lease,
// what it last wrote, the campaign in progress and its term, and the
// counters of Stats. The gateway, the follower and the leader's watch
// report to it; the public methods read it. One mutex guards all of it,
// and nothing done under that mutex calls code outside this package or
// waits: events go to the eventQueue and logs to the logQueue, neither of
// which blocks, and new leaders to the notifier's queue.
type state struct {
	cfg    *config
	events *eventQueue
	logs   *logQueue

	mu sync.Mutex // guards every field below

	leader  string  // the holder identity last observed
	written *record // our last successful write
	// published is the client-go view of our last write (clientGoView),
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

	// pollOnly: the Lease may not be watched (403), so campaigns poll
	// through client-go's acquire loop, as with a Lock, from then on.
	pollOnly bool

	notify *notifier // queues OnNewLeader calls during Run; nil outside
	stats  Stats     // the counters; snapshot adds the rest
}

func newState(cfg *config, events *eventQueue, logs *logQueue) *state {
	return &state{cfg: cfg, events: events, logs: logs, maxTransitions: -1}
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
	s.events.send(ev)
	attrs := []any{"lease", s.cfg.describe}
	if ev.Leader != "" {
		attrs = append(attrs, "leader", ev.Leader)
	}
	switch ev.Kind {
	case EventNewLeader, EventStartedLeading, EventStoppedLeading, EventReleased:
		attrs = append(attrs, "term", ev.Term)
	case EventBackoff:
		attrs = append(attrs, "delay", ev.Delay)
	}
	if ev.Err != nil {
		attrs = append(attrs, "err", ev.Err)
	}
	level := slog.LevelInfo
	if ev.Kind == EventError {
		level = slog.LevelDebug // API errors can be many; they are Events too
	}
	s.logs.log(level, "relect: "+ev.Kind.String(), attrs...)
}

// setNotifier makes n receive new leaders (nil: none).
func (s *state) setNotifier(n *notifier) {
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
	if holder == "" {
		return
	}
	s.emitLocked(Event{Kind: EventNewLeader, Leader: holder, Term: int64(transitions)})
	if s.notify != nil {
		s.notify.push(holder)
	}
}

// observed records a record read or watched. It ends the current term if
// the record names another holder, and the campaign if it acquired by
// following and the Lease moved on before client-go resumed it. It reports
// whether, outside a term, the record names us although this Elector did
// not write it: a stranger's (see disguise).
func (s *state) observed(rec *record) (stranger bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.missingSince = time.Time{}
	s.maxTransitions = max(s.maxTransitions, rec.LeaderTransitions)
	s.setLeaderLocked(rec.HolderIdentity, rec.LeaderTransitions)
	mine := rec.HolderIdentity == s.cfg.identity
	switch {
	case s.term != nil && !mine:
		s.endTermLocked(s.term, ErrLeaseLost)
	case s.term == nil && s.followed && !mine:
		s.stopCampaign(ErrLeaseLost) // the lease we acquired moved on before client-go resumed it
	}
	return s.term == nil && mine && !sameRecord(rec, s.written)
}

// observedMissing records that a read or a watch found no Lease. The
// missing-Lease wait starts then if it had not, or over if restart: the
// observer had a gap, and what happened in it is unseen. A Lease missing
// during a term ends it, and the campaign of a follower whose acquisition
// client-go has yet to resume.
func (s *state) observedMissing(restart bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.missingSince.IsZero() {
		s.logs.log(slog.LevelInfo, "relect: the Lease does not exist; it is created only once it has been seen missing for "+
			"LeaseDuration, in case it was deleted while someone held it", "lease", s.cfg.describe, "leaseDuration", s.cfg.LeaseDuration)
	}
	if restart || s.missingSince.IsZero() {
		s.missingSince = time.Now()
	}
	s.setLeaderLocked("", 0)
	switch {
	case s.term != nil:
		s.endTermLocked(s.term, ErrLeaseLost)
	case s.followed:
		s.stopCampaign(ErrLeaseLost) // deleted before client-go resumed what we acquired
	}
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
	return clampTransitions(s.maxTransitions + 1)
}

// ours reports whether rec is the record this Elector last wrote: then it
// may be resumed at once.
func (s *state) ours(rec *record) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return rec.HolderIdentity == s.cfg.identity && sameRecord(rec, s.written)
}

// wrote records a successful write of ours, sent at sent. The first write
// naming us in a campaign that client-go runs is the acquisition (client-go's
// acquire loop stops at its first success and then starts OnStartedLeading):
// it makes the campaign's term. Later ones are renewals.
//
// A client-go follower restarts its expiry clock only when the record's
// client-go view changes, and that view has the renew time in whole
// seconds: a renewal in the same second as the one before is invisible to
// it. So the instant that bounds every follower's takeover is when the
// first write with the current view was sent (publishedAt), and the term's
// validity counts from there.
func (s *state) wrote(sent time.Time, rec *record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := *rec
	s.written = &w
	s.missingSince = time.Time{} // the Lease exists: we just wrote it
	s.maxTransitions = max(s.maxTransitions, rec.LeaderTransitions)
	if view := clientGoView(rec); string(view) != string(s.published) {
		s.published, s.publishedAt = view, sent
	}
	s.setLeaderLocked(rec.HolderIdentity, rec.LeaderTransitions)
	if rec.HolderIdentity != s.cfg.identity || s.stopCampaign == nil {
		return
	}
	valid := s.publishedAt.Add(s.cfg.RenewDeadline)
	s.stats.LastRenewal = sent
	if s.term == nil {
		s.term = newTerm(rec.LeaderTransitions, sent, valid, s.stopCampaign)
		return
	}
	s.term.renew(rec.LeaderTransitions, valid)
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
	if !t.start(ctx, cancel, time.Now()) {
		return false
	}
	s.stats.TermsStarted++
	s.emitLocked(Event{Kind: EventStartedLeading, Leader: s.cfg.identity, Term: t.number})
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
	if t.end(cause, time.Now()) {
		s.emitLocked(Event{Kind: EventStoppedLeading, Leader: s.cfg.identity, Term: t.number, Err: cause})
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

// called counts one Lease API call of result ("ok", "conflict", ..., see
// CallKey) that waited waited on the bucket, and keeps the degraded signal:
// a failure is an EventError, and DegradedAfter of them in a row an
// EventDegraded until a call succeeds. A call abandoned because its
// campaign stopped is counted, and is no failure.
func (s *state) called(verb, result string, err error, waited time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stats.Calls == nil {
		s.stats.Calls = map[CallKey]uint64{}
	}
	s.stats.Calls[CallKey{verb, result}]++
	s.stats.BucketWait += waited
	switch result {
	case "canceled":
		return
	case "ok", "not_found":
		s.stats.LastSuccess = time.Now()
		s.stats.ConsecutiveFailures = 0
		s.stats.FailingSince = time.Time{}
		if s.stats.Degraded {
			s.stats.Degraded = false
			s.emitLocked(Event{Kind: EventRecovered})
		}
		return
	}
	s.logs.log(slog.LevelDebug, "relect: lease API call failed", "verb", verb, "lease", s.cfg.describe, "err", err)
	s.emitLocked(Event{Kind: EventError, Err: &CallError{Verb: verb, Err: err}})
	if s.stats.ConsecutiveFailures == 0 {
		s.stats.FailingSince = time.Now()
	}
	s.stats.ConsecutiveFailures++
	if !s.stats.Degraded && s.stats.ConsecutiveFailures >= s.cfg.DegradedAfter {
		s.stats.Degraded = true
		s.emitLocked(Event{Kind: EventDegraded, Err: &CallError{Verb: verb, Err: err}})
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
		snap.ValidUntil = s.term.validUntil
	}
	snap.DroppedEvents = s.events.droppedCount()
	if t := s.term; t.working() {
		snap.working, snap.workingTerm, snap.workingEnded = true, t.number, t.validUntil
		if t.phase == termSteppingDown && t.endedAt.Before(t.validUntil) {
			snap.workingEnded = t.endedAt
		}
	}
	return snap
}
