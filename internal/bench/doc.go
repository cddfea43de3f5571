// Package bench is what relect's benchmark has once, for both of its
// backends: internal/fleetbench, a fleet on an in-memory Lease API in
// simulated time (the root's TestFleetChanges), and the e2e module's
// TestPerformance, candidates on a real kube-apiserver + etcd. It holds
// the implementations compared (Impl, which simulation/internal/sim plays too), the
// terms a fleet's candidates lead (Terms), the one wait helper (Await),
// the statistics the reports print (Quantile, MeanSE), their markdown
// tables (Header, Row), the plots' SVG axes and panels (Panel, Scale), and
// the scenario driver of a change of leader (Change, over a backend's
// Fleet).
package bench
