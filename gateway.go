package relect

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/relect/relect/internal/leaserecord"
	"github.com/relect/relect/internal/pace"
)

// gateway is an Elector's one way to the Lease API. Every call — client-go's
// through the resourcelock.Interface it implements, the follower's reads,
// acquisitions and watches, the leader's watch, the release — goes through
// do, which
//
//   - paces: it takes a token from the bucket first (the gateway is the
//     only user of the limiter), so no loop, client-go's or ours, exceeds
//     the budget;
//   - bounds: it gives every call but a watch its own timeout (half the
//     renew deadline), so a hung request cannot stall a campaign;
//   - accounts: it classifies the outcome and reports it (Stats.Calls and
//     the degraded signal); what its watches deliver counts as contact
//     with the API too (event).
//
// On client-go's path it also observes, and reports to the Elector's state,
// the instant each write is sent (t_send: after the bucket, before the
// request) and its outcome, and every record read, which drive IsLeader,
// the term watchdog, new-leader events and loss detection; and it shows
// client-go a disguised record where client-go's rules would be unsafe
// (leaserecord.Disguise).
type gateway struct {
	cfg     *config
	inner   resourcelock.Interface // the lock client-go's elector drives through the gateway
	own     *leaserecord.Lock      // inner, when it is relect's own (Config or Client); nil with a Lock
	limiter *rate.Limiter
	up      gatewayReports
	// acquired is the follower's acquiring write of this campaign, until
	// client-go's first Get and the two writes that follow it, which the
	// gateway answers without a call (see Get and Update).
	acquired atomic.Pointer[acquisition]
}

var _ resourcelock.Interface = (*gateway)(nil)

// gatewayReports is what the gateway tells the Elector's state, and the one
// thing it asks of it.
type gatewayReports interface {
	called(verb string, result string, err error, waited time.Duration)
	observed(rec *record, l *coordinationv1.Lease) (stranger bool)
	observedMissing(restart bool)
	wrote(sent time.Time, rec *record, rv string)
	sending(rec *record)
	mine(rec *record) bool
	createAllowedAt() time.Time
	acquireAllowedAt(l *coordinationv1.Lease) time.Time
	annotate(l *coordinationv1.Lease, rec *record)
	heard()
}

func newGateway(cfg *config, up gatewayReports) *gateway {
	g := &gateway{cfg: cfg, inner: cfg.lock, limiter: newLimiter(cfg), up: up}
	if cfg.lock == nil {
		g.own = leaserecord.NewLock(cfg.leases, cfg.Namespace, cfg.Name, cfg.identity, up.annotate)
		g.inner = g.own
	}
	return g
}

// lastLease is the Lease object the inner lock last read or wrote, if it is
// relect's own lock; else nil.
func (g *gateway) lastLease() *coordinationv1.Lease {
	if g.own == nil {
		return nil
	}
	return g.own.Last()
}

// errBudget wraps a token-bucket wait that could not finish in time.
var errBudget = errors.New("relect: Lease API budget exhausted")

// errCreateTooSoon is client-go's Create refused by gateway.Create.
var errCreateTooSoon = errors.New("relect: the Lease was found missing less than LeaseDuration ago; not creating it yet")

// errStandingBack is client-go's acquisition refused by gateway.Update.
var errStandingBack = errors.New("relect: standing back (the work check fails, or cooling after a stuck handover); not acquiring the Lease yet")

// do makes one Lease API call fn: it waits on the bucket, gives fn a
// context with the per-call timeout if bounded (not a watch, which lives
// until stopped), and reports the outcome.
func (g *gateway) do(ctx context.Context, verb string, bounded bool, fn func(context.Context) error) error {
	waited, err := g.wait(ctx)
	if err == nil {
		cctx := ctx
		if bounded {
			var cancel context.CancelFunc
			cctx, cancel = context.WithTimeout(ctx, g.cfg.callTimeout)
			defer cancel()
		}
		err = fn(cctx)
	}
	g.up.called(verb, callResult(ctx, err), err, waited)
	return err
}

