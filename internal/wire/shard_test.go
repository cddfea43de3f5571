package wire

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bigTable is a table of s shards held by s candidates of identities of
// idLen bytes, each shard with a taker, and failed of them left out.
func bigTable(s, idLen, failed int) *Table {
	id := func(i int) string { return fmt.Sprintf("%0*d", idLen, i) }
	t := &Table{Assigned: map[string]string{}, Takers: map[string]string{}, Out: map[string]string{}}
	for i := range s {
		t.Assigned[fmt.Sprint(i)] = id(i)
		t.Takers[fmt.Sprint(i)] = id((i + 1) % s)
	}
	for i := range failed {
		t.Out[id(i)] = "123456789"
	}
	return t
}

func TestTableFit(t *testing.T) {
	const limit = 248 << 10
	// 1,000 shards with identities of 113 bytes (the longest New accepts
	// for them) and 60 % of the fleet left out: over the limit, until
	// some takers go.
	tb := bigTable(1000, 113, 600)
	holders, out := maps.Clone(tb.Assigned), maps.Clone(tb.Out)
	assert.Greater(t, tb.Size(), limit)
	takers, outs := tb.Fit(limit)
	assert.LessOrEqual(t, tb.Size(), limit)
	assert.Positive(t, takers)
	assert.Less(t, takers, 1000, "only as many takers as needed")
	assert.Zero(t, outs)
	assert.Equal(t, holders, tb.Assigned, "holders are never dropped")
	assert.Equal(t, out, tb.Out)
	t.Logf("1,000 shards, 113-byte identities, 600 left out: %d takers dropped, %d bytes", takers, tb.Size())

	// Takers are not enough: Out entries go too.
	tb = bigTable(1000, 113, 1000)
	tb.Out[strings.Repeat("x", 200)] = "1" // more than one per holder
	takers, outs = tb.Fit(160 << 10)
	assert.Equal(t, 1000, takers)
	assert.Positive(t, outs)
	assert.LessOrEqual(t, tb.Size(), 160<<10)
	assert.Len(t, tb.Assigned, 1000)

	// Within the limit: unchanged.
	tb = bigTable(10, 20, 3)
	before := Table{Assigned: maps.Clone(tb.Assigned), Takers: maps.Clone(tb.Takers), Out: maps.Clone(tb.Out)}
	takers, outs = tb.Fit(limit)
	assert.Zero(t, takers+outs)
	assert.Equal(t, before, *tb)
	takers, outs = tb.Fit(tb.Size()) // exactly at the limit
	assert.Zero(t, takers+outs)
	assert.Equal(t, before, *tb)
}

// TestShardSets: each kind of shard set reads back as what it runs;
// range shards run none of another set's, whatever it calls its shards.
func TestShardSets(t *testing.T) {
	for _, c := range []struct {
		shards []string
		ranges string
		want   string
		size   int
		runs   map[string]bool
	}{
		{[]string{"0", "1", "2"}, "", "count:3", 3, map[string]bool{"0": true, "2": true, "3": false, "01": false}},
		{[]string{"b", "a"}, "", "names:a,b", 2, map[string]bool{"a": true, "b": true, "c": false}},
		{[]string{"0", "1", "2", "3"}, "uid", "ranges:uid:4", 4, map[string]bool{"0": false, "1": false}},
		{[]string{"0", "1"}, "namespace", "ranges:namespace:2", 2, map[string]bool{"0": false}},
	} {
		v := EncodeShardSet(c.shards, c.ranges)
		assert.Equal(t, c.want, v)
		s, ok := ParseShardSet(v)
		require.True(t, ok, v)
		assert.Equal(t, c.size, s.Size, v)
		for sh, runs := range c.runs {
			assert.Equal(t, runs, s.Runs(sh), "%s runs %q", v, sh)
		}
	}
	for _, bad := range []string{"ranges::4", "ranges:uid", "ranges:uid:x", "count:x", "names:", "other:1"} {
		_, ok := ParseShardSet(bad)
		assert.False(t, ok, bad)
	}
}
