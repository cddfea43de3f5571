package shards

import (
	"context"
	"strconv"

	"github.com/relect/relect/shardrange"
)

// shardKey is the key of the shard's name in the contexts of its work.
type shardKey struct{}

// TermContext returns what the contexts of a shard's work (Run,
// Work.Check and Warm) get beyond their own: the shard's name
// (FromContext) and, for a range shard (ranges set, shard one of "0" to
// "count-1"; CheckOptions passed), its range (shardrange.NewContext).
func TermContext(ranges shardrange.Field, count int, shard string) func(ctx context.Context) context.Context {
	i, err := strconv.Atoi(shard)
	r, errOf := shardrange.Of(ranges, i, count)
	if ranges == "" || err != nil || errOf != nil {
		return func(ctx context.Context) context.Context { return context.WithValue(ctx, shardKey{}, shard) }
	}
	return func(ctx context.Context) context.Context {
		return shardrange.NewContext(context.WithValue(ctx, shardKey{}, shard), r)
	}
}

// FromContext returns the shard a context of TermContext is for; ok is
// false for any other context.
func FromContext(ctx context.Context) (shard string, ok bool) {
	shard, ok = ctx.Value(shardKey{}).(string)
	return shard, ok
}
