package e2e

import (
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/relect/relect/operator"

	"github.com/relect/relect"
	"github.com/relect/relect/e2e/internal/history"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Environment variables of the controller-runtime scenario.
const (
	// envCtrlrt=full runs 100 changes of leader in modes ctrlrt and
	// rebuild and 40 in mode native (≈ 21 min); unset, the short mode's
	// 10 and 4 (CI, ≈ 2½ min).
	envCtrlrt = "RELECT_CTRLRT"
	// envCtrlrtOut, if set, is a file the table is written to as well.
	envCtrlrtOut = "RELECT_CTRLRT_OUT"
)

// The scenario's objects: fillers make the cache a list worth the name
// (the manager rebuilt per term lists them at every promotion); each mode
// stamps a group of its own.
const (
	crtNamespace = "ctrlrt-e2e"
	crtFillers   = 500
	crtStamped   = 10
)

// crtModes, in the order they run: one long-lived ctrlrt.Manager, a
// manager rebuilt in every term (the first table's columns), and
// controller-runtime's own manager with its own election and warm
// replicas, no relect at all (the second table's).
var crtModes = []string{"ctrlrt", "rebuild", "native"}

// TestControllerRuntimeTerms runs a real controller-runtime reconciler as
// relect's leader-only work in separate processes — three replicas, two of
// which live throughout — through 10 (short) or 100 (RELECT_CTRLRT=full)
// changes of leader by Yield, HandOver, SIGTERM, SIGKILL and a partition
// longer than the renew deadline, once with ctrlrt's long-lived manager
// and once with a manager rebuilt per term, on the suite's control plane.
// It checks that reconciles never ran on two replicas at once (from their
// histories, and from the fences of every version of the stamped objects),
// that no reconciler or predicate ran outside a term, that the surviving
// processes lived throughout with their metrics and webhook servers never
// restarted and their heap and goroutines flat term after term; and it
// measures promotion → first reconcile in both modes, side by side
// (docs/performance.md).
//
// Then it runs the same reconciler without relect, under controller-runtime's
// own election with warm replicas (mode native, crtPhase.nativeChanges), through
// 4 (short) or 40 changes of leader by SIGTERM and SIGKILL only, and
// compares those rows with ctrlrt's. Timings are printed, never asserted.
func TestControllerRuntimeTerms(t *testing.T) {
	c := requireCluster(t)
	changes, nativeChanges := 10, 4
	switch os.Getenv(envCtrlrt) {
	case "", "short":
	case "full":
		changes, nativeChanges = 100, 40
	default:
		t.Fatalf("%s=%q: want short or full", envCtrlrt, os.Getenv(envCtrlrt))
	}
	ctrlrtReplicaBinary(t)
	crtObjects(t, c)
	certDir := filepath.Join(testDir(t), "certs")
	ca := webhookCert(t, certDir)

	results := map[string]*crtResult{}
	for _, mode := range crtModes {
		t.Run(mode, func(t *testing.T) {
			p := &crtPhase{t: t, c: c, mode: mode, ns: crtNamespace, lease: "ctrlrt-e2e-" + mode, group: mode, certDir: certDir}
			n := changes
			if mode == "native" {
				n = nativeChanges
			}
			results[mode] = p.run(n, ca)
		})
	}
	if len(results) == len(crtModes) {
		table := crtTable(changes, results) + "\n" + crtNativeTable(changes, nativeChanges, results)
		t.Logf("promotion to first reconcile, side by side (%d changes per relect mode, %d with controller-runtime's own election):\n%s", changes, nativeChanges, table)
		if out := os.Getenv(envCtrlrtOut); out != "" {
			if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
				t.Error(err)
			}
		}
	}
}

// crtObjects creates the scenario's namespace and ConfigMaps.
func crtObjects(t *testing.T, c *cluster) {
	t.Helper()
	ctx := context.Background()
	cs := c.client(t)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: crtNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	filler := strings.Repeat("x", 1024)
	create := func(name string, labels map[string]string, data map[string]string) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: crtNamespace, Labels: labels}, Data: data}
		if _, err := cs.CoreV1().ConfigMaps(crtNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	for i := range crtFillers {
		create(fmt.Sprintf("filler-%03d", i), nil, map[string]string{"data": filler})
	}
	for _, mode := range crtModes {
		for i := range crtStamped {
			create(fmt.Sprintf("%s-%02d", mode, i), map[string]string{"ctrlrt-e2e": mode}, nil)
		}
	}
}

