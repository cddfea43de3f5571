package relecttest

import (
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// Call is one Lease call made through a Client, as reported to the
// functions registered with LeaseAPI.Observe.
type Call struct {
	// Client is the name of the handle the call went through.
	Client string
	// Verb is VerbGet, VerbCreate, VerbUpdate, VerbDelete, VerbList or
	// VerbWatch.
	Verb string
	// Name is the Lease the call names: the object of a get, create,
	// update or delete, the metadata.name field selector of a list or
	// watch, or "" for a list or watch without one (relect's candidate
	// registry lists and watches by label).
	Name string
	// Start is when the call was made: the instant it was counted, before
	// any fault (pause, partition, latency, error) was applied.
	Start time.Time
	// End is when it returned to the caller.
	End time.Time
	// Err is what it returned: an injected error, the context's error for
	// a call that hung (partition, latency) until its context ended, the
	// API's answer (NotFound, Conflict, ...), or nil.
	Err error
	// Closed is, for a Watch that succeeded, closed when that watch ends:
	// when it is stopped or the context given to Watch is done. It is nil
	// for every other call.
	Closed <-chan struct{}
}

// observers is the copy-on-write list of the functions Observe registered.
type observers struct {
	mu   sync.Mutex // serialises registrations
	list atomic.Pointer[[]*func(Call)]
}

// Observe registers f to be called once for every Lease call made through
// any Client of a, when the call returns: after its faults were applied and
// the API answered, before the caller sees the answer. f runs in the
// caller's goroutine, so calls made concurrently are reported concurrently
// and f must be safe for that; f must not block, and must not make Lease
// calls itself. Calls are counted (Client.Calls) whether or not anyone
// observes them. The returned function unregisters f; after it returns, f
// is not called for calls that start later.
func (a *LeaseAPI) Observe(f func(Call)) (stop func()) {
	o := &a.obs
	o.mu.Lock()
	defer o.mu.Unlock()
	p := &f
	var next []*func(Call)
	if cur := o.list.Load(); cur != nil {
		next = append(next, *cur...)
	}
	next = append(next, p)
	o.list.Store(&next)
	return func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		cur := o.list.Load()
		if cur == nil {
			return
		}
		var kept []*func(Call)
		for _, q := range *cur {
			if q != p {
				kept = append(kept, q)
			}
		}
		o.list.Store(&kept)
	}
}

// observe reports a call that started at start and is returning *err to
// every registered observer. Deferred by each Lease verb but Watch.
func (c *Client) observe(verb, name string, start time.Time, err *error) {
	c.report(Call{Client: c.name, Verb: verb, Name: name, Start: start, Err: *err})
}

// observeWatch is observe for Watch, which also reports when the watch it
// returns (*wi) ends.
func (c *Client) observeWatch(name string, start time.Time, wi *watch.Interface, err *error) {
	call := Call{Client: c.name, Verb: VerbWatch, Name: name, Start: start, Err: *err}
	if w, ok := (*wi).(*watcher); ok && w != nil && *err == nil {
		call.Closed = w.done
	}
	c.report(call)
}

// report stamps call's end and hands it to every registered observer.
func (c *Client) report(call Call) {
	list := c.api.obs.list.Load()
	if list == nil || len(*list) == 0 {
		return
	}
	call.End = time.Now()
	for _, f := range *list {
		(*f)(call)
	}
}

// selectedName is the Lease a metadata.name field selector names, or "".
func selectedName(fieldSelector string) string {
	name, _ := nameSelector(fieldSelector)
	return name
}

// objectName is the name of the Lease a create or update sends, or "".
func objectName(l *coordinationv1.Lease) string {
	if l == nil {
		return ""
	}
	return l.Name
}
