package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// reporterPodLabel marks the Pods of TestReporterPodRanges.
const reporterPodLabel = "relect-e2e-reporter-ranges"

// TestReporterPodRanges runs examples/daemonset-reporter with
// -pod-ranges=8 as three agents over 200 Pods, on a kube-apiserver with
// the ShardedListAndWatch gate on and on one without (the suite's): on
// both, every Pod comes to be reported by exactly one agent in each
// report interval, and after SIGTERM of one agent by exactly one of the
// other two; with the gate on no agent says that the apiserver did not
// filter, with it off each range term that reports says so. Over the
// whole run no range is reported by two agents at once: each range's
// terms, from "started" to "stopped reporting a pod range" in the agents'
// logs, follow one another.
func TestReporterPodRanges(t *testing.T) {
	plain := requireCluster(t)
	gated, err := startCluster(filepath.Join(workDir, "controlplane-reporter-sharded"), "ShardedListAndWatch=true")
	if err != nil {
		t.Fatalf("starting the control plane with ShardedListAndWatch: %v", err)
	}
	t.Cleanup(func() {
		if err := gated.stop(); err != nil {
			t.Errorf("stopping the gated control plane: %v", err)
		}
	})
	bin := filepath.Join(testDir(t), "daemonset-reporter")
	build := exec.Command(goTool(), "build", "-o", bin, "./examples/daemonset-reporter")
	build.Dir = ".." // the example lives in the root module
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building examples/daemonset-reporter: %v\n%s", err, out)
	}
	for _, c := range []struct {
		name    string
		cl      *cluster
		filters bool
	}{{"gate on", gated, true}, {"gate off", plain, false}} {
		t.Run(c.name, func(t *testing.T) { checkReporterRanges(t, bin, c.cl, c.filters) })
	}
}

// reporterAgent is one process of the example.
type reporterAgent struct {
	name, log string
	cmd       *exec.Cmd
	done      chan error
}

// reporterLine is what the test reads of a line of an agent's log.
type reporterLine struct {
	Time      time.Time `json:"time"`
	Msg       string    `json:"msg"`
	Range     string    `json:"range"`
	Fence     string    `json:"fence"`
	Namespace string    `json:"namespace"`
	Pod       string    `json:"pod"`
}

func checkReporterRanges(t *testing.T, bin string, c *cluster, filters bool) {
	const pods, ranges = 200, 8
	createReporterPods(t, c.client(t), pods)
	dir := testDir(t)
	kc := filepath.Join(dir, "kubeconfig")
	kubeconfig(t, kc, c.adminConfig(), c.apiAddr())
	var agents []*reporterAgent
	for i := range 3 {
		agents = append(agents, startReporterAgent(t, bin, dir, kc, leaseName(t), i, ranges))
	}
	defer func() {
		for _, a := range agents {
			_ = a.cmd.Process.Kill()
		}
	}()
	start := time.Now()
	per, by := waitSplit(t, agents, pods, time.Time{})
	t.Logf("3 agents, %d ranges, %d Pods: each reported by exactly one agent %v after the start; Pods per agent in the last 2.5 s %v",
		ranges, pods, time.Since(start).Round(100*time.Millisecond), per)

	gone := agents[2]
	var theirs []string
	for pod, who := range by {
		if who[0] == gone.name {
			theirs = append(theirs, pod)
		}
	}
	stopping := time.Now()
	stopReporter(t, gone)
	per, _ = waitSplit(t, agents[:2], pods, stopping)
	t.Logf("after SIGTERM of %s: its %d Pods first reported by the others %v later (the last of them); Pods per agent in an interval %v",
		gone.name, len(theirs), reportedAgain(t, agents[:2], theirs, stopping).Round(time.Millisecond), per)
	for _, a := range agents[:2] {
		stopReporter(t, a)
	}
	terms := rangeTerms(t, agents)
	checkRangeTerms(t, terms)
	checkFiltered(t, terms, filters)
}

