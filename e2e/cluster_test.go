package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relect/relect/e2e/internal/faultproxy"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// namespace every Lease of the suite lives in.
const namespace = "default"

// cluster is the envtest control plane shared by the suite, with the fault
// proxies that point at its apiserver.
type cluster struct {
	env *envtest.Environment

	mu      sync.Mutex
	admin   *rest.Config // system:masters, straight to the apiserver
	sa      *rest.Config // the benchmark's ServiceAccount (serviceAccountConfig); nil until made
	proxies map[*faultproxy.Proxy]bool
}

// startCluster starts etcd and kube-apiserver on 127.0.0.1 with their data
// and certificates under dir, so that both can be stopped and started again
// with their state (envtest deletes directories it chose itself on Stop).
// gates, if any, are the apiserver's --feature-gates ("Name=true").
func startCluster(dir string, gates ...string) (*cluster, error) {
	for _, d := range []string{"etcd", "apiserver"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	apiLog, err := os.Create(filepath.Join(dir, "apiserver.log"))
	if err != nil {
		return nil, err
	}
	etcdLog, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		return nil, err
	}
	assets := os.Getenv(envAssets)
	api := &envtest.APIServer{
		CertDir: filepath.Join(dir, "apiserver"),
		Path:    deathSignalWrapper(dir, filepath.Join(assets, "kube-apiserver")),
		Out:     apiLog,
		Err:     apiLog,
	}
	api.Configure().
		// A network namespace without a default route: the apiserver
		// cannot pick an address of its own, nor reconcile endpoints.
		Set("advertise-address", "127.0.0.1").
		Set("endpoint-reconciler-type", "none").
		// envtest's default, spelled out: the RBAC scenario relies on it.
		Set("authorization-mode", "RBAC")
	if len(gates) > 0 {
		api.Configure().Set("feature-gates", strings.Join(gates, ","))
	}
	etcd := &envtest.Etcd{
		DataDir: filepath.Join(dir, "etcd"),
		Path:    deathSignalWrapper(dir, filepath.Join(assets, "etcd")),
		Out:     etcdLog,
		Err:     etcdLog,
	}
	env := &envtest.Environment{
		ControlPlane:             envtest.ControlPlane{APIServer: api, Etcd: etcd},
		ControlPlaneStartTimeout: 60 * time.Second,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	return &cluster{env: env, admin: cfg, proxies: map[*faultproxy.Proxy]bool{}}, nil
}

// deathSignalWrapper returns a script that runs bin with SIGKILL as its
// parent-death signal, so that a test binary killed by a timeout does not
// leave an apiserver or etcd behind. Without setpriv it returns bin.
func deathSignalWrapper(dir, bin string) string {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		return bin
	}
	path := filepath.Join(dir, filepath.Base(bin)+".sh")
	script := fmt.Sprintf("#!/bin/sh\nexec %s --pdeathsig KILL -- %s \"$@\"\n", setpriv, bin)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		return bin
	}
	return path
}

func (c *cluster) stop() error { return c.env.Stop() }

// apiAddr is the apiserver's host:port now.
func (c *cluster) apiAddr() string {
	return c.env.ControlPlane.APIServer.SecureServing.ListenAddr.HostPort()
}

// adminConfig returns a copy of the system:masters config, straight to the
// apiserver (no proxy).
func (c *cluster) adminConfig() *rest.Config {
	c.mu.Lock()
	defer c.mu.Unlock()
	return rest.CopyConfig(c.admin)
}

