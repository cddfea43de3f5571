package operator_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/internal/wire"
	"github.com/relect/relect/operator"
	"github.com/relect/relect/relecttest"
	"github.com/relect/relect/shardrange"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// shardLease is shard sh's Lease of the election default/job, held by
// holder (released if "") in term, renewed at renewed, with fence
// published for holder and term if not "".
func shardLease(sh, holder string, seconds, term int32, renewed time.Time, fence string) *coordinationv1.Lease {
	rt := metav1.NewMicroTime(renewed)
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: wire.ShardLeaseName("job", sh),
			Labels:      map[string]string{wire.LabelShardOf: wire.CandidateOf("job")},
			Annotations: map[string]string{wire.AnnotationShard: sh, wire.AnnotationLease: "job"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds, LeaseTransitions: &term,
			AcquireTime: &rt, RenewTime: &rt},
	}
	if fence != "" {
		raw, _ := json.Marshal(wire.FenceMark{Holder: holder, Term: term, Fence: fence})
		l.Annotations[wire.AnnotationFence] = string(raw)
	}
	return l
}

// ListShards reads what the table assigns and what each shard's Lease
// shows, and judges each Lease's validity as relect status does (renew
// time + lease duration against this machine's clock).
func TestListShards(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	cs := api.Client("operator").Clientset()
	ctx := context.Background()

	// No shards at all: the zero table, no error.
	st, err := operator.ListShards(ctx, cs, "default", "job")
	require.NoError(t, err)
	assert.False(t, st.HasShards())
	assert.Equal(t, operator.ShardTable{At: st.At}, st)

	now := time.Now()
	table := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: wire.ShardTableName("job")}}
	wire.SetTable(table, "job", "a", 7, &wire.Table{
		Assigned: map[string]string{"0": "a", "1": "b", "2": "b", "10": "c"},
		Takers:   map[string]string{"1": "a"},
		Out:      map[string]string{"z": "123", "y": "99"},
	}, now.Add(-time.Second))
	api.Put(table)
	api.Put(shardLease("0", "a", 15, 3, now.Add(-2*time.Second), "4711")) // held, fenced
	api.Put(shardLease("1", "b", 15, 2, now.Add(-20*time.Second), "815")) // b stopped renewing: expired
	api.Put(shardLease("2", "", 1, 5, now.Add(-time.Second), ""))         // released
	// "10" has no Lease yet; "3" has one but no assignment (the leader
	// has not planned since it was created, say).
	api.Put(shardLease("3", "a", 15, 1, now.Add(-time.Second), ""))
	// Labelled by hand, for no shard of this election: left out.
	stray := shardLease("4", "x", 15, 1, now, "")
	stray.Name = "something-else"
	api.Put(stray)
	// Another election's shard Lease: another label, not listed.
	other := shardLease("0", "q", 15, 1, now, "")
	other.Name, other.Labels[wire.LabelShardOf] = wire.ShardLeaseName("other", "0"), wire.CandidateOf("other")
	api.Put(other)

	st, err = operator.ListShards(ctx, cs, "default", "job")
	require.NoError(t, err)
	assert.True(t, st.Found)
	assert.True(t, st.HasShards())
	assert.Equal(t, "a", st.Writer)
	assert.Equal(t, int32(7), st.Term)
	assert.WithinDuration(t, now.Add(-time.Second), st.WrittenAt, time.Millisecond)
	assert.Equal(t, []string{"y", "z"}, st.Out)
	assert.WithinDuration(t, time.Now(), st.At, time.Second)
	names := []string{}
	for _, s := range st.Shards {
		names = append(names, s.Name)
	}
	assert.Equal(t, []string{"0", "1", "2", "3", "10"}, names, "numbered shards by number")

	s0 := st.Shards[0]
	assert.Equal(t, operator.Shard{Name: "0", Lease: wire.ShardLeaseName("job", "0"), Assigned: "a", Exists: true, Holder: "a", Valid: true,
		RenewTime: s0.RenewTime, Expires: s0.RenewTime.Add(15 * time.Second), Term: 3, Fence: "4711"}, s0)
	assert.WithinDuration(t, now.Add(-2*time.Second), s0.RenewTime, time.Millisecond)

	s1 := st.Shards[1]
	assert.Equal(t, "b", s1.Assigned)
	assert.Equal(t, "a", s1.Taker, "the taker the table names")
	assert.Equal(t, "b", s1.Holder)
	assert.False(t, s1.Valid, "renewed 20 s ago, for 15 s: expired")
	assert.Equal(t, relect.Fence("815"), s1.Fence, "the fence of the holder's term, valid or not")

	s2 := st.Shards[2]
	assert.True(t, s2.Exists)
	assert.True(t, s2.Released)
	assert.Empty(t, s2.Holder)
	assert.False(t, s2.Valid)
	assert.True(t, s2.Expires.IsZero(), "no holder, no expiry")
	assert.Empty(t, s2.Fence)

	s3 := st.Shards[3]
	assert.Empty(t, s3.Assigned, "not in the table")
	assert.Equal(t, "a", s3.Holder)
	assert.True(t, s3.Valid)
	assert.Empty(t, s3.Fence, "a term only just begun publishes none")

	s10 := st.Shards[4]
	assert.Equal(t, operator.Shard{Name: "10", Lease: wire.ShardLeaseName("job", "10"), Assigned: "c"}, s10, "assigned, no Lease yet")

	// A fence left by an earlier holder of the Lease is not the holder's.
	stale := shardLease("0", "b", 15, 4, now, "")
	stale.Annotations[wire.AnnotationFence] = `{"holder":"a","term":3,"fence":"4711"}`
	api.Put(stale)
	st, err = operator.ListShards(ctx, cs, "default", "job")
	require.NoError(t, err)
	assert.Equal(t, "b", st.Shards[0].Holder)
	assert.Empty(t, st.Shards[0].Fence)

	// A malformed table: not Found, but the shard Leases are still listed.
	require.NoError(t, api.Edit("default", wire.ShardTableName("job"), func(l *coordinationv1.Lease) {
		l.Annotations[wire.AnnotationShardTable] = "{"
	}))
	st, err = operator.ListShards(ctx, cs, "default", "job")
	require.NoError(t, err)
	assert.False(t, st.Found)
	assert.True(t, st.HasShards())
	assert.Equal(t, "a", st.Writer, "the table Lease's holder still")
	assert.Len(t, st.Shards, 4, "0 to 3, from their Leases")
	assert.Empty(t, st.Shards[0].Assigned)
	assert.Nil(t, st.Out)

	// Errors are the client's.
	api.Client("operator").FailNext(1, relecttest.Error(403))
	_, err = operator.ListShards(ctx, cs, "default", "job")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "forbidden")
}

