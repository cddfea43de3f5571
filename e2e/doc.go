// Package e2e holds relect's end-to-end tests: candidate processes
// (e2e/cmd/candidate) campaigning for a Lease on a real kube-apiserver and
// etcd started by controller-runtime's envtest, with a fault-injecting
// proxy (e2e/internal/faultproxy) between each candidate and the apiserver,
// and a safety checker (e2e/internal/history) run over the leadership
// histories the candidates write.
//
// It is a module of its own so that relect's module does not depend on
// envtest or toxiproxy. See docs/testing.md for how to run it.
package e2e
