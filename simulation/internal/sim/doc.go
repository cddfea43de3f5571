// Package sim is a deterministic fault simulator for leader election on a
// Kubernetes Lease: it plays generated schedules of faults against relect
// and, side by side, against a plain client-go LeaderElector run in a loop
// by hand (internal/clientgoloop, the loop every comparison runs), records
// what happened, and checks the record for safety, liveness, API budget and
// event order.
//
// # Pieces
//
//   - Generate(seed) draws a Schedule from math/rand/v2's PCG seeded by the
//     seed: 2–7 candidates on one Lease, durations relect.New accepts, and
//     faults on each candidate's API handle (errors, per-verb errors,
//     latency, partition, pause), kills and graceful stops with restarts,
//     and hand edits of the Lease, all undone by Schedule.Quiet. A second
//     stream, seeded by the same seed, adds succession: priorities,
//     standbys, candidates that join late or leave for good, Yields and
//     HandOvers; the first stream's draws are those of the schedule before
//     succession was simulated. A third adds the registry's and the
//     step-downs' faults; a fourth, work liveness (relect's Options.Work)
//     for one schedule in three, with faults that make the leaders' work
//     stuck: a candidate's work hangs, its check fails, or the downstream
//     fails for everyone (work.go).
//   - Play(schedule, impl) runs it on a relecttest.LeaseAPI inside a
//     testing/synctest bubble and returns a History.
//   - Every leader writes to stores as its term's work (store.go): relect's
//     to one guarded by its fence and one guarded by its term number, the
//     client-go loop's to one without a guard, through a network that
//     mirrors its candidate's faults (wire.go). LateWrites finds the writes
//     a store accepted from a deposed term after a newer term's reached it
//     (for the fence store, violations: Check), and CheckLinearizable checks
//     a store's history with porcupine against a fenced register, outside
//     the bubble (checkfence.go).
//   - GenerateShards(seed) is Generate's schedule with relect's shards
//     (Options.Shards: S in 1–12 for every candidate), hand edits of a
//     shard's Lease and of the shard table, and rolling restarts, from a
//     fifth stream; Play runs it with every shard term recorded and
//     writing to a store guarded by its shard's fence, and CheckShards and
//     CheckShardStores judge it (shards.go, shardrun.go, checkshards.go).
//     GenerateShardRanges(seed) is the same with S range shards of the uid
//     hash (S in 1–16), whose hashes CheckShardRanges judges: never two
//     running ranges sharing a hash, their union the whole space whenever
//     every shard is held, each term's context its own range; over
//     intervals of time and hashes (CheckHashSpans), whatever the split
//     (checkranges.go).
//   - Check(history) returns the Violations (those on stuck work:
//     checkwork.go); Explain attributes one to a known Finding;
//     LeadershipChanges measures what each change of holder cost in Lease
//     API calls (calls.go); Totals aggregates many runs; Minimize shrinks a
//     failing schedule.
//
// History, Check and Explain depend on the standard library only, but for
// internal/leadership (itself standard library only): the checks for two
// leaders at once and for term numbers that go back, which the e2e suite's
// checker of real-control-plane histories (e2e/internal/history) runs too.
//
// # What is modelled, and how
//
// Time is synctest's fake clock: a schedule spanning minutes runs in
// milliseconds, and every candidate shares one clock (clock-rate drift is
// not modelled). Every Lease call takes at least RoundTrip.
//
// A Kill cancels Run's context with the lease kept (relect's
// KeepLeaseOnCancel; client-go's ReleaseOnCancel false), and the candidate
// comes back as a new process (a new Elector). A true crash cannot be
// modelled in-process: here the dying process still cancels its term
// context and returns from its callbacks, which a crashed one would not,
// but it makes no further API call, which is what the other candidates
// see. A Stop cancels gracefully (the lease is released) and the same
// Elector is Run again. A Pause stalls the candidate's API calls, even past
// their deadlines, as a process stopped between sending a request and
// reading the answer; its timers keep running.
//
// IsLeader is sampled for every candidate at the end of every simulated
// instant at which something observable happened (see Play), so every
// overlap of positive length is seen; term contexts are timed exactly from
// inside OnStartedLeading.
//
// # Replays
//
// A seed always yields the same schedule. The interleavings do not repeat
// exactly: client-go's jitter (wait.Jitter) and cenkalti/backoff draw from
// the global math/rand, and goroutines that run at one simulated instant
// are scheduled in varying order. A replay therefore runs a schedule many
// times; a violation usually recurs in most of them.
package sim
