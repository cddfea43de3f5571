package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The script's steps. Each but the first makes one change of leader,
// measures how long it took (record) and what it cost (cost), and leaves
// every candidate running.

// steps is the script proper.
func (d *demo) steps(ctx context.Context) error {
	if err := d.stepStart(ctx); err != nil {
		return err
	}
	for _, step := range []func(context.Context) error{d.stepCrash, d.stepGraceful, d.stepYield, d.stepHandOver, d.stepHandEdit} {
		if err := step(ctx); err != nil {
			return err
		}
		if err := d.pause(ctx); err != nil {
			return err
		}
	}
	return nil
}

// stepStart starts the first candidate alone, then the others once it leads.
func (d *demo) stepStart(ctx context.Context) error {
	first := d.procs[0]
	d.tl.heading("start: %s alone, then the others", first.name)
	if err := first.start(true); err != nil {
		return err
	}
	started := time.Now()
	led, err := d.waitFor(ctx, "a first leader", func() bool { _, ok := first.term(); return ok })
	if err != nil {
		return err
	}
	d.tl.printf(led, "demo", "%s leads %s after it started (a missing Lease is created LeaseDuration after it was "+
		"found missing, in case it was deleted while held; an existing free one is taken at once)", first.name, seconds(led.Sub(started)))
	if !d.detailed() {
		d.tl.printf(time.Now(), "demo", "%s … %s start (identities as named; each releases the lease when stopped); "+
			"the timeline shows only their terms and errors, the status the candidates that lead, are in line or are down",
			d.procs[1].name, d.procs[len(d.procs)-1].name)
	}
	for _, p := range d.procs[1:] {
		if err := p.start(false); err != nil {
			return err
		}
	}
	return d.pause(ctx)
}

// stepCrash: the first candidate, which leads, dies without releasing.
func (d *demo) stepCrash(ctx context.Context) error {
	first := d.procs[0]
	// Only the first candidate's incarnation keeps the lease when
	// cancelled. It leads since the start, unless its renewals were
	// starved for RenewDeadline on a busy machine; then it waits to lead
	// again.
	if _, err := d.waitFor(ctx, first.name+", started with KeepLeaseOnCancel, to lead", func() bool {
		leader, _ := d.leader()
		return leader == first && first.keepsLease()
	}); err != nil {
		return fmt.Errorf("%w (it lost the lease it had from the start: a busy machine delayed its renewals past "+
			"RenewDeadline; longer durations help: -lease-duration 6s -renew-deadline 4s -retry-period 1s)", err)
	}
	leader, term := d.leader()
	d.tl.heading("crash: %s (term %d) dies without releasing the lease", leader.name, term)
	d.tl.printf(time.Now(), "demo", "cancelling %s's Run with KeepLeaseOnCancel: no release, so the Lease looks as after kill -9 "+
		"(its Run still deletes its registration, which a killed process would leave to lapse)", leader.name)
	before := d.calls()
	t0 := time.Now()
	leader.halt("crashed")
	if holder, _, err := d.b.holder(ctx); err == nil {
		d.tl.printf(time.Now(), "demo", "the Lease still names %s: followers wait for it to expire", d.display(holder))
	}
	next, at, err := d.waitForLeader(ctx)
	if err != nil {
		return err
	}
	d.record(d.crashBound(at.Sub(t0)), next)
	if err := d.cost(ctx, "crash", "the crash", before, next, at); err != nil {
		return err
	}
	return first.start(false)
}

// stepGraceful: the leader stops and releases.
func (d *demo) stepGraceful(ctx context.Context) error {
	leader, term, err := d.currentLeader(ctx, "a leader before the graceful stop")
	if err != nil {
		return err
	}
	d.tl.heading("graceful stop: %s (term %d) stops and releases the lease", leader.name, term)
	d.printLine(leader)
	before := d.calls()
	t0 := time.Now()
	leader.halt("stopped")
	next, at, err := d.waitForLeader(ctx)
	if err != nil {
		return err
	}
	d.record(d.gracefulBound(at.Sub(t0)), next)
	if err := d.cost(ctx, "graceful stop", "the stop", before, next, at); err != nil {
		return err
	}
	return leader.start(false)
}