// crtPhase is one mode's run.
type crtPhase struct {
	t                               *testing.T
	c                               *cluster
	mode, ns, lease, group, certDir string

	replicas   []*crtReplica // every one started, in order
	ephemerals int
	changes    []crtChange
	started    time.Time // when the first leader reconciled
}

// crtChange is one change of leader the phase caused.
type crtChange struct {
	kind     string // yield, handover, sigterm, sigkill, partition
	from, to string
	at       time.Time // when the action began
}

// run runs the phase: three replicas, n changes of leader, then a
// graceful stop; it checks and measures the histories.
func (p *crtPhase) run(n int, ca *x509.CertPool) *crtResult {
	t := p.t
	// A released Lease: the first leader takes it at once (a missing one
	// relect creates only LeaseDuration after finding it missing).
	released := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: p.lease, Namespace: p.ns},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(""), LeaseDurationSeconds: ptr.To[int32](1)}}
	if _, err := p.c.client(t).CoordinationV1().Leases(p.ns).Create(context.Background(), released, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stamps := p.c.watchStamps(t, p.ns, p.group)
	var durable []*crtReplica
	if p.mode == "native" {
		// No replica lives throughout: each change stops the leader,
		// whichever it is.
		for range 3 {
			p.newEphemeral()
		}
	} else {
		durable = []*crtReplica{p.startReplica("d1", true), p.startReplica("d2", true)}
		p.newEphemeral()
	}
	leader := p.awaitPromotion(time.Time{}, nil, leaseDuration+maxAcquireWait()+slack)
	p.started = time.Now()
	t.Logf("%s: %s leads", p.mode, leader.id)

	var polls []*serverPoll
	if p.mode == "ctrlrt" {
		for _, r := range durable {
			polls = append(polls, pollServers(t, r, ca, 250*time.Millisecond))
		}
	}
	if p.mode == "native" {
		p.nativeChanges(leader, n)
	} else {
		p.relectChanges(leader, n)
	}
	ended := time.Now()
	for _, sp := range polls {
		sp.close()
	}
	for _, r := range p.replicas {
		if !r.exited() {
			r.signal(syscall.SIGTERM)
		}
	}
	for _, r := range p.replicas {
		select {
		case <-r.waited:
		case <-time.After(renewDeadline + 30*time.Second):
			t.Fatalf("%s did not exit after SIGTERM", r.id)
		}
		if r.durable && r.err() != nil {
			t.Errorf("%s exited with %v after SIGTERM (want status 0)", r.id, r.err())
		}
		if r.durable && r.dead().Before(ended) {
			t.Errorf("%s, meant to live throughout, died at %v, before the end of the run", r.id, r.dead())
		}
	}
	stamps.close()
	return p.check(stamps, polls, durable, ended)
}

// relectChanges makes n changes of leader from leader by Yield, HandOver,
// SIGTERM, SIGKILL and a partition, in turn.
func (p *crtPhase) relectChanges(leader *crtReplica, n int) {
	// Every term lasts LeaseDuration and a RetryPeriod at least: long
	// enough to reconcile in, and a stable term for relect, after which the
	// replica that stepped down follows the Lease again within a backoff
	// of about a RetryPeriod. Shorter terms, in a row, make relect's
	// backoff grow towards LeaseDuration; a replica in its backoff wait
	// misses its turn in the line of succession, and the next in line takes
	// over half a RetryPeriod later — relect's pacing, not controller-runtime's,
	// which would blur the change rows of the table.
	dwell := func() { time.Sleep(leaseDuration + retryPeriod) }
	kinds := []string{"yield", "sigterm", "partition", "sigkill"}
	for i := 0; len(p.changes) < n; i++ {
		switch kind := kinds[i%len(kinds)]; kind {
		case "yield":
			leader = p.yield(leader)
		case "partition":
			leader = p.partition(leader)
		case "sigterm", "sigkill":
			e := p.ephemeral()
			if leader != e {
				leader = p.handOver(leader, e)
				if len(p.changes) >= n {
					break
				}
				dwell()
			}
			leader = p.stop(e, kind)
		}
		dwell()
	}
}

