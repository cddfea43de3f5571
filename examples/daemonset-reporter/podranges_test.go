package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/relecttest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

// podLog records what the agents log: who reported which Pod when, who
// reported the cluster metrics, and how often an agent filtered a range
// itself. It is a slog.Handler per agent (handler).
type podLog struct {
	mu       sync.Mutex
	pods     []podReport
	cluster  []podReport // pod empty
	filtered int         // "the apiserver does not filter" lines
}

type podReport struct {
	agent, pod string // pod: namespace/name
	at         time.Time
}

// handler is the slog.Handler of agent's logger.
func (l *podLog) handler(agent string) slog.Handler { return &podLogHandler{log: l, agent: agent} }

type podLogHandler struct {
	log   *podLog
	agent string
}

func (h *podLogHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *podLogHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *podLogHandler) WithGroup(string) slog.Handler            { return h }

func (h *podLogHandler) Handle(_ context.Context, r slog.Record) error {
	attrs := map[string]string{}
	r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
	h.log.mu.Lock()
	defer h.log.mu.Unlock()
	switch {
	case r.Message == "pod metrics":
		h.log.pods = append(h.log.pods, podReport{agent: h.agent, pod: attrs["namespace"] + "/" + attrs["pod"], at: r.Time})
	case r.Message == "cluster metrics":
		h.log.cluster = append(h.log.cluster, podReport{agent: h.agent, at: r.Time})
	case strings.HasPrefix(r.Message, "the apiserver does not filter by range"):
		h.log.filtered++
	}
	return nil
}

// since returns, for each Pod reported at or after from, the agents that
// reported it, and the agents that reported the cluster metrics.
func (l *podLog) since(from time.Time) (pods map[string][]string, cluster []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	pods = map[string][]string{}
	for _, r := range l.pods {
		if !r.at.Before(from) && !slices.Contains(pods[r.pod], r.agent) {
			pods[r.pod] = append(pods[r.pod], r.agent)
		}
	}
	for _, r := range l.cluster {
		if !r.at.Before(from) && !slices.Contains(cluster, r.agent) {
			cluster = append(cluster, r.agent)
		}
	}
	return pods, cluster
}

// reportedAgain returns how long after from the last of pods was first
// reported by an agent other than gone, or -1 if one was not.
func (l *podLog) reportedAgain(pods []string, from time.Time, gone string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	first := map[string]time.Time{}
	for _, r := range l.pods {
		if _, ok := first[r.pod]; !ok && !r.at.Before(from) && r.agent != gone {
			first[r.pod] = r.at
		}
	}
	var last time.Duration
	for _, pod := range pods {
		at, ok := first[pod]
		if !ok {
			return -1
		}
		last = max(last, at.Sub(from))
	}
	return last
}

// newPod is Pod i of namespace ns-(i mod 4), with a uid of its own (the
// fake clientset sets none, and the ranges divide the uids' hash).
func newPod(i int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", i%4), Name: fmt.Sprintf("pod-%d", i),
			UID: types.UID(fmt.Sprintf("%08x-0000-4000-8000-000000000000", i))},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// startRangeAgent starts an agent of settings s on the in-memory Lease
// API, listing Pods and Nodes from client.
func startRangeAgent(t *testing.T, api *relecttest.LeaseAPI, client kubernetes.Interface, s settings, name string, log *podLog) *agent {
	t.Helper()
	opts := relect.Options{Client: api.Client(name).Clientset(), Namespace: s.namespace, Name: s.name, Identity: name,
		LeaseDuration: s.leaseDuration, RenewDeadline: s.renewDeadline, RetryPeriod: s.retryPeriod,
		Logger: slog.New(slog.DiscardHandler)}
	setWork(&opts, slog.New(log.handler(name)), client, s)
	e, err := relect.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &agent{e: e, cancel: cancel, done: make(chan error, 1)}
	go func() { a.done <- e.Run(ctx) }()
	return a
}

// checkOnce fails unless every Pod of want was reported by exactly one
// agent in pods, and returns how many Pods each agent reported.
func checkOnce(t *testing.T, pods map[string][]string, want int) map[string]int {
	t.Helper()
	if len(pods) != want {
		t.Errorf("%d Pods reported, want all %d", len(pods), want)
	}
	per := map[string]int{}
	for pod, agents := range pods {
		if len(agents) != 1 {
			t.Errorf("Pod %s reported by %v, want exactly one agent", pod, agents)
		}
		per[agents[0]]++
	}
	return per
}

// podFleet is agents in range mode over one fake clientset of Pods.
type podFleet struct {
	s      settings
	client *fake.Clientset
	log    *podLog
	agents []*agent
	pods   int // in client
}

