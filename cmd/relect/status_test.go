package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/operator"
	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var jobLease = leaseRef{namespace: "default", name: "job"}

func lease(holder string, durationSeconds, transitions int32, renewed time.Time) *coordinationv1.Lease {
	acquired := metav1.NewMicroTime(renewed.Add(-time.Minute))
	renew := metav1.NewMicroTime(renewed)
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "job"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: &holder, LeaseDurationSeconds: &durationSeconds, LeaseTransitions: &transitions,
			AcquireTime: &acquired, RenewTime: &renew,
		},
	}
}

func TestStatusOf(t *testing.T) {
	now := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		lease      *coordinationv1.Lease
		observedAt time.Time
		state      string
		valid      bool
		basis      string
		expires    time.Time
	}{
		{"held", lease("a", 15, 3, now.Add(-2*time.Second)), time.Time{}, stateHeld, true, "renew-time", now.Add(13 * time.Second)},
		{"expired", lease("a", 15, 3, now.Add(-20*time.Second)), time.Time{}, stateExpired, false, "renew-time", now.Add(-5 * time.Second)},
		{"released", lease("", 1, 3, now.Add(-time.Second)), time.Time{}, stateReleased, false, "", time.Time{}},
		{"emptied by hand", lease("", 15, 3, now.Add(-time.Second)), time.Time{}, stateNoHolder, false, "", time.Time{}},
		{"missing", nil, time.Time{}, stateMissing, false, "", time.Time{}},
		// As a follower judges it: from the local observation, whatever the
		// renew time says.
		{"old record just observed", lease("a", 15, 3, now.Add(-time.Hour)), now.Add(-time.Second), stateHeld, true, "observed", now.Add(14 * time.Second)},
		{"record observed long ago", lease("a", 15, 3, now), now.Add(-16 * time.Second), stateExpired, false, "observed", now.Add(-time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := statusOf(jobLease, tc.lease, now, tc.observedAt)
			assert.Equal(t, "default/job", st.Lease)
			assert.Equal(t, tc.state, st.State)
			assert.Equal(t, tc.valid, st.Valid)
			assert.Equal(t, tc.basis, st.ValidityBasis)
			assert.Equal(t, tc.lease != nil, st.Exists)
			if tc.expires.IsZero() {
				assert.Nil(t, st.Expires)
			} else if assert.NotNil(t, st.Expires) {
				assert.Equal(t, tc.expires, *st.Expires)
			}
			assert.False(t, st.CandidatesKnown)
			if tc.lease != nil {
				assert.Equal(t, int32(3), st.Term)
				require.NotNil(t, st.RenewAgeSeconds)
			}
		})
	}
}

func TestStatusTable(t *testing.T) {
	now := time.Now()
	var out bytes.Buffer
	p := newStatusPrinter(&out, "table", false)
	p.print(statusOf(jobLease, lease("pod-a", 15, 4, now.Add(-2*time.Second)), now, time.Time{}))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 4, out.String())
	assert.Equal(t, []string{"LEASE", "STATE", "HOLDER", "TERM", "FENCE", "RENEWED", "VALID", "EXPIRES", "WORK"}, strings.Fields(lines[0]))
	assert.Equal(t, []string{"default/job", "held", "pod-a", "4", "-", "2s", "ago", "yes*", "in", "13s", "-"}, strings.Fields(lines[1]))
	assert.Equal(t, "candidates: not listed", lines[2])

	out.Reset()
	p = newStatusPrinter(&out, "table", false)
	renewed := now.Add(-time.Minute)
	p.print(withCandidates(statusOf(jobLease, lease("pod-a", 15, 4, now.Add(-2*time.Second)), now, time.Time{}), []relect.Candidate{
		{Identity: "pod-a", Leader: true, RenewedAt: renewed},
		{Identity: "pod-b", Priority: 5, Successor: 1},
		{Identity: "pod-c", Standby: true},
	}, nil))
	assert.Contains(t, out.String(), "candidates: pod-a (leader, registered 1m0s ago); pod-b (next #1, priority 5); pod-c (standby)")
	out.Reset()
	p = newStatusPrinter(&out, "table", false)
	p.print(withCandidates(statusOf(jobLease, nil, now, time.Time{}), nil, errors.New("forbidden")))
	assert.Contains(t, out.String(), "candidates: not known (forbidden)")
	assert.Contains(t, lines[3], "estimate")

	out.Reset()
	p = newStatusPrinter(&out, "json", false)
	p.print(statusOf(jobLease, nil, now, time.Time{}))
	var st map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &st))
	assert.Equal(t, map[string]any{
		"time": now.Format(time.RFC3339Nano), "lease": "default/job", "exists": false, "state": "missing",
		"holder": "", "term": 0.0, "lease_duration_seconds": 0.0, "valid": false,
		"candidates": nil, "candidates_known": false,
	}, st)
}

