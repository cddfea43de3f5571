// Package leasewatch decodes what a watch on Leases delivers: the one
// reading of watch events that the root package (the follower's and the
// leader's watch on the election's Lease, the registry's and the line
// Lease's watches) and internal/shards share. It knows nothing of
// elections and makes no API call.
package leasewatch

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// Event is one event of a watch on Leases, decoded.
type Event struct {
	Kind Kind
	// Lease is the Lease as changed, the deleted one (nil if the event did
	// not carry it), or the bookmark's; nil for the other kinds.
	Lease *coordinationv1.Lease
}

// Kind is what a watch event says.
type Kind uint8

// The kinds of Event.
const (
	Ignored  Kind = iota // an object that is not a Lease
	Changed              // added or modified
	Deleted              // deleted
	Progress             // a bookmark: a resourceVersion to resume from
	Closed               // the server ended the watch: resume it from the last resourceVersion
	Broken               // an error event (410 Gone, say): start over with a read or a list
)

// Decode turns what a watch's result channel delivered (open is false once
// it is closed) into an Event.
func Decode(ev watch.Event, open bool) Event {
	if !open {
		return Event{Kind: Closed}
	}
	l, isLease := ev.Object.(*coordinationv1.Lease)
	switch ev.Type {
	case watch.Added, watch.Modified:
		if isLease {
			return Event{Kind: Changed, Lease: l}
		}
	case watch.Deleted:
		if !isLease {
			l = nil
		}
		return Event{Kind: Deleted, Lease: l}
	case watch.Bookmark:
		if isLease {
			return Event{Kind: Progress, Lease: l}
		}
	default:
		return Event{Kind: Broken}
	}
	return Event{Kind: Ignored}
}

// CarriesObject reports whether e carries an object from the API — a
// change, a deletion, a bookmark — and so counts as contact with it.
func (e Event) CarriesObject() bool {
	switch e.Kind {
	case Changed, Deleted, Progress:
		return true
	}
	return false
}
