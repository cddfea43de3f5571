package wire

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Shards (docs/design.md, "Shards"): the leader writes the shard table, one
// Lease beside the election's naming each shard's holder; each shard has a
// Lease of its own, a plain relect election held by its holder, whose
// record is the only thing that makes a holder.

const (
	// LabelShardOf marks a shard Lease with the election's Lease name (as
	// LabelCandidateOf does), so that the leader watches them all with one
	// watch.
	LabelShardOf = "relect.io/shard-of"
	// LabelShardTableOf marks the shard table of an election.
	LabelShardTableOf = "relect.io/shard-table-of"
	// AnnotationShard is a shard Lease's shard name, for people and tools.
	AnnotationShard = "relect.io/shard"
	// AnnotationShardTable holds a Table on the shard table Lease.
	AnnotationShardTable = "relect.io/shard-table"
	// AnnotationShardWeight is a registration's ShardOptions.Weight;
	// missing on a candidate that takes no part in shards.
	AnnotationShardWeight = "relect.io/shard-weight"
	// AnnotationShardSet is a registration's shard set (ShardSetOf), so
	// that the leader gives a candidate only shards it runs; missing on a
	// registration written before it was added (read as the leader's).
	AnnotationShardSet = "relect.io/shard-set"
	// LabelShardRange is a range shard's Lease's range (RangeShard:
	// "uid-8-1", shard 1 of 8 uid ranges), set by every write of its
	// holder and by the leader's create, so that a holder of another
	// split can tell whether the Lease's range overlaps its own.
	LabelShardRange = "relect.io/shard-range"
)

// RangeSplit names the split of count range shards of field's hash
// ("uid-8"): the shard table's Split.
func RangeSplit(field string, count int) string {
	return field + "-" + strconv.Itoa(count)
}

// RangeShard is the key of range shard shard of count ranges of field's
// hash ("uid-8-1"): its Lease's LabelShardRange, and what its Lease's name
// carries in place of the shard (ShardLeaseNameIn), so that shard "1" of
// 4 and shard "1" of 8 are two Leases.
func RangeShard(field string, count int, shard string) string {
	return RangeSplit(field, count) + "-" + shard
}

// ShardLeaseNameIn is the name of shard's Lease for the Lease named lease
// in split (RangeSplit; "" for shards that split no data, whose Lease is
// ShardLeaseName's).
func ShardLeaseNameIn(lease, split, shard string) string {
	if split == "" {
		return ShardLeaseName(lease, shard)
	}
	return ShardLeaseName(lease, split+"-"+shard)
}

// ParseRangeShard reads a LabelShardRange value; ok is false if it is
// malformed (the field is not checked).
func ParseRangeShard(v string) (field string, count, index int, ok bool) {
	parts := strings.Split(v, "-")
	if len(parts) != 3 || parts[0] == "" {
		return "", 0, 0, false
	}
	count, err1 := strconv.Atoi(parts[1])
	index, err2 := strconv.Atoi(parts[2])
	if err1 != nil || err2 != nil || index < 0 || index >= count {
		return "", 0, 0, false
	}
	return parts[0], count, index, true
}

// maxShardSetNames is the longest list of names a shard set writes out;
// a longer one is written as its size and a hash.
const maxShardSetNames = 8 << 10

// EncodeShardSet is the AnnotationShardSet of shards (ShardOptions' names,
// in their order) split by ranges (ShardOptions.Ranges; "" for shards that
// split no data): "count:N" for the numbered shards "0" to "N-1",
// "names:a,b,c" (sorted) for named ones, "hash:N:<16 hex digits>" when
// the names would take more than 8 KiB, and "ranges:FIELD:N" for N range
// shards of FIELD's hash. Two candidates run the same shards exactly when
// their values are equal.
func EncodeShardSet(shards []string, ranges string) string {
	if ranges != "" {
		return "ranges:" + ranges + ":" + strconv.Itoa(len(shards))
	}
	numbered := true
	for i, sh := range shards {
		if sh != strconv.Itoa(i) {
			numbered = false
			break
		}
	}
	if numbered {
		return "count:" + strconv.Itoa(len(shards))
	}
	sorted := slices.Sorted(slices.Values(shards))
	joined := strings.Join(sorted, ",")
	if len(joined) <= maxShardSetNames {
		return "names:" + joined
	}
	sum := sha256.Sum256([]byte(joined))
	return "hash:" + strconv.Itoa(len(shards)) + ":" + hex.EncodeToString(sum[:8])
}

