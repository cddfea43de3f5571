package shardrange

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/sharding"
)

// Field is the object field whose hash a Range divides: UID or Namespace.
// The zero value names no field (the zero Range's).
type Field string

const (
	// UID hashes object.metadata.uid: objects spread evenly over the
	// ranges, and an object never changes range (its uid is fixed).
	UID Field = "uid"
	// Namespace hashes object.metadata.namespace: a namespace's objects
	// are all in one range (a cluster-scoped object's namespace is "").
	Namespace Field = "namespace"
)

// Valid reports whether f is UID or Namespace.
func (f Field) Valid() bool { return f == UID || f == Namespace }

// path is the field's path as the ShardSelector names it.
func (f Field) path() string { return "object.metadata." + string(f) }

// ErrInvalid is the error (wrapped) of Of, Split and Parse for arguments
// that name no range.
var ErrInvalid = errors.New("shardrange: invalid range")

// Range is the objects whose field's 64-bit FNV-1a hash h has
// Start() ≤ h ≤ Last(): one shard of the data. Its bounds are inclusive,
// so that the last range of the space, whose exclusive end is 2^64, fits
// a uint64.
//
// The zero Range is the whole collection, unsharded: its Selector is "",
// it matches every object, and Tweak and NewListerWatcher leave lists
// and watches as they are. A Range is a value, comparable with ==, and
// safe for concurrent use.
type Range struct {
	field       Field
	start, last uint64
}

// Of returns shard i of count equal ranges of f's hash space: the hashes
// from ⌊i·2^64/count⌋ up to the next shard's start, exclusive (2^64 for the
// last). The ranges of 0..count-1 cover the space without overlap, and
// their sizes differ by at most one. It fails, with an error wrapping
// ErrInvalid, when f is not UID or Namespace, count < 1, or i is not in
// [0, count).
func Of(f Field, i, count int) (Range, error) {
	switch {
	case !f.Valid():
		return Range{}, fmt.Errorf("%w: field %q is neither %q nor %q", ErrInvalid, f, UID, Namespace)
	case count < 1:
		return Range{}, fmt.Errorf("%w: %d ranges", ErrInvalid, count)
	case i < 0 || i >= count:
		return Range{}, fmt.Errorf("%w: range %d of %d", ErrInvalid, i, count)
	}
	r := Range{field: f, start: startOf(i, count), last: math.MaxUint64}
	if i+1 < count {
		r.last = startOf(i+1, count) - 1
	}
	return r, nil
}

// startOf is ⌊i·2^64/count⌋, for 0 ≤ i < count.
func startOf(i, count int) uint64 {
	q, _ := bits.Div64(uint64(i), 0, uint64(count))
	return q
}

// Split returns the count equal ranges of f's hash space, Of(f, i, count)
// for i from 0; its errors are Of's.
func Split(f Field, count int) ([]Range, error) {
	if _, err := Of(f, 0, count); err != nil {
		return nil, err
	}
	out := make([]Range, count)
	for i := range out {
		out[i], _ = Of(f, i, count)
	}
	return out, nil
}

// Field returns the field whose hash the range divides; "" for the zero
// Range.
func (r Range) Field() Field { return r.field }

// Start returns the range's smallest hash (inclusive); 0 for the zero Range.
func (r Range) Start() uint64 { return r.start }

// Last returns the range's largest hash (inclusive); 0 for the zero Range.
func (r Range) Last() uint64 { return r.last }

// Contains reports whether hash is in the range; the zero Range contains
// every hash.
func (r Range) Contains(hash uint64) bool {
	return r.field == "" || (r.start <= hash && hash <= r.last)
}

// requirement is the range as apimachinery's sharding package writes it:
// bounds of 16 hex digits, the exclusive end of the space
// "0x10000000000000000".
func (r Range) requirement() sharding.ShardRangeRequirement {
	end := "0x10000000000000000"
	if r.last != math.MaxUint64 {
		end = fmt.Sprintf("0x%016x", r.last+1)
	}
	return sharding.ShardRangeRequirement{Key: r.field.path(), Start: fmt.Sprintf("0x%016x", r.start), End: end}
}

