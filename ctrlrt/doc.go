// Package ctrlrt runs controller-runtime controllers as relect's leader-only
// work: one long-lived manager per process, and leader-only controllers
// that stop and start with each of relect's terms, in a process that never
// restarts.
//
// controller-runtime's manager elects with client-go: when its lease is
// lost it ends the process ("leader election lost"), and neither a manager
// nor a controller can be started twice. With NewManager the manager runs
// with its own election off, and serves its caches, webhooks, metrics and
// probes on every replica, for as long as the process lives. relect's
// Elector runs in it as a runnable that needs no election, and campaigns
// again after every lost term. Each term calls Options.Setup with the
// term's manager, on which the term's controllers are built afresh (with
// the builder, controller.New or their typed variants, exactly as on any
// manager), and starts them with the term's context; when the term ends
// they stop, and the Elector releases the lease only after every one of
// them has returned. Informers are the manager's and outlive the terms, so
// a promotion lists nothing: the new leader's controllers start from a
// warm cache.
//
//	mgr, err := ctrlrt.NewManager(cfg, manager.Options{
//		Scheme:                 scheme,
//		HealthProbeBindAddress: ":8081",
//	}, ctrlrt.Options{
//		Elector: relect.Options{Namespace: ns, Name: "my-controller", Identity: os.Getenv("POD_NAME")},
//		Setup: func(ctx context.Context, mgr manager.Manager) error {
//			return builder.ControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Complete(&reconciler{mgr.GetClient()})
//		},
//		Informers: []client.Object{&corev1.ConfigMap{}},
//	})
//	if err != nil {
//		return err
//	}
//	return mgr.Start(ctx)
//
// A reconciler reads its term, and the fencing token to hand to storage,
// from its context: controller-runtime derives the context of every
// Reconcile from the one its controller was started with, here the term's,
// so relect.TermFromContext and relect.FenceFromContext work in Reconcile
// as in OnStartedLeading.
//
// What never runs outside a term: a term's controllers, their sources,
// their event handlers and predicates, and the runnables that need
// election. The event handlers a term registers on the manager's
// informers are removed when it ends, and the term waits for any call of
// them in progress; controller-runtime itself never removes them, which a
// long-lived manager would otherwise pay for at every term, in goroutines,
// memory and handler calls. What lives as long as the process, on every
// replica: the manager, its caches (and the index functions of their
// fields), webhooks, metrics and probes. See the repository's
// docs/controller-runtime.md.
//
// With relect's shards (Options.Elector.Shards), Options.ShardSetup builds
// controllers per shard term, as Setup does per election term. For range
// shards (shardrange) each shard has a cache of its own, whose informers
// list and watch only its range; it is started when the replica begins to
// campaign for the shard, as holder or as taker, and stopped when it
// stops, so a replica that takes a shard over starts warm, and a replica's
// caches hold its share of the objects, not all of them.
//
// For a program that must keep the manager's own election (and its exit
// when the lease is lost), NewLock is a resourcelock.Interface for
// manager.Options.LeaderElectionResourceLockInterface whose followers
// watch the Lease instead of polling it.
package ctrlrt
