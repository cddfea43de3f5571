// Package history is the record format a candidate process (e2e/cmd/candidate)
// writes about its own leadership, one JSON object per line, and the safety
// checker the e2e tests run over the histories of all candidates of a Lease:
// the leader intervals the samples prove (Intervals, with the bounds of
// real-time sampling, SurelyFrom and SurelyUntil), checked for overlaps and
// for fencing tokens that go back by the checks the fault simulation shares
// (internal/leadership of the root module).
//
// Every timestamp is wall-clock time in Unix nanoseconds taken on the same
// machine, so the timestamps of different candidates can be compared
// directly.
package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Record kinds.
const (
	// KindStart is the first record: Identity, Mode, PID.
	KindStart = "start"
	// KindOn: the View turned true at T (Term when known). A sampled view
	// read true in [T, Until]: the start and the end of the sample, which
	// differ by how long the sampler took (longer when it was starved).
	KindOn = "on"
	// KindOff: the View turned false; T is the start of the first sample
	// that saw it false, LastTrue the end of the last one that saw it true
	// and LastTrueFrom that sample's start (both equal to T for views that
	// are not sampled).
	KindOff = "off"
	// KindGap: two consecutive samples of the View were From and T, further
	// apart than the sampler's gap threshold (the process was stopped or
	// starved); Before and After are the values sampled at From and T.
	KindGap = "gap"
	// KindEvent: a relect Event (Event, Term, Leader, Err; T is the event's
	// own time), or, in clientgo mode, a client-go callback.
	KindEvent = "event"
	// KindExit is the last record, written after Run returned: Err is what
	// it returned, Dropped the events lost to a full Events buffer, Calls
	// and BucketWait relect's call counters.
	KindExit = "exit"
)

// MaxSampleGap is the longest pause between two samples of a view that the
// sampler treats as normal; a longer one is recorded as a gap (the process
// was stopped or starved).
const MaxSampleGap = 50 * time.Millisecond

// Views of leadership a candidate records.
const (
	// ViewRelect is relect's IsLeader, sampled every few milliseconds.
	ViewRelect = "relect"
	// ViewCtx is client-go's OnStartedLeading context: on when the callback
	// starts, off when its context is done.
	ViewCtx = "ctx"
	// ViewIsLeader is client-go's LeaderElector.IsLeader, sampled.
	ViewIsLeader = "isleader"
	// ViewShard is one shard's work context (relect's ShardOptions.Run):
	// on when Run is called, off when its context is done, before Run
	// returns; Shard names the shard. Each shard is a view of its own
	// (ShardIntervals).
	ViewShard = "shard"
)

// Record is one line of a history file. Fields that do not apply to a Kind
// are omitted.
type Record struct {
	T    int64  `json:"t"` // wall clock, Unix ns
	Kind string `json:"kind"`

	Identity string `json:"identity,omitempty"` // start
	Mode     string `json:"mode,omitempty"`     // start: "relect" or "clientgo"
	PID      int    `json:"pid,omitempty"`      // start

	View         string `json:"view,omitempty"`           // on, off, gap
	Shard        string `json:"shard,omitempty"`          // on, off of ViewShard: the shard
	Term         int64  `json:"term,omitempty"`           // on, off, event
	Fence        string `json:"fence,omitempty"`          // on (relect view), event: the term's relect.Fence
	Until        int64  `json:"until,omitempty"`          // on
	LastTrue     int64  `json:"last_true,omitempty"`      // off
	LastTrueFrom int64  `json:"last_true_from,omitempty"` // off
	From         int64  `json:"from,omitempty"`           // gap
	Before       bool   `json:"before,omitempty"`         // gap
	After        bool   `json:"after,omitempty"`          // gap

	Event   string `json:"event,omitempty"`   // event: relect's EventKind.String(), a client-go callback name, or "yield" or "handover" (a call the candidate made)
	Leader  string `json:"leader,omitempty"`  // event; for "handover", the identity named
	Err     string `json:"err,omitempty"`     // event, exit
	Delay   int64  `json:"delay,omitempty"`   // event: backoff, or how long a "yield" or "handover" call took, ns
	Dropped uint64 `json:"dropped,omitempty"` // exit
	// Successors are, with relect's new-leader event, the successors the
	// candidate knew of then, first in line first (Elector.Candidates).
	Successors []string `json:"successors,omitempty"`
	// Shards are, with the event "shards", what Elector.Shards returned
	// (each change of it is recorded; empty for none).
	Shards []string `json:"shards,omitempty"`
	// Calls counts the Lease API calls by "verb/result" (exit, relect
	// mode: relect's Stats.Calls); BucketWait is the total time they
	// waited on relect's token bucket, in ns.
	Calls      map[string]uint64 `json:"calls,omitempty"`
	BucketWait int64             `json:"bucket_wait,omitempty"`
	// Heap and Goroutines are a process's heap in use after a GC, in
	// bytes, and its goroutines (event "mem" of e2e/cmd/ctrlrt-replica).
	Heap       uint64 `json:"heap,omitempty"`
	Goroutines int    `json:"goroutines,omitempty"`
	// Range is, with a ViewShard "on" of e2e/cmd/rangeinformer, the
	// shard's hash range as the apiserver's ShardSelector spells it.
	Range string `json:"range,omitempty"`
	// Objects, Kept and Bytes are what e2e/cmd/rangeinformer's informer
	// of one range had received so far (event "synced", and a ViewShard
	// "off"): the objects the apiserver sent (list items and watch
	// events, bookmarks not counted), those of them in the range, and
	// the response bytes (its client asks for no gzip: the bytes on the
	// wire).
	Objects int64 `json:"objects,omitempty"`
	Kept    int64 `json:"kept,omitempty"`
	Bytes   int64 `json:"bytes,omitempty"`
}

// Time returns T as a time.Time.
func (r Record) Time() time.Time { return time.Unix(0, r.T) }

// Writer appends records to a history file, one write per line so that a
// reader tailing the file, or a SIGKILL, never sees half a record. It is safe
// for concurrent use.
type Writer struct {
	mu     sync.Mutex
	w      io.Writer
	err    error
	exited bool // a KindExit record was written
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write stamps r with the current time if r.T is zero and appends it. The
// first error sticks and is returned by every later call. A record written
// after a KindExit one is dropped: the exit record is the last, though
// client-go calls OnNewLeader on a goroutine of its own that may run after
// its Run returned (seen in TestClientGoPausedLeader).
func (w *Writer) Write(r Record) error {
	if r.T == 0 {
		r.T = time.Now().UnixNano()
	}
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil && !w.exited {
		_, w.err = w.w.Write(line)
		w.exited = r.Kind == KindExit
	}
	return w.err
}

// Parse reads every complete line of data. A trailing line without a newline
// (a record being written) is ignored.
func Parse(data []byte) ([]Record, error) {
	var recs []Record
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		line := data[:i]
		data = data[i+1:]
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r Record
		if err := json.Unmarshal(line, &r); err != nil {
			return recs, fmt.Errorf("history: bad line %q: %w", line, err)
		}
		recs = append(recs, r)
	}
	return recs, nil
}

// ReadFile parses the history file at path.
func ReadFile(path string) ([]Record, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data)
}
