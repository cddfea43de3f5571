package succession

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/relect/relect/internal/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// leaseWith is the election's Lease of term held by holder, carrying s as
// its line of succession (none if s is nil).
func leaseWith(holder string, term int32, s *wire.Succession) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "lease", Annotations: map[string]string{}}}
	l.Spec.HolderIdentity, l.Spec.LeaseTransitions = &holder, &term
	if s != nil {
		s.Term = term
		l.Annotations[wire.AnnotationSuccession] = s.Encode()
	}
	return l
}

func TestChooseSuccessors(t *testing.T) {
	cs := []Candidate{
		{Identity: "low", Priority: 1},
		{Identity: "leader", Priority: 9},
		{Identity: "standby", Priority: 8, Standby: true},
		{Identity: "b", Priority: 5},
		{Identity: "a", Priority: 5},
		{Identity: "zero"},
	}
	next := chooseSuccessors(cs, "leader")
	want := []wire.Successor{{Identity: "a", Priority: 5}, {Identity: "b", Priority: 5}, {Identity: "low", Priority: 1}}
	assert.Equal(t, want, next, "highest priority first, then by identity; neither the leader nor a standby; at most MaxSuccessors")
	assert.Len(t, next, wire.MaxSuccessors)
	assert.Empty(t, chooseSuccessors([]Candidate{{Identity: "leader"}, {Identity: "s", Standby: true}}, "leader"))
}

func TestTurn(t *testing.T) {
	const step = time.Second
	line := &wire.Succession{From: "leader",
		Next:    []wire.Successor{{Identity: "s0"}, {Identity: "s1"}, {Identity: "s2"}},
		Keepers: []string{"k"}, Warden: "w"}
	l := leaseWith("leader", 7, line)

	assert.Zero(t, Turn(leaseWith("leader", 7, nil), "s1", step, false), "no line: everyone at once")
	for i, id := range []string{"s0", "s1", "s2", "k", "w"} {
		assert.Equal(t, time.Duration(i)*step, Turn(l, id, step, false), "%s: its place in line, then the keepers, then the warden", id)
	}
	inLine := 4 * step // three successors and a keeper
	for i := range 50 {
		id := fmt.Sprintf("out%d", i)
		d := Turn(l, id, step, false)
		assert.GreaterOrEqual(t, d, inLine, "%s: after everyone in line", id)
		assert.LessOrEqual(t, d, inLine+2*step, "%s: spread over two steps", id)
		assert.Equal(t, d, Turn(l, id, step, false), "%s: the same turn each time", id)
		assert.Equal(t, d+2*step, Turn(l, id, step, true), "%s: standing back, two steps more", id)
	}
	back := Turn(l, "s0", step, true)
	assert.GreaterOrEqual(t, back, inLine+2*step, "a successor that stands back waits after everyone in line, and two steps more")
	assert.LessOrEqual(t, back, inLine+4*step)
}

func TestCompare(t *testing.T) {
	cs := []Candidate{
		{Identity: "c", Priority: 1},
		{Identity: "second", Successor: 2},
		{Identity: "d", Priority: 3},
		{Identity: "leader", Leader: true},
		{Identity: "first", Successor: 1, Priority: -1},
		{Identity: "b", Priority: 1},
	}
	slices.SortFunc(cs, Candidate.Compare)
	var ids []string
	for _, c := range cs {
		ids = append(ids, c.Identity)
	}
	assert.Equal(t, []string{"leader", "first", "second", "d", "b", "c"}, ids,
		"the leader, the line in order, then by priority, highest first, and identity")
	assert.Zero(t, cs[0].Compare(cs[0]))
}

func TestRegistrationOf(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	id, seconds, renewed := "c1", int32(2700), metav1.NewMicroTime(now)
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: wire.RegistrationName("lease", id), ResourceVersion: "42",
		Annotations: map[string]string{wire.AnnotationPriority: "5", wire.AnnotationInstance: "abc", wire.AnnotationWards: "true",
			wire.AnnotationShardWeight: "3", wire.AnnotationShardSet: wire.EncodeShardSet([]string{"a", "b"}, "")}}}
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &id, &seconds, &renewed

	r, ok := RegistrationOf(l)
	require.True(t, ok)
	assert.Equal(t, Registration{
		Candidate: Candidate{Identity: "c1", Priority: 5, RenewedAt: now},
		Name:      l.Name, Seconds: 2700, RV: "42", ShardWeight: 3,
		ShardSet: wire.EncodeShardSet([]string{"a", "b"}, ""), Instance: "abc", Wards: true,
	}, r)

	l.Spec.HolderIdentity = nil
	_, ok = RegistrationOf(l)
	assert.False(t, ok, "no holder: departed")
}

func TestConfigRegistration(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := Config{Identity: "c1", Priority: 5, Namespace: "ns", Lease: "lease", Instance: "abc", RegistrationSeconds: 2700,
		ShardWeight: 2, ShardSet: wire.EncodeShardSet([]string{"0", "1"}, "")}
	l := c.Registration(nil, now)
	assert.Equal(t, "ns", l.Namespace)
	assert.Equal(t, wire.RegistrationName("lease", "c1"), l.Name)
	assert.Equal(t, wire.CandidateOf("lease"), l.Labels[wire.LabelCandidateOf])
	assert.Equal(t, "lease", l.Annotations[wire.AnnotationLease])
	l.ResourceVersion = "9"
	r, ok := RegistrationOf(l)
	require.True(t, ok, "read back")
	assert.Equal(t, Registration{Candidate: Candidate{Identity: "c1", Priority: 5, RenewedAt: now}, Name: l.Name, Seconds: 2700, RV: "9",
		ShardWeight: 2, ShardSet: "count:2", Instance: "abc", Wards: true}, r, "what the leader reads is what it wrote")
	assert.Equal(t, now, l.Spec.AcquireTime.Time)

	// Rewritten standing by: the foreign annotations stay, the acquire
	// time too; it neither wards nor takes shards.
	l.Annotations["other"] = "kept"
	c.Standby = true
	later := now.Add(time.Minute)
	l = c.Registration(l, later)
	r, _ = RegistrationOf(l)
	assert.True(t, r.Standby)
	assert.False(t, r.Wards, "a standby does not ward")
	assert.Zero(t, r.ShardWeight)
	assert.Empty(t, r.ShardSet)
	assert.Equal(t, "kept", l.Annotations["other"])
	assert.Equal(t, now, l.Spec.AcquireTime.Time, "acquired when first written")
	assert.Equal(t, later, l.Spec.RenewTime.Time)
}
