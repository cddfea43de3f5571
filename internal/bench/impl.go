package bench

import "strconv"

// Impl is an implementation of leader election the benchmark and the
// simulation compare.
type Impl int

// The implementations.
const (
	// Relect is relect.Elector with every option at its default, one per
	// process, Run until cancelled.
	Relect Impl = iota + 1
	// ClientGoLoop is the plain client-go loop of elastic-agent PR #4542:
	// a client-go LeaderElector, re-created and Run in a loop until the
	// context is done (internal/clientgoloop).
	ClientGoLoop
)

// Impls lists the implementations, in report order.
var Impls = []Impl{Relect, ClientGoLoop}

// String is the implementation's name in reports: "relect", "client-go
// loop".
func (i Impl) String() string {
	switch i {
	case Relect:
		return "relect"
	case ClientGoLoop:
		return "client-go loop"
	}
	return "Impl(" + strconv.Itoa(int(i)) + ")"
}
