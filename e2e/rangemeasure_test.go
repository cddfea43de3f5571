package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestShardRangeMeasure's settings.
const (
	// envRanges=short|full runs TestShardRangeMeasure; unset, it is
	// skipped.
	envRanges = "RELECT_RANGES"
	// envRangesOut, if set, is a file the report (markdown) is written
	// to.
	envRangesOut = "RELECT_RANGES_OUT"
	// rangeLabel marks the ConfigMaps of TestShardRangeMeasure.
	rangeLabel = "relect-e2e-ranges"
)

// rangeSize is a size of TestShardRangeMeasure: the ConfigMaps, the
// processes, the range shards (relect's Count).
type rangeSize struct{ objects, procs, shards int }

var rangeSizes = map[string]rangeSize{"short": {1000, 4, 8}, "full": {10000, 10, 32}}

// TestShardRangeMeasure measures range shards on the real control plane
// (issue 51, "Proved and measured"): rangeinformer processes
// (e2e/cmd/rangeinformer), each range's informer over
// shardrange.NewListerWatcher, over the ConfigMaps.
//
//   - Received: with the suite's apiserver (ShardedListAndWatch off) and a
//     second one with the gate on, a settled relect fleet's objects and
//     bytes per replica (max ÷ mean); asserted: each range's informer kept
//     exactly the objects whose uid hash (computed here) its range holds,
//     and was sent those only (gate on) or every object (gate off).
//   - Through a graceful stop, a SIGKILL, a partition (one process cut
//     off from the apiserver by its faultproxy for longer than
//     LeaseDuration, then healed), a graceful stop of the election's
//     leader, and rolling restarts of every process without and with a
//     surge (gate on): asserted, never two processes holding one object
//     at one instant (from the logged start and stop of every range term,
//     touching counts); in the partition, the cut-off holder's terms end
//     within RD + RP of the cut, its ranges run elsewhere within LD + 2 ×
//     RP + 1 s of its last renewal, and healed it holds ranges again
//     (partitionBounds); measured, the object-seconds during which an
//     object had no holder.
//   - The static scheme of kube-state-metrics (process i of N holds range
//     i of N, no coordination) through the same rolling restarts: its
//     unowned and duplicate object-seconds beside relect's.
//   - A moved range's first object handled after its holder stopped
//     (cold: the new holder lists when its term starts), p50 / p99; and
//     again with warm takers (ShardOptions.Warm keeps each range's
//     informer on its holder and its taker, Run reads it) through a
//     graceful stop and a rolling restart, with what each process is
//     sent for the ranges it holds and those it is the taker of.
//
// The figures are printed (t.Logf) and, with envRangesOut, written as a
// markdown report.
func TestShardRangeMeasure(t *testing.T) {
	mode := os.Getenv(envRanges)
	if mode == "" {
		t.Skipf("%s is not set: skipping the range-shard measurement (%s=short or full)", envRanges, envRanges)
	}
	size, ok := rangeSizes[mode]
	if !ok {
		t.Fatalf("%s=%q: want short or full", envRanges, mode)
	}
	plain := requireCluster(t)
	rangeInformerBinary(t)
	suiteTiming := leaseTiming{leaseDuration, renewDeadline, retryPeriod}
	start := time.Now()
	rep := &rangeReport{size: size, mode: mode}

	hashes := createRangeObjects(t, plain, size.objects)
	// relect's default durations: with the gate off every range's
	// informer lists every object, and on two busy cores the suite's
	// (RD 2 s) are missed while they do (a full run of the test as of
	// e87745b: the shards' renewals failed and the fleet did not settle).
	off := newRangeFleet(t, plain, "gate-off", size, false, productionTiming)
	rep.off = off.settle(hashes, false)
	off.stopAll()
	deleteRangeObjects(t, plain)

	gated, err := startCluster(filepath.Join(workDir, "controlplane-ranges"), "ShardedListAndWatch=true")
	if err != nil {
		t.Fatalf("starting the control plane with ShardedListAndWatch: %v", err)
	}
	t.Cleanup(func() {
		if err := gated.stop(); err != nil {
			t.Errorf("stopping the gated control plane: %v", err)
		}
	})
	hashes = createRangeObjects(t, gated, size.objects)
	f := newRangeFleet(t, gated, "relect", size, false, suiteTiming)
	f.proxied = true // each process behind a faultproxy of its own, for the partition
	rep.runRelect(f, hashes)
	w := newRangeFleet(t, gated, "warm", size, false, suiteTiming)
	w.warm = true
	rep.runWarm(w, hashes)
	rep.runStatic(newRangeFleet(t, gated, "static", size, true, suiteTiming), hashes)
	rep.took = time.Since(start)
	table := rep.table()
	t.Logf("TestShardRangeMeasure (%s=%s):\n%s", envRanges, mode, table)
	if out := os.Getenv(envRangesOut); out != "" {
		if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
			t.Errorf("writing the report: %v", err)
		}
	}
}

// runRelect settles the relect fleet f (gate on) and runs it through
// every scenario; no object may be held twice at one instant.
func (r *rangeReport) runRelect(f *rangeFleet, hashes []uint64) {
	r.on = f.settle(hashes, true)
	r.relect, r.partition = f.scenarios(hashes, true)
	r.cold = f.firstReconciles(r.on.at)
	f.stopAll()
	r.safety = coverOf(hashes, f.holdings(), r.on.at, time.Now())
	for _, o := range r.safety.overlaps {
		f.t.Errorf("two processes held one object at once: %v", o)
	}
}

