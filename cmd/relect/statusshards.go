package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/relect/relect/operator"
)

// What relect status shows of an election's shards (relect.ShardOptions):
// the shard table's assignment and each shard's own Lease, as
// operator.ListShards reads them. An election without shards shows
// nothing of them.

// shardLister reads the shards of the Lease (operator.ListShards).
type shardLister func(ctx context.Context) (operator.ShardTable, error)

// shardStatus is one shard (-o json: "shards").
type shardStatus struct {
	// Shard is the shard's name, Lease its Lease's (in the election's
	// namespace).
	Shard string `json:"shard"`
	Lease string `json:"lease"`
	// State is the shard Lease's, as the election's: held, expired,
	// released, no-holder or missing.
	State  string `json:"state"`
	Holder string `json:"holder"`
	// Assigned is the holder the shard table assigns, Taker the candidate
	// it asks to follow the shard's Lease and take it once its holder
	// releases it or its lease expires; absent for none.
	Assigned string `json:"assigned,omitempty"`
	Taker    string `json:"taker,omitempty"`
	// Failures is how many times in a row the shard's work failed (its
	// holder gave it up: stuck, or its Run returned or panicked), as the
	// table says; absent for a healthy shard.
	Failures int `json:"failures,omitempty"`
	// Term is the shard Lease's leaseTransitions; Fence its holder's
	// term's fencing token as published (absent if none).
	Term  int32  `json:"term"`
	Fence string `json:"fence,omitempty"`
	// Valid and Expires: renew time + leaseDurationSeconds against this
	// machine's clock, at the shard table's time (an estimate that
	// assumes synchronized clocks).
	Valid     bool       `json:"valid"`
	RenewTime *time.Time `json:"renew_time,omitempty"`
	Expires   *time.Time `json:"expires,omitempty"`
}

// shardTableStatus is the shard table (-o json: "shard_table").
type shardTableStatus struct {
	// Time is when the shards were read and their validity judged: with
	// --watch, when they were last read, which may be before the row's.
	Time time.Time `json:"time"`
	// Found: the shard table Lease exists and carries a table.
	Found bool `json:"found"`
	// Writer is the leader that last wrote the table, Term its term,
	// WrittenAt when (its clock).
	Writer    string     `json:"writer,omitempty"`
	Term      int32      `json:"term"`
	WrittenAt *time.Time `json:"written_at,omitempty"`
	// Out are the candidates left out: given no shard until their
	// registration changes (they failed to renew, or to take, a shard).
	Out []string `json:"out,omitempty"`
	// Differ are the candidates whose shard set differs from the
	// leader's, with how many shards each runs; Set how many the leader
	// runs (absent when every candidate runs its set).
	Differ map[string]int `json:"differ,omitempty"`
	Set    int            `json:"set,omitempty"`
}

// withShards adds to st the shards t shows (nothing for an election
// without shards), or why they are not known (err: reading them failed),
// and marks the candidates of st (withCandidates, called before) that
// the table leaves out.
func withShards(st leaseStatus, t operator.ShardTable, err error) leaseStatus {
	if err != nil {
		st.ShardsError = err.Error()
		return st
	}
	if !t.HasShards() {
		return st
	}
	tab := &shardTableStatus{Time: t.At, Found: t.Found, Writer: t.Writer, Term: t.Term, Out: t.Out,
		Differ: t.Differ, Set: t.Set}
	for i, c := range st.Candidates {
		st.Candidates[i].LeftOut = slices.Contains(t.Out, c.Identity)
	}
	if !t.WrittenAt.IsZero() {
		at := t.WrittenAt.UTC()
		tab.WrittenAt = &at
	}
	st.ShardTable = tab
	st.Shards = []shardStatus{}
	for _, s := range t.Shards {
		ss := shardStatus{Shard: s.Name, Lease: s.Lease, Holder: s.Holder, Assigned: s.Assigned, Taker: s.Taker,
			Failures: s.Failures, Term: s.Term, Fence: string(s.Fence), Valid: s.Valid}
		switch {
		case !s.Exists:
			ss.State = stateMissing
		case s.Released:
			ss.State = stateReleased
		case s.Holder == "":
			ss.State = stateNoHolder
		case s.Valid:
			ss.State = stateHeld
		default:
			ss.State = stateExpired
		}
		if !s.RenewTime.IsZero() {
			rt := s.RenewTime.UTC()
			ss.RenewTime = &rt
		}
		if !s.Expires.IsZero() {
			ex := s.Expires.UTC()
			ss.Expires = &ex
		}
		st.Shards = append(st.Shards, ss)
	}
	return st
}