// stepYield: the leader yields, and stays a candidate.
func (d *demo) stepYield(ctx context.Context) error {
	leader, term, err := d.currentLeader(ctx, "a leader before the yield")
	if err != nil {
		return err
	}
	d.tl.heading("yield: %s (term %d) steps down with Yield and stays a candidate", leader.name, term)
	line := d.printLine(leader)
	before := d.calls()
	t0 := time.Now()
	if err := leader.yield(ctx); err != nil {
		return fmt.Errorf("yield: %w", err)
	}
	d.tl.printf(time.Now(), "demo", "Yield returned after %s: %s's work returned and the release was written; "+
		"it follows the Lease again after its backoff wait", seconds(time.Since(t0)), leader.name)
	next, at, err := d.waitForLeader(ctx)
	if err != nil {
		return err
	}
	d.record(d.yieldBound(at.Sub(t0)), next)
	if len(line) > 0 && next.id != line[0] {
		d.note(at, "%s took the lease after the yield, but %s was first in line: the first did not take its turn in time", next.name, d.display(line[0]))
	}
	return d.cost(ctx, "yield", "the Yield call", before, next, at)
}

// stepHandOver: the leader hands the lease over to a candidate it names,
// the last one that does not lead: with more than two candidates, not the
// first in line.
func (d *demo) stepHandOver(ctx context.Context) error {
	leader, term, err := d.currentLeader(ctx, "a leader before the handover")
	if err != nil {
		return err
	}
	var target *proc
	for _, p := range slices.Backward(d.procs) {
		if p != leader {
			target = p
			break
		}
	}
	d.tl.heading("hand over: %s (term %d) hands the lease over to %s with HandOver", leader.name, term, target.name)
	line := d.printLine(leader)
	where := "not in the line"
	if i := slices.Index(line, target.id); i >= 0 {
		where = ordinal(i+1) + " in line"
	}
	d.tl.printf(time.Now(), "demo", "%s is %s: HandOver writes the Lease naming it, marked as a handover; it takes the lease "+
		"at once, and nobody else may for 2 RetryPeriods (rounded up to whole seconds)", target.name, where)
	before := d.calls()
	t0 := time.Now()
	if err := leader.handOver(ctx, target); err != nil {
		return fmt.Errorf("handover: %w", err)
	}
	d.tl.printf(time.Now(), "demo", "HandOver returned after %s: %s's work returned and the handover was written", seconds(time.Since(t0)), leader.name)
	next, at, err := d.waitForLeader(ctx)
	if err != nil {
		return err
	}
	d.record(d.handOverBound(at.Sub(t0)), next)
	if next != target {
		// The named candidate alone may take the lease for two RetryPeriods
		// (rounded up to whole seconds); one that did not get the CPU to
		// write within them — a busy machine — lets the others take it.
		d.note(at, "the handover named %s, but %s took the lease: %s did not take it within its %s of exclusive right",
			target.name, next.name, target.name, seconds(2*d.s.retryPeriod))
	}
	return d.cost(ctx, "handover", "the HandOver call", before, next, at)
}

// stepHandEdit: an operator names a follower as holder by hand.
func (d *demo) stepHandEdit(ctx context.Context) error {
	leader, term, err := d.currentLeader(ctx, "a leader before the hand edit")
	if err != nil {
		return err
	}
	var target *proc
	for _, p := range d.procs {
		if p != leader {
			target = p
			break
		}
	}
	d.tl.heading("hand edit: the Lease's holder is set to %s while %s (term %d) leads", target.name, leader.name, term)
	d.tl.printf(time.Now(), "demo", "%s will not trust a record naming it that it did not write: no one leads until the edited lease expires", target.name)
	before := d.calls()
	t0 := time.Now()
	if err := d.b.setHolder(ctx, target.id); err != nil {
		return fmt.Errorf("editing the Lease: %w", err)
	}
	d.tl.printf(time.Now(), "demo", "edited: the Lease now names %s", target.name)
	stepped, err := d.waitFor(ctx, leader.name+" to step down", func() bool {
		n, ok := leader.term()
		return !ok || n != term
	})
	if err != nil {
		return err
	}
	d.tl.printf(stepped, "demo", "%s stepped down %s after the edit (at once through its watch, else at its next renewal: ≤ RetryPeriod + a round trip)", leader.name, seconds(stepped.Sub(t0)))
	next, at, err := d.waitForLeader(ctx)
	if err != nil {
		return err
	}
	d.record(d.handEditBound(at.Sub(t0)), next)
	return d.cost(ctx, "hand edit", "the edit", before, next, at)
}