// doSpare is do for calls that should not delay the election's own (the
// registry's): it takes a token only once the bucket holds more than the
// calls of an acquisition and its first renewal (minRateBurst), waiting
// for the bucket to refill if need be. A bucket of the minimum burst (4)
// never holds more: there it waits for a full bucket, and an acquisition
// right after may wait for one token (at most 1/RateLimit). The wait has
// no limit when within is zero; else, if the spare tokens are not there
// within that time, it returns an error wrapping errBudget without
// calling fn or reporting a call (the election's own calls may keep a
// small bucket from filling for tens of seconds).
func (g *gateway) doSpare(ctx context.Context, verb string, bounded bool, within time.Duration, fn func(context.Context) error) error {
	start := time.Now()
	need := min(minRateBurst+1, float64(g.limiter.Burst()))
	for g.limiter.Limit() != rate.Inf {
		have := g.limiter.Tokens()
		if have >= need {
			break
		}
		refill := time.Duration((need - have) / float64(g.limiter.Limit()) * float64(time.Second))
		if within > 0 {
			left := within - time.Since(start)
			if left <= 0 { // nothing sent: no failed call to report
				return fmt.Errorf("%w: the bucket spared no token within %v", errBudget, within)
			}
			refill = min(refill, left)
		}
		if err := pace.Sleep(ctx, max(refill, time.Millisecond)); err != nil {
			g.up.called(verb, callResult(ctx, err), err, time.Since(start))
			return err
		}
	}
	return g.do(ctx, verb, bounded, fn)
}

// ready waits until the bucket holds a token, without taking it, or ctx
// is done: a caller that decides what to send once it may send sends its
// freshest decision (the shard table), not one that waited for the bucket
// while newer ones queued behind it.
func (g *gateway) ready(ctx context.Context) error {
	for g.limiter.Limit() != rate.Inf {
		have := g.limiter.Tokens()
		if have >= 1 {
			return nil
		}
		if err := pace.Sleep(ctx, max(time.Duration((1-have)/float64(g.limiter.Limit())*float64(time.Second)), time.Millisecond)); err != nil {
			return err
		}
	}
	return nil
}

// trySpare is doSpare for calls that may wait for a later chance (the
// registry's deletions of lapsed registrations): it makes the call only
// if the bucket holds the spare tokens now, and reports whether it did.
// It never waits for the bucket to refill, so that its caller, the
// registry's watch reader, goes on reading the watch: under a low
// RateLimit a wait for spare tokens can last tens of seconds, in which
// every registration of the view would lapse unread.
func (g *gateway) trySpare(ctx context.Context, verb string, bounded bool, fn func(context.Context) error) (tried bool, err error) {
	need := min(minRateBurst+1, float64(g.limiter.Burst()))
	if g.limiter.Limit() != rate.Inf && g.limiter.Tokens() < need {
		return false, nil
	}
	return true, g.do(ctx, verb, bounded, fn)
}

// wait takes one token, blocking until one is available or ctx ends. It
// returns how long it waited.
func (g *gateway) wait(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	if err := g.limiter.Wait(ctx); err != nil {
		if ctx.Err() != nil {
			return time.Since(start), ctx.Err()
		}
		// The wait would outlast ctx's deadline.
		return time.Since(start), fmt.Errorf("%w: %v", errBudget, err)
	}
	return time.Since(start), nil
}

// hasTokens reports whether the bucket holds n tokens now.
func (g *gateway) hasTokens(n float64) bool { return g.limiter.Tokens() >= n }