// lockedBuffer collects what watchStatus prints.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// statuses decodes the JSON lines printed so far.
func (l *lockedBuffer) statuses(t *testing.T) []leaseStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []leaseStatus
	dec := json.NewDecoder(bytes.NewReader(l.b.Bytes()))
	for dec.More() {
		var st leaseStatus
		require.NoError(t, dec.Decode(&st))
		out = append(out, st)
	}
	return out
}

// --watch prints the Lease on every change and when its validity, counted
// from the local observation, passes.
func TestWatchStatus(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	leases := api.Client("status").Clientset().CoordinationV1().Leases("default")
	var out, errOut lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	noCandidates := func(context.Context) ([]relect.Candidate, error) { return nil, nil }
	go func() {
		done <- watchStatus(ctx, leases, noCandidates, nil, jobLease, time.Second, newStatusPrinter(&out, "json", true), &errOut)
	}()
	defer func() {
		cancel()
		require.NoError(t, <-done)
		assert.Empty(t, errOut.b.String())
	}()
	last := func() leaseStatus {
		sts := out.statuses(t)
		if len(sts) == 0 {
			return leaseStatus{}
		}
		return sts[len(sts)-1]
	}
	eventually(t, "missing", func() bool { return last().State == stateMissing })

	api.Put(lease("a", 1, 0, time.Now().Add(-time.Hour))) // an old record, seen now
	eventually(t, "held by a", func() bool { return last().State == stateHeld && last().Holder == "a" })
	held := last()
	assert.Equal(t, "observed", held.ValidityBasis)
	eventually(t, "expired a second after it was observed", func() bool { return last().State == stateExpired })
	assert.GreaterOrEqual(t, last().Time.Sub(*held.ObservedAt), time.Second)

	require.NoError(t, api.SetHolder("default", "job", "b"))
	eventually(t, "held by b", func() bool { return last().State == stateHeld && last().Holder == "b" })
	require.NoError(t, api.Delete("default", "job"))
	eventually(t, "missing again", func() bool { return last().State == stateMissing })
}

// --watch's table keeps its columns aligned from row to row: each row is
// printed as it comes, and a tabwriter flushed per row aligned each row
// alone, so that rows after the first were misaligned. It has a FENCE
// column (it had none: the fence was shown only by a single look).
func TestWatchTableStaysAligned(t *testing.T) {
	now := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	cands := []relect.Candidate{{Identity: "pod-a", Leader: true}, {Identity: "pod-bb", Successor: 1}}
	fenced := lease("pod-a", 15, 4, now.Add(-60*time.Millisecond))
	fenced.Annotations = map[string]string{"relect.io/fence": `{"holder":"pod-a","term":4,"fence":"1234567"}`}
	var out bytes.Buffer
	p := newStatusPrinter(&out, "table", true)
	for _, st := range []leaseStatus{
		statusOf(jobLease, fenced, now, now),
		statusOf(jobLease, lease("pod-bb", 15, 12, now.Add(-12345*time.Millisecond)), now.Add(time.Second), now),
		statusOf(jobLease, lease("", 1, 12, now), now.Add(2*time.Second), time.Time{}),
		statusOf(jobLease, nil, now.Add(3*time.Second), time.Time{}),
		statusOf(jobLease, lease("pod-a", 15, 13, now.Add(-59999*time.Millisecond)), now.Add(4*time.Second), now.Add(-16*time.Second)),
	} {
		p.print(withCandidates(st, cands, nil))
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, lines, 7, out.String())
	assert.True(t, strings.HasPrefix(lines[0], "candidates: pod-a (leader"), lines[0])
	header := lines[1]
	var starts []int
	for i := range header {
		if header[i] != ' ' && (i == 0 || header[i-1] == ' ') {
			starts = append(starts, i)
		}
	}
	require.Len(t, starts, 10, header)
	assert.Equal(t, []string{"TIME", "LEASE", "STATE", "HOLDER", "TERM", "FENCE", "RENEWED", "VALID", "EXPIRES", "WORK"}, strings.Fields(header))
	assert.Equal(t, "1234567", strings.Fields(lines[2])[5], "the fence of the first row")
	assert.Equal(t, "-", strings.Fields(lines[3])[5], "no fence published")
	for _, row := range lines[2:] {
		for _, at := range starts {
			if assert.Greater(t, len(row), at, "row %q shorter than the header %q", row, header) {
				assert.True(t, row[at] != ' ' && (at == 0 || row[at-1] == ' '), "a column of %q does not start where the header's does (%d)\n%s\n%s",
					row, at, header, row)
			}
		}
	}
}

