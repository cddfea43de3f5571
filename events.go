package relect

import (
	"fmt"
	"time"

	"github.com/relect/relect/internal/eventq"
)

// EventKind says what an Event reports.
type EventKind int

// The kinds of Event, in the order they typically occur in one campaign.
const (
	// EventCampaigning: a campaign for the lease began (Run started, or a
	// backoff wait ended).
	EventCampaigning EventKind = iota + 1
	// EventNewLeader: a different, non-empty holder was observed (Leader,
	// Term: the lease's leaseTransitions as observed).
	EventNewLeader
	// EventStartedLeading: this candidate acquired the lease and its term
	// began (Term: its number; Fence: its fencing token).
	EventStartedLeading
	// EventStoppedLeading: the term ended; IsLeader is false from now on
	// (Err: why, one of ErrLeaseExpired, ErrLeaseLost, ErrWorkReturned,
	// ErrYielded, ErrHandedOver, *PanicError, or Run's context's cause).
	EventStoppedLeading
	// EventReleased: the lease was released after the term's work
	// returned — or, when the campaign ended while its acquiring write was
	// in flight and that write had been applied, without a term: Term is
	// then the leaseTransitions of the record released.
	EventReleased
	// EventBackoff: waiting Delay before the next campaign.
	EventBackoff
	// EventError: a Lease API call failed (Err is a *CallError), a release
	// failed, or a callback panicked (Err is a *PanicError). Election goes
	// on. A conflict (409, AlreadyExists: a lost race) is no failure: it is
	// counted in Stats.Calls only.
	EventError
	// EventDegraded: Options.DegradedAfter Lease API calls failed in a row
	// (Err: the last failure). The election goes on; a process that stays
	// degraded is cut off from the API.
	EventDegraded
	// EventRecovered: after EventDegraded, this candidate heard from the
	// Lease API again: a call succeeded, or a watch delivered an event
	// (see Stats.LastContact).
	EventRecovered
	// EventHandedOver: the lease was handed over (Elector.HandOver, or
	// the Lease's preferred holder) to Leader, after the term's work
	// returned (Term: the term that ended).
	EventHandedOver
	// EventLeaseMissing: the Lease was found missing. relect creates a
	// missing Lease only once it has watched it missing, without a gap,
	// for LeaseDuration, in case it was deleted while someone held it
	// (docs/design.md): Delay is that wait, from Time. A first deployment
	// waits so for its first leader. Once per time the Lease is seen to
	// go missing.
	EventLeaseMissing
	// EventWorkStuck: the leading term's work is stuck (Options.Work; Err
	// wraps ErrWorkStuck and says why). The term ends with it and the
	// lease goes to the line of succession at once — EventStoppedLeading
	// with the same Err, then EventReleased — unless the term must hold
	// (the fleet's streak of stuck handovers) or nobody else can take over.
	EventWorkStuck
	// EventWorkRecovered: after EventWorkStuck, the same term's work is no
	// longer stuck — it beat again, or its check passed (Term, Fence; Delay:
	// how long it was stuck). Only a term that led on stuck sees it: one
	// that must hold, or that nobody else could relieve.
	EventWorkRecovered
)

var eventKindNames = [...]string{
	EventCampaigning:    "campaigning",
	EventNewLeader:      "new-leader",
	EventStartedLeading: "started-leading",
	EventStoppedLeading: "stopped-leading",
	EventReleased:       "released",
	EventBackoff:        "backoff",
	EventError:          "error",
	EventDegraded:       "degraded",
	EventRecovered:      "recovered",
	EventHandedOver:     "handed-over",
	EventLeaseMissing:   "lease-missing",
	EventWorkStuck:      "work-stuck",
	EventWorkRecovered:  "work-recovered",
}

// String returns the kind's name in lower case, for logs.
func (k EventKind) String() string {
	if k > 0 && int(k) < len(eventKindNames) {
		return eventKindNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is one observation of an Elector, delivered on Elector.Events. Fields
// that do not apply to a Kind are zero.
type Event struct {
	Kind EventKind
	// Time is when it happened, from the local clock.
	Time time.Time
	// Leader is the holder identity concerned (EventNewLeader,
	// EventStartedLeading, EventStoppedLeading, EventReleased,
	// EventWorkStuck, EventWorkRecovered: this candidate; EventHandedOver:
	// the successor).
	Leader string
	// Term is the lease's leaseTransitions: the number of the term that
	// started, stopped, was released or handed over, or had stuck work or
	// recovered from it; or the value observed with a new leader.
	Term int64
	// Fence is the fencing token of the term concerned (see Fence) for
	// EventStartedLeading, EventStoppedLeading, EventReleased,
	// EventHandedOver, EventWorkStuck and EventWorkRecovered; "" for other
	// kinds, for a term without one, and for a release of an acquiring
	// write that began no term.
	Fence Fence
	// Err is the cause of EventStoppedLeading, EventError, EventDegraded
	// and EventWorkStuck.
	Err error
	// Delay is the wait of EventBackoff and EventLeaseMissing, and how
	// long the work was stuck for EventWorkRecovered.
	Delay time.Duration
}

// String formats the event on one line, for logs and demos.
func (e Event) String() string {
	s := e.Time.Format("15:04:05.000") + " " + e.Kind.String()
	if e.Leader != "" {
		s += " leader=" + e.Leader
	}
	switch e.Kind {
	case EventNewLeader, EventStartedLeading, EventStoppedLeading, EventReleased, EventHandedOver, EventWorkStuck, EventWorkRecovered:
		s += fmt.Sprintf(" term=%d", e.Term)
	}
	if e.Fence != "" {
		s += " fence=" + string(e.Fence)
	}
	if e.Delay != 0 {
		s += " delay=" + e.Delay.String()
	}
	if e.Err != nil {
		s += " err=" + e.Err.Error()
	}
	return s
}

// eventQueue delivers events in order without ever blocking the sender,
// dropping and counting the oldest when the buffer is full; a new channel
// for each Run, closed when Run returns (internal/eventq).
type eventQueue = eventq.Queue[Event]

// newEventQueue returns an eventQueue of size events (Options.EventBuffer).
func newEventQueue(size int) *eventQueue { return eventq.New[Event](size) }
