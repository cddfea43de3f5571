package main

import (
	"errors"

	"bytes"
	"context"
	"encoding/json"
	"github.com/relect/relect"
	"strings"
	"sync"
	"testing"
	"time"

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
	p.flush()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 4, out.String())
	assert.Equal(t, []string{"LEASE", "STATE", "HOLDER", "TERM", "RENEWED", "VALID", "EXPIRES"}, strings.Fields(lines[0]))
	assert.Equal(t, []string{"default/job", "held", "pod-a", "4", "2s", "ago", "yes*", "in", "13s"}, strings.Fields(lines[1]))
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
	go func() {
		done <- watchStatus(ctx, leases, jobLease, time.Second, newStatusPrinter(&out, "json", true), &errOut)
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
