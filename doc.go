// Package relect is resilient leader election on Kubernetes Leases: a
// supervised loop around client-go's leaderelection.LeaderElector that keeps
// campaigning after every lost term, paces itself, and tells the leader
// exactly when to stop.
//
// client-go's LeaderElector.Run serves one term: when the lease is lost it
// returns, and a process that does not call it again never campaigns again,
// so its leader-only work silently stops everywhere. relect's Run loops, and
// adds what client-go leaves to every caller:
//
//   - IsLeader is false, and the term's context is cancelled, no later than
//     RenewDeadline after the last successful renewal was sent — even if a
//     renewal hangs or the process was paused — and as soon as the Lease is
//     seen held by another identity. client-go's IsLeader stays true until
//     another holder is observed.
//   - The lease is released only after OnStartedLeading has returned, and
//     only if the Lease is still the object we hold (client-go releases
//     before the work is told to stop, and may blank a lease that passed to
//     someone else).
//   - Every Lease API call waits on a token bucket (golang.org/x/time/rate),
//     and campaigns after short terms wait an exponential backoff
//     (github.com/cenkalti/backoff/v4), so a flapping cluster cannot make
//     candidates hammer the control plane; a healthy leader never waits.
//   - Events are delivered in order on a channel that never blocks the
//     election (the oldest are dropped and counted when it is full), and
//     OnNewLeader calls arrive in order (client-go's may not).
//   - Each term has a fencing token that only grows (Fence: the
//     resourceVersion of the write that began it), for storage that must
//     refuse a deposed leader's late writes, and a number for people (the
//     Lease's leaseTransitions).
//   - With Options.Work, a leader whose work is stuck — no Beat within a
//     window, or a failing check — hands the lease to the next in line
//     instead of holding it while nothing gets done, without flapping when
//     the work fails everywhere.
//   - A panic in a callback is recovered and ends only that term.
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
// Package operator is the other side: what a tool reads from and asks of an
// election's Lease without running an Elector (an operator's Yield or
// HandOver request, the registered candidates, the holder's fence); the
// relect command's status, yield and handover use it.
//
// The package relecttest provides an in-memory Lease API with the
// apiserver's optimistic concurrency and per-candidate fault injection, for
// testing leader-gated code, in real time or inside a testing/synctest
// bubble.
//
// The durations and their meaning are client-go's (LeaseDuration,
// RenewDeadline, RetryPeriod, defaults 15 s, 10 s, 2 s). See docs/design.md
// in the repository for the loop, the pacing and the safety argument.
package relect
