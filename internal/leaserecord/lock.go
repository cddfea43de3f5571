package leaserecord

import (
	"context"
	"encoding/json"
	"errors"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Lock is the resource lock client-go's elector drives when relect has
// the Lease client (Config or Client): client-go's own LeaseLock
// (resourcelock/leaselock.go) — each write is the Lease object last read or
// written, with a new spec, conditional on its resourceVersion — plus
// relect's annotations on every write (annotate). With Options.Lock,
// the caller's lock is used instead, and no annotation is written.
//
// A Lock is not safe for concurrent use: client-go's elector uses it from
// one goroutine, and the campaign after client-go's Run returned (to
// release): never two at once. Use NewLock.
type Lock struct {
	leases   coordinationv1client.LeaseInterface
	ns, name string
	identity string
	annotate func(l *coordinationv1.Lease, rec *Record)
	lease    *coordinationv1.Lease // last read or written
}

// NewLock returns the Lock of the Lease ns/name, written as held by
// identity; annotate adds relect's annotations to each Lease it creates or
// updates, with the record written (it must not block).
func NewLock(leases coordinationv1client.LeaseInterface, ns, name, identity string,
	annotate func(l *coordinationv1.Lease, rec *Record)) *Lock {
	return &Lock{leases: leases, ns: ns, name: name, identity: identity, annotate: annotate}
}

var _ resourcelock.Interface = (*Lock)(nil)

// Get reads the Lease and keeps it as the object the next Update writes.
func (ll *Lock) Get(ctx context.Context) (*Record, []byte, error) {
	l, err := ll.leases.Get(ctx, ll.name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	ll.lease = l
	rec := Of(l)
	raw, err := json.Marshal(*rec)
	if err != nil {
		return nil, nil, err
	}
	return rec, raw, nil
}

// Create creates the Lease with ler and relect's annotations.
func (ll *Lock) Create(ctx context.Context, ler Record) error {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ll.ns, Name: ll.name}, Spec: resourcelock.LeaderElectionRecordToLeaseSpec(&ler)}
	ll.annotate(l, &ler)
	created, err := ll.leases.Create(ctx, l, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	ll.lease = created
	return nil
}

// Update writes ler, and relect's annotations, into the object last read or
// written, conditionally on its resourceVersion.
func (ll *Lock) Update(ctx context.Context, ler Record) error {
	if ll.lease == nil {
		return errors.New("relect: lease not initialized, call get or create first")
	}
	l := ll.lease.DeepCopy()
	l.Spec = resourcelock.LeaderElectionRecordToLeaseSpec(&ler)
	ll.annotate(l, &ler)
	updated, err := ll.leases.Update(ctx, l, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	ll.lease = updated
	return nil
}

// Last returns the object last read or written; nil before either.
func (ll *Lock) Last() *coordinationv1.Lease { return ll.lease }

// SetLast makes l the object the next Update writes, as if it had been
// read: the Lease as a write made outside the Lock left it.
func (ll *Lock) SetLast(l *coordinationv1.Lease) { ll.lease = l }

// RecordEvent does nothing: relect records its own events (campaign).
func (ll *Lock) RecordEvent(string) {}

// Identity is the holder identity this lock writes.
func (ll *Lock) Identity() string { return ll.identity }

// Describe is the Lease as "namespace/name".
func (ll *Lock) Describe() string { return ll.ns + "/" + ll.name }