// nativeChanges makes n changes of leader from leader under
// controller-runtime's own election. It has no Yield and no HandOver, and
// a partitioned leader's manager ends its process when it loses the lease,
// so the changes are SIGTERM and SIGKILL of the leader, in turn; stop
// starts a replica in place of each one stopped, so that three always run.
// A new replica competes for the Lease only once its sources have synced
// (EnableWarmup): within the term that follows, the same dwell as in
// relectChanges, it is as warm as the others.
func (p *crtPhase) nativeChanges(leader *crtReplica, n int) {
	kinds := []string{"sigterm", "sigkill"}
	for i := range n {
		leader = p.stop(leader, kinds[i%len(kinds)])
		time.Sleep(leaseDuration + retryPeriod)
	}
}

// newEphemeral starts the next replica that SIGTERM and SIGKILL stop.
func (p *crtPhase) newEphemeral() *crtReplica {
	p.ephemerals++
	return p.startReplica(fmt.Sprintf("e%d", p.ephemerals), false)
}

// ephemeral is the ephemeral replica that runs now.
func (p *crtPhase) ephemeral() *crtReplica {
	for i := len(p.replicas) - 1; i >= 0; i-- {
		if r := p.replicas[i]; !r.durable && !r.exited() {
			return r
		}
	}
	p.t.Fatal("no ephemeral replica runs")
	return nil
}

// awaitPromotion waits for a replica other than not (nil: any) to begin
// reconciling in a term that started after from, and returns it.
func (p *crtPhase) awaitPromotion(from time.Time, not *crtReplica, expected time.Duration) *crtReplica {
	p.t.Helper()
	var got *crtReplica
	waitFor(p.t, expected, p.mode+": a new leader's first reconcile", func() bool {
		for _, r := range p.replicas {
			if r == not || r.exited() {
				continue
			}
			for _, ev := range r.tail.events("first-reconcile", from) {
				if ev.Time().After(from) {
					got = r
					return true
				}
			}
		}
		return false
	})
	return got
}

func (p *crtPhase) record(kind string, from, to *crtReplica, at time.Time) {
	p.changes = append(p.changes, crtChange{kind: kind, from: from.id, to: to.id, at: at})
}

// yield asks the leader to Yield (operator.RequestYield, as `relect yield`
// does).
func (p *crtPhase) yield(leader *crtReplica) *crtReplica {
	at := time.Now()
	if _, err := operator.RequestYield(context.Background(), p.c.client(p.t), p.ns, p.lease, "e2e"); err != nil {
		p.t.Fatal(err)
	}
	next := p.awaitPromotion(at, leader, renewDeadline+maxAcquireWait()+slack)
	p.record("yield", leader, next, at)
	return next
}

// handOver asks the leader to hand over to to, once to is registered,
// again until it leads.
func (p *crtPhase) handOver(leader, to *crtReplica) *crtReplica {
	t := p.t
	cs := p.c.client(t)
	waitFor(t, 10*time.Second, to.id+" registered", func() bool {
		cands, err := operator.ListCandidates(context.Background(), cs, p.ns, p.lease)
		if err != nil {
			return false
		}
		for _, c := range cands {
			if c.Identity == to.id {
				return true
			}
		}
		return false
	})
	at := time.Now()
	for try := 0; ; try++ {
		if _, err := operator.RequestHandOver(context.Background(), cs, p.ns, p.lease, to.id, "e2e", nil); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(renewDeadline + slack)
		for time.Now().Before(deadline) {
			if len(to.tail.events("first-reconcile", at)) > 0 {
				p.record("handover", leader, to, at)
				return to
			}
			if h := p.c.getLeaseIn(t, p.ns, p.lease); h != nil && ptrVal(h.Spec.HolderIdentity) != leader.id && ptrVal(h.Spec.HolderIdentity) != to.id {
				t.Fatalf("handing over to %s: the lease went to %q", to.id, ptrVal(h.Spec.HolderIdentity))
			}
			time.Sleep(10 * time.Millisecond)
		}
		if try == 5 {
			t.Fatalf("%s did not take the lease over from %s after %d requests", to.id, leader.id, try+1)
		}
	}
}