// -o json --watch shows in each row the candidates as they are then: they
// are listed again when the holder changes. Every row repeated the list
// read at the start, so that a released Lease still showed its old leader
// as leading.
func TestWatchShowsTheLeaderOfEachRow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		api.PutReleased("default", "job")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		a, err := relect.New(relect.Options{Client: api.Client("a").Clientset(), Namespace: "default", Name: "job", Identity: "a",
			OnStartedLeading: func(ctx context.Context) { <-ctx.Done() }})
		require.NoError(t, err)
		aCtx, stopA := context.WithCancel(ctx)
		aDone := make(chan struct{})
		go func() { defer close(aDone); _ = a.Run(aCtx) }()
		time.Sleep(time.Minute) // a leads, and has registered
		require.True(t, a.IsLeader())

		cs := api.Client("status").Clientset()
		list := func(ctx context.Context) ([]relect.Candidate, error) {
			return operator.ListCandidates(ctx, cs, "default", "job")
		}
		var out, errOut lockedBuffer
		done := make(chan error, 1)
		go func() {
			done <- watchStatus(ctx, cs.CoordinationV1().Leases("default"), list, nil, jobLease, time.Second, newStatusPrinter(&out, "json", true), &errOut)
		}()
		synctest.Wait()
		last := func() leaseStatus {
			sts := out.statuses(t)
			require.NotEmpty(t, sts)
			return sts[len(sts)-1]
		}
		leaders := func(st leaseStatus) []string {
			var ids []string
			for _, c := range st.Candidates {
				if c.Leader {
					ids = append(ids, c.Identity)
				}
			}
			return ids
		}
		st := last()
		assert.Equal(t, stateHeld, st.State)
		assert.Equal(t, []string{"a"}, leaders(st))

		stopA() // a releases the lease
		<-aDone
		synctest.Wait()
		st = last()
		assert.Equal(t, stateReleased, st.State)
		assert.True(t, st.CandidatesKnown)
		assert.Empty(t, leaders(st), "a released Lease has no leader among its candidates: %+v", st.Candidates)

		cancel()
		require.NoError(t, <-done)
		assert.Empty(t, errOut.b.String())
	})
}

// A request pending for the holder (relect yield, relect handover) is
// shown on a line of its own and in -o json; a stale one — addressed to an
// earlier holder or term, which every candidate ignores — is not.
func TestStatusShowsThePendingRequest(t *testing.T) {
	now := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	withRequest := func(req string) *coordinationv1.Lease {
		l := lease("pod-a", 15, 4, now.Add(-2*time.Second))
		l.Annotations = map[string]string{"relect.io/request": req}
		return l
	}
	pendingHandOver := withRequest(`{"holder":"pod-a","term":4,"to":"pod-b","unregistered":true,"by":"alice","at":"2026-01-02T15:04:00Z"}`)
	var out bytes.Buffer
	newStatusPrinter(&out, "table", false).print(statusOf(jobLease, pendingHandOver, now, time.Time{}))
	assert.Contains(t, out.String(), "\nrequest pending: hand over to pod-b (unregistered), asked of pod-a (term 4) by alice at 2026-01-02T15:04:00Z\n")
	out.Reset()
	newStatusPrinter(&out, "json", false).print(statusOf(jobLease, pendingHandOver, now, time.Time{}))
	var st map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &st))
	assert.Equal(t, map[string]any{"action": "handover", "holder": "pod-a", "term": 4.0, "to": "pod-b", "unregistered": true,
		"by": "alice", "at": "2026-01-02T15:04:00Z"}, st["pending_request"])

	for name, req := range map[string]string{
		"an earlier holder's": `{"holder":"pod-z","term":4,"by":"alice","at":"2026-01-02T15:04:00Z"}`,
		"an earlier term's":   `{"holder":"pod-a","term":3,"by":"alice","at":"2026-01-02T15:04:00Z"}`,
		"malformed":           `{"holder":`,
	} {
		for _, output := range []string{"table", "json"} {
			out.Reset()
			newStatusPrinter(&out, output, false).print(statusOf(jobLease, withRequest(req), now, time.Time{}))
			assert.NotContains(t, out.String(), "request", "%s request, -o %s", name, output)
		}
	}
	out.Reset()
	newStatusPrinter(&out, "json", false).print(statusOf(jobLease, withRequest(`{"holder":"pod-a","term":4,"at":"2026-01-02T15:04:00Z"}`), now, time.Time{}))
	assert.Contains(t, out.String(), `"action": "yield"`)
}

