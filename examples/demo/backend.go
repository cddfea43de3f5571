package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/relecttest"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
)

// backend is where the Lease lives: relecttest's in-memory Lease API or a
// real cluster.
type backend interface {
	// where describes the Lease's location for the header.
	where() string
	// identity returns the holder identity of the candidate named name.
	identity(name string) string
	// locate sets the Lease location fields of opts for candidate name.
	locate(opts *relect.Options, name string)
	// calls returns how many Lease API calls candidate name has sent so
	// far, over all its incarnations.
	calls(name string) callCounts
	// holder returns the Lease's holder identity ("" if none) and its
	// leaseTransitions now.
	holder(ctx context.Context) (identity string, transitions int32, err error)
	// setHolder edits the Lease by hand, as kubectl edit would: it names
	// identity as the holder and sets the renew time to now.
	setHolder(ctx context.Context, identity string) error
	// slack is the extra time allowed on top of each computed bound, for
	// scheduling and API latency.
	slack() time.Duration
}

// leaseHolder returns the holder and leaseTransitions of l, which may be nil.
func leaseHolder(l *coordinationv1.Lease) (string, int32, error) {
	if l == nil {
		return "", 0, nil
	}
	var holder string
	var transitions int32
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	if l.Spec.LeaseTransitions != nil {
		transitions = *l.Spec.LeaseTransitions
	}
	return holder, transitions, nil
}

// callCounts are Lease API calls by verb: on the election's Lease and on
// the candidate registry (registrations: create, update, delete; the
// leader's list and watch of them).
type callCounts struct{ get, create, update, watch, list, delete int }

func (c callCounts) add(o callCounts) callCounts {
	return callCounts{c.get + o.get, c.create + o.create, c.update + o.update, c.watch + o.watch, c.list + o.list, c.delete + o.delete}
}

func (c callCounts) sub(o callCounts) callCounts {
	return callCounts{c.get - o.get, c.create - o.create, c.update - o.update, c.watch - o.watch, c.list - o.list, c.delete - o.delete}
}

func (c callCounts) total() int { return c.get + c.create + c.update + c.watch + c.list + c.delete }

func (c callCounts) String() string {
	return fmt.Sprintf("get %3d  create %d  update %3d  watch %2d  list %d  delete %d", c.get, c.create, c.update, c.watch, c.list, c.delete)
}