// Get is client-go's read of the record. The record read is reported; what
// client-go gets is the record, or its disguise, with its leaserecord.Key as the
// raw bytes client-go compares (so that it sees renewals within one second
// as new, too).
//
// The first Get of a campaign that acquired by following is answered,
// without a call, with the Lease as the acquiring write left it, a moment
// ago: client-go only reads it to resume it (see Update).
func (g *gateway) Get(ctx context.Context) (*record, []byte, error) {
	if a := g.acquired.Load(); a != nil && !a.read && g.own != nil {
		a.read = true
		g.own.SetLast(a.lease)
		rec := leaserecord.Of(a.lease)
		g.up.observed(rec, a.lease)
		return rec, leaserecord.Key(rec), nil
	}
	var (
		rec *record
		raw []byte
	)
	err := g.do(ctx, verbGet, true, func(ctx context.Context) error {
		var err error
		rec, raw, err = g.inner.Get(ctx)
		return err
	})
	switch {
	case err == nil:
		stranger := g.up.observed(rec, g.lastLease())
		if leaserecord.Disguised(rec, stranger, g.cfg.leaseSeconds) {
			rec = leaserecord.Disguise(rec, stranger, g.cfg.leaseSeconds)
		}
		return rec, leaserecord.Key(rec), nil
	case apierrors.IsNotFound(err):
		g.up.observedMissing(false)
	}
	return rec, raw, err
}

// Create is client-go's acquisition of a missing Lease (when followers poll,
// or its slow path finds the Lease gone). It is refused, without an API
// call, until the Elector's state allows it (createAllowedAt): a Lease
// deleted by hand may still be acted on by its holder. client-go retries
// after RetryPeriod.
func (g *gateway) Create(ctx context.Context, ler record) error {
	if at := g.up.createAllowedAt(); time.Now().Before(at) {
		return fmt.Errorf("%w: not before %s", errCreateTooSoon, at.Format(time.RFC3339Nano))
	}
	return g.write(ctx, verbCreate, ler, g.inner.Create)
}

// Update is client-go's acquisition or renewal, and relect's release.
//
// After a follower's acquiring write, client-go resumes the record (an
// Update) and its renew loop renews it at once (another): two writes of the
// same record within milliseconds, each sent to every follower's watch.
// The gateway answers both without a call, as if they had been written
// when the acquiring write was — which is what the term then counts from:
// its validity begins at the acquiring write's send time, not later, and
// the next real renewal, a RetryPeriod later, is conditional on the
// acquiring write's resourceVersion, so it fails if the Lease changed
// meanwhile (as the leader's watch shows at once). A change of leader then
// costs one write of the successor's, not three.
//
// A campaign that polls stands back as a follower would (acquireAllowedAt):
// client-go's acquisition is refused, without a call, until then, and
// client-go tries again after RetryPeriod.
func (g *gateway) Update(ctx context.Context, ler record) error {
	if a := g.acquired.Load(); a != nil && a.resumes(g, &ler) {
		a.answered++
		g.up.wrote(a.sent, leaserecord.Of(a.lease), a.lease.ResourceVersion)
		return nil
	}
	if ler.HolderIdentity == g.cfg.identity {
		if at := g.up.acquireAllowedAt(g.lastLease()); time.Now().Before(at) {
			return fmt.Errorf("%w: not before %s", errStandingBack, at.Format(time.RFC3339Nano))
		}
	}
	return g.write(ctx, verbUpdate, ler, g.inner.Update)
}

// acquisition is a follower's acquiring write, for client-go's campaign
// that resumes it (gateway.Get, gateway.Update). Only client-go's goroutine
// touches read and answered.
type acquisition struct {
	lease    *coordinationv1.Lease // as the write left it
	sent     time.Time             // when it was sent
	read     bool                  // client-go's first Get was answered
	answered int                   // writes of client-go's answered
}

// resumes reports whether ler, a write of client-go's, only resumes a's
// record: it names us with a's leaseTransitions, comes after the answered
// Get, within half a RetryPeriod of a, as one of the first two writes of
// the campaign, and nothing was written since (the lock still holds a's
// Lease).
func (a *acquisition) resumes(g *gateway, ler *record) bool {
	return a.read && a.answered < 2 && g.own != nil && g.own.Last() == a.lease &&
		ler.HolderIdentity == g.cfg.identity && ler.LeaderTransitions == leaserecord.Of(a.lease).LeaderTransitions &&
		time.Since(a.sent) < g.cfg.RetryPeriod/2
}

