package relect_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

const (
	ns    = "default"
	lease = "relect-test"
)

// candidate is one Elector on a relecttest.LeaseAPI with everything a test
// checks recorded: events, OnNewLeader calls, live term contexts.
type candidate struct {
	t      *testing.T
	name   string
	client *relecttest.Client
	e      *relect.Elector
	cancel context.CancelCauseFunc
	done   chan error

	mu        sync.Mutex
	events    []relect.Event
	newLeader []string
	working   int // OnStartedLeading calls in progress
	starts    int
}

// newCandidate builds (but does not start) an Elector named name. mod may
// change the options; OnStartedLeading defaults to blocking until its
// context is done.
func newCandidate(t *testing.T, api *relecttest.LeaseAPI, name string, mod func(*relect.Options)) *candidate {
	t.Helper()
	c := &candidate{t: t, name: name, client: api.Client(name)}
	opts := relect.Options{
		Client:           c.client.Clientset(),
		Namespace:        ns,
		Name:             lease,
		Identity:         name,
		OnStartedLeading: func(ctx context.Context) { <-ctx.Done() },
		OnNewLeader: func(id string) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.newLeader = append(c.newLeader, id)
		},
	}
	if mod != nil {
		mod(&opts)
	}
	work := opts.OnStartedLeading
	opts.OnStartedLeading = func(ctx context.Context) {
		c.mu.Lock()
		c.working++
		c.starts++
		c.mu.Unlock()
		defer func() {
			c.mu.Lock()
			c.working--
			c.mu.Unlock()
		}()
		work(ctx)
	}
	e, err := relect.New(opts)
	require.NoError(t, err)
	c.e = e
	return c
}

// noRegistry turns the candidate registry off, for tests that count the
// calls made on the election's Lease itself.
func noRegistry(o *relect.Options) { o.DisableRegistry = true }

// start runs the Elector in the background and records its events.
func (c *candidate) start() {
	ctx, cancel := context.WithCancelCause(context.Background())
	c.cancel = cancel
	c.done = make(chan error, 1)
	events := c.e.Events()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ev := range events {
			c.mu.Lock()
			c.events = append(c.events, ev)
			c.mu.Unlock()
		}
	}()
	go func() {
		err := c.e.Run(ctx)
		wg.Wait() // the channel is closed once Run returned
		c.done <- err
	}()
}

// stop cancels Run and checks that it returned the context's error.
func (c *candidate) stop() {
	c.t.Helper()
	c.cancel(nil)
	require.ErrorIs(c.t, <-c.done, context.Canceled)
}

func (c *candidate) kinds() []relect.EventKind {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []relect.EventKind
	for _, ev := range c.events {
		out = append(out, ev.Kind)
	}
	return out
}

func (c *candidate) eventsOf(kind relect.EventKind) []relect.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []relect.Event
	for _, ev := range c.events {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

func (c *candidate) count(kind relect.EventKind) int { return len(c.eventsOf(kind)) }

func (c *candidate) isWorking() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.working > 0
}

// checkEvents asserts what every event stream must satisfy: terms alternate
// started → stopped, a stopped never comes without a started, term numbers
// never decrease, and OnNewLeader saw exactly the EventNewLeader sequence,
// in order.
func (c *candidate) checkEvents() {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	leading := false
	lastTerm := int64(-1)
	var leaders []string
	for i, ev := range c.events {
		switch ev.Kind {
		case relect.EventStartedLeading:
			require.Falsef(c.t, leading, "%s: event %d: started while leading", c.name, i)
			require.GreaterOrEqualf(c.t, ev.Term, lastTerm, "%s: event %d: term went down", c.name, i)
			leading, lastTerm = true, ev.Term
		case relect.EventStoppedLeading:
			require.Truef(c.t, leading, "%s: event %d: stopped without started", c.name, i)
			require.Equalf(c.t, lastTerm, ev.Term, "%s: event %d: stopped another term", c.name, i)
			require.Errorf(c.t, ev.Err, "%s: event %d: stopped without a cause", c.name, i)
			leading = false
		case relect.EventNewLeader:
			leaders = append(leaders, ev.Leader)
		}
		if i > 0 {
			require.Falsef(c.t, ev.Time.Before(c.events[i-1].Time), "%s: event %d out of time order", c.name, i)
		}
	}
	require.Zero(c.t, c.e.Stats().DroppedEvents, "%s: events were dropped; the checks above saw only part", c.name)
	require.Equalf(c.t, leaders, c.newLeader, "%s: OnNewLeader calls differ from EventNewLeader events", c.name)
}