// printShards prints st's shards for a table: a summary line, a row per
// shard and the candidates left out; only why they are not known if they
// are not; nothing for an election without shards.
func printShards(w io.Writer, st leaseStatus) {
	if st.ShardsError != "" {
		fmt.Fprintf(w, "shards: not known (%s)\n", st.ShardsError)
		return
	}
	if st.ShardTable == nil {
		return
	}
	fmt.Fprintln(w, shardsSummary(st))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SHARD\tSTATE\tHOLDER\tASSIGNED\tTAKER\tTERM\tFENCE\tVALID\tEXPIRES\tWORK")
	for _, s := range st.Shards {
		valid := "-"
		switch {
		case s.Holder != "" && s.Valid:
			valid = "yes*"
		case s.Holder != "":
			valid = "no"
		}
		expires := "-"
		if s.Expires != nil {
			expires = relative(st.ShardTable.Time, *s.Expires)
		}
		term := "-"
		if s.State != stateMissing {
			term = fmt.Sprint(s.Term)
		}
		fmt.Fprintln(tw, strings.Join([]string{s.Shard, s.State, orDash(s.Holder), orDash(s.Assigned), orDash(s.Taker), term,
			orDash(s.Fence), valid, expires, shardWork(s)}, "\t"))
	}
	tw.Flush()
	if len(st.ShardTable.Out) > 0 {
		fmt.Fprintf(w, "left out (given no shard until their registration changes): %s\n", strings.Join(st.ShardTable.Out, ", "))
	}
	if d := st.ShardTable.Differ; len(d) > 0 {
		var parts []string
		for _, id := range slices.Sorted(maps.Keys(d)) {
			parts = append(parts, fmt.Sprintf("%s runs %d", id, d[id]))
		}
		fmt.Fprintf(w, "shard sets differ (the leader runs %d shards; each candidate is given only shards it runs): %s\n",
			st.ShardTable.Set, strings.Join(parts, ", "))
	}
}

// shardsSummary is the shards' first line: how many, whose table, who
// holds how many, how many are held by nobody valid (and of those, how
// many the table assigns), and how many held ones the table moves
// (assigned to another than their holder).
func shardsSummary(st leaseStatus) string {
	t := st.ShardTable
	var b strings.Builder
	fmt.Fprintf(&b, "shards: %d", len(st.Shards))
	switch {
	case !t.Found && t.Writer == "":
		b.WriteString(", no shard table")
	case !t.Found:
		fmt.Fprintf(&b, ", the shard table of %s unreadable", t.Writer)
	default:
		fmt.Fprintf(&b, ", table by %s (term %d)", t.Writer, t.Term)
	}
	holds, order := map[string]int{}, []string{}
	free, waiting, moving := 0, 0, 0
	for _, s := range st.Shards {
		switch {
		case s.State != stateHeld:
			free++
			if s.Assigned != "" {
				waiting++
			}
		default:
			if holds[s.Holder] == 0 {
				order = append(order, s.Holder)
			}
			holds[s.Holder]++
			if s.Assigned != "" && s.Assigned != s.Holder {
				moving++
			}
		}
	}
	var parts []string
	for _, h := range order {
		parts = append(parts, fmt.Sprintf("%s holds %d", h, holds[h]))
	}
	switch {
	case waiting > 0:
		parts = append(parts, fmt.Sprintf("%d held by nobody (%d assigned, not taken yet)", free, waiting))
	case free > 0:
		parts = append(parts, fmt.Sprintf("%d held by nobody", free))
	}
	if failing := countFailing(st.Shards); failing > 0 {
		parts = append(parts, fmt.Sprintf("%d whose work keeps failing", failing))
	}
	if moving > 0 {
		parts = append(parts, fmt.Sprintf("%d assigned to another than its holder", moving))
	}
	if len(parts) > 0 {
		b.WriteString(": " + strings.Join(parts, ", "))
	}
	return b.String()
}

// shardsKey is what the shards of st show but times, which change at
// every renewal: a watch prints them again when it changes. "" for an
// election without shards.
func shardsKey(st leaseStatus) string {
	if st.ShardTable == nil && st.ShardsError == "" {
		return ""
	}
	type row struct {
		Shard, State, Holder, Assigned, Taker, Fence string
		Failures                                     int
	}
	rows := []row{}
	for _, s := range st.Shards {
		rows = append(rows, row{s.Shard, s.State, s.Holder, s.Assigned, s.Taker, s.Fence, s.Failures})
	}
	var t shardTableStatus
	if st.ShardTable != nil {
		t = *st.ShardTable
		t.Time, t.WrittenAt = time.Time{}, nil
	}
	key, _ := json.Marshal([]any{st.ShardsError, st.ShardTable != nil, t, rows})
	return string(key)
}

// shardsEstimated reports whether a shard of st shows a validity, which
// is an estimate (shardsFootnote).
func shardsEstimated(st leaseStatus) bool {
	for _, s := range st.Shards {
		if s.Holder != "" {
			return true
		}
	}
	return false
}

// shardsFootnote explains the shards' VALID column.
const shardsFootnote = "* estimate: a shard Lease's renewTime + leaseDurationSeconds against this machine's clock (assumes synchronized clocks)"

// shardsRefresh is how often at most --watch reads the shards again
// besides when it lists the candidates again: when it prints a row and
// they were read longer ago than this.
const shardsRefresh = 10 * time.Second

// shardWork is a shard's WORK column: "failing(k)" for a shard whose
// work failed k times in a row, "-" for a healthy one.
func shardWork(s shardStatus) string {
	if s.Failures > 0 {
		return fmt.Sprintf("failing(%d)", s.Failures)
	}
	return "-"
}

// countFailing counts the shards whose work keeps failing.
func countFailing(shards []shardStatus) (n int) {
	for _, s := range shards {
		if s.Failures > 0 {
			n++
		}
	}
	return n
}
