// Package deploy holds Kubernetes manifests for relect's example programs
// and for the relect command, one directory per program:
//
//   - controller: a 3-replica Deployment of examples/controller, with its
//     ServiceAccount, Role (Leases) and RoleBinding.
//   - controller-runtime: a 3-replica Deployment of
//     examples/controller-runtime (a module of its own), with its
//     ServiceAccount, Role (Leases, ConfigMaps), RoleBinding and the
//     Dockerfile that builds it.
//   - daemonset-reporter: a DaemonSet of examples/daemonset-reporter, with
//     its ServiceAccount, Role (Leases), ClusterRole (list nodes) and
//     bindings.
//   - relect-run: a singleton — a 2-replica Deployment whose program runs
//     under `relect run` on the leader only — with its RBAC and the
//     Dockerfile that adds relect to the program's image.
//   - relect-sidecar: a 2-replica Deployment of a program that asks a
//     native `relect sidecar` whether it leads and beats on its loopback
//     control address, with its RBAC and a NetworkPolicy that admits only
//     the read-only port, from the namespace and Prometheus.
//   - monitoring: a Grafana dashboard and a PrometheusRule for relect's
//     metrics, checked by a module of its own (see its package doc).
//
// Dockerfile builds any of the programs' images, the relect command's
// included. The package has no code: its test decodes every manifest
// strictly with client-go's scheme and checks what the programs rely on
// (for relect: its flags, its LEASE argument, the variables and ports the
// arguments use), so that CI catches a broken manifest without a cluster.
package deploy
