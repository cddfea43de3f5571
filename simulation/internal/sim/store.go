package sim

import (
	"cmp"
	"strconv"
	"sync"

	"github.com/relect/relect"
)

// The stores every leader writes to (issue 21): what a user of the election
// guards with its token. A relect leader writes every write twice, once to a
// store guarded by relect's fence (relect.FenceFromContext) and once to a
// store guarded by its term number (relect.TermFromContext), which is what
// users naively take for a fencing token; a client-go loop leader writes to
// a store without a guard. How the writes travel is in wire.go; what the
// checkers make of them is in checkfence.go.

// Store names one of the stores the leaders write to.
type Store string

// The stores.
const (
	// StoreFence is guarded by relect's fence: it accepts a write whose
	// fence is at least the highest it has accepted (relect.Fence.Compare).
	StoreFence Store = "fence"
	// StoreTerm is guarded by relect's term number, in the same way: two
	// consecutive terms of one candidate share a number, and a Lease
	// created again starts the numbers over.
	StoreTerm Store = "term number"
	// StorePlain has no guard: it applies every write it receives (the
	// client-go loop's leaders, which have no token).
	StorePlain Store = "none"
)

// storesOf lists the stores the leaders of impl write to, in report order.
func storesOf(impl Impl) []Store {
	if impl == Relect {
		return []Store{StoreFence, StoreTerm}
	}
	return []Store{StorePlain}
}

// compareTokens orders two tokens of store s as Fence.Compare does: −1, 0
// or +1 as a is older than, the same as, or newer than b; "" is older than
// any other. Every token of StorePlain is the same.
func compareTokens(s Store, a, b string) int {
	switch s {
	case StoreFence:
		return relect.Fence(a).Compare(relect.Fence(b))
	case StoreTerm:
		switch {
		case a == b:
			return 0
		case a == "":
			return -1
		case b == "":
			return 1
		}
		x, _ := strconv.ParseInt(a, 10, 64)
		y, _ := strconv.ParseInt(b, 10, 64)
		return cmp.Compare(x, y)
	}
	return 0
}

// register is one store: a register that accepts a write only if its token
// is at least the highest it has accepted (StorePlain: every write). It is
// safe for concurrent use.
type register struct {
	store Store

	mu      sync.Mutex // guards highest and applied
	highest string     // the highest token accepted; "" before the first
	applied int        // writes that reached it, accepted or not
}

// write applies a write with token to the register, and returns whether it
// was accepted, and its position among the writes that reached it (0 for
// the first).
func (g *register) write(token string) (accepted bool, order int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	order = g.applied
	g.applied++
	if g.store != StorePlain && compareTokens(g.store, token, g.highest) < 0 {
		return false, order
	}
	g.highest = token
	return true, order
}

// read returns the highest token the register has accepted.
func (g *register) read() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.highest
}
