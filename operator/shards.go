package operator

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/internal/wire"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Shards (relect.ShardOptions, docs/design.md "Shards"): the election's
// leader writes the shard table, a Lease beside the election's that names
// each shard's holder, its taker (a candidate that follows a shard whose
// holder stopped renewing, to take it once it expires) and the candidates
// left out; each shard has a Lease of its own, a plain relect election,
// whose record alone makes a holder. The table says who campaigns for a
// shard, never who holds it: a Shard shows both, and they differ while a
// shard moves.

// ShardTable is an election's shards as ListShards read them: what the
// shard table says, and what each shard's own Lease says. The zero value
// is an election without shards (no table, no shard Lease). It is a
// snapshot: nothing in it changes after ListShards returned.
type ShardTable struct {
	// Found reports whether the shard table Lease exists and carries a
	// table that parses. A missing or malformed table changes nothing for
	// the candidates (each shard stays with whoever holds its Lease), and
	// Shards still lists the shard Leases found.
	Found bool
	// Writer is the leader that last wrote the table, Term its term (the
	// election's leaseTransitions then), and WrittenAt when, by the
	// writer's clock; empty, zero and zero when the table Lease is
	// missing.
	Writer    string
	Term      int32
	WrittenAt time.Time
	// Out are the candidates the leader gives no shard until their
	// registration changes (they failed to renew, or to take, a shard),
	// sorted; nil if none.
	Out []string
	// Differ are the candidates whose shard set (ShardOptions.Count or
	// Names) differs from the leader's that wrote the table, with how
	// many shards each runs, and Set how many the leader runs; nil and 0
	// when every candidate runs the leader's set. A rolling update that
	// changes the set shows them until it is done.
	Differ map[string]int
	Set    int
	// Shards are the shards the table names or that have a Lease, in the
	// order of their names: numbered shards by number ("2" before "10"),
	// then named ones as strings. A shard configured on the candidates but
	// neither assigned nor given a Lease yet is not known to the API, and
	// not listed.
	Shards []Shard
	// At is when the validity of every Shard was judged: this machine's
	// clock once the API calls had returned.
	At time.Time
}

// HasShards reports whether t shows any shard at all: a table, or a
// shard Lease.
func (t ShardTable) HasShards() bool { return t.Found || len(t.Shards) > 0 }

// Shard is one shard of an election (ShardTable.Shards).
type Shard struct {
	// Name is the shard's name: "0" to "Count-1", or one of
	// ShardOptions.Names.
	Name string
	// Lease is the name of the shard's Lease, in the election's namespace:
	// the election's name, "-shard-", the shard and a hash (the hash alone
	// for a shard name too long), cut to 253 bytes.
	Lease string
	// Assigned is the holder the table assigns the shard, and Taker the
	// candidate it asks to follow the shard's Lease and take it once its
	// holder releases it or its lease expires (named for every shard held
	// where the table keeps it); "" for none, and both "" without a
	// table.
	Assigned string
	Taker    string
	// Failures is, for a shard whose work keeps failing (its holder gave
	// it up: its work stuck, or its Run returned or panicked), how many
	// times in a row, as the table says; 0 for a healthy shard. The
	// leader passes each holder that gave it up over for it for a
	// cooldown that doubles with each failure (docs/design.md).
	Failures int
	// Exists reports whether the shard's Lease exists: the leader creates
	// a missing one (released) once it has seen it missing for
	// LeaseDuration, so a first deployment shows assigned shards without a
	// Lease for that long.
	Exists bool
	// Holder is the holder the shard's Lease names; "" if it is missing,
	// released or emptied. Released reports a release (no holder,
	// leaseDurationSeconds 1: the holder's work returned, or it stopped,
	// or the leader created the Lease).
	Holder   string
	Released bool
	// Valid reports whether Holder holds the shard as of ShardTable.At: a
	// holder whose Lease was renewed (or, never renewed, acquired) less
	// than leaseDurationSeconds before At. Like relect status's single
	// look, it compares the Lease's renew time with this machine's clock,
	// which assumes the holder's clock and this one agree: an estimate (a
	// candidate judges from when it observed the record, not from its
	// timestamps). False for a holder that stopped renewing (Expires has
	// passed), and without a holder.
	Valid bool
	// RenewTime is the Lease's renew time (its acquire time if it has
	// none), by the holder's clock; Expires is RenewTime +
	// leaseDurationSeconds. Both zero without a Lease; Expires zero
	// without a holder.
	RenewTime time.Time
	Expires   time.Time
	// Term is the shard Lease's leaseTransitions, for people and logs
	// (relect.TermFromContext of the holder's ShardOptions.Run); zero
	// without a Lease.
	Term int32
	// Fence is the fencing token of the holder's term of the shard, as
	// the holder published it in the shard's Lease (as Fence reads the
	// election's): the relect.FenceFromContext its ShardOptions.Run saw.
	// Empty when the Lease carries none for its current holder and term
	// (released, or a term only just begun). Fences of one shard only
	// grow; storage keeps the highest it accepted per shard.
	Fence relect.Fence
}

