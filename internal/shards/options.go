package shards

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/relect/relect/internal/problem"
	"github.com/relect/relect/internal/wire"
	"github.com/relect/relect/internal/work"
	"github.com/relect/relect/shardrange"
)

// Settings are what CheckOptions reads of relect.Options: the fields of
// Options.Shards, and the election's own that shards depend on. The
// pointers are Options.Shards' fields, which CheckOptions defaults in
// place.
type Settings struct {
	Count     int
	Names     []string
	Ranges    shardrange.Field
	HasRun    bool // Shards.Run is not nil
	Weight    *int32
	JoinDelay *time.Duration
	Work      *work.Options

	// LeaseDuration is Options.LeaseDuration, valid if DurationsOK.
	LeaseDuration time.Duration
	DurationsOK   bool
	// Lock is Options.Lock set; DisableRegistry is Options.DisableRegistry.
	Lock, DisableRegistry bool
	// Identity is Options.Identity; DefaultIdentityLen gives the length
	// (as JSON) of the default identity New makes when it is empty.
	Identity           string
	DefaultIdentityLen func() int
}

// CheckOptions defaults and checks Options.Shards (which must ask for
// shards) as s gives them, reporting each problem to bad, in the order:
// the names, Ranges, Run, Weight, JoinDelay, the registry, Work, the
// table's size.
func CheckOptions(s Settings, bad problem.Report) {
	checkNames(s.Count, s.Names, bad)
	checkRanges(s, bad)
	if !s.HasRun {
		bad("Shards.Run", "is nil")
	}
	switch {
	case *s.Weight < 0:
		bad("Shards.Weight", "is negative (%d)", *s.Weight)
	case *s.Weight == 0:
		*s.Weight = 1
	}
	switch {
	case *s.JoinDelay < 0:
		bad("Shards.JoinDelay", "is negative (%v)", *s.JoinDelay)
	case *s.JoinDelay == 0 && s.DurationsOK:
		*s.JoinDelay = s.LeaseDuration
	}
	switch {
	case s.Lock:
		bad("Shards", "is set, but %s is too: shards need the candidate registry, which a %s has not", problem.Ref("Lock"), problem.Ref("Lock"))
	case s.DisableRegistry:
		bad("Shards", "is set, but %s is too: the leader assigns shards to the registered candidates", problem.Ref("DisableRegistry"))
	}
	work.Resolve(s.Work, "Shards.Work", false, bad)
	checkTable(s, bad)
}

// Names returns the shard names Shards.Count or Shards.Names configure:
// Names if set, else "0" to "Count-1"; nil without shards.
func Names(count int, names []string) []string {
	if len(names) > 0 {
		return slices.Clone(names)
	}
	if count <= 0 {
		return nil
	}
	out := make([]string, count)
	for i := range out {
		out[i] = strconv.Itoa(i)
	}
	return out
}

// checkNames checks Shards.Count and Names.
func checkNames(count int, names []string, bad problem.Report) {
	switch {
	case count < 0:
		bad("Shards.Count", "is negative (%d)", count)
	case count > 0 && len(names) > 0:
		bad("Shards.Count", "is %d and %s has %d names: set one of them", count, problem.Ref("Shards.Names"), len(names))
	case count == 0 && len(names) == 0:
		bad("Shards.Count", "is 0 and %s is empty: set one of them to take part in shards", problem.Ref("Shards.Names"))
	case count > MaxShards:
		bad("Shards.Count", "%d is more than %d shards", count, MaxShards)
	case len(names) > MaxShards:
		bad("Shards.Names", "has %d names, more than %d", len(names), MaxShards)
	}
	seen := map[string]bool{}
	for i, n := range names {
		field := fmt.Sprintf("Shards.Names[%d]", i)
		switch msgs := validation.IsDNS1123Label(n); {
		case len(msgs) > 0:
			bad(field, "%q is not a DNS label: %s", n, msgs[0])
		case seen[n]:
			bad(field, "%q is named twice", n)
		}
		seen[n] = true
	}
}

// checkRanges checks Shards.Ranges: a field shardrange knows, and range
// shards are numbered ones.
func checkRanges(s Settings, bad problem.Report) {
	switch {
	case s.Ranges == "":
	case !s.Ranges.Valid():
		bad("Shards.Ranges", "is %q: set %q, %q, or nothing for shards that do not split the data", s.Ranges, shardrange.UID, shardrange.Namespace)
	case len(s.Names) > 0:
		bad("Shards.Ranges", "is %q and %s is set: range shards are numbered, set %s instead", s.Ranges, problem.Ref("Shards.Names"), problem.Ref("Shards.Count"))
	case s.Count <= 0:
		bad("Shards.Ranges", "is %q and %s is %d: range shards are the Count equal ranges of the hash space", s.Ranges, problem.Ref("Shards.Count"), s.Count)
	}
}

// LeaseOf returns the name and labels of the Lease of shard shard of the
// election whose Lease is named lease, with ranges and count its
// ShardOptions.Ranges and Count: wire.ShardLeaseName and
// wire.LabelShardOf; a range shard's name carries its split
// (wire.ShardLeaseNameIn), and its labels wire.LabelShardRange, so that each
// split has Leases of its own, each saying its range.
func LeaseOf(lease string, ranges shardrange.Field, count int, shard string) (name string, labels map[string]string) {
	labels = map[string]string{wire.LabelShardOf: wire.CandidateOf(lease)}
	if ranges == "" {
		return wire.ShardLeaseName(lease, shard), labels
	}
	labels[wire.LabelShardRange] = wire.RangeShard(string(ranges), count, shard)
	return wire.ShardLeaseNameIn(lease, wire.RangeSplit(string(ranges), count), shard), labels
}

// leaseOf is LeaseOf for shard sh of the election c configures.
func (c *Config) leaseOf(sh string) (name string, labels map[string]string) {
	return LeaseOf(c.Name, shardrange.Field(c.Ranges), len(c.Shards), sh)
}

// checkTable checks that the shard table fits the Lease's annotations. The
// table names every shard's holder and taker: judged with identities as
// long as this candidate's, it must fit, or the apiserver refuses every
// table the leader writes and no shard is ever assigned.
func checkTable(s Settings, bad problem.Report) {
	idLen, whose := JSONLen(s.Identity), problem.Ref("Identity")
	if s.Identity == "" {
		idLen, whose = s.DefaultIdentityLen(), problem.Ref("Identity")+" left empty: the host name and 16 hex digits"
	}
	if names := Names(s.Count, s.Names); len(names) > 0 && len(names) <= MaxShards {
		if size := TableSize(names, idLen); size > TableBudget {
			field := "Shards.Count"
			if len(s.Names) > 0 {
				field = "Shards.Names"
			}
			bad(field, "makes a shard table of about %d KiB with identities of %d bytes as JSON (%s), more than the %d KiB of the Lease's annotations it may use (the apiserver allows %d KiB): fewer shards, shorter shard names or a shorter identity",
				(size+1023)>>10, idLen, whose, TableBudget>>10, AnnotationLimit>>10)
		}
	}
}
