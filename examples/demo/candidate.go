package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/fencing"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// proc is one candidate: a process that runs one Elector at a time and can
// crash, stop and be restarted with the same identity, as a pod would.
type proc struct {
	d    *demo
	name string // c1, c2, ...: for display
	id   string // holder identity

	mu     sync.Mutex
	e      *relect.Elector // the current incarnation; nil before the first start
	cancel context.CancelFunc
	done   chan struct{} // closed when Run and the event printer have returned
	keep   bool          // this incarnation keeps the lease when cancelled
	down   string        // why it is not running ("crashed", "stopped"); "" while it runs
	starts int
}

// start runs a new incarnation. keepLease sets KeepLeaseOnCancel, which makes
// cancelling it look like a crash to everyone else.
func (p *proc) start(keepLease bool) error {
	opts := relect.Options{
		Identity:          p.id,
		LeaseDuration:     p.d.s.leaseDuration,
		RenewDeadline:     p.d.s.renewDeadline,
		RetryPeriod:       p.d.s.retryPeriod,
		KeepLeaseOnCancel: keepLease,
		OnStartedLeading:  p.work,
		Logger:            p.d.logger.With("candidate", p.name),
	}
	p.d.b.locate(&opts, p.name)
	e, err := relect.New(opts)
	if err != nil {
		return fmt.Errorf("%w: %v", errSetup, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	events := e.Events() // the channel of the Run below; closed when it returns
	p.mu.Lock()
	p.e, p.cancel, p.done, p.keep, p.down = e, cancel, done, keepLease, ""
	p.starts++
	incarnation := p.starts
	p.mu.Unlock()

	how := "releases the lease when stopped"
	if keepLease {
		how = "KeepLeaseOnCancel: cancelling it will look like a crash"
	}
	switch {
	case incarnation == 1 && p.d.detailed():
		p.d.tl.printf(time.Now(), p.name, "starts (identity %q; %s)", p.id, how)
	case incarnation == 1: // a fleet: the script announces them together
	default:
		p.d.tl.printf(time.Now(), p.name, "restarts as a new Elector with the same identity (%s)", how)
	}

	var printer sync.WaitGroup
	printer.Go(func() {
		for ev := range events {
			if p.d.shows(ev) {
				p.d.tl.printf(ev.Time, p.name, "%s", p.d.describe(ev))
			}
		}
	})
	go func() {
		defer close(done)
		err := e.Run(ctx)
		printer.Wait()
		if !errors.Is(err, context.Canceled) {
			p.d.tl.printf(time.Now(), p.name, "Run returned unexpectedly: %v", err)
		}
	}()
	return nil
}

// halt cancels the running incarnation and waits until its Run has
// returned. why is "crashed" or "stopped".
func (p *proc) halt(why string) {
	p.mu.Lock()
	cancel, done := p.cancel, p.done
	p.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
	p.mu.Lock()
	if p.down == "" {
		p.down = why
	}
	p.mu.Unlock()
}

// term reports the current incarnation's Term (false if it is not running).
func (p *proc) term() (int64, bool) {
	p.mu.Lock()
	e := p.e
	p.mu.Unlock()
	if e == nil {
		return 0, false
	}
	return e.Term()
}

// elector returns the current incarnation's Elector, or nil.
func (p *proc) elector() *relect.Elector {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.e
}

// yield is the current incarnation's Yield.
func (p *proc) yield(ctx context.Context) error {
	e := p.elector()
	if e == nil {
		return relect.ErrNotLeader
	}
	return e.Yield(ctx)
}

// handOver is the current incarnation's HandOver to to.
func (p *proc) handOver(ctx context.Context, to *proc) error {
	e := p.elector()
	if e == nil {
		return relect.ErrNotLeader
	}
	return e.HandOver(ctx, to.id, nil)
}

// lastRenewal is when the current incarnation last wrote the Lease naming
// itself (Stats.LastRenewal).
func (p *proc) lastRenewal() time.Time {
	e := p.elector()
	if e == nil {
		return time.Time{}
	}
	return e.Stats().LastRenewal
}

// line returns the line of succession as the current incarnation knows it:
// the successors' identities, first in line first.
func (p *proc) line() []string {
	e := p.elector()
	if e == nil {
		return nil
	}
	var next []string
	for _, c := range e.Candidates() {
		if c.Successor > 0 {
			next = append(next, c.Identity)
		}
	}
	return next
}

// placeInLine returns this candidate's place in the line of succession it
// last observed (1: next in line), or 0.
func (p *proc) placeInLine() int {
	e := p.elector()
	if e == nil {
		return 0
	}
	for _, c := range e.Candidates() {
		if c.Identity == p.id {
			return c.Successor
		}
	}
	return 0
}

func (p *proc) keepsLease() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.keep
}

// state describes the candidate for the status block.
func (p *proc) state() string {
	p.mu.Lock()
	e, down := p.e, p.down
	p.mu.Unlock()
	switch {
	case e == nil:
		return "not started"
	case down != "":
		return down
	}
	if n, ok := e.Term(); ok {
		return fmt.Sprintf("LEADER, term %d", n)
	}
	state := "follower"
	switch l := e.Leader(); l {
	case "":
	case p.id:
		state = "follower (named, not trusted)"
	default:
		state = "follower of " + p.d.display(l)
	}
	if n := p.placeInLine(); n > 0 {
		state += fmt.Sprintf(", %s in line", ordinal(n))
	}
	return state
}

// ordinal returns 1st, 2nd, 3rd, 4th, ...
func ordinal(n int) string {
	switch n {
	case 1:
		return "1st"
	case 2:
		return "2nd"
	case 3:
		return "3rd"
	}
	return fmt.Sprintf("%dth", n)
}

// work is the leader-only work of every candidate: it writes to the fenced
// store, with its term's fence, until its context ends.
func (p *proc) work(ctx context.Context) {
	term, _ := relect.TermFromContext(ctx)
	fence, _ := relect.FenceFromContext(ctx)
	tick := time.NewTicker(p.d.workEvery())
	defer tick.Stop()
	for {
		p.d.store.write(p.name, term, fence)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// describe formats one of a candidate's events for the timeline.
func (d *demo) describe(ev relect.Event) string {
	switch ev.Kind {
	case relect.EventNewLeader:
		return fmt.Sprintf("sees a new holder: %s (leaseTransitions %d)", d.display(ev.Leader), ev.Term)
	case relect.EventStartedLeading:
		return fmt.Sprintf("STARTED LEADING, term %d", ev.Term)
	case relect.EventStoppedLeading:
		return fmt.Sprintf("stopped leading term %d: %s", ev.Term, cause(ev.Err))
	case relect.EventReleased:
		return fmt.Sprintf("released the lease (term %d)", ev.Term)
	case relect.EventHandedOver:
		return fmt.Sprintf("handed the lease over to %s (term %d)", d.display(ev.Leader), ev.Term)
	case relect.EventBackoff:
		return fmt.Sprintf("waits %v before campaigning again", ev.Delay.Round(time.Millisecond))
	case relect.EventError:
		if apierrors.IsConflict(ev.Err) {
			return "write refused with 409 Conflict: the Lease changed since it was read (another candidate wrote first)"
		}
		return "error: " + cause(ev.Err)
	}
	return ev.Kind.String()
}

func cause(err error) string {
	switch {
	case err == nil:
		return "no cause"
	case errors.Is(err, context.Canceled):
		return "its Run was cancelled"
	case errors.Is(err, relect.ErrYielded):
		return "it yielded"
	case errors.Is(err, relect.ErrHandedOver):
		return "it hands the lease over"
	}
	return strings.TrimPrefix(err.Error(), "relect: ")
}

// fencedStore stands for the storage the leader's work writes to. It
// accepts a write only if its fence is at least the highest it has
// accepted (fencing.Guard), so a deposed leader that still writes is
// refused. In a correct run it refuses no write of a leader in its term,
// and two candidates never write with the same fence; lateWrite shows it
// refusing a deposed leader's late write.
type fencedStore struct {
	d     *demo
	guard fencing.Guard
	mu    sync.Mutex

	writer string // who wrote with the highest fence
	first  struct {
		who   string
		term  int64
		fence relect.Fence
	} // the first write of all
	accepted int
	terms    []string // "term N (fence F) by cX", in order
	problems []string
}

func (s *fencedStore) write(who string, term int64, fence relect.Fence) {
	s.mu.Lock()
	defer s.mu.Unlock()
	highest := s.guard.Highest()
	if err := s.guard.Admit(fence); err != nil {
		s.problems = append(s.problems, fmt.Sprintf("%s wrote in term %d with fence %s after %s had written with fence %s: refused", who, term, fence, s.writer, highest))
		s.d.tl.printf(time.Now(), "store", "!! REFUSED a write of %s with stale fence %s (highest %s)", who, fence, highest)
		return
	}
	switch {
	case s.accepted > 0 && fence == highest && who != s.writer:
		s.problems = append(s.problems, fmt.Sprintf("%s and %s both wrote with fence %s", s.writer, who, fence))
		s.d.tl.printf(time.Now(), "store", "!! %s writes with fence %s, which %s already used", who, fence, s.writer)
	case s.accepted == 0 || fence != highest:
		s.terms = append(s.terms, fmt.Sprintf("%d (fence %s) by %s", term, fence, who))
		s.d.tl.printf(time.Now(), "store", "first write of term %d, fence %s, from %s", term, fence, who)
	}
	if s.accepted == 0 {
		s.first.who, s.first.term, s.first.fence = who, term, fence
	}
	s.writer = who
	s.accepted++
}

// lateWrite plays a deposed leader's late write — the first leader's, as
// if it had been paused ever since — and reports whether the store
// refused it, as it must once a newer term has written.
func (s *fencedStore) lateWrite() (refused bool, line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.accepted == 0 {
		return true, "no write to replay"
	}
	err := s.guard.Admit(s.first.fence)
	line = fmt.Sprintf("a late write of %s's term %d (fence %s), as if paused since: ", s.first.who, s.first.term, s.first.fence)
	if err != nil {
		return true, line + "refused, as it must be (a newer term has written, fence " + string(s.guard.Highest()) + ")"
	}
	return false, line + "ACCEPTED"
}