// ListShards reads the shards of the election of the Lease namespace/name
// with client: one Get of the shard table Lease and one List of the shard
// Leases (by their label), for tools and operators (the relect command's
// status). A missing table or a missing Lease is no error: an election
// without shards gives the zero ShardTable but for At (HasShards false).
// It returns the client's error of either call (RBAC: leases get and list
// in namespace). It blocks on the API calls; it keeps no state, and is
// safe for concurrent use.
func ListShards(ctx context.Context, client kubernetes.Interface, namespace, name string) (ShardTable, error) {
	leases := client.CoordinationV1().Leases(namespace)
	tl, err := leases.Get(ctx, wire.ShardTableName(name), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		tl = nil
	case err != nil:
		return ShardTable{}, err
	}
	list, err := leases.List(ctx, metav1.ListOptions{LabelSelector: wire.ShardSelector(name)})
	if err != nil {
		return ShardTable{}, err
	}
	return shardTableOf(name, tl, list.Items, time.Now()), nil
}

// shardTableOf reads the table Lease tl (nil: missing) and the shard
// Leases items of the election's Lease name, judged at now.
func shardTableOf(name string, tl *coordinationv1.Lease, items []coordinationv1.Lease, now time.Time) ShardTable {
	out := ShardTable{At: now}
	table := out.readTable(tl)
	out.Shards = shardsOf(name, table, items, now)
	return out
}

// readTable sets out's facts of the table Lease tl (nil: missing): who
// wrote it and when, the shards out, the shard sets that differ; it
// returns the table tl carries (the zero Table if none).
func (out *ShardTable) readTable(tl *coordinationv1.Lease) wire.Table {
	var table wire.Table
	if tl != nil {
		out.Writer, out.Term = wire.Holder(tl), wire.Transitions(tl)
		if tl.Spec.RenewTime != nil {
			out.WrittenAt = tl.Spec.RenewTime.Time
		}
		if t := wire.TableOf(tl); t != nil {
			out.Found, table = true, *t
		}
	}
	if len(table.Out) > 0 {
		out.Out = slices.Sorted(maps.Keys(table.Out))
	}
	if len(table.Differ) > 0 {
		out.Differ, out.Set = table.Differ, table.Set
	}
	return table
}

// shardsOf returns the shards that table names, with what their Leases
// among items (of the election's Lease name) say at now, sorted by name;
// nil if there are none.
func shardsOf(name string, table wire.Table, items []coordinationv1.Lease, now time.Time) []Shard {
	byName := map[string]*Shard{}
	shard := func(sh string) *Shard {
		s := byName[sh]
		if s == nil {
			s = &Shard{Name: sh, Lease: wire.ShardLeaseNameIn(name, table.Split, sh), Assigned: table.Assigned[sh], Taker: table.Takers[sh], Failures: table.Failing[sh]}
			byName[sh] = s
		}
		return s
	}
	for sh := range table.Assigned {
		shard(sh)
	}
	for sh := range table.Takers {
		shard(sh)
	}
	for sh := range table.Failing {
		shard(sh)
	}
	// A shard Lease names its shard (AnnotationShard); one that does not,
	// or whose name is not that shard's, is another object carrying the
	// label (by hand): it is matched by name to a shard the table names,
	// or left out.
	leaseOf := map[string]string{}
	for sh, s := range byName {
		leaseOf[s.Lease] = sh
	}
	for i := range items {
		l := &items[i]
		sh, ok := l.Annotations[wire.AnnotationShard]
		if !ok || wire.ShardLeaseNameIn(name, table.Split, sh) != l.Name {
			if sh, ok = leaseOf[l.Name]; !ok {
				continue
			}
		}
		readShardLease(shard(sh), l, now)
	}
	if len(byName) == 0 {
		return nil
	}
	out := make([]Shard, 0, len(byName))
	for _, s := range byName {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b Shard) int { return compareShardNames(a.Name, b.Name) })
	return out
}

// readShardLease fills s from its Lease l, judged at now.
func readShardLease(s *Shard, l *coordinationv1.Lease, now time.Time) {
	s.Exists = true
	s.Holder, s.Released, s.Term = wire.Holder(l), wire.Released(l), wire.Transitions(l)
	s.Fence = Fence(l)
	switch {
	case l.Spec.RenewTime != nil:
		s.RenewTime = l.Spec.RenewTime.Time
	case l.Spec.AcquireTime != nil:
		s.RenewTime = l.Spec.AcquireTime.Time
	}
	if s.Holder == "" || s.RenewTime.IsZero() {
		return
	}
	var seconds int32
	if l.Spec.LeaseDurationSeconds != nil {
		seconds = *l.Spec.LeaseDurationSeconds
	}
	s.Expires = s.RenewTime.Add(time.Duration(seconds) * time.Second)
	s.Valid = now.Before(s.Expires)
}

// compareShardNames orders shard names: numbers by value, before names,
// which are ordered as strings.
func compareShardNames(a, b string) int {
	an, aErr := strconv.ParseUint(a, 10, 64)
	bn, bErr := strconv.ParseUint(b, 10, 64)
	switch {
	case aErr == nil && bErr == nil:
		return cmp.Or(cmp.Compare(an, bn), cmp.Compare(a, b)) // "07" before "7"
	case aErr == nil:
		return -1
	case bErr == nil:
		return 1
	}
	return cmp.Compare(a, b)
}
