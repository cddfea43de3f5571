package e2e

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/e2e/internal/faultproxy"
	"github.com/relect/relect/fencing"
	"github.com/relect/relect/shardrange"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// stamper is an in-process candidate of TestFencedRangeStamps, reached
// through its own fault proxy: its ShardOptions.Run is fencing's
// ExampleUpdateObject_rangeShards, with a round every stampEvery and a way
// to hold one write between its check and its update (holdNext).
type stamper struct {
	id        string
	proxy     *faultproxy.Proxy
	cms       conflictCounter // its ConfigMap client, through the proxy
	conflicts atomic.Int32
	cancel    context.CancelFunc
	done      chan struct{} // closed when Run has returned
	runErr    error         // read after done

	mu    sync.Mutex
	terms []stampTerm // guarded by mu
	hold  *heldWrite  // the write to hold, until taken; guarded by mu
}

// stampTerm is one term of one shard of a stamper.
type stampTerm struct {
	shard      string
	fence      relect.Fence
	start, end time.Time // end zero while the term's Run is running
}

// heldWrite is a write a stamper holds after its check: read is closed
// when the check passed, the test closes release to send it, and done is
// closed when UpdateObject returned err.
type heldWrite struct {
	name                string
	read, release, done chan struct{}
	calls               atomic.Int32 // how many reads passed the check
	err                 error        // read after done
}

func startStamper(t *testing.T, c *cluster, id, lease string, count int) *stamper {
	t.Helper()
	s := &stamper{id: id, proxy: c.newProxy(t, id), done: make(chan struct{})}
	cfg := c.restConfig(&reqLog{})
	cfg.Host = "https://" + s.proxy.Addr()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.cms = conflictCounter{cs.CoreV1().ConfigMaps(namespace), &s.conflicts}
	e, err := relect.New(relect.Options{
		Config: cfg, Namespace: namespace, Name: lease, Identity: id,
		LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
		Shards: relect.ShardOptions{Count: count, Ranges: shardrange.UID, Run: s.run},
		Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() {
		defer close(s.done)
		s.runErr = e.Run(ctx)
	}()
	t.Cleanup(func() { s.stop(t) })
	return s
}

// stop ends the candidate's Run and waits for it; it may be called again.
func (s *stamper) stop(t *testing.T) {
	t.Helper()
	s.cancel()
	select {
	case <-s.done:
	case <-time.After(renewDeadline + livenessGrace):
		t.Fatalf("%s's Run did not return within %v", s.id, renewDeadline+livenessGrace)
	}
	if !errors.Is(s.runErr, context.Canceled) {
		t.Errorf("%s's Run returned %v, want context.Canceled", s.id, s.runErr)
	}
}

// run is one term of one shard: the example's loop.
func (s *stamper) run(ctx context.Context) {
	shard, _ := relect.ShardFromContext(ctx)
	r, _ := shardrange.FromContext(ctx)
	fence, _ := relect.FenceFromContext(ctx)
	defer s.begin(shard, fence)()
	for n := 1; !s.stampRange(ctx, shard, fence, r, n); n++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(stampEvery):
		}
	}
}

// stampRange stamps every ConfigMap of r once; it reports whether the term
// has ended (its context done, or a newer term of the shard has written).
func (s *stamper) stampRange(ctx context.Context, shard string, fence relect.Fence, r shardrange.Range, n int) (ended bool) {
	opts := metav1.ListOptions{LabelSelector: fencedLabel}
	r.Tweak(&opts) // the suite's apiserver has the gate off: Matches filters
	list, err := s.cms.List(ctx, opts)
	if err != nil {
		return ctx.Err() != nil
	}
	for _, cm := range list.Items {
		if in, _ := r.Matches(&cm); !in {
			continue
		}
		wctx, change := ctx, stampChange(shard, fence, n)
		h := s.take(cm.Name)
		if h != nil { // as from a paused process: the term's end does not stop it
			wctx, change = context.WithoutCancel(ctx), h.wrap(change)
		}
		_, err := fencing.UpdateObject(wctx, s.cms, cm.Name, fenceKeyOf(shard), fence, change)
		if h != nil {
			h.err = err
			close(h.done)
		}
		if errors.Is(err, fencing.ErrStale) || ctx.Err() != nil {
			return true
		}
	}
	return false
}

// begin records the start of a term, and returns the function that
// records its end.
func (s *stamper) begin(shard string, fence relect.Fence) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := len(s.terms)
	s.terms = append(s.terms, stampTerm{shard: shard, fence: fence, start: time.Now()})
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.terms[i].end = time.Now()
	}
}

func (s *stamper) termsOf() []stampTerm {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]stampTerm(nil), s.terms...)
}

