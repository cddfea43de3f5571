package ctrlrt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// DefaultLockCallTimeout is the default of LockOptions.CallTimeout: half of
// controller-runtime's default RenewDeadline (10 s).
const DefaultLockCallTimeout = 5 * time.Second

// LockOptions configure NewLock. Set exactly one of Config and Client;
// Namespace, Name and Identity are required.
type LockOptions struct {
	// Config is the REST configuration the lock builds its own Lease client
	// from (copied; its Timeout is ignored, as it would cut the watch, and
	// every other call gets CallTimeout instead). Prefer it to Client: the
	// lock's calls then share no client-side rate limiter with the
	// manager's other traffic.
	Config *rest.Config

	// Client is a clientset the lock uses for the Lease.
	Client kubernetes.Interface

	// Namespace and Name of the Lease, and the holder Identity this
	// candidate writes into it (unique among the candidates: the pod name,
	// from the downward API, is a good one).
	Namespace, Name, Identity string

	// EventRecorder, if not nil, records client-go's leader-election
	// Events on the Lease, as client-go's LeaseLock does.
	EventRecorder resourcelock.EventRecorder

	// CallTimeout bounds each Get, Create and Update the lock sends. Zero
	// means DefaultLockCallTimeout (5 s). Keep it below the manager's
	// RenewDeadline, so that one hung call cannot use up a renewal's
	// deadline.
	CallTimeout time.Duration
}

// Lock is a resourcelock.Interface on a Lease whose followers watch the
// Lease instead of polling it, for a controller-runtime manager that keeps
// its own leader election: set it as
// manager.Options.LeaderElectionResourceLockInterface (with LeaderElection
// true) and add it to the manager (mgr.Add(lock)), which runs its watch on
// every replica. client-go's elector still asks the lock for the Lease
// every RetryPeriod or two, as it always does; the Lock answers from its
// watch, without a call, so an idle follower sends no request at all (its
// one watch stays open), where a client-go follower sends one Get per 1–2.2
// RetryPeriods. Writes — acquisition, renewals, release — go to the API as
// client-go's LeaseLock sends them, each conditional on the version of the
// Lease that client-go decided on.
//
// What it does not change: everything else is client-go's and
// controller-runtime's. The manager still exits when it loses the lease
// ("leader election lost"), and restarts to lead again, re-listing its
// caches; with LeaderElectionReleaseOnCancel the lease is released before
// the controllers have stopped; a follower takes a released lease at its
// next poll (up to 2.2 RetryPeriods), not at once; there is no fencing
// token, no line of succession, no Yield or HandOver. For those, run the
// controllers in relect's terms with NewManager instead.
//
// Safety does not rest on the watch: every write is conditional on the
// resourceVersion of the Lease as the lock last handed it to client-go, so
// a watch that lags can make a follower try too late, or try and fail with
// a conflict (after which the lock reads the Lease from the API for its
// next answer), but never take a Lease that was renewed meanwhile.
//
// A Lock is safe for concurrent use. Until its watch has synced (or when it
// does not run), Get reads the Lease from the API, as client-go's LeaseLock
// does. Start may run once at a time; it may be called again after it
// returned.
type Lock struct {
	client          kubernetes.Interface
	leases          coordinationv1client.LeaseInterface
	namespace, name string
	identity        string
	recorder        resourcelock.EventRecorder
	callTimeout     time.Duration

	mu       sync.Mutex // guards the fields below
	running  bool       // Start is active
	synced   bool       // the watch has delivered the Lease's state, and runs
	doubt    bool       // a write conflicted since the last Get from the API
	observed *coordinationv1.Lease
	given    *coordinationv1.Lease // the Lease whose record client-go last got, or last wrote
	stats    LockStats
}

// LockStats counts a Lock's work.
type LockStats struct {
	// APIGets counts the Gets sent to the API (before the watch synced,
	// and after a conflict); LocalGets those answered from the watch.
	APIGets, LocalGets uint64
	// Writes counts the Creates and Updates sent; Conflicts those that
	// failed because the Lease had changed (409) or did not exist (404).
	Writes, Conflicts uint64
}

var (
	_ resourcelock.Interface = (*Lock)(nil)
	// Lock implements manager.Runnable and LeaderElectionRunnable (no
	// election: the watch runs on every replica).
	_ interface {
		Start(context.Context) error
		NeedLeaderElection() bool
	} = (*Lock)(nil)
)