// createReporterPods creates n Pods, which stay Pending (no scheduler), and
// deletes them at the end of the test.
func createReporterPods(t *testing.T, cs kubernetes.Interface, n int) {
	t.Helper()
	ctx := context.Background()
	// The ServiceAccount admission wants the namespace's default account,
	// which no controller-manager creates here.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if _, err := cs.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		err := cs.CoreV1().Pods(namespace).DeleteCollection(context.Background(), metav1.DeleteOptions{},
			metav1.ListOptions{LabelSelector: reporterPodLabel})
		if err != nil {
			t.Errorf("deleting the Pods: %v", err)
		}
	})
	no := false
	for i := range n {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("reporter-%d", i), Labels: map[string]string{reporterPodLabel: "true"}},
			Spec: corev1.PodSpec{AutomountServiceAccountToken: &no,
				Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}
		if _, err := cs.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// startReporterAgent starts agent i with short durations and a report
// every second.
func startReporterAgent(t *testing.T, bin, dir, kc, lease string, i, ranges int) *reporterAgent {
	t.Helper()
	a := &reporterAgent{name: fmt.Sprintf("agent-%d", i), done: make(chan error, 1)}
	a.log = filepath.Join(dir, a.name+".log")
	logf, err := os.Create(a.log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	a.cmd = exec.Command(bin, "-kubeconfig", kc, "-lease-namespace", namespace, "-lease-name", lease,
		"-lease-duration", "3s", "-renew-deadline", "2s", "-retry-period", "500ms",
		"-report-every", "1s", "-health-addr", freeAddr(t), "-pod-ranges", fmt.Sprint(ranges))
	a.cmd.Env = append(os.Environ(), "NODE_NAME=node-"+fmt.Sprint(i), "POD_NAME="+a.name)
	a.cmd.Stdout, a.cmd.Stderr = logf, logf
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { a.done <- a.cmd.Wait() }()
	return a
}

// stopReporter sends a SIGTERM and waits for a clean exit.
func stopReporter(t *testing.T, a *reporterAgent) {
	t.Helper()
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-a.done:
		if err != nil {
			t.Errorf("%s exited with %v", a.name, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not exit within 30 s of SIGTERM", a.name)
	}
}

// readReporterLog returns the lines of a's log that parse.
func readReporterLog(t *testing.T, a *reporterAgent) []reporterLine {
	t.Helper()
	f, err := os.Open(a.log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []reporterLine
	s := bufio.NewScanner(f)
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		var l reporterLine
		if json.Unmarshal(s.Bytes(), &l) == nil {
			out = append(out, l)
		}
	}
	return out
}

// waitSplit waits, for 2 minutes at most (the split takes a few seconds),
// until in the last 2.5 s (two and a half report intervals) and after
// since every one of the n Pods was reported by exactly one of agents,
// and returns how many each reported and who reported each.
func waitSplit(t *testing.T, agents []*reporterAgent, n int, since time.Time) (map[string]int, map[string][]string) {
	t.Helper()
	var by map[string][]string
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		from := time.Now().Add(-2500 * time.Millisecond)
		if from.Before(since) {
			continue
		}
		by = map[string][]string{}
		for _, a := range agents {
			for _, l := range readReporterLog(t, a) {
				pod := l.Namespace + "/" + l.Pod
				if l.Msg == "pod metrics" && strings.HasPrefix(l.Pod, "reporter-") && l.Time.After(from) && !slices.Contains(by[pod], a.name) {
					by[pod] = append(by[pod], a.name)
				}
			}
		}
		if per, ok := splitOnce(by, n); ok {
			return per, by
		}
	}
	t.Fatalf("2 minutes on, the Pods reported in the last 2.5 s: %d (want %d), by agents %v", len(by), n, by)
	return nil, nil
}

// splitOnce counts the Pods of by per agent, and whether there are n, each
// by one agent.
func splitOnce(by map[string][]string, n int) (map[string]int, bool) {
	per := map[string]int{}
	ok := len(by) == n
	for _, agents := range by {
		ok = ok && len(agents) == 1
		per[agents[0]]++
	}
	return per, ok
}

// rangeTerm is one agent's term of one range, from its log.
type rangeTerm struct {
	agent, rng  string
	start, stop time.Time
	reported    bool // it logged a report of its Pods
	unfiltered  bool // it said that the apiserver did not filter
}

// rangeTerms reads the agents' terms of each range from their logs.
func rangeTerms(t *testing.T, agents []*reporterAgent) []*rangeTerm {
	t.Helper()
	var terms []*rangeTerm
	for _, a := range agents {
		open := map[string]*rangeTerm{} // by range and fence
		for _, l := range readReporterLog(t, a) {
			key := l.Range + "/" + l.Fence
			if l.Msg == "started reporting a pod range" {
				open[key] = &rangeTerm{agent: a.name, rng: l.Range, start: l.Time}
				terms = append(terms, open[key])
			}
			tm := open[key]
			switch {
			case tm == nil:
			case l.Msg == "stopped reporting a pod range":
				tm.stop = l.Time
			case l.Msg == "pod range metrics":
				tm.reported = true
			case strings.HasPrefix(l.Msg, "the apiserver does not filter by range"):
				tm.unfiltered = true
			}
		}
	}
	return terms
}

// checkRangeTerms fails if two agents reported a range at once: each
// range's terms, from its "started" line to its "stopped" line, must not
// overlap.
func checkRangeTerms(t *testing.T, terms []*rangeTerm) {
	t.Helper()
	byRange := map[string][]*rangeTerm{}
	for _, tm := range terms {
		byRange[tm.rng] = append(byRange[tm.rng], tm)
	}
	for r, ts := range byRange {
		slices.SortFunc(ts, func(a, b *rangeTerm) int { return a.start.Compare(b.start) })
		for i, tm := range ts {
			if tm.stop.IsZero() {
				t.Errorf("range %s: %s's term from %s has no stop", r, tm.agent, tm.start.Format(time.StampMicro))
			} else if i+1 < len(ts) && ts[i+1].start.Before(tm.stop) {
				t.Errorf("range %s: %s started it at %s, before %s stopped at %s", r, ts[i+1].agent,
					ts[i+1].start.Format(time.StampMicro), tm.agent, tm.stop.Format(time.StampMicro))
			}
		}
	}
}

// checkFiltered fails unless, with the gate on (filters), no term said
// that the apiserver did not filter, and with it off every term that
// reported its Pods did (its list held other ranges' Pods).
func checkFiltered(t *testing.T, terms []*rangeTerm, filters bool) {
	t.Helper()
	var reported, unfiltered, reportedUnfiltered int
	for _, tm := range terms {
		reported += b2i(tm.reported)
		unfiltered += b2i(tm.unfiltered)
		reportedUnfiltered += b2i(tm.reported && tm.unfiltered)
	}
	t.Logf("%d range terms, %d of them reported Pods; %d said that the apiserver did not filter", len(terms), reported, unfiltered)
	if filters && unfiltered != 0 {
		t.Errorf("with the gate on, %d range terms said that the apiserver did not filter", unfiltered)
	}
	if !filters && reportedUnfiltered != reported {
		t.Errorf("with the gate off, %d of the %d terms that reported said that the apiserver did not filter, want all", reportedUnfiltered, reported)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// reportedAgain returns how long after since the last of pods was first
// reported by one of agents, or -1 if one was not.
func reportedAgain(t *testing.T, agents []*reporterAgent, pods []string, since time.Time) time.Duration {
	t.Helper()
	first := map[string]time.Time{}
	for _, a := range agents {
		for _, l := range readReporterLog(t, a) {
			pod := l.Namespace + "/" + l.Pod
			if at, ok := first[pod]; l.Msg == "pod metrics" && l.Time.After(since) && (!ok || l.Time.Before(at)) {
				first[pod] = l.Time
			}
		}
	}
	var last time.Duration
	for _, pod := range pods {
		at, ok := first[pod]
		if !ok {
			return -1
		}
		last = max(last, at.Sub(since))
	}
	return last
}
