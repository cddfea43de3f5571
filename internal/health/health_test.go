package health

import (
	"errors"
	"testing"
	"time"
)

var (
	errOverrun = errors.New("overrun")
	errCutOff  = errors.New("cut off")
	errStuck   = errors.New("stuck work")
)

// source is a fixed Source.
type source struct {
	snap    Snapshot
	running bool
	shards  []Shard
}

func (s source) Snapshot(time.Time) (Snapshot, bool) { return s.snap, s.running }
func (s source) Shards(time.Time) []Shard            { return s.shards }

func TestJudge(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	o := Options{WorkStopTimeout: 10 * time.Second, CutOffAfter: 30 * time.Second, WorkStuckTimeout: time.Minute,
		ErrWorkOverrun: errOverrun, ErrCutOff: errCutOff}
	for _, tc := range []struct {
		name string
		src  source
		is   error
		want string
	}{
		{"healthy", source{running: true}, nil, ""},
		{"work stopping in time", source{snap: Snapshot{Working: true, WorkingTerm: 3, WorkingEnded: ago(10 * time.Second)}}, nil, ""},
		{"work overrun", source{snap: Snapshot{Working: true, WorkingTerm: 3, WorkingEnded: ago(11 * time.Second)}}, errOverrun,
			"overrun: term 3 ended 11s ago, OnStartedLeading has not returned (WorkStopTimeout 10s)"},
		{"shard overrun", source{shards: []Shard{
			{Name: "a", Snapshot: Snapshot{Working: true, WorkingTerm: 1, WorkingEnded: ago(5 * time.Second)}},
			{Name: "b", Snapshot: Snapshot{Working: true, WorkingTerm: 2, WorkingEnded: ago(12 * time.Second)}},
			{Name: "c", Snapshot: Snapshot{Working: true, WorkingTerm: 4, WorkingEnded: ago(20 * time.Second)}},
		}}, errOverrun, "overrun: shard b: term 2 ended 12s ago; shard c: term 4 ended 20s ago; ShardOptions.Run or Warm has not returned (WorkStopTimeout 10s)"},
		{"shard Warm overrun", source{shards: []Shard{
			{Name: "a", WarmCancelled: ago(10 * time.Second)},
			{Name: "b", WarmCancelled: ago(11 * time.Second)},
		}}, errOverrun, "overrun: shard b: Warm cancelled 11s ago; ShardOptions.Run or Warm has not returned (WorkStopTimeout 10s)"},
		{"stuck", source{snap: Snapshot{Stuck: errStuck, StuckAt: ago(61 * time.Second)}}, errStuck, "stuck work, for 1m1s (WorkStuckTimeout 1m0s)"},
		{"stuck, not for long", source{snap: Snapshot{Stuck: errStuck, StuckAt: ago(time.Minute)}}, nil, ""},
		{"cut off", source{running: true, snap: Snapshot{FailingSince: ago(31 * time.Second), LastContact: ago(40 * time.Second), ConsecutiveFailures: 7, Degraded: true}}, errCutOff,
			"cut off: calls failing for 31s (CutOffAfter 30s): 7 failures in a row, degraded true, last contact 2026-01-02T03:03:25Z, 40s ago"},
		{"cut off, never in contact", source{running: true, snap: Snapshot{FailingSince: ago(time.Hour), ConsecutiveFailures: 2}}, errCutOff,
			"cut off: calls failing for 1h0m0s (CutOffAfter 30s): 2 failures in a row, degraded false, last contact never"},
		{"failing, not for long", source{running: true, snap: Snapshot{FailingSince: ago(30 * time.Second)}}, nil, ""},
		{"failing, Run not active", source{snap: Snapshot{FailingSince: ago(time.Hour)}}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := o.judge(tc.src, now)
			if tc.is == nil {
				if err != nil {
					t.Fatalf("judge = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tc.is) || err.Error() != tc.want {
				t.Errorf("judge = %v\nwant %q, matching %v", err, tc.want, tc.is)
			}
		})
	}
	if err := Check(source{running: true}, o)(nil); err != nil {
		t.Errorf("Check of a healthy source = %v", err)
	}
}