// NewLock returns a Lock on the Lease o.Namespace/o.Name. It makes no API
// call and starts nothing. Invalid options give an error that wraps
// ErrInvalidOptions, naming each bad field.
func NewLock(o LockOptions) (*Lock, error) {
	var errs []error
	bad := func(field, problem string) {
		errs = append(errs, fmt.Errorf("%w: LockOptions.%s %s", ErrInvalidOptions, field, problem))
	}
	if (o.Config == nil) == (o.Client == nil) {
		bad("Config", "and Client: set exactly one")
	}
	for _, f := range []struct {
		field, v string
		valid    func(string) []string
	}{
		{"Namespace", o.Namespace, validation.IsDNS1123Label},
		{"Name", o.Name, validation.IsDNS1123Subdomain},
		{"Identity", o.Identity, nil},
	} {
		if f.v == "" {
			bad(f.field, "is empty")
		} else if f.valid != nil {
			if msgs := f.valid(f.v); len(msgs) > 0 {
				bad(f.field, fmt.Sprintf("%q is not a valid %s name: %s", f.v, strings.ToLower(f.field), strings.Join(msgs, "; ")))
			}
		}
	}
	if o.CallTimeout < 0 {
		bad("CallTimeout", fmt.Sprintf("is negative (%v)", o.CallTimeout))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if o.CallTimeout == 0 {
		o.CallTimeout = DefaultLockCallTimeout
	}
	client := o.Client
	if o.Config != nil {
		c := rest.CopyConfig(o.Config)
		c.Timeout = 0 // the watch is long; the calls get CallTimeout
		cs, err := kubernetes.NewForConfig(rest.AddUserAgent(c, "relect-ctrlrt-lock"))
		if err != nil {
			return nil, fmt.Errorf("%w: LockOptions.Config: %w", ErrInvalidOptions, err)
		}
		client = cs
	}
	return &Lock{
		client:      client,
		leases:      client.CoordinationV1().Leases(o.Namespace),
		namespace:   o.Namespace,
		name:        o.Name,
		identity:    o.Identity,
		recorder:    o.EventRecorder,
		callTimeout: o.CallTimeout,
	}, nil
}

// NeedLeaderElection returns false: the watch runs on every replica.
func (l *Lock) NeedLeaderElection() bool { return false }

// Start watches the Lease until ctx is done, and then returns nil; Get
// answers from the watch once it has synced. It returns an error at once if
// another Start of this Lock is active. Lost watches are resumed, and
// failed lists retried, with client-go's backoff.
func (l *Lock) Start(ctx context.Context) error {
	l.mu.Lock()
	if l.running {
		l.mu.Unlock()
		return errors.New("ctrlrt: Lock.Start is already active")
	}
	l.running = true
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.running, l.synced = false, false
		l.mu.Unlock()
	}()

	selector := fields.OneTermEqualSelector("metadata.name", l.name).String()
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return l.leases.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return l.leases.Watch(ctx, o)
		},
	}
	_, informer := toolscache.NewInformerWithOptions(toolscache.InformerOptions{
		// A real apiserver streams the initial state on the watch
		// (client-go's WatchList); a fake clientset cannot, and says so.
		ListerWatcher: toolscache.ToListWatcherWithWatchListSemantics(lw, l.client),
		ObjectType:    &coordinationv1.Lease{},
		Handler: toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { l.observe(obj, false) },
			UpdateFunc: func(_, obj any) { l.observe(obj, false) },
			DeleteFunc: func(obj any) { l.observe(obj, true) },
		},
	})
	var synced sync.WaitGroup
	synced.Go(func() {
		if toolscache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
			l.mu.Lock()
			l.synced = true
			l.mu.Unlock()
		}
	})
	informer.RunWithContext(ctx)
	synced.Wait()
	return nil
}

// observe keeps the newest version of the Lease the watch delivered: a
// watch event older than a write this lock made itself (a lagging watch)
// is ignored.
func (l *Lock) observe(obj any, deleted bool) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.observed != nil && older(lease.ResourceVersion, l.observed.ResourceVersion) {
		return
	}
	if deleted {
		l.observed = nil
		return
	}
	l.observed = lease
}

