package relecttest

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	applyconfigurationscoordinationv1 "k8s.io/client-go/applyconfigurations/coordination/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
)

// The verbs counted by Client.Calls.
const (
	VerbGet    = "get"
	VerbCreate = "create"
	VerbUpdate = "update"
	VerbDelete = "delete"
	VerbList   = "list"
	VerbWatch  = "watch"
)

// Client is one candidate's handle on a LeaseAPI: its view of the API, with
// its own injected faults and its own call counts. Faults apply to every
// Lease verb, in this order: a pause stalls the call until Resume; a
// partition makes it hang until its context ends (it then returns the
// context's error, as a client-side timeout would); latency delays it; then
// an injected error fails it. A Client is safe for concurrent use; get one
// from LeaseAPI.Client.
type Client struct {
	api  *LeaseAPI
	name string

	mu             sync.Mutex
	calls          map[string]int
	failNext       int
	failNextErr    error
	failErr        error
	failVerb       map[string]error
	failLease      map[string]error
	loseAnswers    int
	loseAnswersErr error
	latency        time.Duration
	applyDelay     time.Duration
	partitioned    chan struct{} // non-nil while partitioned; closed by Heal
	resume         chan struct{} // closed unless paused
}

// Name returns the handle's name.
func (c *Client) Name() string { return c.name }

// Clientset returns a kubernetes.Interface whose CoordinationV1().Leases go
// to the LeaseAPI through this handle. Every other API group is a plain
// client-go fake clientset, for the caller's own use.
func (c *Client) Clientset() kubernetes.Interface {
	return &clientset{Clientset: fake.NewClientset(), c: c}
}

// FailNext makes the next n Lease calls through this handle fail with err
// (see Error for the apiserver's errors). n ≤ 0 clears it.
func (c *Client) FailNext(n int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failNext, c.failNextErr = max(n, 0), err
}

// Fail makes every Lease call through this handle fail with err until Heal.
func (c *Client) Fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failErr = err
}

// LoseAnswers makes the next n successful writes (Create, Update) through
// this handle fail with err after the LeaseAPI applied them, as when a
// request times out on the client after the apiserver committed it. n ≤ 0
// clears it; so does Heal.
func (c *Client) LoseAnswers(n int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loseAnswers, c.loseAnswersErr = max(n, 0), err
}

// lostAnswer consumes one LoseAnswers, returning its error, or nil.
func (c *Client) lostAnswer() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loseAnswers == 0 {
		return nil
	}
	c.loseAnswers--
	return c.loseAnswersErr
}

// FailVerb makes every Lease call of verb (VerbWatch, say) through this
// handle fail with err until Heal, as RBAC that lacks one verb would.
func (c *Client) FailVerb(verb string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failVerb == nil {
		c.failVerb = map[string]error{}
	}
	c.failVerb[verb] = err
}

// FailLease makes every Lease call through this handle that names the Lease
// name fail with err until Heal: a Get, Create, Update or Delete of it, a
// List or Watch with the field selector metadata.name=name. Calls naming
// other Leases go on, as when an apiserver sheds one hot object's requests,
// or RBAC grants resourceNames that leave it out.
func (c *Client) FailLease(name string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failLease == nil {
		c.failLease = map[string]error{}
	}
	c.failLease[name] = err
}

// SetLatency delays every Lease call through this handle by d (zero: none).
// The delay ends early with the call's context.
func (c *Client) SetLatency(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.latency = d
}

// SetApplyDelay makes every write (Create, Update) through this handle
// reach the LeaseAPI d after it passed the other faults, as behind a slow
// apiserver or a proxy's queue: the write is applied then even if the
// caller's context ended meanwhile and the call already returned the
// context's error — the client gave up, the server did not. Zero: none;
// Heal clears it (writes already delayed still land).
func (c *Client) SetApplyDelay(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.applyDelay = d
}