// stop ends the ephemeral leader e with SIGTERM (a graceful release) or
// SIGKILL (its lease expires), and starts the next ephemeral replica.
func (p *crtPhase) stop(e *crtReplica, kind string) *crtReplica {
	var at time.Time
	expected := maxAcquireWait() + slack
	if kind == "sigkill" {
		at = e.kill()
		expected += leaseDuration + maxAcquireWait()
	} else {
		at = e.signal(syscall.SIGTERM)
	}
	next := p.awaitPromotion(at, e, expected)
	p.record(kind, e, next, at)
	select {
	case <-e.waited:
	case <-time.After(renewDeadline + 30*time.Second):
		p.t.Fatalf("%s did not exit after %s", e.id, kind)
	}
	if kind == "sigterm" && e.err() != nil {
		p.t.Errorf("%s exited with %v after SIGTERM (want status 0)", e.id, e.err())
	}
	p.newEphemeral()
	return next
}

// partition black-holes the leader's connection to the apiserver for
// longer than the renew deadline (and the lease duration), until another
// replica has taken over, then heals it: the partitioned process lives on
// as a follower.
func (p *crtPhase) partition(leader *crtReplica) *crtReplica {
	if err := leader.proxy.Blackhole(); err != nil {
		p.t.Fatal(err)
	}
	at := time.Now()
	next := p.awaitPromotion(at, leader, leaseDuration+2*maxAcquireWait()+slack)
	if until := at.Add(leaseDuration + slack); time.Now().Before(until) {
		time.Sleep(time.Until(until))
	}
	if err := leader.proxy.Heal(); err != nil {
		p.t.Fatal(err)
	}
	p.record("partition", leader, next, at)
	return next
}

// crtResult is what one phase measured.
type crtResult struct {
	promotions []time.Duration            // term start → first reconcile, every term after the first
	changes    map[string][]time.Duration // the action → the next leader's first reconcile, per kind
	terms      int
	mem        map[string][]history.Record // "mem" events of the replicas that lived throughout
	polls      []*serverPoll
	durable    []*crtReplica
}

// check runs the checks over the phase's histories and collects the
// measurements.
func (p *crtPhase) check(stamps *stampWatch, polls []*serverPoll, durable []*crtReplica, ended time.Time) *crtResult {
	t := p.t
	res := &crtResult{changes: map[string][]time.Duration{}, mem: map[string][]history.Record{}, polls: polls, durable: durable}

	// Reconciles never on two replicas at once, nor leaders: relect's
	// (IsLeader, sampled) or, under controller-runtime's own election, the
	// Lease as each replica's lock held it (from the Update that acquired
	// it to the one that began to release it, or the process's death).
	leaderView := history.ViewRelect
	if p.mode == "native" {
		leaderView = viewLease
	}
	var reconciles, leaders []history.Interval
	byID := map[string]*crtReplica{}
	for _, r := range p.replicas {
		byID[r.id] = r
		reconciles = append(reconciles, r.intervals(viewReconcile)...)
		leaders = append(leaders, r.intervals(leaderView)...)
		for _, ev := range r.tail.events("outside-term", time.Time{}) {
			t.Errorf("%s: %s called outside a term at %s", r.id, ev.Err, ev.Time().Format("15:04:05.000"))
		}
		for _, ev := range r.tail.events("first-reconcile", p.started) {
			res.promotions = append(res.promotions, time.Duration(ev.Delay))
		}
		res.terms += len(r.tail.events("term-start", time.Time{}))
	}
	for _, o := range history.Overlaps(reconciles) {
		t.Errorf("SAFETY VIOLATION: reconciles on two replicas at once: %v", o)
	}
	for _, o := range history.Overlaps(leaders) {
		t.Errorf("SAFETY VIOLATION: two leaders: %v", o)
	}
	t.Logf("%s: %d reconciles, %d terms, %d changes", p.mode, len(reconciles), res.terms, len(p.changes))

	// Every change: from the action (the request, the signal, the
	// partition) to the next leader's first reconcile.
	for _, ch := range p.changes {
		if evs := byID[ch.to].tail.events("first-reconcile", ch.at); len(evs) > 0 {
			res.changes[ch.kind] = append(res.changes[ch.kind], evs[0].Time().Sub(ch.at))
		}
	}

	versions := map[string][]stamp{}
	stamps.mu.Lock()
	for _, s := range stamps.versions {
		versions[s.name] = append(versions[s.name], s)
	}
	stamps.mu.Unlock()
	var written int
	if p.mode == "native" {
		written = p.checkLeaderStamps(versions, byID)
	} else {
		written = p.checkFencedStamps(versions, byID)
	}
	t.Logf("%s: %d stamps written over %d objects", p.mode, written, len(versions))

	for _, r := range durable {
		// The samples after the terms of the run: not the one of the last
		// term, which the final SIGTERM ended, taken as the process exits.
		for _, m := range r.tail.events("mem", time.Time{}) {
			if m.Time().Before(ended) {
				res.mem[r.id] = append(res.mem[r.id], m)
			}
		}
	}
	if p.mode == "ctrlrt" {
		p.checkServers(res)
		p.checkMemory(res)
	}
	return res
}

