// Package clientgoloop is the plain client-go leader election that relect
// is compared with everywhere: the hand-written loop of elastic-agent PR
// #4542. A client-go LeaderElector with ReleaseOnCancel is re-created and
// Run again each time its Run returns, until the context is done. It adds
// nothing to client-go's election: followers poll the Lease every
// RetryPeriod to 2.2 × RetryPeriod, every failure is paced by client-go
// alone, and IsLeader is the current elector's.
//
// It is the one copy of that loop. The fault simulation (simulation/internal/sim), the
// in-memory fleet benchmark (internal/fleetbench), and the e2e module's
// candidates and benchmark (e2e/, which imports it through its replace
// directive) all run it, so that a change of client-go changes every
// comparison in the docs alike. What a harness adds is its own, through
// Config: a wrapper of the Lease lock (the simulation's kills that make no
// further call, its term numbers) and the callbacks. A harness does not
// reimplement the loop.
package clientgoloop
