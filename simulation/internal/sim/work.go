package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/relect/relect"
)

// Work liveness (relect.Options.Work, issue 20): what a schedule's work is
// and how it is told to relect, the faults that make it stuck, and the
// work itself as every leader of both implementations does it. What the
// checkers make of it is in checkwork.go.

// Work is the work liveness of a schedule and the work its leaders do.
// Every leader, of both implementations, does the same work: it beats
// every BeatEvery while it is not hung — relect.Beat for relect, nothing
// for the client-go loop, which has no such thing — and returns as soon as
// its term's context ends. relect's candidates (but standbys, which may not
// have it) run with the Options.Work the fields give. The zero value is
// off: no beat, no check, and the work only waits for its context.
type Work struct {
	// BeatWindow is relect's WorkOptions.BeatWindow (zero: no beat is
	// expected, and healthy work does not beat); BeatEvery is how often
	// healthy work beats.
	BeatWindow, BeatEvery time.Duration
	// Check: relect runs the candidate's work check (WorkOptions.Check)
	// every CheckInterval, each call bounded by CheckTimeout;
	// CheckFailures failures in a row mean stuck. Zero fields select
	// relect's defaults (relect applies them; the checkers apply the
	// documented ones: withDefaults, workpromise.go).
	Check         bool
	CheckInterval time.Duration
	CheckTimeout  time.Duration
	CheckFailures int
	// Cooldown and MaxCooldown are relect's (zero: its defaults): the
	// hold of the leader after the k-th stuck handover in a row is
	// Cooldown × 2^(k−1), at most MaxCooldown.
	Cooldown, MaxCooldown time.Duration
}

// On reports whether w asks for work liveness at all.
func (w Work) On() bool { return w.BeatWindow > 0 || w.Check }

// options is w as relect.Options.Work, with check as the work check.
func (w Work) options(check func(context.Context) error) relect.WorkOptions {
	if !w.On() {
		return relect.WorkOptions{}
	}
	o := relect.WorkOptions{BeatWindow: w.BeatWindow, CheckInterval: w.CheckInterval, CheckTimeout: w.CheckTimeout,
		CheckFailures: w.CheckFailures, Cooldown: w.Cooldown, MaxCooldown: w.MaxCooldown}
	if w.Check {
		o.Check = check
	}
	return o
}

func (w Work) String() string {
	if !w.On() {
		return "off"
	}
	var s string
	if w.BeatWindow > 0 {
		s += fmt.Sprintf("beat-window=%v beat-every=%v ", w.BeatWindow, w.BeatEvery)
	}
	if w.Check {
		s += fmt.Sprintf("check-interval=%v check-timeout=%v check-failures=%d ", w.CheckInterval, w.CheckTimeout, w.CheckFailures)
	}
	return s + fmt.Sprintf("cooldown=%v max-cooldown=%v", w.Cooldown, w.MaxCooldown)
}

// detection returns how long after its work became stuck relect may take
// to see it, by each means it watches: beats (BeatWindow: the last beat
// came at most then) and the check (CheckFailures calls, an interval
// apart, the first at most an interval after the failure began, the last
// counted at its timeout at most); zero for a means not in use. w must
// have its defaults applied.
func (w Work) detection() (beat, check time.Duration) {
	if w.BeatWindow > 0 {
		beat = w.BeatWindow
	}
	if w.Check {
		check = time.Duration(w.CheckFailures)*w.CheckInterval + w.CheckTimeout
	}
	return beat, check
}