// client is a system:masters clientset with short timeouts, for the test's
// own reads and hand edits.
func (c *cluster) client(t *testing.T) kubernetes.Interface {
	t.Helper()
	cfg := c.adminConfig()
	cfg.Timeout = 5 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// newProxy starts a fault proxy to the apiserver that follows it across
// restarts; the test's cleanup closes it.
func (c *cluster) newProxy(t *testing.T, name string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(name, c.apiAddr())
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.proxies[p] = true
	c.mu.Unlock()
	t.Cleanup(func() {
		c.mu.Lock()
		delete(c.proxies, p)
		c.mu.Unlock()
		p.Close()
	})
	return p
}

// retarget points the admin config and every proxy at the apiserver's
// current address, which may change when it restarts.
func (c *cluster) retarget(t *testing.T) {
	t.Helper()
	addr := c.apiAddr()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.admin.Host = "https://" + addr
	for p := range c.proxies {
		if err := p.SetUpstream(addr); err != nil {
			t.Errorf("retargeting a proxy to %s: %v", addr, err)
		}
	}
}

// restartTimes are the instants of a restart of one component.
type restartTimes struct {
	stopCalled  time.Time // Stop called: it may stop answering from here on
	stopped     time.Time // the old process has exited
	startCalled time.Time // Start called: it may answer again from here on
	ready       time.Time // envtest saw it healthy
}

// restartAPIServer stops the apiserver, leaves it down for down, and starts
// it again, then points the proxies at it.
func (c *cluster) restartAPIServer(t *testing.T, down time.Duration) restartTimes {
	t.Helper()
	api := c.env.ControlPlane.APIServer
	var r restartTimes
	r.stopCalled = time.Now()
	if err := api.Stop(); err != nil {
		t.Fatalf("stopping the apiserver: %v", err)
	}
	r.stopped = time.Now()
	time.Sleep(down)
	r.startCalled = time.Now()
	if err := api.Start(); err != nil {
		t.Fatalf("starting the apiserver again: %v", err)
	}
	r.ready = time.Now()
	c.retarget(t)
	return r
}

// restartEtcd stops etcd, leaves it down for down, and starts it again on
// the same client URL with the same data.
func (c *cluster) restartEtcd(t *testing.T, down time.Duration) restartTimes {
	t.Helper()
	etcd := c.env.ControlPlane.Etcd
	var r restartTimes
	r.stopCalled = time.Now()
	if err := etcd.Stop(); err != nil {
		t.Fatalf("stopping etcd: %v", err)
	}
	r.stopped = time.Now()
	time.Sleep(down)
	r.startCalled = time.Now()
	if err := etcd.Start(); err != nil {
		t.Fatalf("starting etcd again: %v", err)
	}
	r.ready = time.Now()
	return r
}

// kubeconfig writes a kubeconfig for cfg's credentials that reaches the
// apiserver through the proxy at proxyAddr. TLS passes through the proxy,
// and the serving certificate covers 127.0.0.1.
func kubeconfig(t *testing.T, path string, cfg *rest.Config, proxyAddr string) {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["e2e"] = &clientcmdapi.Cluster{
		Server:                   "https://" + proxyAddr,
		CertificateAuthorityData: cfg.CAData,
	}
	kc.AuthInfos["e2e"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
	}
	kc.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "e2e"}
	kc.CurrentContext = "e2e"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
}

var notDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// leaseName derives a Lease name from the test's name.
func leaseName(t *testing.T) string {
	n := strings.Trim(notDNS.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(n) > 60 {
		n = n[:60]
	}
	return n
}

// getLease reads the Lease; nil if it does not exist.
func (c *cluster) getLease(t *testing.T, name string) *coordinationv1.Lease {
	t.Helper()
	l, err := c.client(t).CoordinationV1().Leases(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("reading lease %s: %v", name, err)
	}
	return l
}

// editLease applies edit to the Lease as an operator would with kubectl
// edit, retrying on conflicts with the leader's renewals. sent is when the
// write that succeeded was sent, done when it returned.
func (c *cluster) editLease(t *testing.T, name string, edit func(*coordinationv1.LeaseSpec)) (sent, done time.Time) {
	t.Helper()
	leases := c.client(t).CoordinationV1().Leases(namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := leases.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		edit(&l.Spec)
		sent = time.Now()
		_, err = leases.Update(context.Background(), l, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("editing lease %s: %v", name, err)
	}
	return sent, time.Now()
}

// deleteLease deletes the Lease; sent is when the request was sent, done
// when it returned.
func (c *cluster) deleteLease(t *testing.T, name string) (sent, done time.Time) {
	t.Helper()
	sent = time.Now()
	if err := c.client(t).CoordinationV1().Leases(namespace).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting lease %s: %v", name, err)
	}
	return sent, time.Now()
}

// leaseObs is one state of the Lease seen by a leaseWatch.
type leaseObs struct {
	at          time.Time
	exists      bool
	holder      string
	transitions int32
	rv          string // resourceVersion: every write changes it
}

func (o leaseObs) String() string {
	if !o.exists {
		return o.at.Format("15:04:05.000") + " (no lease)"
	}
	return fmt.Sprintf("%s holder=%q transitions=%d", o.at.Format("15:04:05.000"), o.holder, o.transitions)
}

// leaseWatch follows a Lease from the test process, straight to the
// apiserver, with a watch (a release followed by an immediate takeover lasts
// milliseconds: polling would miss it), and keeps every change of holder,
// transitions or existence, stamped when the event arrived. When the watch
// breaks (the apiserver restarts) it reads the Lease again and resumes.
type leaseWatch struct {
	mu   sync.Mutex
	obs  []leaseObs
	stop context.CancelFunc
	done chan struct{}
}

func (c *cluster) watchLease(t *testing.T, name string) *leaseWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &leaseWatch{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			w.follow(ctx, c.adminConfig(), name)
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(w.close)
	return w
}

// follow reads the Lease, then watches it until the watch ends.
func (w *leaseWatch) follow(ctx context.Context, cfg *rest.Config, name string) {
	cfg.Timeout = 0 // a watch lives long
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return
	}
	leases := cs.CoordinationV1().Leases(namespace)
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	list, err := leases.List(rctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	cancel()
	if err != nil {
		return
	}
	if len(list.Items) == 0 {
		w.add(leaseObs{at: time.Now()})
	} else {
		w.add(observe(&list.Items[0]))
	}
	wi, err := leases.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: list.ResourceVersion})
	if err != nil {
		return
	}
	defer wi.Stop()
	for ev := range wi.ResultChan() {
		l, ok := ev.Object.(*coordinationv1.Lease)
		if !ok {
			return // an error event: start over
		}
		switch ev.Type {
		case watch.Deleted:
			w.add(leaseObs{at: time.Now()})
		case watch.Added, watch.Modified:
			w.add(observe(l))
		}
	}
}