// ListShards against a fleet of relect candidates with shards: each
// shard's holder is the one the table assigns, valid, with the term and
// fence its ShardOptions.Run saw; a holder cut off gets a taker, then is
// left out, and its shards go to the taker.
func TestListShardsOfAFleet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		api.PutReleased("default", "job")
		type seen struct {
			holder string
			term   int64
			fence  relect.Fence
		}
		var mu sync.Mutex
		running := map[string]seen{}
		start := func(id string) (*relecttest.Client, func()) {
			c := api.Client(id)
			e, err := relect.New(relect.Options{Client: c.Clientset(), Namespace: "default", Name: "job", Identity: id,
				Shards: relect.ShardOptions{Count: 4, Run: func(ctx context.Context) {
					sh, _ := relect.ShardFromContext(ctx)
					term, _ := relect.TermFromContext(ctx)
					fence, _ := relect.FenceFromContext(ctx)
					mu.Lock()
					running[sh] = seen{id, term, fence}
					mu.Unlock()
					<-ctx.Done()
					mu.Lock()
					if running[sh].holder == id {
						delete(running, sh)
					}
					mu.Unlock()
				}}})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = e.Run(ctx) }()
			stop := func() { cancel(); <-done }
			t.Cleanup(stop)
			return c, stop
		}
		_, stopA := start("a")
		synctest.Wait()
		bClient, stopB := start("b")
		time.Sleep(2 * time.Minute) // the first deployment's waits, b admitted, settled
		synctest.Wait()

		cs := api.Client("operator").Clientset()
		st, err := operator.ListShards(context.Background(), cs, "default", "job")
		require.NoError(t, err)
		require.True(t, st.Found)
		assert.Equal(t, "a", st.Writer, "the leader writes the table")
		require.Len(t, st.Shards, 4)
		mu.Lock()
		held := map[string]int{}
		for i, s := range st.Shards {
			assert.Equal(t, []string{"0", "1", "2", "3"}[i], s.Name)
			assert.Equal(t, s.Assigned, s.Holder, "shard %s: settled, its holder is the assigned one", s.Name)
			assert.NotEmpty(t, s.Taker, "shard %s: settled, a taker follows its Lease", s.Name)
			assert.NotEqual(t, s.Holder, s.Taker, "shard %s: its taker is another candidate", s.Name)
			assert.True(t, s.Valid, "shard %s", s.Name)
			assert.Equal(t, s.Holder, api.Holder("default", s.Lease), "shard %s: Shard.Lease names its Lease (docs/testing.md)", s.Name)
			r := running[s.Name]
			assert.Equal(t, r.holder, s.Holder, "shard %s: the holder runs its work", s.Name)
			assert.Equal(t, r.fence, s.Fence, "shard %s: the fence its Run saw", s.Name)
			assert.Equal(t, r.term, int64(s.Term), "shard %s: the term its Run saw", s.Name)
			held[s.Holder]++
		}
		mu.Unlock()
		assert.Equal(t, map[string]int{"a": 2, "b": 2}, held)
		assert.Nil(t, st.Out)

		// b is cut off: after 1.5 retry periods without a renewal of its
		// shards, the leader names a taker; they are still valid.
		bClient.Partition()
		time.Sleep(4 * time.Second)
		synctest.Wait()
		st, err = operator.ListShards(context.Background(), cs, "default", "job")
		require.NoError(t, err)
		var bShards []string
		for _, s := range st.Shards {
			if s.Holder == "b" {
				bShards = append(bShards, s.Name)
				assert.Equal(t, "b", s.Assigned)
				assert.Equal(t, "a", s.Taker, "shard %s: a follows it", s.Name)
				assert.True(t, s.Valid, "shard %s: renewed 4 s ago, for 15 s", s.Name)
			}
		}
		assert.Len(t, bShards, 2)

		// Expired, they go to the taker, and b is left out.
		time.Sleep(time.Minute)
		synctest.Wait()
		st, err = operator.ListShards(context.Background(), cs, "default", "job")
		require.NoError(t, err)
		assert.Equal(t, []string{"b"}, st.Out)
		for _, s := range st.Shards {
			assert.Equal(t, "a", s.Holder, "shard %s", s.Name)
			assert.Equal(t, "a", s.Assigned, "shard %s", s.Name)
			assert.True(t, s.Valid, "shard %s", s.Name)
		}
		mu.Lock()
		assert.Equal(t, []string{"0", "1", "2", "3"}, slices.Sorted(maps.Keys(running)))
		mu.Unlock()
		bClient.Heal()
		stopB()
		stopA()
	})
}

