package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// TestRBACForbiddenThenGranted: a candidate whose user may not touch Leases
// gets 403 from the apiserver (RBAC authorization, envtest's default). It
// reports each as an error event that names the problem, keeps retrying
// within its call budget without ever leading, and joins the election as
// soon as a Role and RoleBinding grant it the Lease verbs client-go's
// LeaseLock uses (get, create, update; relect's followers also like to
// watch, and fall back to polling when they may not).
func TestRBACForbiddenThenGranted(t *testing.T) {
	c := requireCluster(t)
	lease := leaseName(t)
	user := "relect-e2e-" + lease
	u, err := c.env.AddUser(envtest.User{Name: user}, nil)
	if err != nil {
		t.Fatal(err)
	}

	w := c.watchLease(t, lease)
	a := c.startCandidate(t, "a", candOpts{lease: lease})
	waitLeader(t, leaseDuration+maxAcquireWait()+slack, a)
	started := time.Now()
	b := c.startCandidate(t, "b", candOpts{lease: lease, user: u.Config()})

	time.Sleep(3 * time.Second)
	// The budget is judged over the time that really passed, which a
	// loaded machine stretches.
	window := time.Since(started)
	var forbidden []string
	for _, r := range b.events("error", started) {
		if strings.Contains(r.Err, "forbidden") {
			forbidden = append(forbidden, r.Err)
		}
	}
	if len(forbidden) == 0 {
		t.Fatalf("b: no error event saying forbidden in %v", window)
	}
	t.Logf("b: %d forbidden errors in %s (%.1f/s); the first: %s", len(forbidden), ms(window), float64(len(forbidden))/window.Seconds(), forbidden[0])
	if !strings.Contains(forbidden[0], `cannot get resource "leases"`) || !strings.Contains(forbidden[0], user) {
		t.Errorf("b: the error does not say who may not do what: %s", forbidden[0])
	}
	if len(forbidden) < 2 {
		t.Errorf("b: %d tries in %v: it does not retry", len(forbidden), window)
	}
	if budget := int(window.Seconds()*2/retryPeriod.Seconds()) + 4; len(forbidden) > budget {
		t.Errorf("b: %d calls in %v, over its budget of %d", len(forbidden), window, budget)
	}
	if len(b.intervals()) != 0 {
		t.Fatalf("b led without permission: %v", b.intervals())
	}

	// Grant the Lease verbs client-go's LeaseLock uses.
	rb := c.client(t).RbacV1()
	ctx := context.Background()
	if _, err := rb.Roles(namespace).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: lease},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"coordination.k8s.io"},
			Resources: []string{"leases"},
			Verbs:     []string{"get", "create", "update"},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rb.RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: lease},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: lease},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: user}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	granted := time.Now()

	seen := waitFor(t, 2*maxAcquireWait()+slack, "b to observe a after the grant", func() bool {
		for _, r := range b.events("new-leader", granted) {
			if r.Leader == a.id {
				return true
			}
		}
		return false
	})
	t.Logf("b observed a %s after the grant", ms(seen.Sub(granted)))
	time.Sleep(2 * leaseDuration)
	var others []string
	for _, r := range b.events("error", seen) {
		if strings.Contains(r.Err, "cannot get") || strings.Contains(r.Err, "cannot create") || strings.Contains(r.Err, "cannot update") {
			t.Errorf("b: still forbidden after the grant: %s", r.Err)
		} else {
			others = append(others, r.Err)
		}
	}
	t.Logf("b: %d other errors in the %v after it joined: %q", len(others), 2*leaseDuration, others)
	if len(others) > 2 {
		t.Errorf("b keeps reporting errors after the grant: %q", others)
	}

	w.betweenRenewals(t, a.id)
	sent, _ := a.terminate()
	waitLeader(t, maxAcquireWait()+slack, b)
	on, _ := b.firstOnAfter(sent)
	t.Logf("b leads %s after SIGTERM of a", ms(on.Sub(sent)))
	b.terminate()
	checkSafety(t, a, b)
}
