package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/relect/relect"
)

// leaderState is what GET /leader serves and --file holds.
type leaderState struct {
	// Lease is "namespace/name".
	Lease string `json:"lease"`
	// Identity is this candidate's holder identity.
	Identity string `json:"identity"`
	// Leader is the holder last observed; "" when released or not seen yet.
	Leader string `json:"leader"`
	// Leading is true while this candidate leads (relect's IsLeader), and
	// only while its term's work has not been told to stop.
	Leading bool `json:"leading"`
	// Term is this candidate's term number while it leads, otherwise the
	// Lease's leaseTransitions observed with the current leader; absent
	// when there is none, or for a moment after a new leader was observed.
	Term *int64 `json:"term,omitempty"`
	// Fence, while leading, is the term's fencing token (relect's
	// Stats.Fence, a decimal integer as a string): larger than every
	// earlier term's, so storage that keeps the highest fence it accepted
	// can refuse a deposed leader's late writes (docs/fencing.md). Absent
	// when not leading, or when the apiserver gave none.
	Fence string `json:"fence,omitempty"`
	// ValidUntil, while leading, is when the term ends unless renewed
	// (relect's Stats.ValidUntil, on this machine's clock), or sooner:
	// at most --valid-for after the state was computed. It is truncated to
	// the millisecond for every JSON reader. A program may act as leader
	// only before it: the sidecar keeps the lease until the latest
	// ValidUntil it handed out has passed.
	ValidUntil *time.Time `json:"valid_until,omitempty"`
	// WorkStuck is true while this candidate leads and its work is stuck
	// (relect's Stats.WorkStuck: no beat within --beat-window, or the work
	// check failing --check-failures times in a row), since
	// WorkStuckSince. A stuck leader hands over at once unless it must
	// hold (stuck handovers came in a row) or nobody else can take over;
	// it still leads meanwhile. Absent when false.
	WorkStuck      bool       `json:"work_stuck,omitempty"`
	WorkStuckSince *time.Time `json:"work_stuck_since,omitempty"`
	// WorkStreak, while this candidate leads, is the fleet's stuck
	// handovers in a row that its term took over (relect's
	// Stats.WorkStreak), and WorkHoldUntil when its hold ends
	// (Stats.WorkHoldUntil): stuck or not, it hands over for stuck work no
	// sooner. Absent when there is no streak (none came before this term,
	// or its work proved healthy once it had held).
	WorkStreak    int        `json:"work_streak,omitempty"`
	WorkHoldUntil *time.Time `json:"work_hold_until,omitempty"`
	// WorkCheckFailures is how many work checks failed in a row, as a
	// leader or in the line of succession (a successor whose check fails
	// stands back); absent when none.
	WorkCheckFailures int `json:"work_check_failures,omitempty"`
	// WorkCooling are the candidates cooling after a stuck handover,
	// passed over in the line of succession, with when each cooldown ends
	// (relect's Stats.WorkCooling: as this replica knows them from the
	// Lease, on every replica); absent when none.
	WorkCooling []coolingState `json:"work_cooling,omitempty"`
}

// coolingState is one candidate in its cooldown (leaderState.WorkCooling).
type coolingState struct {
	Identity string    `json:"identity"`
	Until    time.Time `json:"until"`
}

// leaderView computes leaderState from an Elector. It is safe for
// concurrent use.
type leaderView struct {
	e     *relect.Elector
	lease string
	// validFor caps each ValidUntil handed out at that long after it is
	// computed; zero: no cap (the term's own validity).
	validFor time.Duration

	// mu guards the fields below, and makes computing a state and recording
	// the validity it hands out one step (see handedOutUntil).
	mu sync.Mutex
	// termCtx is the context of the term whose work is running, nil
	// between terms; a state says leading only while it is not done.
	termCtx context.Context
	// observedLeader and observedTerm are the last leader observed in the
	// events and its term number.
	observedLeader string
	observedTerm   int64
	// handedOut is the latest ValidUntil in a state returned, with its
	// monotonic clock reading.
	handedOut time.Time

	// changed is signalled (1-buffered, never blocking) when a term's work
	// begins or ends: the state changed without an event, and the state
	// file is rewritten at once (pump).
	changed chan struct{}
}

// newLeaderView returns the view of e's election of lease, handing out
// validities of at most validFor (zero: the term's own).
func newLeaderView(e *relect.Elector, lease leaseRef, validFor time.Duration) *leaderView {
	return &leaderView{e: e, lease: lease.String(), validFor: validFor, changed: make(chan struct{}, 1)}
}