// A relect holder's fence, published in the Lease for its holder and term,
// is shown; one left from an earlier holder or term is not.
func TestStatusShowsTheFence(t *testing.T) {
	now := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	withFence := func(mark string) *coordinationv1.Lease {
		l := lease("pod-a", 15, 4, now.Add(-2*time.Second))
		l.Annotations = map[string]string{"relect.io/fence": mark}
		return l
	}
	var out bytes.Buffer
	current := withFence(`{"holder":"pod-a","term":4,"fence":"8231"}`)
	newStatusPrinter(&out, "table", false).print(statusOf(jobLease, current, now, time.Time{}))
	assert.Equal(t, "8231", strings.Fields(strings.Split(out.String(), "\n")[1])[4], "the FENCE column:\n%s", out.String())
	out.Reset()
	newStatusPrinter(&out, "json", false).print(statusOf(jobLease, current, now, time.Time{}))
	assert.Contains(t, out.String(), `"fence": "8231"`)

	for name, mark := range map[string]string{
		"an earlier holder's": `{"holder":"pod-z","term":4,"fence":"8231"}`,
		"an earlier term's":   `{"holder":"pod-a","term":3,"fence":"8231"}`,
		"malformed":           `{"holder":`,
	} {
		for _, output := range []string{"table", "json"} {
			out.Reset()
			newStatusPrinter(&out, output, false).print(statusOf(jobLease, withFence(mark), now, time.Time{}))
			assert.NotContains(t, out.String(), "8231", "%s fence, -o %s", name, output)
		}
	}
}

// status shows what the Lease says of stuck work, as the library writes
// it: the streak of stuck handovers, the holder's hold and about when it
// ends, the candidates cooling with their seconds left as of the status.
// Two candidates whose work never beats: a is stuck and hands over to b,
// which must hold for the cooldown, stuck too. status showed a plain,
// healthy "held".
func TestStatusShowsStuckWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		api.PutReleased("default", "job")
		withWork := func(o *relect.Options) {
			o.Work = relect.WorkOptions{BeatWindow: 5 * time.Second, Cooldown: time.Minute}
		}
		a := startElector(t, api, "a", withWork)
		time.Sleep(time.Minute) // a leads, and has registered
		require.True(t, a.IsLeader())
		b := startElector(t, api, "b", withWork)
		require.Eventually(t, func() bool { return b.Stats().Leading && b.Stats().WorkStuck }, 5*time.Minute, 100*time.Millisecond,
			"b leads, stuck, holding")
		time.Sleep(10 * time.Second) // some renewals later
		bs := b.Stats()
		require.Equal(t, 1, bs.WorkStreak)

		now := time.Now()
		l := api.Lease("default", "job")
		st := statusOf(jobLease, l, now, time.Time{})
		assert.Equal(t, stateHeld, st.State)
		require.NotNil(t, st.Work, "the Lease says b holds: %v", l.Annotations)
		assert.Equal(t, int32(1), st.Work.Streak)
		require.Len(t, st.Work.Cooling, 1)
		c := st.Work.Cooling[0]
		assert.Equal(t, "a", c.Identity)
		assert.InDelta(t, bs.WorkHoldUntil.Sub(now).Seconds(), c.SecondsLeft, 1.5, "a cools as long as b holds")
		assert.Greater(t, c.SecondsLeft, 30.0)
		require.NotNil(t, st.Work.HoldUntil)
		assert.WithinDuration(t, bs.WorkHoldUntil, *st.Work.HoldUntil, 1500*time.Millisecond, "the hold's end, estimated from the Lease")

		var out bytes.Buffer
		newStatusPrinter(&out, "table", false).print(st)
		t.Logf("relect status of a holding leader:\n%s", out.String())
		lines := strings.Split(out.String(), "\n")
		assert.Equal(t, "streak 1, 1 cooling", strings.Join(strings.Fields(lines[1])[10:], " "), out.String())
		assert.Contains(t, out.String(), "\nwork: 1 stuck handover(s) in a row: b holds until about ")
		assert.Contains(t, out.String(), "cooling after a stuck handover, passed over in the line of succession: a (")
		out.Reset()
		newStatusPrinter(&out, "json", false).print(st)
		var js map[string]any
		require.NoError(t, json.Unmarshal(out.Bytes(), &js))
		work, _ := js["work"].(map[string]any)
		require.NotNil(t, work, out.String())
		assert.Equal(t, 1.0, work["streak"])
		assert.NotEmpty(t, work["hold_until"])
		cooling, _ := work["cooling"].([]any)
		require.Len(t, cooling, 1)
		assert.Equal(t, "a", cooling[0].(map[string]any)["identity"])
		assert.InDelta(t, c.SecondsLeft, cooling[0].(map[string]any)["seconds_left"], 1e-9)

		// With --watch the seconds count from the observation.
		watched := statusOf(jobLease, l, now, now.Add(-20*time.Second))
		assert.InDelta(t, st.Work.Cooling[0].SecondsLeft-20+now.Sub(l.Spec.RenewTime.Time).Seconds(), watched.Work.Cooling[0].SecondsLeft, 1e-6)
	})
}

