package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/internal/wire"
	"github.com/relect/relect/operator"
	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// withShardsOn makes a testElector take part in n shards, whose work
// waits for its term's end.
func withShardsOn(n int) func(*relect.Options) {
	return func(o *relect.Options) {
		o.Shards = relect.ShardOptions{Count: n, Run: func(ctx context.Context) { <-ctx.Done() }}
	}
}

// shardRows returns the rows of the shards' table in a status table, by
// shard: the fields after SHARD.
func shardRows(t *testing.T, out string) map[string][]string {
	t.Helper()
	_, after, found := strings.Cut(out, "\nSHARD ")
	require.True(t, found, "no shards' table in\n%s", out)
	rows := map[string][]string{}
	for _, line := range strings.Split(after, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) != 11 {
			break
		}
		rows[f[0]] = f[1:]
	}
	return rows
}

// relect status shows an election's shards: who holds which, whom the
// table assigns it to, the taker that follows it, the candidates left
// out; in -o json as "shards" and
// "shard_table". An election without shards shows nothing of them.
func TestStatusShowsShards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		api.PutReleased("default", "job")
		startElector(t, api, "a", withShardsOn(3))
		synctest.Wait()
		b := startElector(t, api, "b", withShardsOn(3))
		time.Sleep(2 * time.Minute) // the first deployment's waits, b admitted, settled
		synctest.Wait()

		cs := api.Client("status").Clientset()
		look := func() leaseStatus {
			table, err := operator.ListShards(context.Background(), cs, "default", "job")
			require.NoError(t, err)
			return withShards(statusOf(jobLease, api.Lease("default", "job"), time.Now(), time.Time{}), table, nil)
		}
		st := look()
		require.Len(t, st.Shards, 3)
		var out bytes.Buffer
		newStatusPrinter(&out, "table", false).print(st)
		t.Logf("relect status of an election with shards:\n%s", out.String())
		holds := map[string]int{}
		for _, s := range st.Shards {
			holds[s.Holder]++
		}
		require.Len(t, holds, 2, "both hold shards: %v", holds)
		assert.Contains(t, out.String(), "\nshards: 3, table by a (term 1): ")
		rows := shardRows(t, out.String())
		require.Len(t, rows, 3, out.String())
		for _, s := range st.Shards {
			l := api.Lease("default", wire.ShardLeaseName("job", s.Shard))
			fence := string(operator.Fence(l))
			require.NotEmpty(t, fence, "shard %s's Lease publishes its fence", s.Shard)
			row := rows[s.Shard]
			// STATE HOLDER ASSIGNED TAKER TERM FENCE VALID EXPIRES WORK
			assert.Equal(t, []string{stateHeld, s.Holder, s.Holder}, row[:3], "shard %s", s.Shard)
			assert.Equal(t, s.Taker, row[3], "shard %s: its taker", s.Shard)
			assert.NotContains(t, []string{"-", s.Holder}, row[3], "shard %s: settled, another candidate follows it as taker", s.Shard)
			assert.Equal(t, fence, row[5], "shard %s's fence", s.Shard)
			assert.Equal(t, "yes*", row[6], "shard %s", s.Shard)
			assert.Equal(t, "in", row[7], "shard %s", s.Shard)
			assert.Equal(t, "-", row[9], "shard %s: its work is healthy", s.Shard)
		}
		assert.NotContains(t, out.String(), "left out")

		out.Reset()
		newStatusPrinter(&out, "json", false).print(st)
		var js struct {
			Shards     []map[string]any `json:"shards"`
			ShardTable map[string]any   `json:"shard_table"`
		}
		require.NoError(t, json.Unmarshal(out.Bytes(), &js), out.String())
		require.Len(t, js.Shards, 3)
		assert.Equal(t, "0", js.Shards[0]["shard"])
		assert.Equal(t, wire.ShardLeaseName("job", "0"), js.Shards[0]["lease"])
		assert.Equal(t, stateHeld, js.Shards[0]["state"])
		assert.Equal(t, true, js.Shards[0]["valid"])
		assert.Equal(t, st.Shards[0].Fence, js.Shards[0]["fence"])
		assert.Equal(t, js.Shards[0]["holder"], js.Shards[0]["assigned"])
		assert.Equal(t, st.Shards[0].Taker, js.Shards[0]["taker"])
		assert.Equal(t, true, js.ShardTable["found"])
		assert.Equal(t, "a", js.ShardTable["writer"])

		// b is cut off: a takes over as taker, then as holder, and b is
		// left out.
		b.client.Partition()
		time.Sleep(4 * time.Second)
		synctest.Wait()
		out.Reset()
		newStatusPrinter(&out, "table", false).print(look())
		for sh, row := range shardRows(t, out.String()) {
			if row[1] == "b" {
				assert.Equal(t, []string{stateHeld, "b", "b", "a"}, row[:4], "shard %s: a follows it, to take it\n%s", sh, out.String())
			}
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		out.Reset()
		newStatusPrinter(&out, "table", false).print(look())
		assert.Contains(t, out.String(), "\nshards: 3, table by a (term 1): a holds 3\n", out.String())
		assert.Contains(t, out.String(), "\nleft out (given no shard until their registration changes): b\n")
		b.client.Heal()

		// Without shards: nothing; reading them failed: it says so.
		plain := statusOf(jobLease, lease("pod-a", 15, 4, time.Now()), time.Now(), time.Time{})
		for _, output := range []string{"table", "json"} {
			out.Reset()
			newStatusPrinter(&out, output, false).print(withShards(plain, operator.ShardTable{At: time.Now()}, nil))
			assert.NotContains(t, out.String(), "shard", "-o %s", output)
			out.Reset()
			newStatusPrinter(&out, output, false).print(withShards(plain, operator.ShardTable{}, errors.New("forbidden")))
			assert.Contains(t, out.String(), map[string]string{"table": "shards: not known (forbidden)", "json": `"shards_error": "forbidden"`}[output])
		}
	})
}

