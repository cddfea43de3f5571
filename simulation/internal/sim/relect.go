package sim

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/relect/relect"
	"golang.org/x/time/rate"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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
	// router routes its shard calls (shardrun.go); nil without shards.
	router *shardRouter
}

// ValidTiming returns relect.New's verdict on t.
func ValidTiming(t Timing) error {
	_, err := relect.New(relect.Options{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: Namespace, Name: LeaseName},
			LockConfig: resourcelock.ResourceLockConfig{Identity: "validation"},
		},
		LeaseDuration:       t.LeaseDuration,
		RenewDeadline:       t.RenewDeadline,
		RetryPeriod:         t.RetryPeriod,
		BackoffInitial:      t.BackoffInitial,
		BackoffMax:          t.BackoffMax,
		RateLimit:           rate.Limit(t.RateLimit),
		RateBurst:           t.RateBurst,
		RegistrationRenewal: t.RegistrationRenewal,
		OnStartedLeading:    func(context.Context) {},
	})
	return err
}

func newRelectProcess(r *runner, sl *slot, runID int, prev *Run, a *Action) (process, int) {
	el, _ := sl.reuse.(*relectElector)
	if el == nil || prev == nil || prev.KeepLease || a.KeepLease || a.NewIdentity || el.keep != a.KeepLease {
		r.electors++
		el = &relectElector{id: r.electors, keep: a.KeepLease}
		t := r.t
		var work relect.WorkOptions
		if !r.s.Standby[sl.idx] { // relect.New refuses a standby Work: it never leads
			work = r.s.Work.options(sl.check)
		}
		var client kubernetes.Interface = sl.cs
		var shards relect.ShardOptions
		if r.shards != nil {
			client, el.router = r.shards.client(sl)
			shards = r.shards.options(sl, el)
		}
		e, err := relect.New(relect.Options{
			Client:              client,
			Namespace:           Namespace,
			Name:                LeaseName,
			Identity:            sl.identity,
			LeaseDuration:       t.LeaseDuration,
			RenewDeadline:       t.RenewDeadline,
			RetryPeriod:         t.RetryPeriod,
			BackoffInitial:      t.BackoffInitial,
			BackoffMax:          t.BackoffMax,
			RateLimit:           rate.Limit(t.RateLimit),
			RateBurst:           t.RateBurst,
			KeepLeaseOnCancel:   a.KeepLease,
			Priority:            r.s.Priority[sl.idx],
			Standby:             r.s.Standby[sl.idx],
			RegistrationRenewal: t.RegistrationRenewal,
			EventBuffer:         256,              // drained at every instant; drops are checked
			Logger:              r.logger(sl.idx), // into the History, not stderr
			OnStartedLeading: func(ctx context.Context) {
				n, _ := relect.TermFromContext(ctx)
				f, _ := relect.FenceFromContext(ctx)
				term, cancelled := r.termStarted(sl, int(el.runID.Load()), n)
				sl.startWrites(ctx, term, []termToken{{StoreFence, string(f)}, {StoreTerm, strconv.FormatInt(n, 10)}})
				sl.work(ctx, relect.Beat)
				cancelled()
			},
			Work:   work,
			Shards: shards,
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

func (p *relectProcess) stepDown(ctx context.Context, to string) error {
	if to == "" {
		return p.el.e.Yield(ctx)
	}
	return p.el.e.HandOver(ctx, to, nil)
}

func (p *relectProcess) knowsStandby(identity string) bool {
	return slices.ContainsFunc(p.el.e.Candidates(), func(c relect.Candidate) bool {
		return c.Identity == identity && c.Standby
	})
}

// relect's annotations of the election's Lease (record.go): the line of
// succession and the handover mark.
const (
	annotationSuccession = "relect.io/succession"
	annotationHandOver   = "relect.io/handover"
)

// successionOf fills in what relect's annotations of l say (Change's
// HandOverTo, Line, Keepers, Warden, Posted, Passed, Streak and Cooling), by relect's rules: an annotation
// counts only if written with the record's leaseTransitions, and a
// handover's only if it names the record's holder.
func successionOf(l *coordinationv1.Lease, c *Change) {
	var term int32
	if l.Spec.LeaseTransitions != nil {
		term = *l.Spec.LeaseTransitions
	}
	holder := ""
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	var h struct {
		Term int32  `json:"term"`
		To   string `json:"to"`
	}
	if raw, ok := l.Annotations[annotationHandOver]; ok && json.Unmarshal([]byte(raw), &h) == nil && h.Term == term && h.To == holder {
		c.HandOverTo = holder
	}
	var sc struct {
		Term int32 `json:"term"`
		Next []struct {
			ID string `json:"id"`
		} `json:"next"`
		Streak  int32 `json:"streak"`
		Cooling []struct {
			ID      string `json:"id"`
			Seconds int32  `json:"s"`
		} `json:"cooling"`
		Keep   []string `json:"keep"`
		Ward   string   `json:"ward"`
		Posted bool     `json:"posted"`
		Passed []string `json:"passed"`
	}
	if raw, ok := l.Annotations[annotationSuccession]; ok && json.Unmarshal([]byte(raw), &sc) == nil && sc.Term == term {
		for _, n := range sc.Next {
			c.Line = append(c.Line, n.ID)
		}
		c.Keepers, c.Warden, c.Posted, c.Passed = sc.Keep, sc.Ward, sc.Posted, sc.Passed
		c.Streak = int(sc.Streak)
		for _, n := range sc.Cooling {
			if n.Seconds > 0 {
				c.Cooling = append(c.Cooling, n.ID)
			}
		}
	}
}

func (p *relectProcess) run(ctx context.Context) {
	e := p.el.e
	dropped := e.Stats().DroppedEvents
	ch := e.Events()
	var wg sync.WaitGroup
	wg.Go(func() {
		for ev := range ch {
			kind := EventKind(ev.Kind.String())
			term := int64(-1)
			cause := ""
			switch ev.Kind {
			case relect.EventStartedLeading:
				kind, term = Started, ev.Term
			case relect.EventStoppedLeading:
				kind, term = Stopped, ev.Term
				switch {
				case errors.Is(ev.Err, relect.ErrYielded):
					cause = CauseYielded
				case errors.Is(ev.Err, relect.ErrHandedOver):
					cause = CauseHandedOver
				case errors.Is(ev.Err, relect.ErrWorkStuck):
					cause = CauseWorkStuck
				}
			case relect.EventReleased, relect.EventNewLeader, relect.EventHandedOver, relect.EventWorkStuck:
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
				At: ev.Time.Sub(p.r.t0), Kind: kind, Term: term, Detail: detail, Cause: cause})
			p.r.mu.Unlock()
			p.r.poke()
		}
	})
	_ = e.Run(ctx)
	wg.Wait()
	p.r.mu.Lock()
	p.r.h.Runs[p.runID].Dropped = e.Stats().DroppedEvents - dropped
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
