package relect_test

import (
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/relect/relect"
	"github.com/relect/relect/relecttest"
	"github.com/relect/relect/shardrange"
)

// TestRangeShardScale: 1,000 shards over 10 candidates on relecttest,
// plain and range shards, in simulated time: how long until every shard
// runs balanced, how many lists the split-change guards sent at the start
// (their shared flight), and the calls per candidate-minute once settled,
// in which the guards send none. It prints its figures; about a minute of
// CPU per fleet, so it runs on request only:
//
//	RELECT_RANGE_SCALE=1 go test -count=1 -run '^TestRangeShardScale$' -v .
func TestRangeShardScale(t *testing.T) {
	if os.Getenv("RELECT_RANGE_SCALE") == "" {
		t.Skip("set RELECT_RANGE_SCALE=1: two fleets of 10 candidates over 1,000 shards")
	}
	perMinute := map[bool]float64{}
	for _, ranges := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "ranges"}[ranges], func(t *testing.T) {
			perMinute[ranges] = rangeShardScale(t, ranges)
		})
	}
	t.Logf("calls per candidate-minute, settled: plain %.1f, range shards %.1f", perMinute[false], perMinute[true])
	assert.LessOrEqual(t, perMinute[true], perMinute[false]*1.01, "range shards cost no more once settled")
}

// rangeShardScale runs one fleet of TestRangeShardScale and returns its
// settled calls per candidate-minute.
func rangeShardScale(t *testing.T, ranges bool) (perMinute float64) {
	const n, s = 10, 1000
	synctest.Test(t, func(t *testing.T) {
		api, b := newAPI(), newShardBook(t)
		began := time.Now()
		cs := shardFleet(t, api, b, n, s, func(i int, o *relect.Options) {
			if ranges {
				o.Shards.Ranges = shardrange.UID
			}
		})
		took := until(t, time.Hour, "every shard runs, balanced", func() bool { return isBalanced(b, s, n) })
		t.Logf("ranges %v: every shard runs, balanced, %v after the first start (%v after the last); the guards' lists so far: %d",
			ranges, time.Since(began), took, guardLists(cs))
		creates := func() int { return cs[0].client.Calls(relecttest.VerbCreate) }
		for last := -1; creates() != last; { // the leader's first creates of shard Leases
			last = creates()
			time.Sleep(5 * time.Second)
		}
		time.Sleep(ld)
		synctest.Wait()
		before, lists := allCalls(api), guardLists(cs)
		time.Sleep(time.Minute)
		synctest.Wait()
		perMinute = float64(allCalls(api)-before) / n
		t.Logf("ranges %v: settled, %.1f calls per candidate-minute; the guards' lists in that minute: %d", ranges, perMinute, guardLists(cs)-lists)
		assert.Equal(t, lists, guardLists(cs), "a guard lists only as a range's campaign or term starts")
		assert.Zero(t, b.overlaps)
		stopAllAtOnce(cs...)
	})
	return perMinute
}

// guardLists is how many lists of the range shard Leases the candidates'
// split-change guards sent (Stats.Calls, list-range-leases).
func guardLists(cs []*candidate) (n uint64) {
	for _, c := range cs {
		for k, v := range c.e.Stats().Calls {
			if k.Verb == "list-range-leases" {
				n += v
			}
		}
	}
	return n
}
