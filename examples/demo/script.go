package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relect/relect"
)

// errSetup marks errors of flags and setup (exit status 2), as opposed to a
// failed check (exit status 1).
var errSetup = errors.New("setup")

// demo is one run of the script.
type demo struct {
	s      settings
	b      backend
	tl     *timeline
	logger *slog.Logger
	procs  []*proc
	store  *fencedStore

	lastStatus atomic.Int64 // UnixNano of the last status block

	mu       sync.Mutex
	samples  int
	overlaps []string // "c1 (term 1) and c2 (term 2) at +3.456s"
	results  []result
	costs    []changeCost
	notes    []string // what went other than expected without failing (note)
}

// detailedUpTo is the largest number of candidates the timeline and the
// status block show one by one. With more, the timeline shows only terms
// (started, stopped, released, handed over) and errors, not every
// follower's view of every new leader, and the status block shows the
// candidates that lead, are in line or are down, and sums up the others.
const detailedUpTo = 10

func (d *demo) detailed() bool { return len(d.procs) <= detailedUpTo }

// shows reports whether ev goes on the timeline (see detailedUpTo).
func (d *demo) shows(ev relect.Event) bool {
	switch ev.Kind {
	case relect.EventStartedLeading, relect.EventStoppedLeading, relect.EventReleased, relect.EventHandedOver,
		relect.EventError, relect.EventDegraded, relect.EventRecovered:
		return true
	}
	return d.detailed()
}

func newDemo(s settings, b backend, tl *timeline, logger *slog.Logger) *demo {
	d := &demo{s: s, b: b, tl: tl, logger: logger}
	d.store = &fencedStore{d: d}
	d.lastStatus.Store(time.Now().UnixNano())
	for i := 1; i <= s.candidates; i++ {
		name := fmt.Sprintf("c%d", i)
		d.procs = append(d.procs, &proc{d: d, name: name, id: b.identity(name)})
	}
	return d
}

// result is one measured failover and the range it must fall in.
type result struct {
	what     string
	took     time.Duration
	expected string // the typical range, in words and numbers
	lo, hi   time.Duration
	note     string // explains a value that surprises but is in range
}

func (r result) ok() bool { return r.took >= r.lo && r.took <= r.hi }

// outside is the verdict of a measurement outside its range. It is printed,
// never a failure: how long a change takes in real time depends on the
// machine (a thousand candidates in one process on two busy cores handle
// each watch event late), and the demo fails only on what it proves —
// never two leaders at once, and every change of leader completing. Its
// tests, in simulated time, require every measurement in range.
const outside = "OUTSIDE the expected range (timings depend on this machine's load; not a failure)"

func (r result) String() string {
	verdict := "OK"
	if !r.ok() {
		verdict = outside
	}
	return fmt.Sprintf("%-19s %s  expected %s (accepted %s…%s)  %s",
		r.what+":", seconds(r.took), r.expected, seconds(r.lo), seconds(r.hi), verdict)
}

// Bounds. All times are measured by polling IsLeader every millisecond.
//
// relect's followers watch the Lease: each change reaches them at once, and
// they note the local time at which they saw it. They take a released lease
// (no holder) at once, and a held one LeaseDuration after they last saw it
// change. A follower that may not watch (RBAC without "watch") polls as
// client-go does, every RetryPeriod to 2.2 × RetryPeriod; the accepted
// ranges leave room for that, the expected ones are those of watching.
//
//   - Crash: the leader renewed at most RetryPeriod before it died, and a
//     follower takes over exactly LeaseDuration after that renewal:
//     LeaseDuration − RetryPeriod ≤ t ≤ LeaseDuration after the crash
//     (polling: up to 4.4 × RetryPeriod later).
//   - Graceful stop: the release is written once the leader's work has
//     returned; the watch reports it and the follower writes at once:
//     a few milliseconds (polling: up to 2.2 × RetryPeriod).
//   - Hand edit: the edit is the last change everyone saw, and a record
//     naming a candidate that did not write it is taken only once it
//     expires: LeaseDuration after the edit (polling: up to 4.4 ×
//     RetryPeriod later).
//
// The backend's slack (scheduling, API latency) widens each range.
func (d *demo) crashBound(took time.Duration) result {
	ld, rp, slack := d.s.leaseDuration, d.s.retryPeriod, d.b.slack()
	var note string
	if took < ld {
		note = "below LeaseDuration: the last renewal came up to RetryPeriod before the crash"
	}
	return result{
		note:     note,
		what:     "crash failover",
		took:     took,
		expected: fmt.Sprintf("last renewal + LeaseDuration = %s…%s after the crash", seconds(ld-rp), seconds(ld)),
		lo:       max(ld-rp-slack, 0),
		hi:       ld + rp*44/10 + slack,
	}
}

