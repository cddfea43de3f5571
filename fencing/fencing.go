// Package fencing guards a store against a deposed leader's late writes,
// with relect's fencing tokens (relect.Fence): a Guard admits a write only
// if its fence is at least the highest it has admitted, so a write from an
// older term never lands after one from a newer term — whatever the old
// leader believes, however late its request arrives.
//
// A Guard is for storage that lives in one process. UpdateObject writes a
// Kubernetes object the same way, keeping the highest fence in one of its
// annotations and updating it conditional on the resourceVersion read.
// For storage of its own, do the same comparison in the store, in the
// same transaction as the write: docs/fencing.md has recipes for SQL and
// etcd, and for the objects of a range shard (and docs/design.md,
// "Fencing tokens, and term numbers", the argument).
package fencing

import (
	"errors"
	"fmt"
	"sync"

	"github.com/relect/relect"
)

var (
	// ErrStale is returned (wrapped, with both fences) for a write whose
	// fence is older than one the Guard has already admitted: it comes
	// from a term that has ended.
	ErrStale = errors.New("fencing: a newer term has written")

	// ErrNoFence is returned for a write without a fence (the zero Fence):
	// its term has none, or it comes from outside a term. A write whose
	// fence is not valid (relect.Fence.Valid: text that relect never hands
	// out, such as a value garbled on its way) is refused with an error that
	// wraps both ErrNoFence and relect.ErrInvalidFence.
	ErrNoFence = errors.New("fencing: the write carries no fence")
)

// Guard keeps the highest fence it has admitted. The zero value is ready
// and admits any fence first. A Guard is safe for concurrent use; it must
// not be copied after first use.
type Guard struct {
	mu      sync.Mutex // guards highest, and makes Do's check and write one step
	highest relect.Fence
}

// Admit admits a write with fence f: it returns nil, and f becomes the
// highest admitted if it is higher, if f is at least the highest admitted;
// else an error that wraps ErrStale; ErrNoFence for the zero Fence and for
// a fence that is not valid (never admitted, so it cannot block later
// terms). It
// never blocks but on the Guard's own lock. Admit alone checks: to make
// the check and the write one step, use Do.
func (g *Guard) Admit(f relect.Fence) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.admitLocked(f)
}

// Do admits a write with fence f, as Admit, and runs write while it holds
// the Guard, so that no write with another fence is admitted in between:
// it returns Admit's error without running write, or write's error. The
// fence counts as admitted even if write fails: a newer term tried to
// write, so the older one must not.
func (g *Guard) Do(f relect.Fence, write func() error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.admitLocked(f); err != nil {
		return err
	}
	return write()
}

// Highest returns the highest fence admitted, or the zero Fence if none.
func (g *Guard) Highest() relect.Fence {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.highest
}

func (g *Guard) admitLocked(f relect.Fence) error {
	if err := checkFence(f); err != nil {
		return err
	}
	if f.Compare(g.highest) < 0 {
		return fmt.Errorf("%w: the write's fence %s is older than %s", ErrStale, f, g.highest)
	}
	g.highest = f
	return nil
}

// checkFence refuses a write without a valid fence: ErrNoFence for the
// zero Fence, and an error wrapping ErrNoFence and relect.ErrInvalidFence
// for text relect never hands out (admitted as the highest, such garbage
// would refuse every real term's write).
func checkFence(f relect.Fence) error {
	switch {
	case f == "":
		return ErrNoFence
	case !f.Valid():
		return fmt.Errorf("%w: %q is not a fence relect hands out: %w", ErrNoFence, f, relect.ErrInvalidFence)
	}
	return nil
}
