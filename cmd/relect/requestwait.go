package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/relect/relect/internal/pace"
	"github.com/relect/relect/operator"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// The wait for a request's outcome (relect yield, relect handover). The
// Lease is watched from the version read before the request was written,
// so the record that carries the request is seen, and from it the term the
// request is addressed to; every record after it is judged against that
// term:
//
//   - the same term (holder, leaseTransitions, acquireTime) with the
//     request still pending: wait on;
//   - the same term without it: refused (or replaced by another request);
//   - another term: the holder stepped down. A yield is honoured then; it
//     waits on for the next leader, only to say who. A handover is
//     honoured when the candidate named leads: a record naming it with the
//     old term's number is the handover record, not yet taken; a record of
//     someone else's term means another took the Lease.

// asked is a request as written.
type asked struct {
	holder       string // the holder it is addressed to (RequestYield's answer)
	to           string // "" for a yield
	unregistered bool
	by           string
	sent         time.Time // on this machine's clock
}

// ours reports whether r is the request a (the time it was written, by the
// library, is not known here: two requests alike are one).
func (a asked) ours(r operator.Request) bool {
	return r.Holder == a.holder && r.To == a.to && r.Unregistered == a.unregistered && r.By == a.by
}

// outcome is how a wait ended: the exit code, and what to say.
type outcome struct {
	code int
	msg  string
}

// outcomeWatch is the watch of the Lease a request's outcome is judged on.
// It is not safe for concurrent use.
type outcomeWatch struct {
	leases coordinationv1client.LeaseInterface
	plan   *requestPlan
	pre    *coordinationv1.Lease // read before the request was written
	wi     watch.Interface
}

// startOutcomeWatch watches the Lease from pre, the Lease as read before
// the request is written.
func startOutcomeWatch(ctx context.Context, leases coordinationv1client.LeaseInterface, plan *requestPlan, pre *coordinationv1.Lease) (*outcomeWatch, error) {
	w := &outcomeWatch{leases: leases, plan: plan, pre: pre}
	var err error
	if w.wi, err = w.watchFrom(ctx, pre.ResourceVersion); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *outcomeWatch) watchFrom(ctx context.Context, rv string) (watch.Interface, error) {
	return w.leases.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + w.plan.lease.name, ResourceVersion: rv})
}

// stop ends the watch.
func (w *outcomeWatch) stop() {
	if w.wi != nil {
		w.wi.Stop()
	}
}

// wait judges every change of the Lease until the outcome of a is known or
// ctx is done (gaveUp).
func (w *outcomeWatch) wait(ctx context.Context, a asked) outcome {
	j := &judge{a: a, lease: w.plan.lease, base: termOf(w.pre)}
	j.base.holder = a.holder
	for {
		var ev watch.Event
		ok := false
		select {
		case <-ctx.Done():
			return j.gaveUp(ctx, w.plan.timeout)
		case ev, ok = <-w.wi.ResultChan():
		}
		l, isLease := ev.Object.(*coordinationv1.Lease)
		switch {
		case ok && ev.Type == watch.Deleted:
			o, _ := j.observe(nil)
			return o
		case ok && isLease && (ev.Type == watch.Added || ev.Type == watch.Modified):
			if o, done := j.observe(l); done {
				return o
			}
		case ok && ev.Type != watch.Error:
			// A bookmark.
		default:
			// The watch ended (closed, or an error such as 410 Gone).
			if o, done := w.resync(ctx, j); done {
				return o
			}
		}
	}
}

// resync reads the Lease again after the watch ended, judges it
// (judge.resynced: changes in between are not seen) and watches from
// there, retrying every second, until it has a watch or an outcome, or
// ctx is done.
func (w *outcomeWatch) resync(ctx context.Context, j *judge) (outcome, bool) {
	w.wi.Stop()
	for ctx.Err() == nil {
		l, err := w.leases.Get(ctx, w.plan.lease.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return j.observe(nil)
		}
		if err == nil {
			if o, done := j.resynced(l); done {
				return o, true
			}
			if w.wi, err = w.watchFrom(ctx, l.ResourceVersion); err == nil {
				return outcome{}, false
			}
		}
		_ = pace.Sleep(ctx, time.Second)
	}
	return j.gaveUp(ctx, w.plan.timeout), true
}

// judge says what the records seen after a request was written mean for
// it.
type judge struct {
	a     asked
	lease leaseRef
	// seen: the record that carries the request was seen; base is the
	// term it was addressed to (before it was seen: the term read before
	// the request was written).
	seen bool
	base leaseTerm
	// ended: the base term ended (the holder stepped down).
	ended bool
}

