package main

import (
	"encoding/json"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// What relect status reads of stuck work and handovers from the Lease's
// annotations. The root package exposes no reader for either (it has
// relect.LeaseFence and relect.PendingRequest for the fence and the
// request, not one for the line of succession or a handover record), so
// the two wire formats are read here as succession.go writes them.
//
// NOTE for the refactor that moves the Lease's format into a subpackage:
// replace leaseLine and leaseHandOver with its readers — a
// Succession(l) (streak, cooling with seconds left as written, from) and a
// HandOver(l) (from, to) with the same term checks as succession.go's
// successionOf and handOverOf — and the release rule in statusOf with its
// Released(l). Until then a change of relect.io/succession or
// relect.io/handover must be made here too (TestStatusShowsStuckWork and
// TestStatusShowsAHandover decode what the library writes, through
// relecttest, and fail on a drift of the fields they read).

// The annotations, as succession.go names them.
const (
	annotationSuccession = "relect.io/succession"
	annotationHandOver   = "relect.io/handover"
	// maxCooling is how many cooling candidates the library reads of a
	// line (succession.go's maxPassed).
	maxCooling = 8
)

// leaseLine is the part of relect.io/succession that status shows: the
// line of succession a leader (From) published with its record of
// leaseTransitions Term — the fleet's streak of stuck handovers in a row,
// and the candidates cooling after one, with the seconds of cooldown each
// had left when the record was written.
type leaseLine struct {
	Term    int32  `json:"term"`
	From    string `json:"from"`
	Streak  int32  `json:"streak"`
	Cooling []struct {
		Identity string `json:"id"`
		Seconds  int32  `json:"s"`
	} `json:"cooling"`
}

// lineOf returns l's line of succession, or nil if it has none, it is
// malformed, or it belongs to another term (a client-go holder kept an
// older one), as the library ignores it then.
func lineOf(l *coordinationv1.Lease) *leaseLine {
	raw, ok := l.Annotations[annotationSuccession]
	if !ok {
		return nil
	}
	var line leaseLine
	if json.Unmarshal([]byte(raw), &line) != nil || line.Term != ptrValue(l.Spec.LeaseTransitions) {
		return nil
	}
	line.Cooling = line.Cooling[:min(len(line.Cooling), maxCooling)]
	return &line
}

// leaseHandOver is relect.io/handover: the record is a handover from From
// to To, the holder it names, who has not acquired the lease yet.
type leaseHandOver struct {
	Term int32  `json:"term"`
	From string `json:"from"`
	To   string `json:"to"`
}

// handOverOf returns the handover l's record is, or nil: one written with
// its term, naming its holder, from someone else (succession.go's rule).
func handOverOf(l *coordinationv1.Lease) *leaseHandOver {
	raw, ok := l.Annotations[annotationHandOver]
	if !ok {
		return nil
	}
	var h leaseHandOver
	holder := ptrValue(l.Spec.HolderIdentity)
	if json.Unmarshal([]byte(raw), &h) != nil || h.Term != ptrValue(l.Spec.LeaseTransitions) ||
		h.To == "" || h.To != holder || h.From == holder {
		return nil
	}
	return &h
}

// workStatus is what the Lease says of stuck work in the fleet, as of the
// status's time (-o json: "work"). Whether the holder's work is stuck now
// is known to the holder alone (its /leader's work_stuck, the metric
// relect_work_stuck): the Lease carries the streak and the cooldowns.
type workStatus struct {
	// Streak is the fleet's stuck handovers in a row: on a held Lease,
	// those the holder's term took over, so that it must hold before it
	// may hand over for stuck work in turn; on a released one, those up to
	// its release. Zero (absent) once a term's work proved healthy.
	Streak int32 `json:"streak,omitempty"`
	// HoldUntil, while the holder holds (Streak above zero), is about when
	// its hold ends: its hold and the cooldown of the leader it took over
	// from are one length and begin with the handover, so it is the
	// latest cooldown of the others in Cooling (an estimate: the leader's
	// own sidecar reports it exactly, as work_hold_until). Absent when not
	// holding, or when no cooldown says it.
	HoldUntil *time.Time `json:"hold_until,omitempty"`
	// Cooling are the candidates passed over in the line of succession
	// after a stuck handover of theirs, with the cooldown each has left.
	Cooling []coolingStatus `json:"cooling,omitempty"`
}

// coolingStatus is one candidate in its cooldown.
type coolingStatus struct {
	Identity string `json:"identity"`
	// SecondsLeft is the cooldown left at the status's time: the seconds
	// the record gave it, less the time since the record was written
	// (renew time, against this machine's clock) or, with --watch, since
	// it was observed — the validity's basis. Zero once it has passed.
	SecondsLeft float64 `json:"seconds_left"`
	// Until is when it ends, on the same basis.
	Until time.Time `json:"until"`
}

// handoverStatus is a handover record (-o json: "handover"): From handed
// the lease over to To, the holder it names, who may take it until Until;
// nobody leads meanwhile, and after Until succession resumes.
type handoverStatus struct {
	From  string     `json:"from"`
	To    string     `json:"to"`
	Until *time.Time `json:"until,omitempty"`
}

// workOf returns what l's line of succession says of stuck work at now,
// counting the cooldowns' seconds from basis (when the record was written
// or observed); nil when it says nothing (no streak, nobody cooling).
func workOf(l *coordinationv1.Lease, holder string, now, basis time.Time) *workStatus {
	line := lineOf(l)
	if line == nil || (line.Streak <= 0 && len(line.Cooling) == 0) {
		return nil
	}
	w := &workStatus{Streak: max(line.Streak, 0)}
	var hold time.Time
	for _, c := range line.Cooling {
		until := basis.Add(time.Duration(c.Seconds) * time.Second)
		w.Cooling = append(w.Cooling, coolingStatus{Identity: c.Identity, SecondsLeft: max(until.Sub(now).Seconds(), 0), Until: until})
		if c.Identity != holder && until.After(hold) {
			hold = until
		}
	}
	if w.Streak > 0 && holder != "" && line.From == holder && !hold.IsZero() {
		w.HoldUntil = &hold
	}
	return w
}
