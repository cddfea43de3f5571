package fleetbench

import (
	"context"
	"errors"
	"sync"
	"time"

	leasewire "github.com/relect/relect/internal/wire"
	"github.com/relect/relect/relecttest"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// wire stands between every candidate and the LeaseAPI, as the network and
// the apiserver's front door do: it logs every Lease call (who, which verb,
// which object, the holder written and the holder stored, when, what it
// returned), sheds acquiring writes with 429 while a burst is being shed
// (see arm), and swallows the calls of dead processes (see kill). It is
// safe for concurrent use.
type wire struct {
	api       *relecttest.LeaseAPI
	roundTrip time.Duration
	shedFor   time.Duration

	mu    sync.Mutex // guards every field below
	calls []Call
	dead  map[string]bool
	// The shedding model: armed from arm until disarm; the window opens
	// at the first acquiring write after arm (shedUntil: zero until then).
	armed     bool
	shedUntil time.Time
}

func newWire(api *relecttest.LeaseAPI, roundTrip, shedFor time.Duration) *wire {
	return &wire{api: api, roundTrip: roundTrip, shedFor: shedFor, dead: map[string]bool{}}
}

// Call is one Lease API call as the wire saw it.
type Call struct {
	// Candidate is the identity of the candidate that sent it.
	Candidate string
	// Verb is relecttest's: VerbGet, VerbUpdate, ...
	Verb string
	// Election is true for a call on the election's Lease: a read or a
	// write of it, or a watch that selects it by name; false for the
	// candidate registry's calls (registrations, their list and watch).
	Election bool
	// Line is true for a call on relect's line Lease (docs/design.md,
	// "Only the line watches"): a read, a write, or a watch of it.
	Line bool
	// Holder is, for a write of the election's Lease, the holder identity
	// it writes ("" for a release); Stored is the holder stored when the
	// call was sent.
	Holder, Stored string
	// Start is when it was sent, End when it returned.
	Start, End time.Time
	// Err is what it returned.
	Err error
	// Shed is true for an acquiring write the apiserver answered with
	// 429 (the shedding model), without applying it.
	Shed bool
}

// acquiring reports whether c is an acquiring write: a write of the
// election's Lease naming a holder that is not the one stored.
func (c Call) acquiring() bool {
	return c.Election && (c.Verb == relecttest.VerbUpdate || c.Verb == relecttest.VerbCreate) &&
		c.Holder != "" && c.Holder != c.Stored
}

// renewal reports whether c is a successful write of the election's Lease
// by its holder, naming itself.
func (c Call) renewal() bool {
	return c.Election && c.Verb == relecttest.VerbUpdate && c.Err == nil && !c.Shed &&
		c.Holder == c.Candidate && c.Stored == c.Candidate
}

// errDead is what a dead process's calls return; they never reach the API.
var errDead = errors.New("fleetbench: the candidate's process is dead")

// clientset returns candidate's view of the API: client's, through the
// wire.
func (w *wire) clientset(candidate string, client *relecttest.Client) kubernetes.Interface {
	cs := client.Clientset()
	return &clientset{Interface: cs, coord: coordination{CoordinationV1Interface: cs.CoordinationV1(), w: w, candidate: candidate}}
}

// kill makes candidate's process dead: from now on its calls return
// errDead at once and are not logged, as nothing reaches the apiserver
// from a crashed process. revive undoes it for the next process.
func (w *wire) kill(candidate string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dead[candidate] = true
}

func (w *wire) revive(candidate string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.dead, candidate)
}

// arm starts shedding for one change: the first acquiring write from now
// on, and every acquiring write sent within shedFor after it, is answered
// 429 Too Many Requests. disarm stops it.
func (w *wire) arm() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armed, w.shedUntil = true, time.Time{}
}

func (w *wire) disarm() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armed, w.shedUntil = false, time.Time{}
}

// shed decides whether the apiserver sheds c, an acquiring write sent now.
func (w *wire) shed(c Call) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.armed || !c.acquiring() {
		return false
	}
	if w.shedUntil.IsZero() {
		w.shedUntil = c.Start.Add(w.shedFor)
	}
	return !c.Start.After(w.shedUntil)
}

// send makes one call c for candidate: a dead process's returns errDead,
// unlogged; a shed one takes a round trip and returns 429; any other is
// made by fn. Every call that reaches the apiserver is logged.
func (w *wire) send(ctx context.Context, c Call, fn func() error) error {
	w.mu.Lock()
	dead := w.dead[c.Candidate]
	w.mu.Unlock()
	if dead {
		return errDead
	}
	if c.Election {
		c.Stored = w.api.Holder(namespace, leaseName)
	}
	c.Start = time.Now()
	if w.shed(c) {
		c.Shed = true
		c.Err = relecttest.Error(429)
		t := time.NewTimer(w.roundTrip)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			c.Err = ctx.Err()
		}
	} else {
		c.Err = fn()
	}
	c.End = time.Now()
	w.mu.Lock()
	w.calls = append(w.calls, c)
	w.mu.Unlock()
	return c.Err
}