// runWarm settles the relect fleet f with warm takers (gate on) and runs
// it through a graceful stop and a rolling restart; no object may be held
// twice at one instant.
func (r *rangeReport) runWarm(f *rangeFleet, hashes []uint64) {
	w := &warmRun{on: f.settle(hashes, true)}
	w.covers, _ = f.scenarios(hashes, false)
	w.moves = f.firstReconciles(w.on.at)
	f.stopAll()
	w.safety = coverOf(hashes, f.holdings(), w.on.at, time.Now())
	for _, o := range w.safety.overlaps {
		f.t.Errorf("warm: two processes held one object at once: %v", o)
	}
	r.warm = w
}

// runStatic settles the static fleet s and runs it through the rolling
// restarts.
func (r *rangeReport) runStatic(s *rangeFleet, hashes []uint64) {
	r.static = s.settle(hashes, true)
	var ws []rangeWindow
	for _, surge := range []bool{false, true} {
		from, to := s.rollingRestart(surge)
		ws = append(ws, rangeWindow{rollingName(surge), from, to})
	}
	s.stopAll()
	r.staticCover = coversOf(hashes, s.holdings(), ws)
}

// rangeWindow is one scenario's stretch of time.
type rangeWindow struct {
	name     string
	from, to time.Time
}

func rollingName(surge bool) string {
	if surge {
		return "rolling restart, maxSurge 1 (new process first)"
	}
	return "rolling restart, maxSurge 0 (old process stopped first)"
}

// scenarios runs the relect fleet through a graceful stop of a follower,
// and if all, a SIGKILL of one (each followed by a new process in its
// slot), a partition of one (the fleet must be proxied) and a graceful
// stop of the election's leader (followed by a new process); then a
// rolling restart, and if all, one with a surge. It returns each one's
// coverage, and the partition's figures (nil unless all).
func (f *rangeFleet) scenarios(hashes []uint64, all bool) ([]rangeCover, *partitionRun) {
	var ws []rangeWindow
	var part *partitionRun
	for i, sc := range []struct {
		name                    string
		leader, kill, partition bool
	}{{"graceful stop of a follower, then a new process", false, false, false},
		{"SIGKILL of a follower, then a new process", false, true, false},
		{partitionName, false, false, true},
		{"graceful stop of the leader (a change of leader), then a new process", true, false, false}} {
		if i > 0 && !all {
			break
		}
		if sc.partition {
			var w rangeWindow
			w, part = f.partition()
			ws = append(ws, w)
			continue
		}
		from := time.Now()
		f.replace(f.victim(sc.leader), sc.kill)
		ws = append(ws, rangeWindow{sc.name, from, time.Now()})
	}
	for _, surge := range []bool{false, true} {
		if surge && !all {
			break
		}
		from, to := f.rollingRestart(surge)
		ws = append(ws, rangeWindow{rollingName(surge), from, to})
	}
	return coversOf(hashes, f.holdings(), ws), part
}

// replace stops p (SIGKILL if kill, else SIGTERM), waits until the others
// hold every range, starts a new process in its slot and waits until the
// fleet is settled with it.
func (f *rangeFleet) replace(p *rangeProc, kill bool) {
	f.t.Helper()
	if kill {
		p.kill()
	} else {
		f.stop(p)
	}
	f.await(f.settleTime(), "the ranges of "+p.id+" held elsewhere", f.settled)
	f.start(p.slot)
	f.await(f.settleTime(), "the fleet settled with "+p.id+"'s replacement", f.settled)
}

// stopAll sends SIGTERM to every running process and waits for them.
func (f *rangeFleet) stopAll() {
	f.t.Helper()
	live := f.live()
	for _, p := range live {
		p.stopped = p.signal(syscall.SIGTERM)
	}
	for _, p := range live {
		select {
		case <-p.waited:
		case <-time.After(f.lt.rd + livenessGrace):
			f.t.Fatalf("%s did not exit after SIGTERM", p.id)
		}
	}
}

// createRangeObjects creates n labelled ConfigMaps (a 128-byte value
// each) with 16 writers and a raised client rate, and returns their uid
// hashes (FNV-1a, computed here). The test's cleanup deletes them.
func createRangeObjects(t *testing.T, c *cluster, n int) []uint64 {
	t.Helper()
	cfg := c.adminConfig()
	cfg.QPS, cfg.Burst = 2000, 4000
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteRangeObjects(t, c) })
	start := time.Now()
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	value := strings.Repeat("x", 128)
	for range 16 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n) && failed.Load() == nil; i = next.Add(1) - 1 {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ranges-%05d", i),
					Labels: map[string]string{rangeLabel: "1"}}, Data: map[string]string{"v": value}}
				if _, err := cs.CoreV1().ConfigMaps(namespace).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
					failed.Store(fmt.Errorf("creating %s: %w", cm.Name, err))
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	all, err := cs.CoreV1().ConfigMaps(namespace).List(t.Context(), metav1.ListOptions{LabelSelector: rangeLabel})
	if err != nil || len(all.Items) != n {
		t.Fatalf("listing the ConfigMaps: %d of %d, %v", len(all.Items), n, err)
	}
	hashes := make([]uint64, n)
	for i, cm := range all.Items {
		hashes[i] = fnv64a(string(cm.UID))
	}
	t.Logf("created %d ConfigMaps in %s", n, ms(time.Since(start)))
	return hashes
}

// deleteRangeObjects deletes the labelled ConfigMaps.
func deleteRangeObjects(t *testing.T, c *cluster) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(c.adminConfig())
	if err != nil {
		t.Fatal(err)
	}
	err = cs.CoreV1().ConfigMaps(namespace).DeleteCollection(context.Background(), metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: rangeLabel})
	if err != nil {
		t.Errorf("deleting the ConfigMaps: %v", err)
	}
}