// checkFencedStamps checks the stamps of a relect mode: in the order the
// apiserver wrote them, each object's fence never goes back, and each
// stamp names a term its leader led. It returns the number of stamps.
func (p *crtPhase) checkFencedStamps(versions map[string][]stamp, byID map[string]*crtReplica) (written int) {
	t := p.t
	for name, vs := range versions {
		var last relect.Fence
		for _, s := range vs {
			if s.fence == "" {
				continue
			}
			written++
			if f := relect.Fence(s.fence); f.Compare(last) < 0 {
				t.Errorf("SAFETY VIOLATION: %s: fence %s (by %s, term %s) written after fence %s", name, s.fence, s.leader, s.term, last)
			} else {
				last = f
			}
			if r := byID[s.leader]; r == nil || !ledTerm(r, s.term) {
				t.Errorf("%s: stamped by %s with term %s, which it never led", name, s.leader, s.term)
			}
		}
	}
	return written
}

// checkLeaderStamps checks the stamps of controller-runtime's own election,
// which gives the reconciler no term and no fence to write, only its
// identity: in the order the apiserver wrote them, each object's stamps
// follow the order in which their replicas acquired the Lease (a replica
// acquires it once at most: its manager ends when it loses it), and each
// names a replica that led. A deposed leader's write after its successor's
// fails the first check; what it cannot see is a write of a deposed leader
// that no successor overwrote yet, which a fence would have refused (and
// the replicas' histories above show none). It returns the number of stamps.
func (p *crtPhase) checkLeaderStamps(versions map[string][]stamp, byID map[string]*crtReplica) (written int) {
	t := p.t
	type term struct {
		id string
		at time.Time
	}
	var terms []term
	for id, r := range byID {
		starts := r.tail.events("term-start", time.Time{})
		if len(starts) > 1 {
			t.Errorf("%s acquired the Lease %d times: controller-runtime's manager should have ended when it lost it", id, len(starts))
		}
		if len(starts) > 0 {
			terms = append(terms, term{id, starts[0].Time()})
		}
	}
	sort.Slice(terms, func(i, j int) bool { return terms[i].at.Before(terms[j].at) })
	order := map[string]int{}
	for i, tm := range terms {
		order[tm.id] = i + 1
	}
	for name, vs := range versions {
		last, lastBy := 0, ""
		for _, s := range vs {
			if s.leader == "" {
				continue
			}
			written++
			switch n := order[s.leader]; {
			case n == 0:
				t.Errorf("%s: stamped by %s, which never led", name, s.leader)
			case n < last:
				t.Errorf("SAFETY VIOLATION: %s: stamped by %s (leader #%d) after %s (leader #%d)", name, s.leader, n, lastBy, last)
			default:
				last, lastBy = n, s.leader
			}
		}
	}
	return written
}

// ledTerm reports whether r's history shows it leading term (a decimal).
func ledTerm(r *crtReplica, term string) bool {
	for _, iv := range r.intervals(history.ViewRelect) {
		if fmt.Sprint(iv.Term) == term {
			return true
		}
	}
	return false
}