// fleetNote explains a handover that took longer than a few milliseconds in
// a fleet (see detailedUpTo): in this one process, every candidate handles
// the watch event of the release (or handover) on this machine's CPUs
// before the first in line may be scheduled; a real fleet spreads that
// work over its nodes.
func (d *demo) fleetNote(took time.Duration) string {
	if d.detailed() || took < 20*time.Millisecond {
		return ""
	}
	return fmt.Sprintf("all %d candidates of this one process handle the watch event on its CPUs first; a real fleet spreads that over its nodes", len(d.procs))
}

func (d *demo) gracefulBound(took time.Duration) result {
	rp, slack := d.s.retryPeriod, d.b.slack()
	return result{
		note:     d.fleetNote(took),
		what:     "graceful handover",
		took:     took,
		expected: "one watch event + 3 writes: milliseconds",
		lo:       0,
		hi:       rp*22/10 + slack,
	}
}

func (d *demo) yieldBound(took time.Duration) result {
	rp, slack := d.s.retryPeriod, d.b.slack()
	return result{
		note:     d.fleetNote(took),
		what:     "yield",
		took:     took,
		expected: "the first in line takes it at once: milliseconds",
		lo:       0,
		hi:       rp*22/10 + slack,
	}
}

func (d *demo) handOverBound(took time.Duration) result {
	rp, slack := d.s.retryPeriod, d.b.slack()
	return result{
		note:     d.fleetNote(took),
		what:     "handover",
		took:     took,
		expected: "the named candidate takes it at once: milliseconds",
		lo:       0,
		hi:       rp*22/10 + slack,
	}
}

func (d *demo) handEditBound(took time.Duration) result {
	ld, rp, slack := d.s.leaseDuration, d.s.retryPeriod, d.b.slack()
	return result{
		what:     "hand-edit recovery",
		took:     took,
		expected: fmt.Sprintf("LeaseDuration after the edit = %s", seconds(ld)),
		lo:       ld,
		hi:       ld + rp*44/10 + slack,
	}
}

// waitLimit bounds every wait of the script, so that a broken run fails
// instead of hanging — a change of leader that never completes: twice the
// longest accepted failover.
func (d *demo) waitLimit() time.Duration {
	return 2 * (d.s.leaseDuration + d.s.retryPeriod*44/10 + d.b.slack())
}

// settle is the pause between steps, long enough to see a few renewals.
func (d *demo) settle() time.Duration { return max(d.s.leaseDuration, 3*d.s.retryPeriod) }

// workEvery is how often the leader's work writes to the fenced store.
func (d *demo) workEvery() time.Duration { return max(d.s.retryPeriod/5, 10*time.Millisecond) }

func (d *demo) display(identity string) string {
	for _, p := range d.procs {
		if p.id == identity {
			return p.name
		}
	}
	if identity == "" {
		return "(none)"
	}
	return fmt.Sprintf("%q (not a candidate of this demo)", identity)
}

// script runs the whole demo and returns an error if a check failed.
func (d *demo) script(ctx context.Context) error {
	s := d.s
	d.tl.plain("relect demo: %d candidates on %s", s.candidates, d.b.where())
	d.tl.plain("LeaseDuration %v, RenewDeadline %v, RetryPeriod %v; IsLeader of every candidate sampled every %v",
		s.leaseDuration, s.renewDeadline, s.retryPeriod, s.sampleEvery)

	bg, stopBackground := context.WithCancel(context.Background())
	var background sync.WaitGroup
	background.Go(func() { d.sample(bg) })
	if s.statusEvery > 0 {
		background.Go(func() { d.statusLoop(bg) })
	}

	err := d.steps(ctx)

	d.tl.heading("shutdown: every candidate still running stops gracefully, the leader last")
	// The leader stops last: a leader that stopped first would release the
	// lease to its successor, which would lead for the moment until it
	// stopped too, and so on down the line.
	leader, _ := d.leader()
	for _, p := range d.procs {
		if p != leader {
			p.halt("stopped")
		}
	}
	if leader != nil {
		leader.halt("stopped")
	}
	stopBackground()
	background.Wait()
	d.status(ctx)
	return d.summary(err)
}