// A handover record shows as one: from → to, until the successor's time
// to take it ends; then, not taken, as expired. It showed as a "held" term
// of the named successor.
func TestStatusShowsAHandover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		api.PutReleased("default", "job")
		a := startElector(t, api, "a", nil)
		time.Sleep(time.Minute)
		require.True(t, a.IsLeader())
		// To a candidate that does not run: the record stays until its time passes.
		require.NoError(t, a.HandOver(context.Background(), "z", &relect.HandOverOptions{Unregistered: true}))
		l := api.Lease("default", "job")
		now := time.Now()
		st := statusOf(jobLease, l, now, time.Time{})
		assert.Equal(t, stateHandover, st.State)
		assert.Equal(t, "z", st.Holder)
		require.NotNil(t, st.HandOver, "%v", l.Annotations)
		assert.Equal(t, handoverStatus{From: "a", To: "z", Until: st.Expires}, *st.HandOver)
		var out bytes.Buffer
		newStatusPrinter(&out, "table", false).print(st)
		t.Logf("relect status of a handover:\n%s", out.String())
		fields := strings.Fields(strings.Split(out.String(), "\n")[1])
		assert.Equal(t, []string{"default/job", "handover", "a", "→", "z"}, fields[:5], out.String())
		assert.Contains(t, out.String(), "\nhandover: a → z until ")
		assert.Contains(t, out.String(), "z may take the lease at once, nobody leads meanwhile")
		out.Reset()
		newStatusPrinter(&out, "json", false).print(st)
		assert.Contains(t, out.String(), `"handover": {`)
		assert.Contains(t, out.String(), `"from": "a"`)

		lapsed := statusOf(jobLease, l, st.Expires.Add(time.Second), time.Time{})
		assert.Equal(t, stateExpired, lapsed.State)
		out.Reset()
		newStatusPrinter(&out, "table", false).print(lapsed)
		assert.Contains(t, out.String(), "handover: a → z lapsed at ")

		// One written for another holder or term is no handover.
		for name, raw := range map[string]string{
			"another holder": `{"term":` + fmt.Sprint(st.Term) + `,"from":"a","to":"y"}`,
			"another term":   `{"term":` + fmt.Sprint(st.Term+1) + `,"from":"a","to":"z"}`,
			"malformed":      `{"term":`,
		} {
			edited := l.DeepCopy()
			edited.Annotations["relect.io/handover"] = raw
			got := statusOf(jobLease, edited, now, time.Time{})
			assert.Nil(t, got.HandOver, name)
			assert.Equal(t, stateHeld, got.State, name)
		}
	})
}