// selector is the range as apimachinery's matcher: Everything for the
// zero Range.
func (r Range) selector() sharding.Selector {
	if r.field == "" {
		return sharding.Everything()
	}
	return sharding.NewSelector(r.requirement())
}

// Selector returns the metav1.ListOptions.ShardSelector that asks the
// apiserver for the range's objects, for example
// "shardRange(object.metadata.uid, '0x4000000000000000', '0x8000000000000000')";
// "" for the zero Range (no filter). The apiserver filters only with the
// ShardedListAndWatch gate on, and then says so in the list answer's
// ListMeta.ShardInfo; an apiserver that does not filter ignores it and
// sends every object (NewListerWatcher filters those).
func (r Range) Selector() string { return r.selector().String() }

// Tweak sets o.ShardSelector to the range's Selector, replacing any; it
// fits an informer factory's TweakListOptions. Tweak alone does not
// filter when the apiserver does not: see NewListerWatcher.
func (r Range) Tweak(o *metav1.ListOptions) { o.ShardSelector = r.Selector() }

// Matches reports whether obj is in the range, hashing its field with
// apimachinery's matcher (the apiserver's). It fails only when obj has no
// object metadata. The zero Range matches every object.
func (r Range) Matches(obj runtime.Object) (bool, error) {
	return r.selector().Matches(obj)
}

type contextKey struct{}

// NewContext returns a copy of ctx that carries r (FromContext).
func NewContext(ctx context.Context, r Range) context.Context {
	return context.WithValue(ctx, contextKey{}, r)
}

// FromContext returns the range ctx carries: in relect, the context of
// ShardOptions.Run and of ShardOptions.Work.Check for a range shard
// (ShardOptions.Ranges set). ok is false for any other context.
func FromContext(ctx context.Context) (r Range, ok bool) {
	r, ok = ctx.Value(contextKey{}).(Range)
	return r, ok
}

// Parse returns the Range whose Selector is s: one shardRange of
// object.metadata.uid or .namespace with bounds of 16 lowercase hex digits
// ("0x10000000000000000" for the end of the space), spaces after the
// commas optional; "" gives the zero Range. It is not the apiserver's
// parser (a CEL expression that may join ranges with ||): it reads what
// Selector writes, such as relect run's RELECT_SHARD_RANGE. Any other
// string fails with an error wrapping ErrInvalid.
func Parse(s string) (Range, error) {
	if s == "" {
		return Range{}, nil
	}
	bad := func(why string) (Range, error) { return Range{}, fmt.Errorf("%w: %q: %s", ErrInvalid, s, why) }
	inner, okPrefix := strings.CutPrefix(s, "shardRange(")
	inner, okSuffix := strings.CutSuffix(inner, ")")
	if !okPrefix || !okSuffix {
		return bad("not shardRange(field, 'start', 'end')")
	}
	args := strings.Split(inner, ",")
	if len(args) != 3 {
		return bad("shardRange takes 3 arguments")
	}
	name, _ := strings.CutPrefix(strings.TrimSpace(args[0]), "object.metadata.")
	f := Field(name)
	if !f.Valid() {
		return bad("the field is neither object.metadata.uid nor object.metadata.namespace")
	}
	start, okStart := parseBound(args[1])
	end, okEnd := parseBound(args[2])
	last, endOfSpace := end-1, strings.TrimSpace(args[2]) == "'0x10000000000000000'"
	if endOfSpace {
		last, okEnd = math.MaxUint64, true
	}
	switch {
	case !okStart || !okEnd:
		return bad("a bound is not '0x' and 16 lowercase hex digits")
	case !endOfSpace && end <= start:
		return bad("the end does not exceed the start")
	}
	return Range{field: f, start: start, last: last}, nil
}

// parseBound reads a quoted bound of 16 lowercase hex digits, as
// apimachinery writes it.
func parseBound(arg string) (uint64, bool) {
	arg = strings.TrimSpace(arg)
	hex, okPrefix := strings.CutPrefix(arg, "'0x")
	hex, okSuffix := strings.CutSuffix(hex, "'")
	if !okPrefix || !okSuffix || len(hex) != 16 || strings.ToLower(hex) != hex {
		return 0, false
	}
	v, err := strconv.ParseUint(hex, 16, 64)
	return v, err == nil
}
