package main

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/relecttest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// agent is one reporter on the in-memory Lease API, with the settings of
// deploy/daemonset-reporter, listing nodes from a fake clientset whose
// lists fail while failing is set.
type agent struct {
	e       *relect.Elector
	failing atomic.Bool
	cancel  context.CancelFunc
	done    chan error
}

func startAgent(t *testing.T, api *relecttest.LeaseAPI, name string) *agent {
	t.Helper()
	s := settings{namespace: "default", name: "relect-reporter", reportEvery: 30 * time.Second,
		leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: 2 * time.Second}
	a := &agent{done: make(chan error, 1)}
	nodes := fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}},
	)
	nodes.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if a.failing.Load() {
			return true, nil, errors.New("the apiserver refuses to list nodes")
		}
		return false, nil, nil
	})
	logger := slog.New(slog.DiscardHandler)
	var err error
	a.e, err = relect.New(relect.Options{
		Client:        api.Client(name).Clientset(),
		Namespace:     s.namespace,
		Name:          s.name,
		Identity:      name,
		LeaseDuration: s.leaseDuration,
		RenewDeadline: s.renewDeadline,
		RetryPeriod:   s.retryPeriod,
		OnStartedLeading: func(ctx context.Context) {
			reportCluster(ctx, logger, nodes, s)
		},
		Work: workOptions(s.reportEvery),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	go func() { a.done <- a.e.Run(ctx) }()
	return a
}

func (a *agent) stop() {
	a.cancel()
	<-a.done
}

// The leader beats after each report; one whose reports fail for three
// report intervals hands the lease to the other agent at once, and the new
// leader's reports beat.
func TestStuckReporterHandsOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		api.PutReleased("default", "relect-reporter") // taken at once
		a := startAgent(t, api, "node-a/reporter-a")
		synctest.Wait()
		b := startAgent(t, api, "node-b/reporter-b")
		defer b.stop()
		defer a.stop()

		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if !a.e.IsLeader() {
			t.Fatal("the first agent does not lead")
		}
		if age := time.Since(a.e.Stats().LastBeat); age > 30*time.Second {
			t.Errorf("the leader's last beat is %v old; it reports every 30 s", age)
		}

		a.failing.Store(true)
		failedAt, lastBeat := time.Now(), a.e.Stats().LastBeat
		window := workOptions(30 * time.Second).BeatWindow
		for !b.e.IsLeader() {
			if time.Since(failedAt) > window+time.Minute {
				t.Fatalf("%v after the reports began to fail, the other agent does not lead", time.Since(failedAt))
			}
			time.Sleep(100 * time.Millisecond)
		}
		// BeatWindow after the last beat, and the handover's moment.
		if took := time.Since(lastBeat); took > window+time.Second {
			t.Errorf("handed over %v after the last beat, more than BeatWindow %v and a second", took, window)
		}
		if n := a.e.Stats().WorkStuckHandovers; n != 1 {
			t.Errorf("%d stuck handovers, want 1", n)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if s := b.e.Stats(); !s.Leading || s.WorkStuck || s.LastBeat.Before(failedAt) {
			t.Errorf("the new leader: leading %v, stuck %v, last beat %v: want it leading, reporting and beating", s.Leading, s.WorkStuck, s.LastBeat)
		}
	})
}

// With -shards, the three metricsets spread over three agents, one each,
// each reported (a beat); when one agent stops, its metricset is reported
// by another at once.
func TestShardsSpreadTheMetricsets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		api.PutReleased("default", "relect-reporter")
		s := settings{namespace: "default", name: "relect-reporter", reportEvery: 30 * time.Second,
			leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: 2 * time.Second,
			shards: []string{"nodes", "pods", "namespaces"}}
		client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}})
		var es []*relect.Elector
		var cancels []context.CancelFunc
		var dones []chan error
		for _, name := range []string{"node-a/a", "node-b/b", "node-c/c"} {
			opts := relect.Options{Client: api.Client(name).Clientset(), Namespace: s.namespace, Name: s.name, Identity: name,
				LeaseDuration: s.leaseDuration, RenewDeadline: s.renewDeadline, RetryPeriod: s.retryPeriod}
			setWork(&opts, slog.New(slog.DiscardHandler), client, s)
			e, err := relect.New(opts)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- e.Run(ctx) }()
			es, cancels, dones = append(es, e), append(cancels, cancel), append(dones, done)
			synctest.Wait()
		}
		held := func() map[string]string {
			out := map[string]string{}
			for _, e := range es {
				for _, sh := range e.Shards() {
					out[sh] = e.Identity()
				}
			}
			return out
		}
		time.Sleep(4 * s.leaseDuration)
		synctest.Wait()
		h := held()
		if len(h) != 3 || len(slices.Compact(slices.Sorted(maps.Values(h)))) != 3 {
			t.Fatalf("shards held %v: want each metricset on its own agent", h)
		}
		for _, e := range es {
			if len(e.Shards()) != 1 {
				t.Errorf("%s holds %v", e.Identity(), e.Shards())
			}
		}
		gone := es[2].Shards()[0]
		cancels[2]()
		<-dones[2]
		synctest.Wait()
		if h := held(); h[gone] == "" || h[gone] == es[2].Identity() {
			t.Errorf("after its agent stopped, metricset %s is held by %q", gone, h[gone])
		}
		for i := range 2 {
			cancels[i]()
			<-dones[i]
		}
	})
}
