package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/relect/relect/internal/wire"

	"github.com/relect/relect"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Requests: an operator, from any machine with RBAC to update the Lease,
// asks its current leader to Yield or HandOver, without access to the
// leader's process (relect yield, relect handover). The request is an
// annotation of the election's Lease, addressed to one leader and one term:
// the leader sees it on its watch (or at its next renewal, which conflicts
// with the write) and steps down exactly as Yield or HandOver do. Stepping
// down is always safe — it cannot make two leaders — so a stale or forged
// request can at most end a term: one addressed to another holder or term
// is ignored, a handover to a candidate the leader does not know is refused,
// and the leader's next write removes a request it did not honour. A plain
// client-go leader ignores the annotation; its next renewal keeps it, but
// the next relect leader's term differs, so it is stale.

// Request is an operator's request to the leader of a Lease to step down:
// to Yield, or to HandOver to To. RequestYield and RequestHandOver write
// it; PendingRequest reads it. It is the annotation relect.io/request, as
// JSON, and its fields are:
//
//   - Holder is the leader it is addressed to, and Term that leader's term
//     (the Lease's leaseTransitions) when it was written: any other leader,
//     or a later term, ignores it.
//   - To is the candidate to hand over to; empty asks for a Yield.
//   - Unregistered hands over to To even if the leader does not know it
//     from the registry (relect.HandOverOptions.Unregistered).
//   - By and At say who asked and when, by the asker's clock, for people.
//
// It is the type relect's candidates read the annotation into (defined in
// an internal package the library shares), so that what an operator writes
// and what a leader reads are one definition.
type Request = wire.Request

// ErrNoLeader is returned by RequestYield and RequestHandOver when the
// Lease has no holder to ask: it is missing, released, or a handover
// record whose successor has not taken it yet.
var ErrNoLeader = errors.New("operator: the Lease has no leader")

// RequestYield asks the current leader of the Lease namespace/name to
// Yield: it writes a Request addressed to the holder and its term, with
// client, conditionally on the Lease as read (it reads again and retries
// on a conflict with the leader's renewal, a few times). It returns the
// Request written (its Holder is the leader asked) once it is written —
// not once it is honoured: watch the Lease for a new holder, or for the
// request to vanish unheeded (PendingRequest); WithdrawRequest takes it
// back. by says who asks, for people (the user name, say). Errors:
// ErrNoLeader, or the client's (a 403 names the RBAC it lacks: leases get
// and update). It blocks on the API calls.
func RequestYield(ctx context.Context, client kubernetes.Interface, namespace, name, by string) (Request, error) {
	return request(ctx, client, namespace, name, Request{By: by})
}

// RequestHandOver asks the current leader of the Lease namespace/name to
// HandOver to identity, as RequestYield asks it to Yield. The leader
// refuses an identity it does not know as a live registered candidate that
// may lead (see relect's Elector.HandOver) unless opts.Unregistered is
// set (opts may be nil), and removes the request with its next renewal:
// check the identity first (ListCandidates); before its first list of the
// registry (half a RetryPeriod into its term), and with its registry off,
// it refuses every name but an Unregistered one. Errors: an empty identity
// or the holder's own, ErrNoLeader, or the client's.
func RequestHandOver(ctx context.Context, client kubernetes.Interface, namespace, name, identity, by string, opts *relect.HandOverOptions) (Request, error) {
	if identity == "" {
		return Request{}, errors.New("operator: RequestHandOver: empty identity")
	}
	var o relect.HandOverOptions
	if opts != nil {
		o = *opts
	}
	return request(ctx, client, namespace, name, Request{To: identity, Unregistered: o.Unregistered, By: by})
}

// request writes r, addressed to the Lease's current holder and term.
func request(ctx context.Context, client kubernetes.Interface, namespace, name string, r Request) (Request, error) {
	leases := client.CoordinationV1().Leases(namespace)
	for try := 0; ; try++ {
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return Request{}, fmt.Errorf("%w: Lease %s/%s not found", ErrNoLeader, namespace, name)
		}
		if err != nil {
			return Request{}, err
		}
		holder := wire.Holder(l)
		if holder == "" || wire.HandOverOf(l) != nil {
			return Request{}, fmt.Errorf("%w: Lease %s/%s is not held", ErrNoLeader, namespace, name)
		}
		if r.To == holder {
			return Request{}, fmt.Errorf("operator: RequestHandOver: %q already holds Lease %s/%s", r.To, namespace, name)
		}
		r.Holder, r.Term, r.At = holder, wire.Transitions(l), time.Now()
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		raw, _ := json.Marshal(r)
		l.Annotations[wire.AnnotationRequest] = string(raw)
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) && try < 5 {
			continue // the leader renewed in between: ask again
		}
		if err != nil {
			return Request{}, err
		}
		return r, nil
	}
}

// WithdrawRequest takes back Request r, written by RequestYield or
// RequestHandOver, if the Lease namespace/name still carries it (the same
// request: holder, term, target and time): a withdrawal never removes
// another's. It reports whether it removed it; a request the leader
// already honoured, refused or outlived is gone anyway (false, nil).
// Errors: the client's. It blocks on the API calls, and retries a
// conflict with the leader's renewal a few times.
func WithdrawRequest(ctx context.Context, client kubernetes.Interface, namespace, name string, r Request) (bool, error) {
	leases := client.CoordinationV1().Leases(namespace)
	for try := 0; ; try++ {
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		var there wire.Request
		raw, ok := l.Annotations[wire.AnnotationRequest]
		if !ok || json.Unmarshal([]byte(raw), &there) != nil || !wire.SameRequest(there, r) {
			return false, nil
		}
		delete(l.Annotations, wire.AnnotationRequest)
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) && try < 5 {
			continue
		}
		return err == nil, err
	}
}

// PendingRequest returns the Request written into l that l's current
// holder has yet to honour or refuse: one addressed to that holder and its
// term. ok is false if there is none, or only a stale one.
func PendingRequest(l *coordinationv1.Lease) (r Request, ok bool) {
	return wire.PendingRequest(l)
}