// printLine prints the line of succession leader publishes, and returns
// it (identities, first in line first).
func (d *demo) printLine(leader *proc) []string {
	line := leader.line()
	var names []string
	for _, id := range line {
		names = append(names, d.display(id))
	}
	shown := strings.Join(names, ", ")
	if shown == "" {
		shown = "none yet"
	}
	d.tl.printf(time.Now(), "demo", "the line of succession %s publishes in the Lease: %s", leader.name, shown)
	return line
}

// callSnapshot is every candidate's Lease API calls at one moment, by
// candidate name.
type callSnapshot map[string]callCounts

// calls returns every candidate's Lease API calls so far.
func (d *demo) calls() callSnapshot {
	s := callSnapshot{}
	for _, p := range d.procs {
		s[p.name] = d.b.calls(p.name)
	}
	return s
}

// since returns what each candidate called after before, for those that
// called anything, the most first (then by name).
func (s callSnapshot) since(before callSnapshot) []candidateCalls {
	var out []candidateCalls
	for name, c := range s {
		if d := c.sub(before[name]); d.total() != 0 {
			out = append(out, candidateCalls{name, d})
		}
	}
	slices.SortFunc(out, func(a, b candidateCalls) int {
		if c := b.calls.total() - a.calls.total(); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	return out
}

// candidateCalls is one candidate's calls in a change.
type candidateCalls struct {
	name  string
	calls callCounts
}

// byCandidate says who made the calls of a change: the candidates that
// called the most, and how many others called what.
func byCandidate(cs []candidateCalls) string {
	const shown = 4
	var parts []string
	var rest callCounts
	for i, c := range cs {
		if i < shown {
			parts = append(parts, c.name+": "+c.calls.brief())
		} else {
			rest = rest.add(c.calls)
		}
	}
	if n := len(cs) - shown; n > 0 {
		parts = append(parts, fmt.Sprintf("%d others: %s", n, rest.brief()))
	}
	return strings.Join(parts, "; ")
}

// changeCost is what one change of leader cost: every candidate's calls
// from the change to the new leader's first renewal one RetryPeriod into
// its term, that renewal included.
type changeCost struct {
	what  string
	calls callCounts
}

// cost waits for next's first renewal one RetryPeriod into the term it was
// first seen leading at at, then prints and records every candidate's
// calls since before, taken at the change (from, in words), and who made
// them: a call the change did not need (a follower that tried to acquire
// after the new leader had — its turn came before it had read the
// leader's write, on a busy machine) is then seen as its own.
func (d *demo) cost(ctx context.Context, what, from string, before callSnapshot, next *proc, at time.Time) error {
	renewed, err := d.waitFor(ctx, next.name+"'s first renewal", func() bool {
		return !next.lastRenewal().Before(at.Add(d.s.retryPeriod / 2))
	})
	if err != nil {
		return err
	}
	by := d.calls().since(before)
	var c callCounts
	for _, cc := range by {
		c = c.add(cc.calls)
	}
	d.mu.Lock()
	d.costs = append(d.costs, changeCost{what, c})
	d.mu.Unlock()
	d.tl.block(renewed, "CALLS", []string{
		fmt.Sprintf("%s: %d calls by all %d candidates from %s to %s's first renewal a RetryPeriod into its term (included): %s",
			what, c.total(), len(d.procs), from, next.name, c.brief()),
		"by " + byCandidate(by),
	})
	return nil
}
