package e2e

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/ptr"
)

// relayProbe measures, on the control plane and under the load of the
// moment, the path of a graceful move with nothing of relect's on it: one
// client writes a Lease (as a holder releases its shard), a second client,
// on an HTTP/2 connection of its own, sees the write by its watch and
// writes the Lease in turn (as the taker acquires it), and the second
// write is answered (when the taker's work starts). Both clients are in
// the test process; their writes are conditional updates, as relect's
// are. A graceful move cannot be faster than this path on the same
// machine at the same time: it is the floor a target is measured against.
type relayProbe struct {
	stop  context.CancelFunc
	done  sync.WaitGroup
	kicks chan struct{}

	mu      sync.Mutex
	samples []relaySample
	errs    int
}

// relaySample is one relay: its first write's send, the instant the
// second client's watch saw that write, and the instant the second write
// was answered; kicked if it was begun by kick rather than the period.
type relaySample struct {
	sent, seen, answered time.Time
	kicked               bool
}

// startRelayProbe creates the Lease name and relays on it every period
// until stop.
func (c *cluster) startRelayProbe(t *testing.T, name string, every time.Duration) *relayProbe {
	t.Helper()
	a, b := c.relayClient(t), c.relayClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	p := &relayProbe{stop: cancel, kicks: make(chan struct{}, 1)}
	l, err := a.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("b-0")},
	}, metav1.CreateOptions{})
	if err != nil {
		cancel()
		t.Fatalf("relay probe: creating its Lease: %v", err)
	}
	p.done.Go(func() { p.run(ctx, a, b, l, every) })
	return p
}

// kick begins a relay now, at once if none is under way, else after it:
// beside a graceful stop, under the load of that instant. A nil probe
// does nothing.
func (p *relayProbe) kick() {
	if p == nil {
		return
	}
	select {
	case p.kicks <- struct{}{}:
	default:
	}
}

// relayClient is a Lease client on a connection of its own: client-go
// would otherwise share one between configs with equal TLS settings. It
// has no whole-request timeout, which would end its watch: each write
// has one of its own (relayTimeout).
func (c *cluster) relayClient(t *testing.T) coordinationv1client.LeaseInterface {
	t.Helper()
	cfg := c.adminConfig()
	d := &net.Dialer{Timeout: 5 * time.Second}
	cfg.Dial = d.DialContext
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs.CoordinationV1().Leases(namespace)
}

// relayTimeout bounds each of the probe's writes, and a relay.
const relayTimeout = 5 * time.Second

// run relays on l until ctx is done: the first client writes holder a-n on
// the object the second client's last write left; the second, watching,
// writes b-n on the object its watch delivered.
func (p *relayProbe) run(ctx context.Context, a, b coordinationv1client.LeaseInterface, l *coordinationv1.Lease, every time.Duration) {
	type answer struct {
		l              *coordinationv1.Lease
		seen, answered time.Time
		err            error
	}
	answers := make(chan answer, 1)
	var watcher sync.WaitGroup
	defer watcher.Wait() // after the watch stopped and wctx ended
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	w, err := b.Watch(wctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", l.Name).String(),
		ResourceVersion: l.ResourceVersion,
	})
	if err != nil {
		p.fail()
		return
	}
	defer w.Stop()
	watcher.Go(func() {
		for ev := range w.ResultChan() {
			got, ok := ev.Object.(*coordinationv1.Lease)
			if !ok || ev.Type != watch.Modified || got.Spec.HolderIdentity == nil {
				continue
			}
			n, isA := relayRound(*got.Spec.HolderIdentity)
			if !isA {
				continue
			}
			seen := time.Now()
			next := got.DeepCopy()
			next.Spec.HolderIdentity = ptr.To("b-" + strconv.Itoa(n))
			uctx, cancel := context.WithTimeout(wctx, relayTimeout)
			out, err := b.Update(uctx, next, metav1.UpdateOptions{})
			cancel()
			select {
			case answers <- answer{l: out, seen: seen, answered: time.Now(), err: err}:
			case <-wctx.Done():
				return
			}
		}
	})
	tick := time.NewTicker(every)
	defer tick.Stop()
	for n := 1; ; n++ {
		kicked := false
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-p.kicks:
			kicked = true
		}
		next := l.DeepCopy()
		next.Spec.HolderIdentity = ptr.To("a-" + strconv.Itoa(n))
		sent := time.Now()
		uctx, cancel := context.WithTimeout(ctx, relayTimeout)
		_, err := a.Update(uctx, next, metav1.UpdateOptions{})
		cancel()
		if err != nil {
			p.fail()
			return // its object is unknown now: the probe ends
		}
		select {
		case <-ctx.Done():
			return
		case ans := <-answers:
			if ans.err != nil {
				p.fail()
				return
			}
			l = ans.l
			p.mu.Lock()
			p.samples = append(p.samples, relaySample{sent: sent, seen: ans.seen, answered: ans.answered, kicked: kicked})
			p.mu.Unlock()
		case <-time.After(2 * relayTimeout):
			p.fail() // the watch ended: the probe ends
			return
		}
	}
}

// relayRound parses a holder a-n.
func relayRound(holder string) (n int, ok bool) {
	if len(holder) < 3 || holder[:2] != "a-" {
		return 0, false
	}
	n, err := strconv.Atoi(holder[2:])
	return n, err == nil
}

func (p *relayProbe) fail() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errs++
}

// end stops the probe and returns its samples, or an error if it ended
// early.
func (p *relayProbe) end() ([]relaySample, error) {
	p.stop()
	p.done.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.errs > 0 {
		return p.samples, fmt.Errorf("relay probe: ended early after %d relays (a write failed or the watch broke)", len(p.samples))
	}
	return p.samples, nil
}

// relayFloor splits samples into the whole relay (first write sent →
// second answered), and its legs: sent → seen by the other's watch, seen
// → second write answered; of the kicked samples only if kicked, else of
// the others.
func relayFloor(samples []relaySample, kicked bool) (whole, seen, write []time.Duration) {
	for _, s := range samples {
		if s.kicked == kicked {
			whole = append(whole, s.answered.Sub(s.sent))
			seen = append(seen, s.seen.Sub(s.sent))
			write = append(write, s.answered.Sub(s.seen))
		}
	}
	return whole, seen, write
}
