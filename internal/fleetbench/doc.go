// Package fleetbench measures what a change of leader costs a fleet of N
// candidates on one Lease, for relect and, side by side, for the plain
// client-go loop of elastic-agent PR #4542 (internal/clientgoloop, the one
// the simulation and the e2e benchmark run too), in simulated time. The
// root package's TestFleetChanges runs it and prints the report; see
// docs/performance.md, "Changes of leader at fleet size (in memory)". It is
// the in-memory backend of the benchmark: its changes of leader are played
// by internal/bench's Change, as the e2e module's are on the real control
// plane.
//
// # The model
//
// Every candidate runs in one testing/synctest bubble on one
// relecttest.LeaseAPI, with every option at its default (LeaseDuration
// 15 s, RenewDeadline 10 s, RetryPeriod 2 s; relect's bucket and candidate
// registry), and every Lease call takes 1 ms (RoundTrip), as in
// simulation/internal/sim. Each candidate's calls go through a wire (wire.go), which
// logs them — who, which verb, on the election's Lease or a registration,
// the holder written and the holder stored — and, like the apiserver's
// front door, can shed writes and never hears from a dead process.
//
// A fleet forms (the first candidate takes a released Lease, the others
// join, two LeaseDurations pass), its steady background is counted over
// one LeaseDuration, and then each scenario is played Changes times. The
// leader goes a quarter RetryPeriod after one of its renewals (none is in
// flight):
//
//   - graceful: its Run is cancelled; it releases (relect also deletes its
//     registration; the client-go loop reads the Lease, then releases);
//   - crash: its process dies — from that instant its calls never reach the
//     API — with the lease held and, for relect, its registration left;
//   - with 429: in either, the apiserver sheds the burst of acquiring writes
//     that follows (see below).
//
// After each change the old leader is started again as a new process with
// the same identity, as a pod would be, and the fleet settles for one
// LeaseDuration before the next change.
//
// # What is measured
//
// A change's window (Change) runs from its Start — the stop, or, for a
// crash, the expiry: LeaseDuration after the apiserver answered the dead
// leader's last renewal — to its End, the new leader's first renewal at
// least half a RetryPeriod into its term, that is its first steady renewal
// one RetryPeriod after it began to lead. Measured over it:
//
//   - calls beyond the steady background (Change.Beyond): every call sent
//     in the window except the background, counted by class
//     (Change.Background): the renewal that closes the window, the
//     client-go loop's polls (every Get of the election's Lease by a
//     candidate that does not hold it), and relect's registration renewals.
//     The background is subtracted by class, not as a rate × the window's
//     length: at N = 1,000 the client-go loop polls about 312 times a
//     second, and the count of polls in a 2-second window varies by tens
//     from one window to the next, more than a change costs;
//   - every call of the window (Change.Total), background included;
//   - the most calls sent within any 10 ms (Change.Peak), background
//     included: what the apiserver sees at once;
//   - how long no one leads (Change.Latency): from Start to the new
//     leader's OnStartedLeading.
//
// # Shedding (429)
//
// A model of API Priority and Fairness when the leader-election priority
// level's seats and queue are full: once armed for a change, the apiserver
// answers 429 Too Many Requests to the first acquiring write (a write of
// the election's Lease naming a holder other than the one stored) and to
// every acquiring write sent within ShedWindow (10 ms) after it; reads,
// renewals, releases and the registry's calls are admitted. The 429
// reaches the caller, as one without a Retry-After header does (client-go's
// REST client would retry one with Retry-After itself, hiding it from both
// implementations).
package fleetbench