// write sends ler through the inner lock and reports it with its t_send.
func (g *gateway) write(ctx context.Context, verb string, ler record, call func(context.Context, record) error) error {
	var sent time.Time
	err := g.do(ctx, verb, true, func(ctx context.Context) error {
		sent = time.Now()
		ler.LeaderTransitions = int(leaserecord.ClampTransitions(ler.LeaderTransitions)) // client-go counts past MaxInt32
		if ler.HolderIdentity == g.cfg.identity {
			// client-go stamped the renew time before the bucket wait (and
			// before a slow-path Get); stamp it again now, so that a
			// delayed renewal still looks new to followers that compare
			// whole seconds. It is informational: no one compares it
			// across machines.
			ler.RenewTime = metav1.NewTime(sent)
			g.up.sending(&ler)
		}
		return call(ctx, ler)
	})
	if err == nil {
		rv := "" // with a Lock, the Lease object is not relect's to see
		if l := g.lastLease(); l != nil {
			rv = l.ResourceVersion
		}
		g.up.wrote(sent, &ler, rv)
	}
	return err
}

// RecordEvent ignores client-go's calls: client-go records "became leader"
// before the work starts and "stopped leading" on every exit, led or not.
// relect records its own (campaign.recordEvent), when they happen.
func (g *gateway) RecordEvent(string) {}

// Identity is this candidate's holder identity.
func (g *gateway) Identity() string { return g.cfg.identity }

// Describe is the Lease as "namespace/name".
func (g *gateway) Describe() string { return g.cfg.describe }

// read gets the record as stored (nil if there is no Lease), and refreshes
// the object the inner lock's next Update is conditional on.
func (g *gateway) read(ctx context.Context) (*record, error) {
	var rec *record
	err := g.do(ctx, verbGet, true, func(ctx context.Context) error {
		var err error
		rec, _, err = g.inner.Get(ctx)
		return err
	})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	g.up.observed(rec, g.lastLease())
	return rec, nil
}

// release hands the lease back — or over, to the holder to names (see
// leaserecord.HandOver), if to is not empty: it writes the record conditionally
// on the object this gateway last read or wrote, so a Lease that has passed
// to another holder is never blanked. If check, or after a conflict
// (perhaps a write of ours cancelled on our side after the apiserver
// applied it, or someone else's), it first reads the Lease as stored — not
// as Get would disguise it — and goes on only while it holds a record this
// Elector wrote or sent (state.mine): one that merely names us may be
// another leader's, edited by hand. It gives up when ctx ends, and reports
// whether the lease is now released (or handed over) by us, and the
// leaseTransitions of the record it released.
func (g *gateway) release(ctx context.Context, transitions int, to string, check bool) (bool, int, error) {
	for ; ; check = true {
		if check {
			cur, err := g.read(ctx)
			if err != nil || cur == nil || !g.up.mine(cur) {
				return false, 0, err // passed on, edited, deleted, or unreadable
			}
			transitions = cur.LeaderTransitions
		}
		rec := leaserecord.Release(transitions)
		if to != "" {
			rec = leaserecord.HandOver(transitions, to, g.cfg.handOverSeconds)
		}
		err := g.Update(ctx, rec)
		if err == nil {
			return true, transitions, nil
		}
		if !apierrors.IsConflict(err) {
			return false, 0, err
		}
	}
}

// getLease reads the Lease for the follower; NotFound is returned as an
// error.
func (g *gateway) getLease(ctx context.Context) (*coordinationv1.Lease, error) {
	var l *coordinationv1.Lease
	err := g.do(ctx, verbGet, true, func(ctx context.Context) error {
		var err error
		l, err = g.cfg.leases.Get(ctx, g.cfg.Name, metav1.GetOptions{})
		return err
	})
	return l, err
}

