package main

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/shardrange"
	"github.com/spf13/pflag"
)

// Shards from the command line (relect.Options.Shards): --shards or
// --shard-names make this candidate take part in the election's shards,
// each an election of its own that the leader assigns (docs/command.md,
// "Shards"). run runs CMD once per shard it holds (runner.runShard), the
// sidecar holds each shard for its program (holdShard), and both serve
// GET /shards (shardView). The flags are the table shardFlags (flags.go).

// shardsOn reports whether the flags turn shards on.
func (s *settings) shardsOn() bool { return s.opts.Shards.Count != 0 || len(s.opts.Shards.Names) > 0 }

// resolveShards checks the shard flags of fs as far as the library does
// not — no shard flag without shards, no empty --shard-names, nothing that
// would silently do nothing with shards — and, with shards on, sets a
// stand-in Shards.Run (runElection and sidecarElection set the real one)
// and moves the work liveness the flags give (--check, --check-url and
// theirs; resolveWork must have run) to each shard's work (Shards.Work):
// with shards, the work is the shards'. It returns every problem found.
func (s *settings) resolveShards(fs *pflag.FlagSet) []error {
	var errs []error
	if fs.Changed("shard-names") && len(s.opts.Shards.Names) == 0 {
		errs = append(errs, usagef("--shard-names is empty: want a comma-separated list of shard names (leave it out for no shards)"))
	}
	if !s.shardsOn() {
		for _, name := range []string{"shard-weight", "shard-join-delay", "shard-ranges"} {
			if fs.Changed(name) {
				errs = append(errs, usagef("--%s is set, but there are no shards: give --shards=N (N ≥ 1) or --shard-names", name))
			}
		}
		// The flags' defaults (--shard-weight is 1) are no request for
		// shards: relect.New refuses a ShardOptions with a field set but
		// neither Count nor Names.
		s.opts.Shards = relect.ShardOptions{}
		return errs
	}
	if s.opts.Standby {
		errs = append(errs, usagef("--standby and --shards (or --shard-names) are both given: a standby takes no part in shards"))
	}
	if s.opts.Work.BeatWindow > 0 {
		errs = append(errs, usagef("--beat-window and --shards (or --shard-names) are both given: beats are not served per shard; use --check or --check-url, which apply to each shard"))
	}
	if fs.Changed("work-stuck-timeout") {
		errs = append(errs, usagef("--work-stuck-timeout is set, but with --shards (or --shard-names) no work leads on stuck: the work check applies to each shard, whose holder releases it when its work is stuck"))
	}
	s.opts.Shards.Run = func(context.Context) {} // a stand-in, for relect.New to check the flags
	s.opts.Shards.Work, s.opts.Work = s.opts.Work, relect.WorkOptions{}
	return errs
}

// shardsAttr is what the "campaigning" log line says of shards: how many,
// or their names; nil without shards.
func shardsAttr(s settings) any {
	switch {
	case len(s.opts.Shards.Names) > 0:
		return s.opts.Shards.Names
	case s.opts.Shards.Count != 0:
		return s.opts.Shards.Count
	}
	return nil
}

// shardsState is what GET /shards serves: the shards this candidate holds
// now.
type shardsState struct {
	// Lease is "namespace/name", the election's; Identity this
	// candidate's holder identity.
	Lease    string `json:"lease"`
	Identity string `json:"identity"`
	// Shards are the shards this candidate holds now, in the order of
	// --shards or --shard-names; [] when none.
	Shards []heldShard `json:"shards"`
}

// heldShard is one shard held (shardsState.Shards).
type heldShard struct {
	// Shard is its name: "0" to "N-1" with --shards, else one of
	// --shard-names.
	Shard string `json:"shard"`
	// Term is the shard's term number (its Lease's leaseTransitions, for
	// people and logs), Fence the term's fencing token (as RELECT_FENCE
	// of run's CMD for the shard): a decimal integer larger than every
	// earlier term's of the same shard; absent if the apiserver gave none.
	Term  int64  `json:"term"`
	Fence string `json:"fence,omitempty"`
	// Range is, with --shard-ranges, the shard's range of the data as the
	// ShardSelector of a Kubernetes list or watch (as RELECT_SHARD_RANGE of
	// run's CMD for the shard); absent without.
	Range string `json:"range,omitempty"`
	// Failures is, for a shard whose work keeps failing (a holder gave it
	// up: its CMD exited, or its check failed), how many times in a row,
	// as the shard table says (relect.Stats.ShardFailing) and relect
	// status shows it (WORK "failing(k)"); absent for a healthy shard.
	Failures int `json:"failures,omitempty"`
	// ValidUntil (sidecar only) is when the program must have stopped
	// acting on the shard unless it asked again: at most the shard
	// validity (shardValidFor) after the answer. The sidecar keeps the
	// shard until the latest ValidUntil it handed out has passed.
	ValidUntil *time.Time `json:"valid_until,omitempty"`
}