// apply runs write, d after now if SetApplyDelay asked for it, and returns
// its outcome — or, if ctx ends first, ctx's error while write still runs
// at its time.
func (c *Client) apply(ctx context.Context, write func() (*coordinationv1.Lease, error)) (*coordinationv1.Lease, error) {
	c.mu.Lock()
	d := c.applyDelay
	c.mu.Unlock()
	if d <= 0 {
		return write()
	}
	type result struct {
		l   *coordinationv1.Lease
		err error
	}
	done := make(chan result, 1)
	go func() {
		time.Sleep(d)
		l, err := write()
		done <- result{l, err}
	}()
	select {
	case r := <-done:
		return r.l, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Partition cuts this handle off: calls hang until their context ends, and
// calls in flight when Heal is called go on normally.
func (c *Client) Partition() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.partitioned == nil {
		c.partitioned = make(chan struct{})
	}
}

// Pause stalls every call through this handle, even those whose context
// ends, until Resume, as if the candidate's process were stopped: a call
// that was sent completes after Resume. Use it to model a process paused
// between sending a request and reading its answer.
func (c *Client) Pause() {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.resume:
		c.resume = make(chan struct{})
	default: // already paused
	}
}

// Resume ends a Pause.
func (c *Client) Resume() {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.resume:
	default:
		close(c.resume)
	}
}

// Heal clears errors (FailNext, Fail, FailVerb, FailLease, LoseAnswers),
// latency, the apply delay and a partition. It does not end a Pause.
func (c *Client) Heal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failNext, c.failNextErr, c.failErr, c.latency, c.applyDelay = 0, nil, nil, 0, 0
	c.failVerb, c.failLease = nil, nil
	c.loseAnswers, c.loseAnswersErr = 0, nil
	if c.partitioned != nil {
		close(c.partitioned)
		c.partitioned = nil
	}
}

// Calls returns how many Lease calls of verb (VerbGet, VerbUpdate, ...) this
// handle has sent, including failed ones.
func (c *Client) Calls(verb string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[verb]
}

// TotalCalls returns how many Lease calls of any verb this handle has sent.
func (c *Client) TotalCalls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.calls {
		n += v
	}
	return n
}

// enter counts the call and applies the faults; a non-nil error fails it.
func (c *Client) enter(ctx context.Context, verb, name string) error {
	c.mu.Lock()
	c.calls[verb]++
	resume := c.resume
	c.mu.Unlock()
	<-resume // a paused process does not even see its context end

	c.mu.Lock()
	part, lat := c.partitioned, c.latency
	c.mu.Unlock()
	if part != nil {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-part:
		}
	}
	if lat > 0 {
		t := time.NewTimer(lat)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.failNext > 0:
		c.failNext--
		return c.failNextErr
	case c.failErr != nil:
		return c.failErr
	case c.failVerb[verb] != nil:
		return c.failVerb[verb]
	case name != "" && c.failLease[name] != nil:
		return c.failLease[name]
	}
	return nil
}

// clientset is a fake clientset whose Leases go to the LeaseAPI.
type clientset struct {
	*fake.Clientset
	c *Client
}

func (s *clientset) CoordinationV1() coordinationv1client.CoordinationV1Interface {
	return coordination{s.c}
}

type coordination struct{ c *Client }

func (coordination) RESTClient() rest.Interface { return nil }

func (g coordination) Leases(namespace string) coordinationv1client.LeaseInterface {
	return &leases{c: g.c, ns: namespace}
}

// leases implements the typed Lease client over the LeaseAPI.
type leases struct {
	c  *Client
	ns string
}

var _ coordinationv1client.LeaseInterface = (*leases)(nil)

func (l *leases) Get(ctx context.Context, name string, _ metav1.GetOptions) (_ *coordinationv1.Lease, err error) {
	defer l.c.observe(VerbGet, name, time.Now(), &err)
	if err := l.c.enter(ctx, VerbGet, name); err != nil {
		return nil, err
	}
	return l.c.api.get(l.ns, name)
}