// older reports whether resourceVersion a is older than b. Versions that do
// not compare (not integers) are taken in the order the watch delivers them.
func older(a, b string) bool {
	c, err := resourceversion.CompareResourceVersion(a, b)
	return err == nil && c < 0
}

// Get returns the Lease's record: from the watch once it has synced, else
// from the API. A missing Lease is a NotFound error, as client-go expects.
func (l *Lock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	l.mu.Lock()
	if l.synced && !l.doubt {
		l.stats.LocalGets++
		l.given = l.observed
		lease := l.given
		l.mu.Unlock()
		if lease == nil {
			return nil, nil, apierrors.NewNotFound(coordinationv1.Resource("leases"), l.name)
		}
		return recordOf(lease)
	}
	l.stats.APIGets++
	l.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, l.callTimeout)
	defer cancel()
	lease, err := l.leases.Get(ctx, l.name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	l.mu.Lock()
	l.given = lease
	if l.observed == nil || !older(lease.ResourceVersion, l.observed.ResourceVersion) {
		l.observed = lease
	}
	l.doubt = false // a read settles the doubt a conflict cast
	l.mu.Unlock()
	return recordOf(lease)
}

// recordOf is the record client-go reads from a Lease, and its JSON, which
// client-go compares to tell a new record from the one it saw before.
func recordOf(lease *coordinationv1.Lease) (*resourcelock.LeaderElectionRecord, []byte, error) {
	r := resourcelock.LeaseSpecToLeaderElectionRecord(&lease.Spec)
	raw, err := json.Marshal(*r)
	if err != nil {
		return nil, nil, err
	}
	return r, raw, nil
}

// Create creates the Lease with ler.
func (l *Lock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: l.namespace},
		Spec:       resourcelock.LeaderElectionRecordToLeaseSpec(&ler),
	}
	return l.write(ctx, func(ctx context.Context) (*coordinationv1.Lease, error) {
		return l.leases.Create(ctx, lease, metav1.CreateOptions{})
	})
}

// Update writes ler over the Lease as client-go last got it (or last
// wrote it), conditional on that version: it fails with a conflict if the
// Lease has changed since.
func (l *Lock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	l.mu.Lock()
	base := l.given
	l.mu.Unlock()
	if base == nil {
		return errors.New("ctrlrt: Lock.Update: lease not initialized, call get or create first")
	}
	lease := base.DeepCopy()
	lease.Spec = resourcelock.LeaderElectionRecordToLeaseSpec(&ler)
	return l.write(ctx, func(ctx context.Context) (*coordinationv1.Lease, error) {
		return l.leases.Update(ctx, lease, metav1.UpdateOptions{})
	})
}

// write sends one Create or Update and keeps what it wrote. After a
// conflict (or a Lease found missing) the watch is doubted until the next
// Get from the API.
func (l *Lock) write(ctx context.Context, send func(context.Context) (*coordinationv1.Lease, error)) error {
	l.mu.Lock()
	l.stats.Writes++
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, l.callTimeout)
	defer cancel()
	lease, err := send(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) {
			l.stats.Conflicts++
			l.doubt = true
		}
		return err
	}
	l.given = lease
	if l.observed == nil || !older(lease.ResourceVersion, l.observed.ResourceVersion) {
		l.observed = lease
	}
	return nil
}

// RecordEvent records an Event on the Lease, as client-go's LeaseLock does.
func (l *Lock) RecordEvent(s string) {
	if l.recorder == nil {
		return
	}
	l.mu.Lock()
	meta := metav1.ObjectMeta{Name: l.name, Namespace: l.namespace}
	if l.given != nil {
		meta = *l.given.ObjectMeta.DeepCopy()
	}
	l.mu.Unlock()
	subject := &coordinationv1.Lease{ObjectMeta: meta}
	subject.Kind = "Lease"
	subject.APIVersion = coordinationv1.SchemeGroupVersion.String()
	l.recorder.Eventf(subject, corev1.EventTypeNormal, "LeaderElection", "%v %v", l.identity, s)
}

// Describe returns "namespace/name".
func (l *Lock) Describe() string { return l.namespace + "/" + l.name }

// Identity returns the holder identity this candidate writes.
func (l *Lock) Identity() string { return l.identity }

// Stats returns the Lock's counters.
func (l *Lock) Stats() LockStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats
}
