package sim

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/relect/relect"
	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// relectProcess is one Run of a relect.Elector.
type relectProcess struct {
	r     *runner
	sl    *slot
	runID int
	el    *relectElector
}

// relectElector is one relect.Elector: a process. It is Run again after a
// graceful Stop (the same process campaigning again), and replaced after a
// Kill (a crashed process is restarted as a new one).
type relectElector struct {
	e     *relect.Elector
	id    int
	keep  bool
	runID atomic.Int64 // the Run in progress, for the callbacks
}

// ValidTiming returns relect.New's verdict on t.
func ValidTiming(t Timing) error {
	_, err := relect.New(relect.Options{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: Namespace, Name: LeaseName},
			LockConfig: resourcelock.ResourceLockConfig{Identity: "validation"},
		},
		LeaseDuration:    t.LeaseDuration,
		RenewDeadline:    t.RenewDeadline,
		RetryPeriod:      t.RetryPeriod,
		BackoffInitial:   t.BackoffInitial,
		BackoffMax:       t.BackoffMax,
		RateLimit:        rate.Limit(t.RateLimit),
		RateBurst:        t.RateBurst,
		OnStartedLeading: func(context.Context) {},
	})
	return err
}

func newRelectProcess(r *runner, sl *slot, runID int, prev *Run, a *Action) (process, int) {
	el, _ := sl.reuse.(*relectElector)
	if el == nil || prev == nil || prev.KeepLease || a.KeepLease || a.NewIdentity || el.keep != a.KeepLease {
		r.electors++
		el = &relectElector{id: r.electors, keep: a.KeepLease}
		t := r.t
		e, err := relect.New(relect.Options{
			Client:            sl.cs,
			Namespace:         Namespace,
			Name:              LeaseName,
			Identity:          sl.identity,
			LeaseDuration:     t.LeaseDuration,
			RenewDeadline:     t.RenewDeadline,
			RetryPeriod:       t.RetryPeriod,
			BackoffInitial:    t.BackoffInitial,
			BackoffMax:        t.BackoffMax,
			RateLimit:         rate.Limit(t.RateLimit),
			RateBurst:         t.RateBurst,
			KeepLeaseOnCancel: a.KeepLease,
			EventBuffer:       256, // drained at every instant; drops are checked
			OnStartedLeading: func(ctx context.Context) {
				n, _ := relect.TermFromContext(ctx)
				cancelled := r.termStarted(sl, int(el.runID.Load()), n)
				<-ctx.Done()
				cancelled()
			},
		})
		if err != nil {
			panic("sim: relect.New: " + err.Error())
		}
		el.e = e
		sl.reuse = el
	}
	el.runID.Store(int64(runID))
	return &relectProcess{r: r, sl: sl, runID: runID, el: el}, el.id
}

func (p *relectProcess) isLeader() bool { return p.el.e.IsLeader() }

func (p *relectProcess) run(ctx context.Context) {
	e := p.el.e
	dropped := e.DroppedEvents()
	ch := e.Events()
	var wg sync.WaitGroup
	wg.Go(func() {
		for ev := range ch {
			kind := EventKind(ev.Kind.String())
			term := int64(-1)
			switch ev.Kind {
			case relect.EventStartedLeading:
				kind, term = Started, ev.Term
			case relect.EventStoppedLeading:
				kind, term = Stopped, ev.Term
			case relect.EventReleased, relect.EventNewLeader:
				term = ev.Term
			}
			detail := ev.Leader
			if ev.Err != nil {
				detail = errString(unwrapAll(ev.Err))
			}
			if ev.Delay != 0 {
				detail = "delay=" + ev.Delay.String()
			}
			p.r.mu.Lock()
			p.r.h.Events = append(p.r.h.Events, Event{Candidate: p.sl.idx, Run: p.runID,
				At: ev.Time.Sub(p.r.t0), Kind: kind, Term: term, Detail: detail})
			p.r.mu.Unlock()
			p.r.poke()
		}
	})
	_ = e.Run(ctx)
	wg.Wait()
	p.r.mu.Lock()
	p.r.h.Runs[p.runID].Dropped = e.DroppedEvents() - dropped
	p.r.mu.Unlock()
}

// unwrapAll returns the innermost error of a chain of single wraps.
func unwrapAll(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}
