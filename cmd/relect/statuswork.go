package main

import (
	"time"

	"github.com/relect/relect/internal/wire"
	coordinationv1 "k8s.io/api/coordination/v1"
)

// What relect status reads of stuck work and handovers from the Lease's
// annotations, by the library's own rules (internal/wire: an annotation of
// another term, or a handover not naming the holder, is no annotation).

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
	line := wire.SuccessionOf(l)
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
