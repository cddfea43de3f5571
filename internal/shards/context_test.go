package shards

import (
	"testing"

	"github.com/relect/relect/shardrange"
)

// TestTermContext: a shard's term context carries the shard; a range
// shard's carries shard i's range of Count too, plain shards' none.
func TestTermContext(t *testing.T) {
	ctx := TermContext(shardrange.UID, 8, "3")(t.Context())
	got, ok := shardrange.FromContext(ctx)
	want, _ := shardrange.Of(shardrange.UID, 3, 8)
	if !ok || got != want {
		t.Errorf("range shard 3 of 8: FromContext = %+v, %v; want %+v", got, ok, want)
	}
	if sh, ok := FromContext(ctx); !ok || sh != "3" {
		t.Errorf("range shard 3 of 8: the shard is %q, %v; want \"3\"", sh, ok)
	}
	for _, c := range []struct {
		ranges shardrange.Field
		shard  string
	}{{"", "3"}, {shardrange.UID, "name"}, {shardrange.UID, "8"}} {
		ctx := TermContext(c.ranges, 8, c.shard)(t.Context())
		if _, ok := shardrange.FromContext(ctx); ok {
			t.Errorf("%+v: the context carries a range", c)
		}
		if sh, ok := FromContext(ctx); !ok || sh != c.shard {
			t.Errorf("%+v: the shard is %q, %v", c, sh, ok)
		}
	}
	if _, ok := FromContext(t.Context()); ok {
		t.Error("a context of no shard's work carries a shard")
	}
}