func (l *leases) Create(ctx context.Context, lease *coordinationv1.Lease, _ metav1.CreateOptions) (_ *coordinationv1.Lease, err error) {
	defer l.c.observe(VerbCreate, objectName(lease), time.Now(), &err)
	if err := l.c.enter(ctx, VerbCreate, objectName(lease)); err != nil {
		return nil, err
	}
	in := lease.DeepCopy() // the caller may reuse lease once it gave up
	out, err := l.c.apply(ctx, func() (*coordinationv1.Lease, error) { return l.c.api.create(l.ns, in) })
	if err == nil {
		if lost := l.c.lostAnswer(); lost != nil {
			return nil, lost
		}
	}
	return out, err
}

func (l *leases) Update(ctx context.Context, lease *coordinationv1.Lease, _ metav1.UpdateOptions) (_ *coordinationv1.Lease, err error) {
	defer l.c.observe(VerbUpdate, objectName(lease), time.Now(), &err)
	if err := l.c.enter(ctx, VerbUpdate, objectName(lease)); err != nil {
		return nil, err
	}
	in := lease.DeepCopy()
	out, err := l.c.apply(ctx, func() (*coordinationv1.Lease, error) { return l.c.api.update(l.ns, in) })
	if err == nil {
		if lost := l.c.lostAnswer(); lost != nil {
			return nil, lost
		}
	}
	return out, err
}

// Delete honours a resourceVersion precondition as the apiserver does: a
// Lease changed since fails with 409 Conflict.
func (l *leases) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) (err error) {
	defer l.c.observe(VerbDelete, name, time.Now(), &err)
	if err := l.c.enter(ctx, VerbDelete, name); err != nil {
		return err
	}
	l.c.api.mu.Lock()
	defer l.c.api.mu.Unlock()
	if p := opts.Preconditions; p != nil && p.ResourceVersion != nil {
		if cur := l.c.api.leases[key(l.ns, name)]; cur != nil && cur.ResourceVersion != *p.ResourceVersion {
			return apierrors.NewConflict(leasesResource, name, fmt.Errorf(
				"the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%s)", *p.ResourceVersion, cur.ResourceVersion))
		}
	}
	return l.c.api.deleteLocked(l.ns, name)
}

func (l *leases) List(ctx context.Context, opts metav1.ListOptions) (_ *coordinationv1.LeaseList, err error) {
	defer l.c.observe(VerbList, selectedName(opts.FieldSelector), time.Now(), &err)
	if err := l.c.enter(ctx, VerbList, selectedName(opts.FieldSelector)); err != nil {
		return nil, err
	}
	return l.c.api.list(l.ns, opts)
}

// Watch supports an empty field selector or metadata.name=NAME, and any
// label selector. Without a resourceVersion, events start with the next
// change; with one, the changes after it are replayed first — any
// resourceVersion of the last 75 s, as the apiserver's watch cache keeps
// them (see historyWindow) — or the watch fails with 410 Gone
// (apierrors.IsResourceExpired) if they are older. An open watch never
// drops an event, however slowly it is read. The watch ends when Stop is
// called or ctx is done.
func (l *leases) Watch(ctx context.Context, opts metav1.ListOptions) (wi watch.Interface, err error) {
	defer l.c.observeWatch(selectedName(opts.FieldSelector), time.Now(), &wi, &err)
	if err := l.c.enter(ctx, VerbWatch, selectedName(opts.FieldSelector)); err != nil {
		return nil, err
	}
	name, err := nameSelector(opts.FieldSelector)
	if err != nil {
		return nil, err
	}
	sel, err := labelSelector(opts.LabelSelector)
	if err != nil {
		return nil, err
	}
	return l.c.api.watch(ctx, l.ns, name, sel, opts.ResourceVersion)
}

func (l *leases) DeleteCollection(context.Context, metav1.DeleteOptions, metav1.ListOptions) error {
	return errUnsupported("deletecollection")
}

func (l *leases) Patch(context.Context, string, types.PatchType, []byte, metav1.PatchOptions, ...string) (*coordinationv1.Lease, error) {
	return nil, errUnsupported("patch")
}

func (l *leases) Apply(context.Context, *applyconfigurationscoordinationv1.LeaseApplyConfiguration, metav1.ApplyOptions) (*coordinationv1.Lease, error) {
	return nil, errUnsupported("apply")
}
