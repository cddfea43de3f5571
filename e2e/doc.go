// Package e2e holds relect's end-to-end tests: candidate processes
// (e2e/cmd/candidate) campaigning for a Lease on a real kube-apiserver and
// etcd started by controller-runtime's envtest, with a fault-injecting
// proxy (e2e/internal/faultproxy) between each candidate and the apiserver,
// and a safety checker (e2e/internal/history) run over the leadership
// histories the candidates write.
//
// It is a module of its own so that relect's module does not depend on
// envtest or toxiproxy. CONTRIBUTING.md says how to run it.
//
// # How the suite works
//
//   - One control plane (controller-runtime's envtest: etcd and
//     kube-apiserver with RBAC authorization), started on first use
//     (about 3.5 s) and shared by every test; its data and certificates
//     live in fixed directories, so the restart scenarios stop and start
//     etcd or the apiserver with their state. Both run under
//     `setpriv --pdeathsig KILL` and the candidates with a parent-death
//     signal: a test binary killed by a timeout leaves no process behind.
//   - Candidates are processes of e2e/cmd/candidate (built with -race when
//     the tests run with it): -mode=relect runs a relect.Elector,
//     -mode=clientgo the client-go loop (internal/clientgoloop, as
//     elastic-agent runs it since its PR #4542). Each writes a JSON-lines
//     history (e2e/internal/history): every on/off transition of its
//     leadership with nanosecond timestamps (relect's IsLeader sampled
//     every 2 ms; for client-go the OnStartedLeading context), the term,
//     every relect event, and on exit relect's call counters. SIGTERM
//     cancels Run and the process exits 0 once Run has returned;
//     -priority and -standby set those options, SIGUSR1 calls Yield and
//     SIGUSR2 HandOver to -handover-to.
//   - Fault proxies: each candidate reaches the apiserver through its own
//     TCP proxy on 127.0.0.1 (toxiproxy v2, in the test process): latency,
//     a black hole (accept, never forward nor answer), cut connections, a
//     new upstream after an apiserver restart.
//   - The safety checker (e2e/internal/history) turns each history into
//     leader intervals (from the first sample that saw the candidate lead
//     to the first that saw it not lead, or 50 ms after the last if
//     sampling stopped; a killed leader's ends when the test saw the
//     process gone) and reports every pair of candidates whose intervals
//     share an instant. It also checks that a new holder's term is larger
//     than its predecessor's (internal/leadership) and that each relect
//     term's fence is above every earlier term's, across deletions,
//     restarts and one candidate's consecutive terms. Every scenario ends
//     with it; TestClientGoPausedLeader shows it is not vacuous.
//
// Timings: LeaseDuration 3 s, RenewDeadline 2 s, RetryPeriod 0.5 s.
// Assertions are orderings and bounds derived from these, with slack; the
// measured values are printed with -v.
package e2e
