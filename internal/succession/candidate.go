package succession

import (
	"cmp"
	"strconv"
	"time"

	"github.com/relect/relect/internal/wire"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Candidate is a candidate for the lease as an Elector knows it. Its fields
// are relect.Candidate's, in the same order, so that the core converts one
// to the other (relect.Candidate(c)); relect.Candidate documents them.
type Candidate struct {
	Identity  string
	Priority  int32
	Standby   bool
	Leader    bool
	Successor int
	RenewedAt time.Time
}

// Compare orders candidates for people (relect.Candidate.Compare): the
// leader first, then the line of succession in order, then the others by
// priority, highest first, and identity. It returns -1, 0 or +1.
func (c Candidate) Compare(d Candidate) int {
	switch {
	case c.Leader != d.Leader:
		if c.Leader {
			return -1
		}
		return 1
	case (c.Successor == 0) != (d.Successor == 0):
		if c.Successor == 0 {
			return 1
		}
		return -1
	case c.Successor != d.Successor:
		return cmp.Compare(c.Successor, d.Successor)
	case c.Priority != d.Priority:
		return cmp.Compare(d.Priority, c.Priority)
	}
	return cmp.Compare(c.Identity, d.Identity)
}

// Registration is one registration — the small Lease a candidate keeps
// beside the election's — as read from the API.
type Registration struct {
	Candidate
	Name string // the registration's object name
	// Seconds is its lease duration: it lapses that long after its last
	// change was observed.
	Seconds int
	RV      string // its resourceVersion
	// ShardWeight is its ShardOptions.Weight; 0 if it takes no part.
	ShardWeight int32
	ShardSet    string // its wire.AnnotationShardSet; "" if none
	Instance    string // its wire.AnnotationInstance
	// Wards: it can be the line's warden (wire.AnnotationWards).
	Wards bool
}

// RegistrationOf decodes a registration; ok is false if l is not one (no
// holder: departed).
func RegistrationOf(l *coordinationv1.Lease) (r Registration, ok bool) {
	w, ok := wire.RegistrationOf(l)
	if !ok {
		return r, false
	}
	return RegistrationFrom(w), true
}

// RegistrationFrom is the registration w, as the registry component reads
// it (internal/registry passes wire.Registration values).
func RegistrationFrom(w wire.Registration) Registration {
	return Registration{
		Candidate: Candidate{Identity: w.Identity, Priority: w.Priority, Standby: w.Standby, RenewedAt: w.RenewedAt},
		Name:      w.Name, Seconds: w.Seconds, RV: w.RV, ShardWeight: w.ShardWeight,
		ShardSet: w.ShardSet, Instance: w.Instance, Wards: w.Wards,
	}
}

// Seen is a registration in the leader's view, with the local time its
// current version was first seen (SeenAt): it lapses Seconds later, unless
// renewed (client-go's expiry rule, on the local clock).
type Seen struct {
	Registration
	SeenAt time.Time
}

// Live reports whether c has not lapsed at now.
func (c *Seen) Live(now time.Time) bool {
	return now.Before(c.SeenAt.Add(time.Duration(c.Seconds) * time.Second))
}

// lapsedLongAgo reports whether c has been seen unchanged for twice its
// lease duration: its candidate died without deregistering.
func (c *Seen) lapsedLongAgo(now time.Time) bool {
	return !now.Before(c.SeenAt.Add(2 * time.Duration(c.Seconds) * time.Second))
}

// sighting is the first local sight of a registration at version rv.
type sighting struct {
	rv string
	at time.Time
}

// silence is when a warden was replaced for not beating, and its
// registration's resourceVersion then.
type silence struct {
	rv string
	at time.Time
}

// Registration returns this candidate's own registration object, as it
// wants it written at now: from (nil: a new one) with relect's labels and
// annotations set as c says, the annotations of others kept. A candidate
// standing by does not ward and takes no shards.
func (c Config) Registration(from *coordinationv1.Lease, now time.Time) *coordinationv1.Lease {
	l := &coordinationv1.Lease{}
	if from != nil {
		l = from.DeepCopy()
	}
	l.Namespace, l.Name = c.Namespace, wire.RegistrationName(c.Lease, c.Identity)
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[wire.LabelCandidateOf] = wire.CandidateOf(c.Lease)
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	a := l.Annotations
	a[wire.AnnotationLease] = c.Lease
	a[wire.AnnotationPriority] = strconv.Itoa(int(c.Priority))
	a[wire.AnnotationInstance] = c.Instance
	for _, k := range []string{wire.AnnotationStandby, wire.AnnotationWards, wire.AnnotationShardWeight, wire.AnnotationShardSet} {
		delete(a, k)
	}
	if c.Standby {
		a[wire.AnnotationStandby] = "true"
	} else {
		a[wire.AnnotationWards] = "true"
	}
	if c.ShardSet != "" && !c.Standby {
		a[wire.AnnotationShardWeight] = strconv.Itoa(int(c.ShardWeight))
		a[wire.AnnotationShardSet] = c.ShardSet
	}
	id, seconds, t := c.Identity, c.RegistrationSeconds, metav1.NewMicroTime(now)
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &id, &seconds, &t
	if l.Spec.AcquireTime == nil {
		l.Spec.AcquireTime = &t
	}
	return l
}