// ShardSet is a candidate's shard set as its registration says
// (ParseShardSet).
type ShardSet struct {
	// Size is how many shards it runs.
	Size int
	// count: numbered "0" to Size-1; names: these (sorted); neither: only
	// a hash is known, or the shards are ranges, whose shard "i" is
	// another range at another Size or of another field: it runs none of
	// another set's.
	count bool
	names []string
}

// ParseShardSet reads an AnnotationShardSet value; ok is false if it is
// malformed.
func ParseShardSet(v string) (s ShardSet, ok bool) {
	kind, rest, _ := strings.Cut(v, ":")
	switch kind {
	case "count":
		n, err := strconv.Atoi(rest)
		return ShardSet{Size: n, count: true}, err == nil && n >= 0
	case "names":
		names := strings.Split(rest, ",")
		return ShardSet{Size: len(names), names: names}, rest != ""
	case "hash":
		n, _, found := strings.Cut(rest, ":")
		size, err := strconv.Atoi(n)
		return ShardSet{Size: size}, found && err == nil && size >= 0
	case "ranges":
		field, n, found := strings.Cut(rest, ":")
		size, err := strconv.Atoi(n)
		return ShardSet{Size: size}, found && field != "" && err == nil && size >= 0
	}
	return s, false
}

// Runs reports whether the set runs shard; false when only its hash is
// known.
func (s ShardSet) Runs(shard string) bool {
	if s.count {
		n, err := strconv.Atoi(shard)
		return err == nil && n >= 0 && n < s.Size && strconv.Itoa(n) == shard
	}
	_, found := slices.BinarySearch(s.names, shard)
	return found
}

// ShardLeaseName is the name of shard's Lease for the Lease named lease:
// that name (cut to leave room), "-shard-", the shard, and 8 hex digits of
// a hash of both, so that it is told from another election's Lease.
func ShardLeaseName(lease, shard string) string {
	sum := sha256.Sum256([]byte(lease + "\x00" + shard))
	suffix := "-shard-" + shard + "-" + hex.EncodeToString(sum[:4])
	if len(suffix) > 200 {
		suffix = "-shard-" + hex.EncodeToString(sum[:8])
	}
	if len(lease)+len(suffix) > 253 {
		lease = lease[:253-len(suffix)]
	}
	return strings.TrimRight(lease, ".-") + suffix
}

// ShardTableName is the name of the shard table Lease of the Lease named
// lease.
func ShardTableName(lease string) string {
	sum := sha256.Sum256([]byte(lease))
	suffix := "-shards-" + hex.EncodeToString(sum[:4])
	if len(lease)+len(suffix) > 253 {
		lease = lease[:253-len(suffix)]
	}
	return strings.TrimRight(lease, ".-") + suffix
}

// ShardSelector selects the shard Leases of the Lease named lease.
func ShardSelector(lease string) string {
	return labels.SelectorFromSet(labels.Set{LabelShardOf: CandidateOf(lease)}).String()
}