// observe judges l, the next record of the Lease (nil: deleted).
func (j *judge) observe(l *coordinationv1.Lease) (outcome, bool) {
	if l == nil {
		return outcome{exitFailure, fmt.Sprintf("Lease %s was deleted while waiting for the outcome", j.lease)}, true
	}
	r, pending := operator.PendingRequest(l)
	mine := pending && j.a.ours(r)
	if !j.seen {
		// Changes from before the request was written; the record that
		// carries it comes next.
		if mine {
			j.seen, j.base = true, termOf(l)
		}
		return outcome{}, false
	}
	t := termOf(l)
	if !j.ended && t.same(j.base) {
		switch {
		case mine:
			return outcome{}, false
		case pending:
			return outcome{exitRefused, fmt.Sprintf("not honoured: another request (by %q, to %s) replaced this one while %s still leads %s (term %d)",
				r.By, actionOf(r.To), j.base.holder, j.lease, j.base.number)}, true
		}
		what := "a relect leader refuses a handover to a candidate it does not know as a live registered one (its log says why)"
		if j.a.to == "" {
			what = "the leader does not know requests, or another write removed it"
		}
		return outcome{exitRefused, fmt.Sprintf("refused: %s still leads %s (term %d), and the request is gone: %s",
			j.base.holder, j.lease, j.base.number, what)}, true
	}
	j.ended = true
	return j.after(t)
}

// resynced judges l, read anew after the watch was lost: if the record
// that carries the request was never seen, l is judged against the term
// read before the request was written.
func (j *judge) resynced(l *coordinationv1.Lease) (outcome, bool) {
	if !j.seen {
		j.seen = true
		if r, ok := operator.PendingRequest(l); ok && j.a.ours(r) {
			j.base = termOf(l)
		}
	}
	return j.observe(l)
}

// leader returns who leads in t, a term after the base one: "" while
// nobody does (released, or a handover record not taken yet: a record
// naming another holder with the base term's number).
func (j *judge) leader(t leaseTerm) string {
	if t.holder != j.base.holder && t.number == j.base.number {
		return ""
	}
	return t.holder
}

// after judges t, a record after the base term ended.
func (j *judge) after(t leaseTerm) (outcome, bool) {
	leader := j.leader(t)
	took := time.Since(j.a.sent).Round(time.Millisecond)
	switch {
	case leader == "":
		return outcome{}, false
	case j.a.to == "" && leader == j.base.holder:
		return outcome{exitOK, fmt.Sprintf("%s yielded %s: no other candidate took the Lease, and %s leads again (term %d), %v after the request",
			j.base.holder, j.lease, leader, t.number, took)}, true
	case j.a.to == "":
		return outcome{exitOK, fmt.Sprintf("%s yielded %s: %s leads now (term %d), %v after the request",
			j.base.holder, j.lease, leader, t.number, took)}, true
	case leader == j.a.to:
		return outcome{exitOK, fmt.Sprintf("%s handed %s over to %s: %s leads now (term %d), %v after the request",
			j.base.holder, j.lease, leader, leader, t.number, took)}, true
	}
	return outcome{exitOtherLeads, fmt.Sprintf("%s stepped down, but %s leads %s now (term %d), not %s: %s did not take the Lease in the time the handover gave it",
		j.base.holder, leader, j.lease, t.number, j.a.to, j.a.to)}, true
}

// gaveUp is the outcome when ctx is done first: --timeout passed, or a
// stop signal came.
func (j *judge) gaveUp(ctx context.Context, timeout time.Duration) outcome {
	why := fmt.Sprintf("no outcome within --timeout %v", timeout)
	if cause := context.Cause(ctx); !errors.Is(cause, context.DeadlineExceeded) {
		why = fmt.Sprintf("stopped waiting (%v)", cause)
	}
	switch {
	case !j.ended:
		return outcome{exitTimedOut, fmt.Sprintf("%s: %s still leads %s (term %d) and has not acted on the request: "+
			"a plain client-go leader ignores requests; a relect leader acts on them at once, unless it cannot reach the API", why, j.base.holder, j.lease, j.base.number)}
	case j.a.to == "":
		return outcome{exitOK, fmt.Sprintf("%s yielded %s: nobody leads it yet (%v after the request)", j.base.holder, j.lease, time.Since(j.a.sent).Round(time.Millisecond))}
	}
	return outcome{exitTimedOut, fmt.Sprintf("%s: %s stepped down, but %s does not lead %s yet", why, j.base.holder, j.a.to, j.lease)}
}

// same reports whether t and u are one term.
func (t leaseTerm) same(u leaseTerm) bool {
	return t.holder == u.holder && t.number == u.number && t.acquired.Equal(u.acquired)
}

// actionOf says what a request to hand over to to asks: "yield" if to is
// empty.
func actionOf(to string) string {
	if to == "" {
		return "yield"
	}
	return "hand over to " + to
}