// holdNext makes the stamper hold its next write of name after the check.
func (s *stamper) holdNext(name string) *heldWrite {
	h := &heldWrite{name: name, read: make(chan struct{}), release: make(chan struct{}), done: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold = h
	return h
}

// take returns the write to hold if it is name's, once.
func (s *stamper) take(name string) *heldWrite {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.hold
	if h == nil || h.name != name {
		return nil
	}
	s.hold = nil
	return h
}

// wrap holds change's first call until release.
func (h *heldWrite) wrap(change func(*corev1.ConfigMap) error) func(*corev1.ConfigMap) error {
	return func(cm *corev1.ConfigMap) error {
		if h.calls.Add(1) == 1 {
			close(h.read)
			<-h.release
		}
		return change(cm)
	}
}

// stampEvent is a stamp as a watch of the ConfigMaps saw it written.
type stampEvent struct {
	name  string
	rv    uint64
	stamp string
	fence string // the annotation of the stamp's shard
}

// stampHistory is every change of the test's ConfigMaps, in the
// apiserver's order (a RetryWatcher: a watch resumed from the last
// resourceVersion seen).
type stampHistory struct {
	w      *watchtools.RetryWatcher
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	events []stampEvent // guarded by mu
	err    error        // a watch error; guarded by mu
}

func watchStamps(t *testing.T, cs kubernetes.Interface) *stampHistory {
	t.Helper()
	l, err := cs.CoreV1().ConfigMaps(namespace).List(t.Context(), metav1.ListOptions{LabelSelector: fencedLabel})
	if err != nil {
		t.Fatal(err)
	}
	lw := cache.NewFilteredListWatchFromClient(cs.CoreV1().RESTClient(), "configmaps", namespace,
		func(o *metav1.ListOptions) { o.LabelSelector = fencedLabel })
	ctx, cancel := context.WithCancel(context.Background())
	w, err := watchtools.NewRetryWatcherWithContext(ctx, l.ResourceVersion, lw)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	h := &stampHistory{w: w, cancel: cancel, done: make(chan struct{})}
	go h.follow()
	t.Cleanup(h.stop)
	return h
}

func (h *stampHistory) follow() {
	defer close(h.done)
	for ev := range h.w.ResultChan() {
		cm, ok := ev.Object.(*corev1.ConfigMap)
		h.mu.Lock()
		switch {
		case !ok && h.err == nil:
			h.err = errors.New("the watch sent a " + string(ev.Type) + " event without a ConfigMap")
		case ok && ev.Type == watch.Modified && cm.Annotations[stampKey] != "":
			rv, _ := strconv.ParseUint(cm.ResourceVersion, 10, 64)
			st, _ := parseStamp(cm.Annotations[stampKey])
			h.events = append(h.events, stampEvent{cm.Name, rv, cm.Annotations[stampKey], cm.Annotations[fenceKeyOf(st.shard)]})
		}
		h.mu.Unlock()
	}
}

// stop ends the watch and waits for it; it may be called again.
func (h *stampHistory) stop() {
	h.cancel()
	h.w.Stop()
	<-h.done
}

func (h *stampHistory) all() ([]stampEvent, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]stampEvent(nil), h.events...), h.err
}

// latest returns each stamped ConfigMap's last stamp.
func (h *stampHistory) latest() map[string]stampID {
	evs, _ := h.all()
	last := map[string]stampID{}
	for _, ev := range evs {
		if st, err := parseStamp(ev.stamp); err == nil {
			last[ev.name] = st
		}
	}
	return last
}

// checkStamps checks the stamps in the apiserver's order: every one is of
// a term its shard's holder held (with that shard's fence in its
// annotation), none is a late write's, and for each ConfigMap the fences
// of a shard never go down — a term's stamps never follow a newer term's,
// so two holders never stamp it in turn — and a term's rounds go up. It
// returns the stamps and how many times a ConfigMap's stamper changed.
func checkStamps(t *testing.T, evs []stampEvent, werr error, fleet []*stamper) (accepted, moves int) {
	t.Helper()
	if werr != nil {
		t.Errorf("watching the ConfigMaps: %v", werr)
	}
	holder := map[stampID]string{} // {shard, fence} → candidate
	for _, s := range fleet {
		for _, tm := range s.termsOf() {
			k := stampID{shard: tm.shard, fence: tm.fence}
			if other, dup := holder[k]; dup {
				t.Errorf("shard %s's fence %s is the fence of a term of %s and of %s", tm.shard, tm.fence, other, s.id)
			}
			holder[k] = s.id
		}
	}
	last := map[string]stampEvent{}
	for _, ev := range evs {
		st, err := parseStamp(ev.stamp)
		who, known := holder[stampID{shard: st.shard, fence: st.fence}]
		switch {
		case err != nil:
			t.Errorf("%s at %d: %v", ev.name, ev.rv, err)
			continue
		case st.round < 1:
			t.Errorf("%s at %d: a late write landed: %q", ev.name, ev.rv, ev.stamp)
		case !known:
			t.Errorf("%s at %d: stamp %q of no term of shard %s", ev.name, ev.rv, ev.stamp, st.shard)
		case ev.fence != string(st.fence):
			t.Errorf("%s at %d: stamp %q, but the shard's fence annotation is %q", ev.name, ev.rv, ev.stamp, ev.fence)
		}
		if prev, ok := last[ev.name]; ok {
			p, _ := parseStamp(prev.stamp)
			switch {
			case ev.rv <= prev.rv:
				t.Errorf("%s: the watch sent resourceVersion %d after %d", ev.name, ev.rv, prev.rv)
			case st.fence.Compare(p.fence) < 0:
				t.Errorf("%s: the fence went down, shard %s's %s at %d after shard %s's %s at %d", ev.name, st.shard, st.fence, ev.rv, p.shard, p.fence, prev.rv)
			case p.shard == st.shard && p.fence == st.fence && st.round <= p.round:
				t.Errorf("%s: round %d of fence %s at %d after its round %d", ev.name, st.round, st.fence, ev.rv, p.round)
			}
			if holder[stampID{shard: p.shard, fence: p.fence}] != who {
				moves++
			}
		}
		last[ev.name] = ev
	}
	return len(evs), moves
}