// ListShards of range shards: each shard's Lease is its split's (the
// table's Split), held by its holder; a Lease of another split left
// behind, which calls itself shard "1" too, is not taken for it.
func TestListShardsOfRanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		api.PutReleased("default", "job")
		leftover := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: wire.ShardLeaseNameIn("job", "uid-8", "1"),
			Labels:      map[string]string{wire.LabelShardOf: wire.CandidateOf("job"), wire.LabelShardRange: "uid-8-1"},
			Annotations: map[string]string{wire.AnnotationShard: "1"}}}
		holder := "gone"
		leftover.Spec.HolderIdentity = &holder
		api.Put(leftover)
		var stops []func()
		for _, id := range []string{"a", "b"} {
			e, err := relect.New(relect.Options{Client: api.Client(id).Clientset(), Namespace: "default", Name: "job", Identity: id,
				Shards: relect.ShardOptions{Count: 4, Ranges: shardrange.UID, Run: func(ctx context.Context) { <-ctx.Done() }}})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = e.Run(ctx) }()
			stops = append(stops, func() { cancel(); <-done })
			synctest.Wait()
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		st, err := operator.ListShards(context.Background(), api.Client("operator").Clientset(), "default", "job")
		require.NoError(t, err)
		require.Len(t, st.Shards, 4)
		for _, s := range st.Shards {
			assert.Equal(t, wire.ShardLeaseNameIn("job", "uid-4", s.Name), s.Lease, "shard %s", s.Name)
			assert.Equal(t, s.Assigned, s.Holder, "shard %s", s.Name)
			assert.Equal(t, s.Holder, api.Holder("default", s.Lease), "shard %s: Shard.Lease names its Lease", s.Name)
			assert.True(t, s.Valid, "shard %s", s.Name)
		}
		for _, stop := range stops {
			stop()
		}
	})
}