// shardView computes shardsState from an Elector and the shard terms
// whose work runs. It is safe for concurrent use.
type shardView struct {
	e        *relect.Elector
	lease    string
	identity string
	// validFor is how long after an answer each shard's validity lasts
	// (sidecar); zero: none handed out (run, whose CMD relect stops).
	validFor time.Duration

	// mu guards terms, and makes computing a state and recording the
	// validities it hands out one step (see end).
	mu sync.Mutex
	// terms are the shard terms whose work runs, by shard: a state lists
	// a shard only while its term's context is not done.
	terms map[string]*shardTerm
	// changed, if set, is called when a shard term's work begins or ends
	// (the sidecar's leaderView.signal: the state file is rewritten at
	// once). It must not block.
	changed func()
}

// shardTerm is one shard term whose work runs (shardView.terms).
type shardTerm struct {
	ctx   context.Context
	term  int64
	fence relect.Fence
	rng   string // the range's ShardSelector, "" without --shard-ranges
	// handedOut is the latest validity handed out for it, with its
	// monotonic clock reading.
	handedOut time.Time
}

// newShardView returns the view of e's shards of lease, handing out
// validities of validFor (zero: none).
func newShardView(e *relect.Elector, lease leaseRef, validFor time.Duration) *shardView {
	return &shardView{e: e, lease: lease.String(), identity: e.Identity(), validFor: validFor, terms: map[string]*shardTerm{}}
}

// begin is called by a shard term's work when it starts, with the term's
// context (ShardOptions.Run's); end when it has been told to stop. end
// returns the latest validity handed out for it: after end, no state lists
// the shard for that term. A shard's next term begins only after its work
// for the last one returned (the library's rule), so one term per shard
// at most is recorded.
func (v *shardView) begin(ctx context.Context) (shard string) {
	shard, _ = relect.ShardFromContext(ctx)
	term, _ := relect.TermFromContext(ctx)
	fence, _ := relect.FenceFromContext(ctx)
	rng, _ := shardrange.FromContext(ctx)
	v.mu.Lock()
	v.terms[shard] = &shardTerm{ctx: ctx, term: term, fence: fence, rng: rng.Selector()}
	v.mu.Unlock()
	v.signal()
	return shard
}

func (v *shardView) end(shard string) (handedOutUntil time.Time) {
	v.mu.Lock()
	t := v.terms[shard]
	delete(v.terms, shard)
	v.mu.Unlock()
	v.signal()
	if t == nil {
		return time.Time{}
	}
	return t.handedOut
}

func (v *shardView) signal() {
	if v.changed != nil {
		v.changed()
	}
}

// state returns the shards held now and records the validities it hands
// out. A shard is held when the library says so (Elector.Shards: its
// term serves) and its term's work has not been told to stop, as
// leaderView judges the election's term.
func (v *shardView) state() shardsState {
	failing := v.e.Stats().ShardFailing
	v.mu.Lock()
	defer v.mu.Unlock()
	st := shardsState{Lease: v.lease, Identity: v.identity, Shards: []heldShard{}}
	now := time.Now()
	for _, sh := range v.e.Shards() {
		t := v.terms[sh]
		if t == nil || t.ctx.Err() != nil {
			continue
		}
		h := heldShard{Shard: sh, Term: t.term, Fence: string(t.fence), Range: t.rng, Failures: failing[sh]}
		if v.validFor > 0 {
			valid := now.Add(v.validFor)
			until := valid.Round(0).UTC().Truncate(time.Millisecond)
			h.ValidUntil = &until
			if valid.After(t.handedOut) {
				t.handedOut = valid
			}
		}
		st.Shards = append(st.Shards, h)
	}
	return st
}

// handleShards serves GET /shards from v; without shards (v nil) it
// answers 404, saying so.
func handleShards(v *shardView) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if v == nil {
			http.Error(w, "relect: started without --shards or --shard-names: this candidate takes part in no shards\n", http.StatusNotFound)
			return
		}
		writeJSON(w, http.StatusOK, v.state())
	}
}

// holdShard is the sidecar's work for one shard term: nothing, until the
// term ends; then it keeps the shard until the latest validity handed out
// for it has passed — relect releases the shard's Lease only after it
// returns — so that a program acting on the shard before the valid_until
// it read never overlaps the shard's next holder. A second stop signal
// (hurry) does not shorten the wait.
func holdShard(ctx context.Context, v *shardView, log *slog.Logger, hurry <-chan struct{}) {
	sh := v.begin(ctx)
	<-ctx.Done()
	until := v.end(sh)
	waitOut(until, log, hurry, "shard's term ended: keeping the shard until the validity handed out has passed", "shard", sh)
}
