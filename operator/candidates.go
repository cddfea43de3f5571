package operator

import (
	"context"
	"slices"

	"github.com/relect/relect"
	"github.com/relect/relect/internal/wire"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ListCandidates returns the candidates registered for the Lease
// namespace/name, for tools and operators (the relect command's status):
// one List of the registrations and one Get of the Lease, with client.
// Each candidate's Leader and Successor say what the Lease shows: its
// holder, and the line of succession its leader published. Registrations
// are returned as stored, lapsed ones included: RenewedAt (the candidate's
// own clock) tells how old each is — a registration is renewed every
// Options.RegistrationRenewal (15 minutes by default). The order is
// relect.Candidate.Compare's: the leader, the line in order, then by
// priority and identity. It returns the client's error of either call (a
// missing Lease is no error). It blocks on the API calls.
func ListCandidates(ctx context.Context, client kubernetes.Interface, namespace, name string) ([]relect.Candidate, error) {
	leases := client.CoordinationV1().Leases(namespace)
	list, err := leases.List(ctx, metav1.ListOptions{LabelSelector: wire.RegistrationSelector(name)})
	if err != nil {
		return nil, err
	}
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		l = nil
	case err != nil:
		return nil, err
	}
	var holder string
	var line *wire.Succession
	if l != nil {
		holder, line = wire.Holder(l), wire.SuccessionOf(l)
	}
	var cs []relect.Candidate
	for i := range list.Items {
		if r, ok := wire.RegistrationOf(&list.Items[i]); ok {
			cs = append(cs, relect.Candidate{Identity: r.Identity, Priority: r.Priority, Standby: r.Standby, RenewedAt: r.RenewedAt,
				Leader: r.Identity == holder, Successor: line.Rank(r.Identity) + 1})
		}
	}
	slices.SortFunc(cs, relect.Candidate.Compare)
	return cs, nil
}

// Fence returns the fence of the term that holds l, as its relect holder
// published it (from its first renewal on), or "" if l carries none for
// its current holder and term (a plain client-go holder, a released Lease,
// a handover record, a term only just begun), or if l is nil.
func Fence(l *coordinationv1.Lease) relect.Fence {
	if l == nil {
		return ""
	}
	f, err := relect.ParseFence(wire.FenceOf(l))
	if err != nil {
		return ""
	}
	return f
}
