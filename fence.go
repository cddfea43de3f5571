package relect

import (
	"cmp"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// Fence is a term's fencing token: the resourceVersion the apiserver gave
// the write that began the term (the Lease written naming this candidate,
// the first write of its term). A store that the leader writes to keeps
// the highest fence it has accepted and refuses a write that carries a
// lower one: a deposed leader's late write — from a paused process, or a
// request stuck in a proxy — then never lands after a newer leader's
// (Kleppmann's fencing argument). Recipes for SQL, etcd and Kubernetes
// objects: docs/fencing.md; the argument: docs/design.md, "Fencing tokens,
// and term numbers".
//
// Every acquisition writes the Lease, and every write gets a larger
// resourceVersion than any before it (it is etcd's revision, which keeps
// growing across a deletion and re-creation of the Lease, and across
// apiserver restarts). So every term's fence is larger than the fence of
// every term that began before it — also the same candidate's own earlier
// term, and a term that follows a Yield by the same candidate — which the
// term number (the Lease's leaseTransitions) does not promise: two terms of
// one candidate in a row share a number, and a Lease created again by a
// plain client-go candidate starts over at 0. Kubernetes promises that
// resourceVersions are comparable integers from 1.35 on (KEP-5504);
// etcd-backed apiservers produced them before that too. A resourceVersion
// that is not a decimal integer (another storage) gives no fence.
//
// A Fence is the resourceVersion's decimal digits, without leading zeros,
// compared as integers of any length (Compare); the zero Fence, "", is no
// fence. Uint64 gives it as a number for storage that wants one.
type Fence string

// newFence returns the fence of a write that left resourceVersion rv, or ""
// if rv is not a well-formed one (a decimal integer without leading zeros).
func newFence(rv string) Fence {
	if _, err := resourceversion.CompareResourceVersion(rv, rv); err != nil {
		return ""
	}
	return Fence(rv)
}

// ParseFence returns s as a Fence, for a fence that travelled as text (the
// RELECT_FENCE variable of relect run's CMD, the sidecar's "fence", a
// column or annotation a store keeps). s must be a well-formed
// resourceVersion: a positive decimal integer without leading zeros, of any
// length. Otherwise it returns the zero Fence and an error that names s and
// wraps ErrInvalidFence ("" gives one that says there is no fence).
func ParseFence(s string) (Fence, error) {
	if s == "" {
		return "", fmt.Errorf("%w: no fence (empty)", ErrInvalidFence)
	}
	if f := newFence(s); f != "" {
		return f, nil
	}
	return "", fmt.Errorf("%w: %q is not a positive decimal integer without leading zeros", ErrInvalidFence, s)
}

// Valid reports whether f is a fence relect hands out (a well-formed
// resourceVersion; see ParseFence). The zero Fence is not valid.
func (f Fence) Valid() bool { return f != "" && newFence(string(f)) == f }

// Compare returns −1, 0 or +1 as f is older than, the same as, or newer
// than g: valid fences as integers of any length (Kubernetes' rule,
// resourceversion.CompareResourceVersion). Compare is a total order: a
// Fence that is not valid (the zero Fence, or text that did not come from
// relect, such as an annotation garbled by hand) is older than every valid
// one — so it never blocks a real term's write — and such fences order
// among themselves by their text. Check input with ParseFence or Valid
// where a bad fence must be refused rather than ordered.
func (f Fence) Compare(g Fence) int {
	if f == g {
		return 0
	}
	fv, gv := f.Valid(), g.Valid()
	switch {
	case fv && gv:
		c, _ := resourceversion.CompareResourceVersion(string(f), string(g))
		return c
	case fv:
		return 1
	case gv:
		return -1
	}
	return cmp.Compare(f, g)
}

// Uint64 returns f as a number, for storage that compares integers (a SQL
// column, an etcd value). It fails, with an error that wraps
// ErrInvalidFence, for a Fence that is not valid (the zero Fence included),
// and for one that does not fit 64 bits (etcd's revisions are 64-bit).
func (f Fence) Uint64() (uint64, error) {
	if !f.Valid() {
		_, err := ParseFence(string(f))
		return 0, err
	}
	n, err := strconv.ParseUint(string(f), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s does not fit 64 bits", ErrInvalidFence, f)
	}
	return n, nil
}
