// Package deploy holds Kubernetes manifests for relect's example programs,
// one directory per program:
//
//   - controller: a 3-replica Deployment of examples/controller, with its
//     ServiceAccount, Role (Leases) and RoleBinding.
//   - daemonset-reporter: a DaemonSet of examples/daemonset-reporter, with
//     its ServiceAccount, Role (Leases), ClusterRole (list nodes) and
//     bindings.
//
// Dockerfile builds either program's image. The package has no code: its
// test decodes every manifest strictly with client-go's scheme and checks
// what the programs rely on, so that CI catches a broken manifest without a
// cluster.
package deploy
