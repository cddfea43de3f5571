package linelease

import "github.com/relect/relect/internal/wire"

// Want is the leader's side of the line Lease in the Elector's state: the
// line it wants posted, the last it posted, and the line of a handover to
// post. The zero value wants nothing. It is not safe for concurrent use:
// the core calls it under its state's lock, as it calls every component
// it keeps there, and reads it for Post through LeaderReports.
type Want struct {
	want     wire.Line
	wanted   bool      // want is set
	posted   wire.Line // the last line written in this term (zero: none)
	withView bool      // want was chosen from the leader's view of the registry
	// handOver is the line to post once a handover to a candidate outside
	// the line is written (HandOver); handingOver: it is set.
	handOver    wire.Line
	handingOver bool
	wake        chan struct{} // signalled (cap 1) when want changes
	// mayBePosted: the line Lease may post a line — this Elector observed
	// a record that posts one (Seen), or wanted one posted — so a leader
	// that posts none withdraws it; else it writes nothing.
	mayBePosted bool
}

// Seen notes that a record observed on the election's Lease posts its
// line (PostedFor): the line Lease may post one, so a leader of this
// Elector that posts none withdraws it.
func (w *Want) Seen() { w.mayBePosted = true }

// Set sets the line the leader wants posted with a record of its own:
// line's Holder and Term are the record's, its Succession the line the
// record publishes if it says Posted, else nil. A line that is not posted
// is wanted withdrawn, so that candidates following an earlier leader's
// line watch the election's Lease again — if the line Lease may post one.
// withView: the line was chosen from the leader's view of the registry.
// It reports whether the line Lease posts line already: until it does,
// the record says Posted false, so that no candidate reads the line Lease
// before the leader wrote it, and none backs off for finding it stale.
func (w *Want) Set(line wire.Line, withView bool) (posted bool) {
	if line.Succession != nil {
		w.mayBePosted = true
	}
	posted = line.Succession != nil && Same(w.posted, line)
	if !w.mayBePosted {
		return posted
	}
	if w.wanted && Same(w.want, line) && w.withView == withView {
		w.want = line // the cooldowns' seconds, for the next write
		return posted
	}
	w.want, w.wanted, w.withView = line, true, withView
	if w.wake == nil {
		w.wake = make(chan struct{}, 1)
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return posted
}

// SetHandOver prepares, for a handover record of term term to to carrying
// sc (the line it publishes, or the leader's own without successors), the
// line that tells to of it when to follows the line Lease: the line posted
// does not name it, so it does not watch the election's Lease. The line
// names to as holder and first in line; the leader posts it once the
// handover is written (HandOver, PostHandOver), and to, named, reads the
// election's Lease and takes the lease at once. Nothing when no line was
// posted, or the line wanted names to.
func (w *Want) SetHandOver(to string, term int32, sc wire.Succession) {
	w.handingOver = false
	if !w.mayBePosted || (w.wanted && w.want.Succession.Names(to)) {
		return
	}
	sc.Posted = true
	sc.Next = append([]wire.Successor{{Identity: to}}, sc.Next...)
	sc.Next = sc.Next[:min(len(sc.Next), wire.MaxSuccessors)]
	w.handOver, w.handingOver = wire.Line{Holder: to, Term: term, Succession: &sc}, true
}

// Current returns the line wanted, whether it was chosen from the leader's
// view of the registry, and a channel signalled when that changes; ok is
// false while none is wanted for the record the leader last wrote — ours
// says it is the leader's own, term its leaseTransitions (another term's:
// the term's first write is not annotated yet, or it handed over).
func (w *Want) Current(ours bool, term int32) (line wire.Line, ok, withView bool, changed <-chan struct{}) {
	if w.wake == nil {
		w.wake = make(chan struct{}, 1)
	}
	ok = w.wanted && ours && w.want.Term == term
	return w.want, ok, w.withView, w.wake
}

// Wrote records line as the line Lease's after the leader wrote it (the
// zero Line at the end of its term).
func (w *Want) Wrote(line wire.Line) { w.posted = line }

// HandOver returns the line to post after a handover was written
// (SetHandOver), once; ok is false if there is none.
func (w *Want) HandOver() (line wire.Line, ok bool) {
	line, ok = w.handOver, w.handingOver
	w.handingOver = false
	return line, ok
}
