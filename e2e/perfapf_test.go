package e2e

import (
	"context"
	"os"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Row g's candidates are not system:masters, whose requests API Priority
// and Fairness exempts: they authenticate as a ServiceAccount of the
// namespace, as a Deployment's or a DaemonSet's pods do, so that the
// apiserver's default APF configuration classifies them as it would
// those: the built-in FlowSchema service-accounts, priority level
// workload-low, one flow for the whole fleet. The benchmark counts the
// 429s their transports see, and fails if a change of relect's leader
// sees one.

// perfServiceAccount is the ServiceAccount row g's candidates run as, in
// namespace.
const perfServiceAccount = "relect-perf"

// serviceAccountConfig returns credentials of the ServiceAccount
// perfServiceAccount as the apiserver sees one (a client certificate for
// system:serviceaccount:NAMESPACE:relect-perf in the groups
// system:serviceaccounts and system:serviceaccounts:NAMESPACE), granted
// by a Role what relect needs on the namespace's Leases, as deploy/'s
// manifests grant it. Made once per suite.
func (c *cluster) serviceAccountConfig(t *testing.T) *rest.Config {
	t.Helper()
	c.mu.Lock()
	sa := c.sa
	c.mu.Unlock()
	if sa != nil {
		return rest.CopyConfig(sa)
	}
	u, err := c.env.AddUser(envtest.User{
		Name:   "system:serviceaccount:" + namespace + ":" + perfServiceAccount,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rb := c.client(t).RbacV1()
	ctx := context.Background()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: perfServiceAccount},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"coordination.k8s.io"},
			Resources: []string{"leases"},
			Verbs:     []string{"get", "watch", "create", "update", "list", "delete"},
		}},
	}
	if _, err := rb.Roles(namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: perfServiceAccount},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: perfServiceAccount},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: perfServiceAccount, Namespace: namespace}},
	}
	if _, err := rb.RoleBindings(namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.sa = u.Config()
	c.mu.Unlock()
	return rest.CopyConfig(u.Config())
}

// apfN and apfChanges size TestAPF: a DaemonSet-sized fleet, a few changes.
const (
	apfN       = 1000
	apfChanges = 3
)

// TestAPF: under the apiserver's default API Priority and Fairness
// configuration, a change of relect's leader among apfN candidates of one
// ServiceAccount sees no 429 — neither the apiserver's count of the
// requests APF rejected in each change's window nor the in-process
// candidates' transports (checkAPF, as in row g) — and the candidates'
// requests did land in workload-low, so that the check is not vacuous.
// It runs with the benchmark (RELECT_PERF set): a fleet of apfN takes
// minutes to start on a small machine.
func TestAPF(t *testing.T) {
	if os.Getenv(envPerf) == "" {
		t.Skipf("%s is not set: skipping the APF check, which starts %d candidates", envPerf, apfN)
	}
	c := requireCluster(t)
	candidateBinary(t)
	m0, err := c.scrapeMetrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	k := fleetKey{mode: modeRelect, n: apfN, apart: true}
	run := benchFleetApart(t, c, k, apfChanges)
	m1, err := c.scrapeMetrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var rejected, low float64
	for _, w := range run.change {
		rejected += w.rejected
		low += w.workloadLow
	}
	t.Logf("%s: %d changes of leader, handovers %v; in the change windows APF dispatched %.0f requests to workload-low and rejected %.0f, "+
		"the transports saw %.0f answers 429; from the fleet's start to its end APF rejected %.0f requests",
		k, len(run.latency), run.latency, low, rejected, sum(intsToFloats(run.throttled)), m1.rejected-m0.rejected)
	if low == 0 {
		t.Errorf("%s: no request of the change windows was dispatched to workload-low through the FlowSchema service-accounts: the check did not run under the default APF configuration", k)
	}
}

func intsToFloats(xs []int) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	return out
}