// leader returns the candidate that leads now, if any, and its term.
func (d *demo) leader() (*proc, int64) {
	for _, p := range d.procs {
		if n, ok := p.term(); ok {
			return p, n
		}
	}
	return nil, 0
}

// currentLeader returns the candidate that leads and its term, waiting
// for one if none does at the moment (a term lost on a busy machine is
// followed by another).
func (d *demo) currentLeader(ctx context.Context, what string) (*proc, int64, error) {
	var p *proc
	var term int64
	_, err := d.waitFor(ctx, what, func() bool {
		p, term = d.leader()
		return p != nil
	})
	return p, term, err
}

// note prints something that went otherwise than expected but is no
// failure (a timing that depends on the machine), and repeats it in the
// summary.
func (d *demo) note(at time.Time, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	d.mu.Lock()
	d.notes = append(d.notes, msg)
	d.mu.Unlock()
	d.tl.printf(at, "demo", "note: %s", msg)
}

// waitForLeader waits until some candidate leads, and returns it and when
// it was first seen leading.
func (d *demo) waitForLeader(ctx context.Context) (*proc, time.Time, error) {
	var next *proc
	at, err := d.waitFor(ctx, "a new leader", func() bool {
		next, _ = d.leader()
		return next != nil
	})
	return next, at, err
}

// waitFor polls cond every millisecond and returns when it first held. It
// gives up after waitLimit or when ctx is done.
func (d *demo) waitFor(ctx context.Context, what string, cond func() bool) (time.Time, error) {
	limit := d.waitLimit()
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		now := time.Now()
		if cond() {
			return now, nil
		}
		if now.After(deadline) {
			return now, fmt.Errorf("waited %v for %s", limit, what)
		}
		select {
		case <-ctx.Done():
			return now, ctx.Err()
		case <-tick.C:
		}
	}
}

// pause lets the election run undisturbed for settle, then prints the
// status unless one was printed less than a RetryPeriod ago (nothing much
// can have changed since).
func (d *demo) pause(ctx context.Context) error {
	t := time.NewTimer(d.settle())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	if time.Since(time.Unix(0, d.lastStatus.Load())) >= d.s.retryPeriod {
		d.status(ctx)
	}
	return nil
}

// record prints a measurement as it is made.
func (d *demo) record(r result, leader *proc) {
	n, _ := leader.term()
	d.mu.Lock()
	d.results = append(d.results, r)
	d.mu.Unlock()
	d.tl.printf(time.Now(), "RESULT", "%s leads, term %d", leader.name, n)
	d.tl.printf(time.Now(), "RESULT", "%s", r)
	if r.note != "" {
		d.tl.printf(time.Now(), "RESULT", "(%s)", r.note)
	}
}