// --watch shows the shards when it starts, and again when they change:
// it reads them again when it lists the candidates, and when it prints a
// row and last read them 10 s ago or longer.
func TestWatchShowsShards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		api.PutReleased("default", "job")
		startElector(t, api, "a", withShardsOn(2))
		synctest.Wait()
		b := startElector(t, api, "b", withShardsOn(2))
		time.Sleep(2 * time.Minute)
		synctest.Wait()

		cs := api.Client("status").Clientset()
		list := func(ctx context.Context) ([]relect.Candidate, error) {
			return operator.ListCandidates(ctx, cs, "default", "job")
		}
		shards := func(ctx context.Context) (operator.ShardTable, error) {
			return operator.ListShards(ctx, cs, "default", "job")
		}
		var out lockedBuffer
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- watchStatus(ctx, cs.CoordinationV1().Leases("default"), list, shards, jobLease, time.Second, newStatusPrinter(&out, "table", true), &out)
		}()
		time.Sleep(time.Second)
		synctest.Wait()
		printed := func() string {
			out.mu.Lock()
			defer out.mu.Unlock()
			return out.b.String()
		}
		assert.Contains(t, printed(), "shards: 2, table by a (term 1): ")
		assert.Equal(t, 1, strings.Count(printed(), "\nSHARD "), "printed once while they do not change:\n%s", printed())

		b.stop() // its shard goes to a
		time.Sleep(30 * time.Second)
		synctest.Wait()
		assert.Contains(t, printed(), "shards: 2, table by a (term 1): a holds 2\n", printed())
		assert.GreaterOrEqual(t, strings.Count(printed(), "\nSHARD "), 2, "printed again:\n%s", printed())
		// The last shards printed are current: a holds both, its new
		// term's fence published (a change too: it comes with the term's
		// first renewal).
		last := printed()[strings.LastIndex(printed(), "\nshards: "):]
		for sh, row := range shardRows(t, last) {
			assert.Equal(t, "a", row[1], "shard %s", sh)
			assert.NotEqual(t, "-", row[5], "shard %s's fence", sh)
		}
		t.Logf("relect status --watch:\n%s", printed())
		cancel()
		require.NoError(t, <-done)
	})
}

// The summary line counts a shard as moving only while someone holds it:
// with every shard released, "8 held by nobody, 8 assigned to another than
// its holder" spoke of a holder there was not.
func TestShardsSummary(t *testing.T) {
	table := &shardTableStatus{Found: true, Writer: "a", Term: 3}
	st := leaseStatus{ShardTable: table, Shards: []shardStatus{
		{Shard: "0", State: stateHeld, Holder: "a", Assigned: "a"},
		{Shard: "1", State: stateHeld, Holder: "a", Assigned: "b"},
		{Shard: "2", State: "released", Assigned: "b"},
		{Shard: "3", State: "missing"},
	}}
	assert.Equal(t, "shards: 4, table by a (term 3): a holds 2, 2 held by nobody (1 assigned, not taken yet), 1 assigned to another than its holder", shardsSummary(st))
	st.Shards = []shardStatus{{Shard: "0", State: "released", Assigned: "a"}, {Shard: "1", State: "released", Assigned: "b"}}
	assert.Equal(t, "shards: 2, table by a (term 3): 2 held by nobody (2 assigned, not taken yet)", shardsSummary(st))
}