// checkServers: the long-lived replicas' metrics and webhook servers
// answered every poll and started once. (The connections each took are
// logged: a server that restarted would also take a new one, but an HTTP/2
// connection can be replaced without a restart, and the client retries
// such a request on the new one unseen.)
func (p *crtPhase) checkServers(res *crtResult) {
	t := p.t
	for i, r := range res.durable {
		sp := res.polls[i]
		sp.mu.Lock()
		for _, name := range []string{"metrics", "webhook"} {
			t.Logf("%s: %s server: %d polls, %d failed, %d connections", r.id, name, sp.polls[name], sp.failed[name], len(sp.conns[name]))
			if sp.failed[name] > 0 || sp.polls[name] == 0 {
				t.Errorf("%s: the %s server failed %d of %d polls: it restarted, or stopped serving", r.id, name, sp.failed[name], sp.polls[name])
			}
		}
		sp.mu.Unlock()
		for _, line := range []string{"Starting metrics server", "Starting webhook server"} {
			if n := r.logCount(line); n != 1 {
				t.Errorf("%s: %q logged %d times, want once", r.id, line, n)
			}
		}
	}
}

// checkMemory: term after term, the long-lived replicas' heap (after a GC)
// and goroutines do not grow (growth per term under 1 MiB, and under one
// goroutine), fitted by least squares over their terms.
func (p *crtPhase) checkMemory(res *crtResult) {
	t := p.t
	for id, mem := range res.mem {
		heap, gor := slopes(mem)
		t.Logf("%s: after each of its %d terms: heap %s, goroutines %s; growth per term %.1f KiB, %.2f goroutines",
			id, len(mem), heapSeries(mem), goroutineSeries(mem), heap/1024, gor)
		if len(mem) < 5 {
			continue // too few terms to fit a trend
		}
		if heap > 1<<20 {
			t.Errorf("%s: heap grows by %.0f KiB per term (target: under 1 MiB)", id, heap/1024)
		}
		if gor >= 1 {
			t.Errorf("%s: goroutines grow by %.2f per term", id, gor)
		}
	}
}

// slopes fits heap and goroutines against the term's ordinal.
func slopes(mem []history.Record) (heap, goroutines float64) {
	n := float64(len(mem))
	if n < 2 {
		return 0, 0
	}
	var sx, sxx, sh, sxh, sg, sxg float64
	for i, m := range mem {
		x := float64(i)
		sx, sxx = sx+x, sxx+x*x
		sh, sxh = sh+float64(m.Heap), sxh+x*float64(m.Heap)
		sg, sxg = sg+float64(m.Goroutines), sxg+x*float64(m.Goroutines)
	}
	d := n*sxx - sx*sx
	return (n*sxh - sx*sh) / d, (n*sxg - sx*sg) / d
}

func heapSeries(mem []history.Record) string {
	if len(mem) == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f → %.1f MiB", float64(mem[0].Heap)/(1<<20), float64(mem[len(mem)-1].Heap)/(1<<20))
}

func goroutineSeries(mem []history.Record) string {
	if len(mem) == 0 {
		return "—"
	}
	return fmt.Sprintf("%d → %d", mem[0].Goroutines, mem[len(mem)-1].Goroutines)
}

