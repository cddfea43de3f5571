package relect

import (
	"context"
	"time"

	"github.com/relect/relect/internal/work"
)

// What a term's context carries — its number, its fencing token, its
// beats — and the functions that read it: TermFromContext,
// FenceFromContext, Beat.

// termValue is what a term's context carries (TermFromContext, Beat).
type termValue struct {
	number int64
	fence  Fence
	beats  *work.Beats // the work's beats (internal/work)
}

// TermFromContext returns the term number carried by the context given to
// OnStartedLeading or to ShardOptions.Run (or one derived from either): the
// number Elector.Term gives, for people and logs — for a shard, its own
// Lease's leaseTransitions. A shard's first term is 0 when its holder
// created the Lease and 1 when the leader created it released first (a
// first deployment), so numbers need not start at 0. Storage compares
// FenceFromContext's fence instead.
func TermFromContext(ctx context.Context) (number int64, ok bool) {
	tv, ok := ctx.Value(termKey{}).(*termValue)
	if !ok {
		return 0, false
	}
	return tv.number, true
}

type termKey struct{}

// FenceFromContext returns the fence of the term whose context ctx is (or
// derives from): the context given to OnStartedLeading, or to
// ShardOptions.Run — there the shard's own fence, which only grows from one
// of the shard's terms to the next, as the election's does. ok is false
// outside a term, and when the term has no fence (with Options.Lock, relect
// does not see the Lease object's resourceVersion; or the apiserver's is not
// an integer).
func FenceFromContext(ctx context.Context) (f Fence, ok bool) {
	tv, found := ctx.Value(termKey{}).(*termValue)
	if !found || tv.fence == "" {
		return "", false
	}
	return tv.fence, true
}

// Beat records that the work of the term whose context ctx is (or derives
// from) has made progress (WorkOptions.BeatWindow). It reports whether ctx
// carries a term. It never blocks and is safe for concurrent use; a beat
// from a term that has ended counts for nothing.
func Beat(ctx context.Context) bool {
	tv, ok := ctx.Value(termKey{}).(*termValue)
	if !ok {
		return false
	}
	tv.beats.Beat(time.Now())
	return true
}