func observe(l *coordinationv1.Lease) leaseObs {
	return leaseObs{at: time.Now(), exists: true, holder: ptrVal(l.Spec.HolderIdentity),
		transitions: ptrVal(l.Spec.LeaseTransitions), rv: l.ResourceVersion}
}

// add keeps o if it is a new write, or a deletion.
func (w *leaseWatch) add(o leaseObs) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.obs); n == 0 || w.obs[n-1].exists != o.exists || w.obs[n-1].rv != o.rv {
		w.obs = append(w.obs, o)
	}
}

func (w *leaseWatch) close() {
	w.stop()
	<-w.done
}

// changes returns the observed changes of holder, transitions or
// existence, in order (renewals left out).
func (w *leaseWatch) changes() []leaseObs {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []leaseObs
	for _, o := range w.obs {
		if n := len(out); n == 0 || out[n-1].exists != o.exists || out[n-1].holder != o.holder || out[n-1].transitions != o.transitions {
			out = append(out, o)
		}
	}
	return out
}

// betweenRenewals waits until holder's next renewal is observed, then a
// little longer, and returns: the next renewal is then about a retry period
// away, so a signal sent now does not catch a renewal in flight. (A
// renewal in flight at shutdown is another scenario, not measured here.)
func (w *leaseWatch) betweenRenewals(t *testing.T, holder string) {
	t.Helper()
	w.mu.Lock()
	n := len(w.obs)
	w.mu.Unlock()
	waitFor(t, 2*retryPeriod+slack, "a renewal by "+holder, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, o := range w.obs[n:] {
			if o.exists && o.holder == holder {
				return true
			}
		}
		return false
	})
	time.Sleep(retryPeriod / 10)
}

// takeover finds the first write after from that names a holder other
// than prev (the new holder's acquisition), and the last write naming prev
// the watch saw before it (prev's last renewal as observed). It waits up to
// timeout for the new holder's write to arrive.
func (w *leaseWatch) takeover(prev string, from time.Time, timeout time.Duration) (last, next leaseObs, ok bool) {
	deadline := time.Now().Add(timeout)
	for {
		w.mu.Lock()
		for i, o := range w.obs {
			if !o.at.After(from) || !o.exists || o.holder == "" || o.holder == prev {
				continue
			}
			for j := i - 1; j >= 0; j-- {
				if w.obs[j].exists && w.obs[j].holder == prev {
					w.mu.Unlock()
					return w.obs[j], o, true
				}
			}
			break
		}
		w.mu.Unlock()
		if time.Now().After(deadline) {
			return leaseObs{}, leaseObs{}, false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// first returns the first observation at or after from that satisfies ok.
func (w *leaseWatch) first(from time.Time, ok func(leaseObs) bool) (leaseObs, bool) {
	for _, o := range w.changes() {
		if !o.at.Before(from) && ok(o) {
			return o, true
		}
	}
	return leaseObs{}, false
}

// await waits until an observation at or after from satisfies ok, as
// waitFor does: a wait longer than expected is reported, one longer than
// expected + livenessGrace fails the test.
func (w *leaseWatch) await(t *testing.T, from time.Time, expected time.Duration, what string, ok func(leaseObs) bool) leaseObs {
	t.Helper()
	var o leaseObs
	waitFor(t, expected, what+" (lease changes seen so far: see the log)", func() bool {
		var found bool
		o, found = w.first(from, ok)
		return found
	})
	return o
}

func ptrVal[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