// Table is the shard table as written by the leader.
type Table struct {
	// Assigned names the candidate each shard is assigned to: shard →
	// identity. A shard not in it is assigned to none. (Its holder is
	// whoever holds the shard's Lease, which follows the assignment; the
	// JSON key stays "holders", which every version reads and writes.)
	Assigned map[string]string `json:"holders,omitempty"`
	// Takers names, for a shard whose holder stopped renewing, the
	// candidate that follows its Lease to take it once it expires.
	Takers map[string]string `json:"takers,omitempty"`
	// Out are candidates the leader gives no shard until their
	// registration changes: identity → the registration's resourceVersion
	// when they were left out (they failed to renew, or to take, a shard).
	Out map[string]string `json:"out,omitempty"`
	// Failing names the shards whose work keeps failing — their holder
	// gave them up, its work stuck, or its Run returned or panicked —
	// with their failures in a row: shard → count. A shard not in it is
	// healthy.
	Failing map[string]int `json:"failing,omitempty"`
	// Set is the number of shards of the leader that wrote the table, and
	// Differ the candidates whose shard set (AnnotationShardSet) differs
	// from its own: identity → how many shards they run. Each is given
	// only shards it runs.
	Set    int            `json:"set,omitempty"`
	Differ map[string]int `json:"differ,omitempty"`
	// Unseen are holders the leader's view of the registry does not show
	// taking part (their registration deleted by hand, or its weight
	// edited), with their registration's resourceVersion ("" if it is
	// missing): they keep what they hold, and register again when they
	// read it.
	Unseen map[string]string `json:"unseen,omitempty"`
	// Split is, for range shards, the split of the leader that wrote the
	// table (RangeSplit: "uid-8"), whose shard "i" has the Lease
	// ShardLeaseNameIn names; empty for shards that split no data.
	Split string `json:"split,omitempty"`
}

// Wants reports whether the table asks identity to campaign for shard: as
// its holder or as its taker.
func (t *Table) Wants(shard, identity string) bool {
	return t != nil && (t.Assigned[shard] == identity || t.Takers[shard] == identity)
}

// Size is the length of t as written in its annotation, in bytes.
func (t *Table) Size() int {
	raw, err := json.Marshal(t)
	if err != nil {
		return 0
	}
	return len(raw)
}

// Fit makes t at most limit bytes (Size) if it is over: it names no taker
// for shards from the last in sort order back, then, if that is not
// enough, leaves out fewer candidates (from the last identity back). A
// table without takers still moves every shard, by the leader's writes;
// holders are never dropped. It returns how many takers and how many
// entries of Out it dropped.
func (t *Table) Fit(limit int) (takers, out int) {
	n := 0
	for _, m := range []map[string]string{t.Assigned, t.Takers, t.Out} {
		for k, v := range m {
			n += len(k) + len(v) + len(`"":"",`)
		}
	}
	if 6*n+64 <= limit { // even if JSON wrote every byte as six
		return 0, 0
	}
	size := t.Size()
	if size <= limit {
		return 0, 0
	}
	drop := func(m map[string]string) (n int) {
		keys := slices.Sorted(maps.Keys(m))
		for i := len(keys) - 1; i >= 0 && size > limit; i-- {
			raw, _ := json.Marshal(map[string]string{keys[i]: m[keys[i]]})
			delete(m, keys[i])
			size -= len(raw) - 1 // "k":"v" and its comma, not the braces
			n++
		}
		return n
	}
	takers = drop(t.Takers)
	size = t.Size() // exact again: an emptied map's key is left out too
	out = drop(t.Out)
	return takers, out
}

// TableOf reads a shard table Lease; nil if l carries none or it is
// malformed.
func TableOf(l *coordinationv1.Lease) *Table {
	raw, ok := l.Annotations[AnnotationShardTable]
	if !ok {
		return nil
	}
	var t Table
	if json.Unmarshal([]byte(raw), &t) != nil {
		return nil
	}
	return &t
}

// SetTable makes l the shard table Lease of the Lease named lease, written
// by holder in term with t, at now.
func SetTable(l *coordinationv1.Lease, lease, holder string, term int32, t *Table, now time.Time) {
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[LabelShardTableOf] = CandidateOf(lease)
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[AnnotationLease] = lease
	raw, _ := json.Marshal(t)
	l.Annotations[AnnotationShardTable] = string(raw)
	tt := metav1.NewMicroTime(now)
	l.Spec.HolderIdentity, l.Spec.LeaseTransitions = &holder, &term
	l.Spec.RenewTime = &tt
	if l.Spec.AcquireTime == nil {
		l.Spec.AcquireTime = &tt
	}
}

// ShardWeightOf is a registration's shard weight; 0 if it takes no part.
func ShardWeightOf(l *coordinationv1.Lease) int32 {
	w, err := strconv.ParseInt(l.Annotations[AnnotationShardWeight], 10, 32)
	if err != nil || w < 0 {
		return 0
	}
	return int32(w)
}