// statusLoop prints the status block whenever none was printed for
// statusEvery.
func (d *demo) statusLoop(ctx context.Context) {
	tick := time.NewTicker(max(d.s.statusEvery/10, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if time.Since(time.Unix(0, d.lastStatus.Load())) >= d.s.statusEvery {
			d.status(ctx)
		}
	}
}

// status prints who leads, the Lease, and every candidate's state and calls.
func (d *demo) status(ctx context.Context) {
	now := time.Now()
	d.lastStatus.Store(now.UnixNano())
	lease := "Lease: "
	if holder, transitions, err := d.b.holder(ctx); err != nil {
		lease += "error reading it: " + err.Error()
	} else {
		lease += fmt.Sprintf("holder %s, leaseTransitions %d", d.display(holder), transitions)
	}
	lines := []string{lease}
	var total callCounts
	type group struct {
		n     int
		calls callCounts
	}
	var groups []string // in order of first appearance
	grouped := map[string]*group{}
	for _, p := range d.procs {
		c := d.b.calls(p.name)
		total = total.add(c)
		state := p.state()
		if d.detailed() || strings.HasPrefix(state, "LEADER") || strings.HasSuffix(state, " in line") || state == "crashed" {
			lines = append(lines, fmt.Sprintf("%-5s %-30s calls: %s", p.name, state, c))
			continue
		}
		if strings.HasPrefix(state, "follower") {
			state = "followers"
		}
		g := grouped[state]
		if g == nil {
			g = &group{}
			grouped[state] = g
			groups = append(groups, state)
		}
		g.n++
		g.calls = g.calls.add(c)
	}
	for _, state := range groups {
		g := grouped[state]
		lines = append(lines, fmt.Sprintf("%-5s %-30s calls: %s", "", fmt.Sprintf("%s: %d", state, g.n), g.calls))
	}
	lines = append(lines, fmt.Sprintf("%-5s %-30s calls: %s", "all", "", total))
	d.tl.block(now, "status", lines)
}

// sample checks, every sampleEvery until ctx is done, that at most one
// candidate leads.
//
// The candidates are read one after the other, not at one instant, so a
// handover between two reads could look like an overlap. A suspected overlap
// is therefore confirmed by reading the earlier candidate again: if it still
// leads in the same term after the later one was seen leading, both led at
// the instant of the later read.
func (d *demo) sample(ctx context.Context) {
	tick := time.NewTicker(d.s.sampleEvery)
	defer tick.Stop()
	type seen struct {
		p    *proc
		term int64
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var leading []seen
		for _, p := range d.procs {
			if n, ok := p.term(); ok {
				leading = append(leading, seen{p, n})
			}
		}
		d.mu.Lock()
		d.samples++
		d.mu.Unlock()
		if len(leading) < 2 {
			continue
		}
		last := leading[len(leading)-1]
		for _, s := range leading[:len(leading)-1] {
			if n, ok := s.p.term(); ok && n == s.term {
				msg := fmt.Sprintf("%s (term %d) and %s (term %d) at %+.3fs", s.p.name, s.term, last.p.name, last.term, d.tl.since(time.Now()).Seconds())
				d.mu.Lock()
				d.overlaps = append(d.overlaps, msg)
				d.mu.Unlock()
				d.tl.printf(time.Now(), "!!", "TWO LEADERS AT ONCE: %s", msg)
			}
		}
	}
}

// printMeasurements prints what the script measured: printed, never
// checked, as they depend on this machine's load.
func (d *demo) printMeasurements(results []result, costs []changeCost, notes []string) {
	slow := 0
	for _, r := range results {
		d.tl.plain("%s", r)
		if r.note != "" {
			d.tl.plain("  (%s)", r.note)
		}
		if !r.ok() {
			slow++
		}
	}
	if slow > 0 {
		d.tl.plain("%d of %d measurements outside their expected range: printed, not checked (they depend on this machine's load)", slow, len(results))
	}
	if len(costs) > 0 {
		d.tl.plain("calls per change, by all %d candidates, from the change to the new leader's first renewal a RetryPeriod into its term (included):", len(d.procs))
		for _, c := range costs {
			d.tl.plain("  %-14s %3d  (%s)", c.what+":", c.calls.total(), c.calls.brief())
		}
	}
	for _, n := range notes {
		d.tl.plain("note: %s", n)
	}
}

// summary prints the results and returns an error naming every failed check
// (or err, the script's own error, with them).
func (d *demo) summary(err error) error {
	d.mu.Lock()
	results, overlaps, samples, costs, notes := d.results, d.overlaps, d.samples, d.costs, d.notes
	d.mu.Unlock()
	d.store.mu.Lock()
	terms, accepted, problems := d.store.terms, d.store.accepted, d.store.problems
	d.store.mu.Unlock()

	var failed []string
	if err != nil {
		if errors.Is(err, errSetup) {
			return err
		}
		failed = append(failed, err.Error())
	}

	d.tl.heading("summary")
	d.printMeasurements(results, costs, notes)
	if len(overlaps) == 0 {
		d.tl.plain("two leaders at once: never, in %d samples of every candidate's IsLeader", samples)
	} else {
		d.tl.plain("two leaders at once: %d times, first %s", len(overlaps), overlaps[0])
		failed = append(failed, fmt.Sprintf("two candidates led at once %d times", len(overlaps)))
	}
	d.tl.plain("fenced store: %d writes accepted; terms in order: %s", accepted, strings.Join(terms, ", "))
	for _, p := range problems {
		d.tl.plain("fenced store: %s", p)
		failed = append(failed, "fenced store: "+p)
	}
	if len(terms) > 1 { // a newer term has written
		refused, line := d.store.lateWrite()
		d.tl.plain("fenced store: %s", line)
		if !refused {
			failed = append(failed, "fenced store: "+line)
		}
	}
	if len(failed) > 0 {
		d.tl.plain("result: FAIL")
		return errors.New(strings.Join(failed, "; "))
	}
	d.tl.plain("result: PASS")
	return nil
}
