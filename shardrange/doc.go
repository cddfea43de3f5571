// Package shardrange is a shard of the data: a range of the 64-bit FNV-1a
// hash of each object's metadata.uid (or metadata.namespace), as the
// apiserver's sharded list and watch serve it (KEP-5866, the alpha feature
// gate ShardedListAndWatch: metav1.ListOptions.ShardSelector, and
// metav1.ListMeta.ShardInfo on a list answer the apiserver filtered).
//
// With relect.ShardOptions.Ranges set, each of the Count shards is an
// equal range of the hash space (Of), and the context of a shard's term
// carries its range (FromContext). The holder passes it to its lists and
// watches:
//
//   - Range.Selector is the ShardSelector string, and Range.Tweak sets it
//     on a metav1.ListOptions (an informer factory's TweakListOptions);
//   - Range.Matches tells whether an object is in the range, with
//     apimachinery's own matcher (k8s.io/apimachinery/pkg/sharding), so
//     that client and apiserver hash alike;
//   - NewListerWatcher wraps a client-go cache.ListerWatcher so that an
//     informer holds the range's objects only, whether or not the
//     apiserver filters: when it does not (the gate off, or an apiserver
//     older than Kubernetes 1.36), the wrapper drops the other objects
//     itself and says so once.
//
// A program given its range as a string (relect run's RELECT_SHARD_RANGE)
// reads it back with Parse.
//
// The package knows no election: it has no state, and everything in it is
// safe for concurrent use.
package shardrange
