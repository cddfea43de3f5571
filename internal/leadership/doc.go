// Package leadership holds the checks of a record of who led when that the
// fault simulation (simulation/internal/sim) and the e2e suite (e2e/internal/history)
// share: no two holders lead at once (Overlaps), and fencing tokens never
// go back (TermRegressions).
//
// It knows nothing of how a record was made — the simulation's exact
// simulated instants, the e2e suite's wall-clock samples and their error
// bounds — and depends on the standard library only. Each caller turns its
// own record into Spans and Terms, says which Bounds its spans have, and
// reads the results back by index into its own types.
package leadership