// brief lists only the verbs that were called, as "1 get, 4 update".
func (c callCounts) brief() string {
	var parts []string
	for _, v := range []struct {
		n    int
		verb string
	}{{c.get, "get"}, {c.create, "create"}, {c.update, "update"}, {c.watch, "watch"}, {c.list, "list"}, {c.delete, "delete"}} {
		if v.n != 0 {
			parts = append(parts, fmt.Sprintf("%d %s", v.n, v.verb))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// memBackend is relecttest's in-memory Lease API. Each candidate gets its own
// Client handle, which counts its calls.
type memBackend struct {
	api *relecttest.LeaseAPI
}

const (
	memNamespace = "default"
	memLease     = "relect-demo"
)

func newMemBackend() *memBackend { return &memBackend{api: relecttest.NewLeaseAPI()} }

func (m *memBackend) where() string {
	return fmt.Sprintf("relecttest's in-memory Lease API, Lease %s/%s", memNamespace, memLease)
}

func (m *memBackend) identity(name string) string { return name }

func (m *memBackend) locate(opts *relect.Options, name string) {
	opts.Client = m.api.Client(name).Clientset()
	opts.Namespace, opts.Name = memNamespace, memLease
}

func (m *memBackend) calls(name string) callCounts {
	c := m.api.Client(name)
	return callCounts{
		get:    c.Calls(relecttest.VerbGet),
		create: c.Calls(relecttest.VerbCreate),
		update: c.Calls(relecttest.VerbUpdate),
		watch:  c.Calls(relecttest.VerbWatch),
		list:   c.Calls(relecttest.VerbList),
		delete: c.Calls(relecttest.VerbDelete),
	}
}

func (m *memBackend) holder(context.Context) (string, int32, error) {
	return leaseHolder(m.api.Lease(memNamespace, memLease))
}

func (m *memBackend) setHolder(_ context.Context, identity string) error {
	return m.api.SetHolder(memNamespace, memLease, identity)
}

func (m *memBackend) slack() time.Duration { return 150 * time.Millisecond }

// clusterBackend is a real cluster. Candidates get their own copy of the
// REST config (Options.Config, the recommended way), wrapped to count their
// requests by HTTP method: relect only sends Lease requests through it.
type clusterBackend struct {
	cfg       *rest.Config
	client    kubernetes.Interface // for the hand edit; not counted
	namespace string
	lease     string
	source    string
	prefix    string // makes identities unique to this run

	mu     sync.Mutex
	counts map[string]*callCounts
}

func newClusterBackend(cfg *rest.Config, namespace, lease, source string) (*clusterBackend, error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: building a client: %v", errSetup, err)
	}
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("%w: %v", errSetup, err)
	}
	return &clusterBackend{
		cfg: cfg, client: client, namespace: namespace, lease: lease, source: source,
		prefix: "demo-" + hex.EncodeToString(b[:]) + "-",
		counts: map[string]*callCounts{},
	}, nil
}

func (c *clusterBackend) where() string {
	return fmt.Sprintf("the cluster of %s (%s), Lease %s/%s", c.source, c.cfg.Host, c.namespace, c.lease)
}

// identity adds a per-run prefix, so that two demos running at once, or a
// Lease left held by an earlier run, never share an identity with this one.
func (c *clusterBackend) identity(name string) string { return c.prefix + name }

func (c *clusterBackend) locate(opts *relect.Options, name string) {
	c.mu.Lock()
	counts := c.counts[name]
	if counts == nil {
		counts = &callCounts{}
		c.counts[name] = counts
	}
	c.mu.Unlock()
	cfg := rest.CopyConfig(c.cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &countingTransport{rt: rt, mu: &c.mu, counts: counts}
	})
	opts.Config = cfg
	opts.Namespace, opts.Name = c.namespace, c.lease
}

func (c *clusterBackend) calls(name string) callCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.counts[name]; n != nil {
		return *n
	}
	return callCounts{}
}

func (c *clusterBackend) holder(ctx context.Context) (string, int32, error) {
	l, err := c.client.CoordinationV1().Leases(c.namespace).Get(ctx, c.lease, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "", 0, nil
	case err != nil:
		return "", 0, err
	}
	return leaseHolder(l)
}

func (c *clusterBackend) setHolder(ctx context.Context, identity string) error {
	leases := c.client.CoordinationV1().Leases(c.namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := leases.Get(ctx, c.lease, metav1.GetOptions{})
		if err != nil {
			return err
		}
		l.Spec.HolderIdentity = &identity
		l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		return err
	})
}

// slack covers a few API round trips to a real apiserver.
func (c *clusterBackend) slack() time.Duration { return time.Second }

// countingTransport counts requests by HTTP method: relect's Lease client
// sends Get as GET, Watch as GET with watch=true, List as GET of the
// collection (…/leases), Create as POST, Update as PUT and Delete as
// DELETE.
type countingTransport struct {
	rt     http.RoundTripper
	mu     *sync.Mutex
	counts *callCounts
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.mu.Lock()
	switch req.Method {
	case http.MethodGet:
		switch {
		case req.URL.Query().Get("watch") == "true":
			t.counts.watch++
		case strings.HasSuffix(req.URL.Path, "/leases"):
			t.counts.list++
		default:
			t.counts.get++
		}
	case http.MethodPost:
		t.counts.create++
	case http.MethodPut:
		t.counts.update++
	case http.MethodDelete:
		t.counts.delete++
	}
	t.mu.Unlock()
	return t.rt.RoundTrip(req)
}