// listLease reads the Lease for the follower by a list of it alone (nil:
// missing), and returns the list's resourceVersion: the apiserver's
// current one, from which a watch can resume even when the Lease itself
// has not changed for longer than the watch cache keeps. Counted as a get.
func (g *gateway) listLease(ctx context.Context) (*coordinationv1.Lease, string, error) {
	var list *coordinationv1.LeaseList
	err := g.do(ctx, verbGet, true, func(ctx context.Context) error {
		var err error
		list, err = g.cfg.leases.List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("metadata.name", g.cfg.Name).String(),
		})
		return err
	})
	if err != nil {
		return nil, "", err
	}
	for i := range list.Items {
		if list.Items[i].Name == g.cfg.Name {
			return &list.Items[i], list.ResourceVersion, nil
		}
	}
	return nil, list.ResourceVersion, nil
}

// acquire sends a follower's acquiring write: a Create of the Lease if from
// is nil, else an Update of from, conditional on its resourceVersion. Its
// spec is stamped with the instant the write is sent (after the bucket);
// sent is zero if it was not sent. A successful write is reported.
func (g *gateway) acquire(ctx context.Context, from *coordinationv1.Lease, spec func(sent time.Time) coordinationv1.LeaseSpec) (
	l *coordinationv1.Lease, sent time.Time, err error) {
	verb := verbUpdate
	if from == nil {
		verb = verbCreate
	}
	err = g.do(ctx, verb, true, func(ctx context.Context) error {
		ctx, cancel := g.detached(ctx)
		defer cancel()
		sent = time.Now()
		var err error
		want := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: g.cfg.Namespace, Name: g.cfg.Name}}
		if from != nil {
			want = from.DeepCopy()
		}
		want.Spec = spec(sent)
		g.up.sending(leaserecord.Of(want))
		g.up.annotate(want, leaserecord.Of(want))
		if from == nil {
			l, err = g.cfg.leases.Create(ctx, want, metav1.CreateOptions{})
		} else {
			l, err = g.cfg.leases.Update(ctx, want, metav1.UpdateOptions{})
		}
		return err
	})
	if err == nil {
		g.up.wrote(sent, leaserecord.Of(l), l.ResourceVersion)
		g.acquired.Store(&acquisition{lease: l, sent: sent})
	}
	return l, sent, err
}

// detached is the context a follower's acquiring write is sent with: ctx's values,
// not its end, and the call timeout. Shutdown (the campaign's end) does not
// cancel it: a write cancelled client-side may still be applied by the
// apiserver after the release's read saw the Lease free, and the exited
// process would hold the Lease until it expired. So shutdown waits for the
// write's outcome, the call timeout at most, and releases what it wrote
// (TestShutdownWhileAcquiringReleasesTheLateWrite).
func (g *gateway) detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), g.cfg.callTimeout)
}

// forgetAcquired drops what the follower's acquiring write left for
// client-go's campaign: a campaign that ends before client-go ran, or a
// new one, must read the Lease and write its own.
func (g *gateway) forgetAcquired() { g.acquired.Store(nil) }

// watch opens a watch on the one Lease (field selector metadata.name),
// resuming after resourceVersion rv ("": from now).
func (g *gateway) watch(ctx context.Context, rv string) (watch.Interface, error) {
	var w watch.Interface
	err := g.do(ctx, verbWatch, false, func(ctx context.Context) error {
		var err error
		w, err = g.cfg.leases.Watch(ctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", g.cfg.Name).String(),
			ResourceVersion: rv,
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// callResult classifies a Lease API call's outcome for Stats.Calls (see
// string); ctx is the caller's, whose end makes a failure
// "canceled".
func callResult(ctx context.Context, err error) string {
	switch {
	case err == nil:
		return resultOK
	case apierrors.IsNotFound(err):
		return resultNotFound
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
		return resultConflict
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		return resultForbidden
	case apierrors.IsTooManyRequests(err):
		return resultThrottled
	case errors.Is(err, errBudget):
		return resultBudget
	case ctx.Err() != nil:
		return resultCanceled
	case errors.Is(err, context.DeadlineExceeded) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err):
		return resultTimeout
	case apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsUnexpectedServerError(err):
		return resultServerError
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code >= 500 {
		return resultServerError
	}
	return resultOther
}