// log returns the calls sent from from on (inclusive), in the order they
// returned.
func (w *wire) log(from time.Time) []Call {
	w.mu.Lock()
	defer w.mu.Unlock()
	// The log is in the order calls returned, and a call returns after it
	// was sent: the calls sent from from on are among the last that
	// returned from from on.
	i := len(w.calls)
	for i > 0 && !w.calls[i-1].End.Before(from) {
		i--
	}
	var out []Call
	for _, c := range w.calls[i:] {
		if !c.Start.Before(from) {
			out = append(out, c)
		}
	}
	return out
}

// lastRenewal returns the last successful write by holder naming itself
// (an acquisition or a renewal), or the zero Call.
func (w *wire) lastRenewal(holder string) Call {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.calls) - 1; i >= 0; i-- {
		c := w.calls[i]
		if c.Candidate == holder && c.Election && c.Holder == holder && c.Err == nil && !c.Shed &&
			(c.Verb == relecttest.VerbUpdate || c.Verb == relecttest.VerbCreate) {
			return c
		}
	}
	return Call{}
}

// count returns how many calls reached the apiserver, shed ones included.
func (w *wire) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.calls)
}

// The typed client, wrapped: only the Lease verbs leader election uses go
// through the wire; anything else is the LeaseAPI's.

type clientset struct {
	kubernetes.Interface
	coord coordination
}

func (c *clientset) CoordinationV1() coordinationv1client.CoordinationV1Interface { return c.coord }

type coordination struct {
	coordinationv1client.CoordinationV1Interface
	w         *wire
	candidate string
}

func (c coordination) Leases(ns string) coordinationv1client.LeaseInterface {
	return &leases{LeaseInterface: c.CoordinationV1Interface.Leases(ns), w: c.w, candidate: c.candidate}
}

type leases struct {
	coordinationv1client.LeaseInterface
	w         *wire
	candidate string
}

var _ coordinationv1client.LeaseInterface = (*leases)(nil)

func (l *leases) call(verb, name string) Call {
	return Call{Candidate: l.candidate, Verb: verb, Election: name == leaseName, Line: name == leasewire.LineName(leaseName)}
}

func holderOf(lease *coordinationv1.Lease) string {
	if lease == nil || lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

func (l *leases) Get(ctx context.Context, name string, opts metav1.GetOptions) (out *coordinationv1.Lease, err error) {
	err = l.w.send(ctx, l.call(relecttest.VerbGet, name), func() error {
		out, err = l.LeaseInterface.Get(ctx, name, opts)
		return err
	})
	return out, err
}

func (l *leases) Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (out *coordinationv1.Lease, err error) {
	c := l.call(relecttest.VerbCreate, lease.Name)
	c.Holder = holderOf(lease)
	err = l.w.send(ctx, c, func() error {
		out, err = l.LeaseInterface.Create(ctx, lease, opts)
		return err
	})
	return out, err
}

func (l *leases) Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (out *coordinationv1.Lease, err error) {
	c := l.call(relecttest.VerbUpdate, lease.Name)
	c.Holder = holderOf(lease)
	err = l.w.send(ctx, c, func() error {
		out, err = l.LeaseInterface.Update(ctx, lease, opts)
		return err
	})
	return out, err
}

func (l *leases) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return l.w.send(ctx, l.call(relecttest.VerbDelete, name), func() error {
		return l.LeaseInterface.Delete(ctx, name, opts)
	})
}

func (l *leases) List(ctx context.Context, opts metav1.ListOptions) (out *coordinationv1.LeaseList, err error) {
	err = l.w.send(ctx, l.call(relecttest.VerbList, ""), func() error {
		out, err = l.LeaseInterface.List(ctx, opts)
		return err
	})
	return out, err
}

// Watch is on the election's Lease when it selects it by name (a
// follower's, or the leader's), on the line Lease when it selects that,
// else on the registry.
func (l *leases) Watch(ctx context.Context, opts metav1.ListOptions) (out watch.Interface, err error) {
	c := l.call(relecttest.VerbWatch, "")
	c.Line = opts.FieldSelector == fields.OneTermEqualSelector("metadata.name", leasewire.LineName(leaseName)).String()
	c.Election = opts.FieldSelector != "" && !c.Line
	err = l.w.send(ctx, c, func() error {
		out, err = l.LeaseInterface.Watch(ctx, opts)
		return err
	})
	return out, err
}
