package registry

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/relect/relect/internal/fakecalls"
	"github.com/relect/relect/internal/wire"
	"github.com/relect/relect/relecttest"

	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestMain fails the package if any goroutine outlives the tests:
// Register's wait and Watch return only once everything they started
// returned.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The fake port: what the component asks of the election core, played by
// the tests. Calls go straight to relecttest's Lease API (no bucket; the
// spare tokens are a switch); the reports are recorded.

const (
	testNS    = "ns"
	testLease = "work"
	rp        = 2 * time.Second
	renewal   = 10 * time.Second
)

// fakeCalls implements Calls: it counts the calls by verb
// (fakecalls.Counter); TrySpare makes its call only while spare is set, and
// counts the others as declined.
type fakeCalls struct {
	fakecalls.Counter
	mu       sync.Mutex
	spare    bool
	declined int
}

var _ Calls = (*fakeCalls)(nil)

func (c *fakeCalls) TrySpare(ctx context.Context, verb string, bounded bool, fn func(context.Context) error) (bool, error) {
	c.mu.Lock()
	spare := c.spare
	if !spare {
		c.declined++
	}
	c.mu.Unlock()
	if !spare {
		return false, nil
	}
	return true, c.Do(ctx, verb, bounded, fn)
}

// fakeReports implements Reports: it records what it is told, keeps the
// view by object name, and turns the registry off at Forbidden, as the
// core does.
type fakeReports struct {
	mu         sync.Mutex
	off        context.Context
	turnOff    context.CancelFunc
	forbidden  []string // the verbs
	cannot     []string // the verbs
	duplicates []string
	view       map[string]wire.Registration // nil: unknown
	lists      int
	gone       []string
	lapsed     []Version
}

var _ Reports = (*fakeReports)(nil)

func newFakeReports() *fakeReports {
	r := &fakeReports{}
	r.off, r.turnOff = context.WithCancel(context.Background())
	return r
}

func (r *fakeReports) Off() context.Context { return r.off }

func (r *fakeReports) Forbidden(verb string, _ error) {
	r.with(func() { r.forbidden = append(r.forbidden, verb) })
	r.turnOff()
}

func (r *fakeReports) CannotDelete(verb string, _ error) {
	r.with(func() { r.cannot = append(r.cannot, verb) })
}

func (r *fakeReports) DuplicateIdentity(how string) {
	r.with(func() { r.duplicates = append(r.duplicates, how) })
}

func (r *fakeReports) Listed(rs []wire.Registration) {
	r.with(func() {
		r.lists++
		r.view = map[string]wire.Registration{}
		for _, x := range rs {
			r.view[x.Name] = x
		}
	})
}

func (r *fakeReports) Changed(x wire.Registration) { r.with(func() { r.view[x.Name] = x }) }

func (r *fakeReports) Gone(name string) {
	r.with(func() { delete(r.view, name); r.gone = append(r.gone, name) })
}

func (r *fakeReports) Lapsed() []Version {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.lapsed)
}

func (r *fakeReports) Unknown() { r.with(func() { r.view = nil }) }

func (r *fakeReports) with(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f()
}

// identities returns the identities of the view, sorted; nil if unknown.
func (r *fakeReports) identities() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.view == nil {
		return nil
	}
	ids := []string{}
	for _, x := range r.view {
		ids = append(ids, x.Identity)
	}
	slices.Sort(ids)
	return ids
}

// testConfig is the Config of election testLease for candidate id, of
// Elector instance, over client.
func testConfig(client *relecttest.Client, id, instance string) Config {
	return Config{
		Name: testLease, Namespace: testNS, Identity: id, Instance: instance,
		RetryPeriod: rp, RenewDeadline: rp * 5, BackoffMax: 4 * rp, Renewal: renewal,
		Leases:       client.Clientset().CoordinationV1().Leases(testNS),
		Registration: testRegistration(id, instance),
		NewBackoff:   func(initial, _ time.Duration) Backoff { return fixedBackoff(initial) },
	}
}

// testRegistration writes id's registration as Elector instance: relect's
// (succession.go's registration) in the fields the component reads.
func testRegistration(id, instance string) func(*coordinationv1.Lease, time.Time) *coordinationv1.Lease {
	return func(from *coordinationv1.Lease, now time.Time) *coordinationv1.Lease {
		l := &coordinationv1.Lease{}
		if from != nil {
			l = from.DeepCopy()
		}
		l.Namespace, l.Name = testNS, wire.RegistrationName(testLease, id)
		l.Labels = map[string]string{wire.LabelCandidateOf: wire.CandidateOf(testLease)}
		l.Annotations = map[string]string{wire.AnnotationInstance: instance}
		seconds, t := int32(3*renewal/time.Second), metav1.NewMicroTime(now)
		l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &id, &seconds, &t
		return l
	}
}

// fixedBackoff waits its duration every time.
type fixedBackoff time.Duration

func (b fixedBackoff) Next() time.Duration { return time.Duration(b) }
func (fixedBackoff) Reset()                {}
