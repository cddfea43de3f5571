package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/relect/relect"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestControllerRuntimeExample runs examples/controller-runtime — the
// program deploy/controller-runtime deploys — as three replicas against the
// real control plane, as its Deployment would (identity from POD_NAME, the
// namespace from POD_NAMESPACE, relect's default durations): the leader
// stamps every labelled ConfigMap with its identity, term and fence; every
// replica's /healthz and /readyz pass and its /metrics has relect's
// metrics; SIGTERM of the leader hands over at once, and the next leader
// stamps them again with a larger fence; every replica exits 0 on SIGTERM.
func TestControllerRuntimeExample(t *testing.T) {
	c := requireCluster(t)
	dir := testDir(t)
	bin := filepath.Join(dir, "controller-runtime")
	build := exec.Command(goTool(), "build", "-o", bin, ".")
	build.Dir = "../examples/controller-runtime" // a module of its own
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building examples/controller-runtime: %v\n%s", err, out)
	}
	const ns, lease = "ctrlrt-example", "relect-controller-runtime"
	ctx := context.Background()
	cs := c.client(t)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// Released, so that the first replica takes it at once (relect waits
	// LeaseDuration, 15 s, before it creates a missing Lease).
	released := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lease, Namespace: ns},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(""), LeaseDurationSeconds: ptr.To[int32](1)}}
	if _, err := cs.CoordinationV1().Leases(ns).Create(ctx, released, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	names := []string{"demo-a", "demo-b", "demo-c"}
	for _, name := range names {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"relect-example": "controller-runtime"}}}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kc := filepath.Join(dir, "kubeconfig")
	kubeconfig(t, kc, c.adminConfig(), c.apiAddr())

	type replica struct {
		name, metrics, health string
		p                     *process
	}
	var replicas []*replica
	for i := range 3 {
		r := &replica{name: fmt.Sprintf("crt-%d", i), metrics: freeAddr(t), health: freeAddr(t)}
		cmd := exec.Command(bin, "-kubeconfig", kc, "-lease-name", lease, "-metrics-addr", r.metrics, "-health-addr", r.health)
		cmd.Env = append(os.Environ(), "POD_NAME="+r.name, "POD_NAMESPACE="+ns)
		r.p = startProcess(t, r.name, cmd, filepath.Join(dir, r.name+".log"), nil)
		replicas = append(replicas, r)
	}

	// stamps waits until every ConfigMap carries a stamp by a replica
	// other than not, with a fence above above, and returns its leader.
	stamps := func(not string, above relect.Fence) (string, relect.Fence) {
		t.Helper()
		var leader string
		var fence relect.Fence
		waitFor(t, 10*time.Second, "every ConfigMap stamped by a new leader", func() bool {
			leader, fence = "", ""
			for _, name := range names {
				cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false
				}
				l, f := cm.Annotations["example.relect.io/leader"], relect.Fence(cm.Annotations["example.relect.io/fence"])
				if l == "" || l == not || f.Compare(above) <= 0 || (leader != "" && (l != leader || f != fence)) {
					return false
				}
				leader, fence = l, f
			}
			return true
		})
		return leader, fence
	}
	first, fence := stamps("", "")
	t.Logf("%s leads and stamped every ConfigMap with fence %s", first, fence)

	for _, r := range replicas {
		for _, path := range []string{"/healthz", "/readyz"} {
			var code int
			var body string
			waitFor(t, 5*time.Second, r.name+path, func() bool {
				code, body = httpGet(t, "http://"+r.health+path)
				return code == http.StatusOK
			})
			if code != http.StatusOK {
				t.Errorf("%s %s: %d %s", r.name, path, code, body)
			}
		}
		want := fmt.Sprintf(`relect_is_leader{lease=%q,lease_namespace=%q} %d`, lease, ns, map[bool]int{true: 1}[r.name == first])
		waitFor(t, 5*time.Second, r.name+" /metrics", func() bool {
			code, body := httpGet(t, "http://"+r.metrics+"/metrics")
			return code == http.StatusOK && strings.Contains(body, want) && strings.Contains(body, "controller_runtime_")
		})
	}

	var leader *replica
	for _, r := range replicas {
		if r.name == first {
			leader = r
		}
	}
	stopped := leader.p.signal(syscall.SIGTERM)
	next, nextFence := stamps(first, fence)
	t.Logf("%s stamped every ConfigMap with fence %s, %v after SIGTERM of %s", next, nextFence, time.Since(stopped).Round(time.Millisecond), first)
	for _, r := range replicas {
		if r != leader {
			r.p.signal(syscall.SIGTERM)
		}
	}
	for _, r := range replicas {
		select {
		case <-r.p.waited:
			if err := r.p.err(); err != nil {
				t.Errorf("%s exited with %v", r.name, err)
			}
		case <-time.After(45 * time.Second):
			t.Errorf("%s did not exit within 45s of SIGTERM", r.name)
		}
	}
	if l := c.getLeaseIn(t, ns, lease); l != nil && ptrVal(l.Spec.HolderIdentity) != "" {
		t.Errorf("after every replica stopped the Lease is held by %q", ptrVal(l.Spec.HolderIdentity))
	}
}

// getLeaseIn reads the Lease ns/name; nil if it does not exist.
func (c *cluster) getLeaseIn(t *testing.T, ns, name string) *coordinationv1.Lease {
	t.Helper()
	l, err := c.client(t).CoordinationV1().Leases(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return l
}