// signal wakes pump; it never blocks.
func (v *leaderView) signal() {
	select {
	case v.changed <- struct{}{}:
	default:
	}
}

// observe takes the term numbers from events.
func (v *leaderView) observe(ev relect.Event) {
	switch ev.Kind {
	case relect.EventNewLeader, relect.EventStartedLeading:
		v.mu.Lock()
		v.observedLeader, v.observedTerm = ev.Leader, ev.Term
		v.mu.Unlock()
	}
}

// begin is called by a term's work when it starts, with the term's
// context; end when it has been told to stop. end returns the latest
// validity handed out: after end, no state says leading for this term.
func (v *leaderView) begin(ctx context.Context) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.termCtx = ctx
	v.signal()
}

func (v *leaderView) end() (handedOutUntil time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.termCtx = nil
	v.signal()
	return v.handedOut
}

// state returns the current state and records the validity it hands out.
// Leading needs both relect's IsLeader (from one Stats snapshot) and the
// term's work not yet told to stop: relect cancels the term's context a
// moment before IsLeader turns false in some cases, and a state must never
// hand out a validity after end has read the latest.
func (v *leaderView) state() leaderState {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := v.e.Stats()
	st := leaderState{Lease: v.lease, Identity: s.Identity, Leader: s.Leader}
	if s.Leader != "" && s.Leader == v.observedLeader {
		// Leader is read from the Elector, the term from its events, which
		// come a moment later.
		term := v.observedTerm
		st.Term = &term
	}
	if s.Leading && v.termCtx != nil && v.termCtx.Err() == nil {
		st.Leading, st.Term, st.Fence = true, &s.Term, string(s.Fence)
		valid := s.ValidUntil
		if capped := time.Now().Add(v.validFor); v.validFor > 0 && capped.Before(valid) {
			valid = capped
		}
		until := valid.Round(0).UTC().Truncate(time.Millisecond)
		st.ValidUntil = &until
		if valid.After(v.handedOut) {
			v.handedOut = valid
		}
		if s.WorkStuck {
			since := s.WorkStuckSince.Round(0).UTC().Truncate(time.Millisecond)
			st.WorkStuck, st.WorkStuckSince = true, &since
		}
		if s.WorkStreak > 0 {
			hold := s.WorkHoldUntil.Round(0).UTC().Truncate(time.Millisecond)
			st.WorkStreak, st.WorkHoldUntil = s.WorkStreak, &hold
		}
	}
	st.WorkCheckFailures = s.WorkCheckFailures
	for _, id := range slices.Sorted(maps.Keys(s.WorkCooling)) {
		st.WorkCooling = append(st.WorkCooling, coolingState{Identity: id, Until: s.WorkCooling[id].Round(0).UTC().Truncate(time.Millisecond)})
	}
	return st
}

// beat records a beat of the program (sidecar's POST /beat) for the term
// whose work is running (relect.Beat), and returns the state after it.
// counted is false when this candidate does not lead: then no beat was
// recorded, or it came as the term ended and counts for nothing.
func (v *leaderView) beat() (st leaderState, counted bool) {
	v.mu.Lock()
	ctx := v.termCtx
	v.mu.Unlock()
	counted = ctx != nil && ctx.Err() == nil && relect.Beat(ctx)
	st = v.state()
	return st, counted && st.Leading
}

// stateFile keeps a file holding the latest leaderState, rewritten
// atomically (a temporary file in the same directory, renamed over it) so
// that readers never see a partial one. With shards it holds them too
// (fileState).
type stateFile struct {
	path   string
	shards *shardView // nil without shards
	last   []byte
}

// fileState is what the sidecar's --file holds: leaderState, and with
// shards "shards", the list GET /shards serves ([] when none is held),
// each shard's valid_until handed out as an answer of GET /shards is.
type fileState struct {
	leaderState
	Shards *[]heldShard `json:"shards,omitempty"`
}

// write writes st, and the shards held now, unless the file already holds
// them.
func (f *stateFile) write(st leaderState) error {
	fs := fileState{leaderState: st}
	if f.shards != nil {
		held := f.shards.state().Shards
		fs.Shards = &held
	}
	data, err := json.Marshal(fs)
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if bytes.Equal(data, f.last) {
		return nil
	}
	if err := writeAtomic(f.path, data); err != nil {
		return fmt.Errorf("--file: %w", err)
	}
	f.last = data
	return nil
}

func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