// addWork draws, from its own stream, work liveness for one schedule in
// three: beats, a check, or both (a BeatWindow of ½–3 LD, healthy work
// beating twice a window; a check every ½–2½ RP, its timeout relect's
// default or drawn, 1–4 failures in a row or relect's default), a Cooldown
// of ½–2½ LD, capped in half of them at 1–8 cooldowns. Then its faults:
// each candidate that may lead has its work hang (with beats), and its
// check fail (with a check; one failing check in three hangs until its
// timeout), up to two times each, each time for ½–3 times what relect needs
// to see it and hand over (the detection, 2 RP and two token waits); and in
// one of those schedules in three the downstream fails for everyone, for
// the detection time plus 1–4 cooldowns. The faults fall in the fault
// phase where they fit; a candidate's ends at most a handover's time (and
// LD) beyond it. Quiet is when the last is undone.
func addWork(r *rand.Rand, s *Schedule, acts []Action, faultEnd time.Duration) []Action {
	if r.IntN(3) != 0 {
		return acts
	}
	t := s.Timing.withDefaults()
	ld, rp := t.LeaseDuration, t.RetryPeriod
	w := &s.Work
	mode := r.IntN(3) // beats, check, both
	if mode != 1 {
		w.BeatWindow = roundMs(scale(ld, 0.5+2.5*r.Float64()))
		w.BeatEvery = roundMs(w.BeatWindow / 2)
	}
	if mode != 0 {
		w.Check = true
		w.CheckInterval = roundMs(scale(rp, 0.5+2*r.Float64()))
		if r.IntN(2) == 0 {
			w.CheckTimeout = roundMs(scale(w.CheckInterval, 0.1+0.9*r.Float64()))
		}
		w.CheckFailures = r.IntN(5) // 0: relect's default
	}
	w.Cooldown = roundMs(scale(ld, 0.5+2*r.Float64()))
	if r.IntN(2) == 0 {
		w.MaxCooldown = roundMs(scale(w.Cooldown, 1+7*r.Float64()))
	}
	beat, check := w.withDefaults().detection()
	detect := max(beat, check)
	// What relect needs to see stuck work and hand over, holds aside.
	handOver := detect + 2*rp + 2*time.Duration(float64(time.Second)/t.RateLimit)
	// at draws when a fault of length d begins, after from: within the
	// fault phase, ending in it if there is room.
	at := func(from, d time.Duration) time.Duration {
		return from + roundMs(scale(max(0, faultEnd-from-d), r.Float64()))
	}
	episode := func(fault, undo Kind, c int, hang bool) {
		if r.IntN(2) == 0 {
			return
		}
		// Beyond the fault phase by at most a handover's time, and LD.
		d := min(roundMs(scale(handOver, 1.5+2.5*r.Float64())), faultEnd+min(handOver, ld))
		a := at(0, d)
		acts = append(acts, Action{At: a, Kind: fault, Target: c, Hang: hang}, Action{At: a + d, Kind: undo, Target: c})
	}
	for c := range s.Candidates {
		if s.Standby[c] {
			continue // never leads: relect refuses it Work
		}
		if w.BeatWindow > 0 {
			episode(HangWork, UnhangWork, c, false)
		}
		if w.Check {
			episode(FailCheck, HealCheck, c, r.IntN(3) == 0)
		}
	}
	if r.IntN(3) == 0 {
		d := detect + roundMs(scale(w.withDefaults().Cooldown, 1+3*r.Float64()))
		a := at(0, d)
		hang := w.Check && r.IntN(3) == 0
		acts = append(acts, Action{At: a, Kind: FailDownstream, Target: -1, Hang: hang},
			Action{At: a + d, Kind: HealDownstream, Target: -1})
	}
	return acts
}

// workUndo maps each work fault to what undoes it.
var workUndo = map[Kind]Kind{HangWork: UnhangWork, FailCheck: HealCheck, FailDownstream: HealDownstream}

// workFaults is what work faults did to one candidate's work (a slot's),
// or to everyone's (the runner's downstream).
type workFaults struct {
	hung    atomic.Bool // the work does not beat
	failing atomic.Bool // the check fails
	hangs   atomic.Bool // ... by hanging until its context ends
}

// applyWork applies work fault a (HangWork … HealDownstream).
func (r *runner) applyWork(a Action) {
	f := &r.downstream
	if a.Target >= 0 {
		f = &r.slots[a.Target].faults
	}
	switch a.Kind {
	case HangWork:
		f.hung.Store(true)
	case UnhangWork:
		f.hung.Store(false)
	case FailCheck:
		f.hangs.Store(a.Hang)
		f.failing.Store(true)
	case HealCheck:
		f.failing.Store(false)
	case FailDownstream:
		f.hangs.Store(a.Hang)
		f.failing.Store(true)
		f.hung.Store(true)
	case HealDownstream:
		f.failing.Store(false)
		f.hung.Store(false)
	}
}

// work is the work of one term of slot sl, whose context is ctx: it beats
// (beat) every BeatEvery while it is not hung, and returns when ctx ends.
func (sl *slot) work(ctx context.Context, beat func(context.Context) bool) {
	every := sl.r.s.Work.BeatEvery
	if every <= 0 {
		<-ctx.Done()
		return
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if !sl.faults.hung.Load() && !sl.r.downstream.hung.Load() {
				beat(ctx)
			}
		}
	}
}

// errDownstream is what a failing work check returns.
var errDownstream = errors.New("sim: the work's downstream does not answer")

// check is slot sl's work check (relect's WorkOptions.Check): nil while
// healthy; while failing, an error at once, or, if the fault says it
// hangs, the context's error once it ends. Every call is recorded
// (History.Checks).
func (sl *slot) check(ctx context.Context) (err error) {
	r := sl.r
	start := r.now()
	defer func() {
		r.mu.Lock()
		r.h.Checks = append(r.h.Checks, CheckCall{Candidate: sl.idx, Run: sl.runID, Start: start, End: r.now(), Failed: err != nil}) // runID: guarded by mu
		r.mu.Unlock()
	}()
	f, d := &sl.faults, &r.downstream
	switch {
	case f.failing.Load() && f.hangs.Load(), d.failing.Load() && d.hangs.Load():
		<-ctx.Done()
		return ctx.Err()
	case f.failing.Load(), d.failing.Load():
		return errDownstream
	}
	return nil
}
