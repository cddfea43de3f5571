// Package relect is resilient leader election on Kubernetes Leases: a
// supervised loop around client-go's leaderelection.LeaderElector for
// programs where exactly one replica must do some work, and that work must
// not silently stop.
//
// What it gives, in the order a user meets it:
//
//   - Campaigning again after every lost term: Run loops until its context
//     is done (client-go's Run serves one term), paced by a token bucket
//     and an exponential backoff, so a flapping cluster cannot make
//     candidates hammer the control plane; a healthy leader never waits.
//   - IsLeader, and the term's context given to OnStartedLeading: false
//     and cancelled no later than RenewDeadline after the last successful
//     renewal was sent, even if a renewal hangs or the process was paused.
//   - Events, in order, on a channel that never blocks the election (the
//     oldest are dropped and counted when it is full).
//   - Release after the work returned: the lease is released only once
//     OnStartedLeading has returned (a panic in it ends only that term),
//     and only if the Lease is still the one held.
//   - A fencing token per term (FenceFromContext), which only grows, for
//     storage that must refuse a deposed leader's late writes.
//   - Stuck work handed over (Options.Work): a leader whose work stops
//     beating (Beat) or fails its check hands the lease to the next in
//     line, without flapping when the work fails everywhere.
//   - The line of succession: candidates register, the leader names who
//     takes over and in what order, so a change of leader is a few calls
//     at any fleet size; only that line watches the Lease (a warden outside
//     it reads it now and then), so a fleet's steady cost does not grow
//     with its size.
//   - Shards (Options.Shards): work split over the fleet, each shard held
//     by one candidate at a time with its own term, fence and work
//     liveness, assigned by the leader, balanced and sticky.
//   - Package relecttest: an in-memory Lease API with the apiserver's
//     optimistic concurrency and per-candidate faults, for testing
//     leader-gated code in real time or in a testing/synctest bubble.
//
// # Usage
//
//	e, err := relect.New(relect.Options{
//		Config:    restConfig, // relect builds its own Lease client
//		Namespace: "kube-system",
//		Name:      "my-controller",
//		Identity:  os.Getenv("POD_NAME"),
//		OnStartedLeading: func(ctx context.Context) {
//			fence, _ := relect.FenceFromContext(ctx)
//			runLeaderWork(ctx, fence) // return when ctx is done
//		},
//	})
//	if err != nil {
//		return err // names the invalid field
//	}
//	return e.Run(ctx) // campaigns until ctx is done
//
// The durations are client-go's (LeaseDuration, RenewDeadline,
// RetryPeriod; defaults 15 s, 10 s, 2 s). Package operator reads and
// edits an election from outside (the relect command's status, yield and
// handover); module ctrlrt runs controller-runtime controllers as the
// leader's work. See docs/design.md in the repository for the loop, the
// pacing and the safety argument.
package relect
