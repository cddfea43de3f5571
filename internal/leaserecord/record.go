// Package leaserecord holds the rules relect applies to a Lease's
// leader-election record, client-go's resourcelock.LeaderElectionRecord:
// when two records are the same, when a record is a release, which
// leaseTransitions the apiserver accepts, and what client-go is shown of a
// record it must not act on as stored. They are pure functions of records;
// whoever reads or writes the Lease applies them. Lock, beside them, is
// the resource lock that reads and writes a Lease for client-go's elector.
// The package knows nothing of an election's state.
package leaserecord

import (
	"encoding/json"
	"math"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Record is client-go's view of a Lease's spec.
type Record = resourcelock.LeaderElectionRecord

// Of returns the record of a Lease read from the API.
func Of(l *coordinationv1.Lease) *Record {
	return resourcelock.LeaseSpecToLeaderElectionRecord(&l.Spec)
}

// ClientGoView is what a client-go follower compares to tell a new record
// from the one before: the record's JSON, in which renewTime and
// acquireTime have whole seconds. Two renewals within one second look the
// same to it.
func ClientGoView(rec *Record) []byte {
	raw, _ := json.Marshal(rec)
	return raw
}

// Key identifies a record: its client-go view plus the renew and
// acquire times at the Lease's precision, the microsecond. Two records are
// the same record exactly when their keys are equal (Same): relect
// tells renewals within one second apart, as client-go cannot. The key is
// also what relect hands client-go as the record's raw bytes, so that
// client-go, too, sees every renewal as new.
func Key(rec *Record) []byte {
	key := ClientGoView(rec)
	key = append(key, rec.RenewTime.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano)...)
	return append(key, rec.AcquireTime.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano)...)
}

// Same reports whether a and b are the same record (see Key);
// nil is no record, and never the same as any.
func Same(a, b *Record) bool {
	if a == nil || b == nil {
		return false
	}
	return string(Key(a)) == string(Key(b))
}

// StampedAs reports whether rec carries the stamps of ours — the same
// holder, leaseTransitions, and renew and acquire times at the Lease's
// precision, the microsecond — whatever else an edit changed since
// (spec.preferredHolder, a duration): the same tenure, not necessarily the
// same record. A record edited by hand to name a holder carries the times
// of whoever held it before, or of the edit. nil is no record.
func StampedAs(rec, ours *Record) bool {
	if rec == nil || ours == nil {
		return false
	}
	same := func(a, b time.Time) bool {
		return a.UTC().Truncate(time.Microsecond).Equal(b.UTC().Truncate(time.Microsecond))
	}
	return rec.HolderIdentity == ours.HolderIdentity && rec.LeaderTransitions == ours.LeaderTransitions &&
		same(rec.RenewTime.Time, ours.RenewTime.Time) && same(rec.AcquireTime.Time, ours.AcquireTime.Time)
}

// Released reports whether a record is a release: no holder, and the lease
// duration of 1 s that relect and client-go write when they release. A
// holder emptied any other way (by hand) may still be acted on by whoever
// held it, until its next renewal: it is waited out like a held lease.
func Released(rec *Record) bool {
	return rec.HolderIdentity == "" && rec.LeaseDurationSeconds == 1
}

// Release is the record a release writes: no holder, a lease duration
// of 1 s (as client-go's), the term's leaseTransitions kept.
func Release(transitions int) Record {
	now := time.Now()
	rec := Record{LeaseDurationSeconds: 1, LeaderTransitions: transitions}
	rec.AcquireTime.Time, rec.RenewTime.Time = now, now
	return rec
}

// HandOver is the record HandOver writes: the successor to named as
// holder — it has not acquired yet; the annotation written with the record
// tells it so (wire.AnnotationHandOver) — for seconds, the time it has to take
// the lease before normal succession resumes; the term's leaseTransitions
// kept.
func HandOver(transitions int, to string, seconds int) Record {
	now := time.Now()
	rec := Record{HolderIdentity: to, LeaseDurationSeconds: seconds, LeaderTransitions: transitions}
	rec.AcquireTime.Time, rec.RenewTime.Time = now, now
	return rec
}

// ClampTransitions keeps a leaseTransitions the apiserver accepts: 0 to
// MaxInt32. Counting past MaxInt32 (a hand edit, or 2^31 changes of holder)
// would wrap to a negative value the apiserver rejects with 422, wedging the
// election; it saturates instead, so term numbers stop growing there.
func ClampTransitions(n int) int32 {
	return int32(min(max(n, 0), math.MaxInt32))
}

// NextTransitions is the leaseTransitions of an acquisition that follows
// rec: one more, unless it resumes our own record, saturating at MaxInt32.
func NextTransitions(rec *Record, ours bool) int32 {
	n := ClampTransitions(rec.LeaderTransitions)
	if !ours && n < math.MaxInt32 {
		n++
	}
	return n
}

// StrangerSuffix marks, for client-go only, a holder that names us but whose
// record this Elector did not write.
const StrangerSuffix = " (not written by this elector)"

// EmptiedHolder stands, for client-go only, for a holder emptied otherwise
// than by a release (see Released).
const EmptiedHolder = "(holder emptied without a release)"

// Disguised reports whether client-go must be shown rec otherwise than as
// stored (see Disguise).
func Disguised(rec *Record, stranger bool, leaseSeconds int) bool {
	short := rec.HolderIdentity != "" && rec.LeaseDurationSeconds < leaseSeconds
	return stranger || short || (rec.HolderIdentity == "" && !Released(rec))
}

// Disguise returns what client-go is shown of rec, never what is stored, in
// the cases where client-go's rules would let this candidate take over
// while the holder may still act as leader:
//
//   - stranger: the record names us, but this Elector did not write it (an
//     operator's hand edit, or a previous process with the same identity).
//     client-go would resume it at once, while the candidate that really
//     held it may still act as leader until its next renewal. Shown as held
//     by a stranger, it is taken over only once it expires, as a new term.
//   - a held lease whose duration is shorter than ours (zero, negative, or
//     just short: a hand edit or a client with other settings). client-go
//     would take it over that soon after observing it, possibly before the
//     holder's next renewal reveals the edit. It is shown with our own lease
//     duration, so a takeover waits at least that long.
//   - a holder emptied otherwise than by a release: whoever held it may
//     still act as leader until its next renewal, so it is shown as held, by
//     a placeholder, for our own lease duration (the record's may be absurd,
//     and no holder is left to repair it).
//
// Leader() and events still report the record as stored.
func Disguise(rec *Record, stranger bool, leaseSeconds int) *Record {
	shown := *rec
	if stranger {
		shown.HolderIdentity += StrangerSuffix
	}
	if rec.HolderIdentity == "" && !Released(rec) {
		shown.HolderIdentity = EmptiedHolder
		shown.LeaseDurationSeconds = leaseSeconds
	}
	if shown.HolderIdentity != "" && shown.LeaseDurationSeconds < leaseSeconds {
		shown.LeaseDurationSeconds = leaseSeconds
	}
	return &shown
}