// crtTable formats the side-by-side table of docs/performance.md.
func crtTable(changes int, res map[string]*crtResult) string {
	a, b := res["ctrlrt"], res["rebuild"]
	var sb strings.Builder
	fmt.Fprintf(&sb, "| %d changes of leader per mode, 3 replicas, %d ConfigMaps in the cache | ctrlrt: one long-lived manager | a manager rebuilt per term | ratio |\n|---|---:|---:|---:|\n",
		changes, crtFillers+len(crtModes)*crtStamped)
	row := func(name string, qa, qb []time.Duration, q float64) {
		pa, pb := percentile(qa, q), percentile(qb, q)
		fmt.Fprintf(&sb, "| %s | %s | %s | %s |\n", name, fmtDur(pa), fmtDur(pb), ratioOf(float64(pb), float64(pa)))
	}
	row(fmt.Sprintf("promotion → first reconcile, p50 (%d / %d terms)", len(a.promotions), len(b.promotions)), a.promotions, b.promotions, 0.5)
	row("… p99", a.promotions, b.promotions, 0.99)
	row("… max", a.promotions, b.promotions, 1)
	for _, k := range []struct{ kind, what string }{
		{"yield", "Yield requested"}, {"handover", "HandOver requested"}, {"sigterm", "SIGTERM of the leader"},
		{"sigkill", "SIGKILL of the leader"}, {"partition", "the leader partitioned"},
	} {
		row(fmt.Sprintf("%s → the next leader's first reconcile, p50 (%d / %d)", k.what, len(a.changes[k.kind]), len(b.changes[k.kind])), a.changes[k.kind], b.changes[k.kind], 0.5)
	}
	mem := func(r *crtResult) (string, string) {
		var hs, gs []string
		ids := make([]string, 0, len(r.mem))
		for id := range r.mem {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			h, g := slopes(r.mem[id])
			hs = append(hs, fmt.Sprintf("%+.0f KiB", h/1024))
			gs = append(gs, fmt.Sprintf("%+.2f", g))
		}
		return strings.Join(hs, ", "), strings.Join(gs, ", ")
	}
	ha, ga := mem(a)
	hb, gb := mem(b)
	fmt.Fprintf(&sb, "| heap after GC, growth per term (the two replicas that live throughout) | %s | %s | |\n", ha, hb)
	fmt.Fprintf(&sb, "| goroutines, growth per term | %s | %s | |\n", ga, gb)
	fmt.Fprintf(&sb, "\ntarget p99 within one RetryPeriod (%v): %s; at least 5× faster than rebuilt at p50 and p99: %s\n",
		retryPeriod, met(percentile(a.promotions, 0.99) <= retryPeriod),
		met(percentile(b.promotions, 0.5) >= 5*percentile(a.promotions, 0.5) && percentile(b.promotions, 0.99) >= 5*percentile(a.promotions, 0.99)))
	return sb.String()
}

// crtNativeTable formats the second table of docs/performance.md: ctrlrt
// beside controller-runtime's own election with warm replicas, on the
// changes both make (SIGTERM and SIGKILL of the leader), and the issue's
// target for the graceful one. The ratio is how many times faster ctrlrt
// is.
func crtNativeTable(changes, nativeChanges int, res map[string]*crtResult) string {
	a, n := res["ctrlrt"], res["native"]
	var sb strings.Builder
	fmt.Fprintf(&sb, "| %d changes of leader (ctrlrt) and %d (controller-runtime), 3 replicas, %d ConfigMaps in the cache | ctrlrt: one long-lived manager | controller-runtime's own election, warm replicas | ratio |\n|---|---:|---:|---:|\n",
		changes, nativeChanges, crtFillers+len(crtModes)*crtStamped)
	row := func(name string, qa, qn []time.Duration, q float64) {
		pa, pn := percentile(qa, q), percentile(qn, q)
		fmt.Fprintf(&sb, "| %s | %s | %s | %s |\n", name, fmtDur(pa), fmtDur(pn), ratioOf(float64(pn), float64(pa)))
	}
	for _, k := range []struct{ kind, what string }{{"sigterm", "SIGTERM of the leader"}, {"sigkill", "SIGKILL of the leader"}} {
		qa, qn := a.changes[k.kind], n.changes[k.kind]
		row(fmt.Sprintf("%s → the next leader's first reconcile, p50 (%d / %d)", k.what, len(qa), len(qn)), qa, qn, 0.5)
		row("… p99", qa, qn, 0.99)
	}
	row(fmt.Sprintf("term start (ctrlrt: Setup called; controller-runtime: the Lease acquired) → first reconcile, p50 (%d / %d terms)", len(a.promotions), len(n.promotions)), a.promotions, n.promotions, 0.5)
	ta, tn := a.changes["sigterm"], n.changes["sigterm"]
	fmt.Fprintf(&sb, "\ntarget: ctrlrt's graceful handover (SIGTERM of the leader) to the first reconcile at least 10× faster than controller-runtime's own election with warm replicas, at p50 and p99: %s\n",
		met(len(ta) > 0 && len(tn) > 0 && percentile(tn, 0.5) >= 10*percentile(ta, 0.5) && percentile(tn, 0.99) >= 10*percentile(ta, 0.99)))
	return sb.String()
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}