// leaders returns the candidates whose IsLeader is true now.
func leaders(cs ...*candidate) []string {
	var out []string
	for _, c := range cs {
		if c.e.IsLeader() {
			out = append(out, c.name)
		}
	}
	return out
}

// monitor samples every candidate every step until stop is closed and fails
// the test if two ever lead, or two run their leader work, at one instant.
// Under synctest every state change happens at an instant at which all
// goroutines are blocked, so sampling after synctest.Wait at each step sees
// every overlap longer than the step.
func monitor(t *testing.T, step time.Duration, cs ...*candidate) (stop func()) {
	t.Helper()
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(step)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			if l := leaders(cs...); len(l) > 1 {
				t.Errorf("%v: two leaders at once: %v", time.Now(), l)
			}
			working := 0
			for _, c := range cs {
				if c.isWorking() {
					working++
				}
			}
			if working > 1 {
				t.Errorf("%v: %d candidates running leader work at once", time.Now(), working)
			}
		}
	}()
	return func() { close(quit); <-done }
}

// waitFor advances simulated time in steps until cond holds, failing after
// limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s did not happen", limit, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// recordingLock wraps a resource lock and records when each successful write
// naming its identity was sent: t_send of the safety rule.
type recordingLock struct {
	resourcelock.Interface
	mu    sync.Mutex
	sends []time.Time
}

func (r *recordingLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	sent := time.Now()
	err := r.Interface.Update(ctx, ler)
	if err == nil && ler.HolderIdentity == r.Identity() {
		r.mu.Lock()
		r.sends = append(r.sends, sent)
		r.mu.Unlock()
	}
	return err
}

func (r *recordingLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	sent := time.Now()
	err := r.Interface.Create(ctx, ler)
	if err == nil {
		r.mu.Lock()
		r.sends = append(r.sends, sent)
		r.mu.Unlock()
	}
	return err
}

func (r *recordingLock) lastSend() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.sends) == 0 {
		return time.Time{}
	}
	return r.sends[len(r.sends)-1]
}

func (r *recordingLock) sendTimes() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.sends...)
}

func newRecordingLock(api *relecttest.LeaseAPI, name string) *recordingLock {
	return &recordingLock{Interface: &resourcelock.LeaseLock{
		LeaseMeta:  metaFor(),
		Client:     api.Client(name).Clientset().CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: name},
	}}
}

func metaFor() metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: lease} }

// putLease stores a Lease held by holder that no candidate of the test wrote,
// renewed now, as another process (or an operator) would have left it.
func putLease(api *relecttest.LeaseAPI, holder string, seconds, transitions int32) {
	now := metav1.NewMicroTime(time.Now())
	api.Put(&coordinationv1.Lease{
		ObjectMeta: metaFor(),
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds,
			LeaseTransitions: &transitions, RenewTime: &now, AcquireTime: &now},
	})
}

// newAPI returns a fake Lease API that holds the test's Lease, released, so
// that the first candidate acquires it at once: relect creates a missing
// Lease only LeaseDuration after it found it missing.
func newAPI() *relecttest.LeaseAPI {
	api := relecttest.NewLeaseAPI()
	api.PutReleased(ns, lease)
	return api
}