// A candidate killed without a word (here cut off: it can neither renew
// nor deregister) stays registered, and in the leader's line of succession,
// until its registration lapses (3 × --registration-renewal, 45 min by
// default); the shard table leaves it out within LeaseDuration +
// 2 × RetryPeriod. relect status showed it as "next #1" 30 s after the
// kill, in the same output that listed it left out. It is still the line's
// first — a takeover would wait one succession step for it — but it failed
// at its shards and did not come back: the status says so where it names
// it next, and -o json has it as "left_out".
func TestStatusMarksASuccessorLeftOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		api.PutReleased("default", "job")
		startElector(t, api, "a", withShardsOn(3))
		synctest.Wait()
		b := startElector(t, api, "b", withShardsOn(3))
		startElector(t, api, "c", withShardsOn(3))
		time.Sleep(2 * time.Minute)
		synctest.Wait()

		cs := api.Client("status").Clientset()
		look := func() (leaseStatus, string) {
			cands, err := operator.ListCandidates(context.Background(), cs, "default", "job")
			require.NoError(t, err)
			table, err := operator.ListShards(context.Background(), cs, "default", "job")
			require.NoError(t, err)
			st := withShards(withCandidates(statusOf(jobLease, api.Lease("default", "job"), time.Now(), time.Time{}), cands, nil), table, nil)
			var out bytes.Buffer
			newStatusPrinter(&out, "table", false).print(st)
			return st, out.String()
		}
		st, out := look()
		require.Equal(t, "a", st.Holder, out)
		assert.Contains(t, out, "; b (next #1, registered ", out)
		assert.NotContains(t, out, "left out", out)

		b.client.Partition()
		time.Sleep(30 * time.Second)
		synctest.Wait()
		st, out = look()
		t.Logf("relect status 30 s after b was cut off:\n%s", out)
		require.Equal(t, []string{"b"}, st.ShardTable.Out, "b is left out")
		var sb candidateStatus
		for _, c := range st.Candidates {
			if c.Identity == "b" {
				sb = c
			}
		}
		assert.Equal(t, 1, sb.Successor, "the line the leader published still names b first")
		assert.True(t, sb.LeftOut)
		assert.Contains(t, out, "; b (named next #1, but left out of the shards (likely gone: a takeover would wait one succession step for it), registered ")
		assert.NotContains(t, out, "b (next #1", "b is not shown next in line without more")
		assert.Contains(t, out, "c (next #2, registered ")

		var js bytes.Buffer
		newStatusPrinter(&js, "json", false).print(st)
		assert.Contains(t, js.String(), `"identity": "b",`)
		assert.Contains(t, js.String(), `"left_out": true`)
		b.client.Heal()
	})
}

// A shard whose work keeps failing shows it: WORK "failing(k)", a count in
// the summary, and "failures" in -o json; candidates whose shard set
// differs from the leader's, a line naming each with its size.
func TestStatusShowsFailingShard(t *testing.T) {
	now := time.Now()
	tab := operator.ShardTable{Found: true, Writer: "a", Term: 1, At: now, Differ: map[string]int{"c": 4}, Set: 8, Shards: []operator.Shard{
		{Name: "0", Lease: wire.ShardLeaseName("job", "0"), Assigned: "a", Exists: true, Holder: "a", Valid: true},
		{Name: "1", Lease: wire.ShardLeaseName("job", "1"), Assigned: "b", Exists: true, Released: true, Failures: 3},
	}}
	st := withShards(statusOf(jobLease, lease("a", 15, 1, now), now, time.Time{}), tab, nil)
	var out bytes.Buffer
	newStatusPrinter(&out, "table", false).print(st)
	t.Logf("relect status with a failing shard:\n%s", out.String())
	assert.Contains(t, out.String(), "1 whose work keeps failing")
	assert.Contains(t, out.String(), "\nshard sets differ (the leader runs 8 shards; each candidate is given only shards it runs): c runs 4\n")
	_, rows, _ := strings.Cut(out.String(), "\nSHARD ")
	lines := strings.Split(rows, "\n")
	require.GreaterOrEqual(t, len(lines), 3)
	assert.Equal(t, "-", strings.Fields(lines[1])[len(strings.Fields(lines[1]))-1], "shard 0 is healthy")
	assert.Equal(t, "failing(3)", strings.Fields(lines[2])[len(strings.Fields(lines[2]))-1])
	out.Reset()
	newStatusPrinter(&out, "json", false).print(st)
	assert.Contains(t, out.String(), `"failures": 3`)
}
