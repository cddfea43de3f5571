// Package metrics exports an Elector's state and counters to Prometheus.
//
// NewCollector returns a prometheus.Collector that reads Elector.Stats once
// per scrape and turns the snapshot into constant metrics; it keeps no state
// of its own, so it cannot drift from the Elector, and nothing is updated on
// the election's hot path. The package has no package-level state and never
// touches prometheus.DefaultRegisterer: register the Collector yourself,
//
//	c, err := metrics.NewCollector(e, metrics.Options{Namespace: "kube-system", Name: "my-controller"})
//	if err != nil {
//		return err
//	}
//	registry.MustRegister(c)
//
// Several Electors can be collected by one registry: each Collector's
// metrics carry its Lease's namespace and name as constant labels
// (lease_namespace, lease), so Collectors of different Leases never clash,
// and the registry refuses a second Collector for the same Lease (Register
// returns an error) unless Options.IdentityLabel tells them apart. To add labels of your own, register through
// prometheus.WrapRegistererWith.
//
// The metrics, their types and labels, and alert rules built on them are
// listed in docs/operations.md in the repository.
package metrics
