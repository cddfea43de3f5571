// Package leasewatch decodes what a watch on Leases delivers: the one
// reading of watch events that the root package (the follower's and the
// leader's watch on the election's Lease, the registry's and the line
// Lease's watches) and internal/shards share, and the loop that reads
// them (Reader). It knows nothing of elections and makes no API call.
package leasewatch

import (
	"context"
	"errors"
	"time"

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

// Reader reads watches on Leases: the loop that the registry's, the shard
// table's, the shard Leases' and the leader's term watches share. Its
// zero value is not usable: Decode and Handle are required.
type Reader struct {
	// Decode decodes each event (Decode, or a caller's wrapper of it that
	// counts contact with the API).
	Decode func(ev watch.Event, open bool) Event
	// Handle is given each event but the watch's end (Closed, Broken).
	Handle func(Event)
	// Tick, if not nil, calls OnTick at each of its ticks while a watch
	// is read, on the reading goroutine.
	Tick   <-chan time.Time
	OnTick func()
	// Follow's hooks, each nil for nothing: Watching is told when each
	// watch opens (true) and ends (false); Resuming is called after each
	// watch the server closed, before the next opens.
	Watching func(on bool)
	Resuming func()
}

// Read reads w's events until ctx is done or the watch ends: closed by
// the server (broken false: resume from *rv) or broken by an error event
// (true: start over with a list or a read). Each event that carries a
// Lease advances *rv to its resourceVersion before Handle sees it. It does
// not stop w.
func (r Reader) Read(ctx context.Context, w watch.Interface, rv *string) (broken bool) {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-r.Tick:
			r.OnTick()
		case ev, open := <-w.ResultChan():
			e := r.Decode(ev, open)
			if e.Lease != nil {
				*rv = e.Lease.ResourceVersion
			}
			switch e.Kind {
			case Closed:
				return false
			case Broken:
				return true
			}
			r.Handle(e)
		}
	}
}

// Follow reads watches from resourceVersion rv until ctx is done (nil),
// one cannot be opened (open's error) or one breaks (ErrBroken: the
// caller lists again): after each watch the server closed, it calls
// Resuming and opens the next from the last resourceVersion seen. It
// blocks.
func (r Reader) Follow(ctx context.Context, rv string, open func(ctx context.Context, rv string) (watch.Interface, error)) error {
	for ctx.Err() == nil {
		w, err := open(ctx, rv)
		if err != nil {
			return err
		}
		r.watching(true)
		broken := r.Read(ctx, w, &rv)
		r.watching(false)
		w.Stop()
		switch {
		case ctx.Err() != nil:
			return nil
		case broken:
			return ErrBroken
		case r.Resuming != nil:
			r.Resuming()
		}
	}
	return nil
}

func (r Reader) watching(on bool) {
	if r.Watching != nil {
		r.Watching(on)
	}
}

// ErrBroken is Follow's error when a watch broke: an error event, 410 Gone
// say. The caller starts over with a list.
var ErrBroken = errors.New("watch broken")