// startPodFleet starts an agent per name with -pod-ranges=ranges, over
// listed Pods, and waits until the ranges have settled.
func startPodFleet(t *testing.T, ranges, listed int, names ...string) *podFleet {
	t.Helper()
	api := relecttest.NewLeaseAPI()
	api.PutReleased("default", "relect-reporter")
	f := &podFleet{
		s: settings{namespace: "default", name: "relect-reporter", reportEvery: 30 * time.Second,
			leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: 2 * time.Second,
			podRanges: ranges},
		client: fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}),
		log:    &podLog{},
		pods:   listed,
	}
	for i := range listed {
		if err := f.client.Tracker().Add(newPod(i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range names {
		f.agents = append(f.agents, startRangeAgent(t, api, f.client, f.s, name, f.log))
		synctest.Wait()
	}
	time.Sleep(4 * f.s.leaseDuration)
	synctest.Wait()
	return f
}

// create adds n Pods, which the informers receive by their watches.
func (f *podFleet) create(t *testing.T, n int) {
	t.Helper()
	for i := f.pods; i < f.pods+n; i++ {
		p := newPod(i)
		if _, err := f.client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f.pods += n
	synctest.Wait()
}

// interval returns who reported each Pod, and who the cluster metrics, in
// the next report interval.
func (f *podFleet) interval() (pods map[string][]string, cluster []string) {
	from := time.Now()
	time.Sleep(f.s.reportEvery)
	synctest.Wait()
	return f.log.since(from)
}

// With -pod-ranges=8 over 3 agents, each agent holds 2 or 3 of the 8 uid
// ranges and, in a report interval, every Pod — those listed at the start
// and those created later — is reported by exactly one agent, while only
// the leader reports the cluster metrics. When an agent stops, the others
// take its ranges at once and report its Pods, each by exactly one.
func TestPodRangesSplitThePods(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := startPodFleet(t, 8, 240, "node-a/a", "node-b/b", "node-c/c")
		f.create(t, 16)
		held := map[string][]string{}
		for _, a := range f.agents {
			held[a.e.Identity()] = a.e.Shards()
			if n := len(a.e.Shards()); n < 2 || n > 3 {
				t.Errorf("%s holds ranges %v: want 2 or 3 of 8", a.e.Identity(), a.e.Shards())
			}
		}
		pods, cluster := f.interval()
		per := checkOnce(t, pods, f.pods)
		t.Logf("3 agents, 8 ranges, %d Pods: ranges held %v; Pods reported per agent in one interval %v; cluster metrics by %v; %d range terms filtered on the client",
			f.pods, held, per, cluster, f.log.filtered)
		if len(cluster) != 1 || !slices.ContainsFunc(f.agents, func(a *agent) bool { return a.e.Identity() == cluster[0] && a.e.IsLeader() }) {
			t.Errorf("cluster metrics reported by %v, want the leader alone", cluster)
		}
		if f.log.filtered == 0 {
			t.Error("no agent said it filtered its ranges itself (the fake clientset does not filter)")
		}
		checkStopMovesPods(t, f, f.agents[2], pods)
		for _, a := range f.agents[:2] {
			a.stop()
		}
	})
}

// checkStopMovesPods stops gone and checks that in the next report
// interval every Pod is reported by exactly one of the others, those gone
// reported (before, from pods) included.
func checkStopMovesPods(t *testing.T, f *podFleet, gone *agent, pods map[string][]string) {
	t.Helper()
	var theirs []string
	for pod, by := range pods {
		if by[0] == gone.e.Identity() {
			theirs = append(theirs, pod)
		}
	}
	stopping := time.Now()
	gone.stop()
	pods, _ = f.interval()
	per := checkOnce(t, pods, f.pods)
	for _, pod := range theirs {
		if by := pods[pod]; len(by) == 0 || by[0] == gone.e.Identity() {
			t.Errorf("after %s stopped, its Pod %s is reported by %v", gone.e.Identity(), pod, by)
		}
	}
	t.Logf("after %s stopped: its %d Pods reported by the others (the last of them first %v after the stop); Pods reported per agent in the next interval %v",
		gone.e.Identity(), len(theirs), f.log.reportedAgain(theirs, stopping, gone.e.Identity()), per)
}

// -pod-ranges takes 0 (off) to 1000, and not with -shards.
func TestCheckPodRanges(t *testing.T) {
	for _, c := range []struct {
		ranges int
		shards string
		ok     bool
	}{
		{0, "", true}, {8, "", true}, {1000, "", true}, {0, "nodes", true},
		{-1, "", false}, {1001, "", false}, {8, "nodes,pods", false},
	} {
		if err := checkPodRanges(c.ranges, c.shards); (err == nil) != c.ok {
			t.Errorf("checkPodRanges(%d, %q) = %v, want ok %v", c.ranges, c.shards, err, c.ok)
		}
	}
}
