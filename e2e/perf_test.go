package e2e

import (
	"context"
	"fmt"
	"github.com/relect/relect/internal/bench"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relect/relect/internal/defaults"

	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// The side-by-side benchmark: relect and the plain client-go loop
// (internal/clientgoloop of the root module) in one run, on the suite's
// control plane. Each run records samples in a perfResults, and the
// benchmark prints them as a markdown table (perfreport_test.go);
// docs/performance.md says what each row measures. It only fails when
// something is broken (no leader at all, a Run that returned an error, a
// goroutine left behind), never on a figure.

// Environment variables of the benchmark.
const (
	// envPerf selects the benchmark's size: "short" (CI, ≈ 7 min),
	// "dev" (short's windows, rows e and g at N = 1,000 too) or "full"
	// (≈ 32 min before rows e and g grew); unset skips TestPerformance
	// and TestAPF.
	envPerf = "RELECT_PERF"
	// envPerfOut, if set, is a file the table is written to as well.
	envPerfOut = "RELECT_PERF_OUT"
	// envPerfSVG, if set, is a file a plot of row e at every N is written
	// to (perfslope_test.go).
	envPerfSVG = "RELECT_PERF_SVG"
	// envPerfRows, if set, runs only the rows it names, by letter
	// ("e,g"); the others' cells are empty. Rows a and d run together.
	envPerfRows = "RELECT_PERF_ROWS"
)

// perfParams size one run of the benchmark.
type perfParams struct {
	warmup, window time.Duration // rows a and d: after the faults began
	handovers      int           // row b, per implementation
	failovers      int           // row c, per implementation
	scaleN         int           // row e: the candidates on one Lease of the table's rows
	scaleNs        []int         // row e: every size measured, scaleN among them (the slope)
	scaleJSONNs    []int         // row e: sizes also run with relect speaking JSON
	scaleIdle      time.Duration // row e: the idle baseline
	scaleWarmup    time.Duration // row e: after the candidates started
	scaleWindow    time.Duration // row e: per implementation, at scaleN
	slopeWindow    time.Duration // row e: per implementation, at the other sizes
	overheadN      int           // row f: idle followers
	fleetNs        []int         // row g: fleet sizes
	fleetOffNs     []int         // row g: fleet sizes also run with relect's registry off
	fleetJSONNs    []int         // row g: fleet sizes also run with relect speaking JSON
	fleetInprocNs  []int         // row g: fleet sizes also run with every relect candidate in the test process
	fleetChanges   int           // row g: changes of leader per implementation and size
	stepDowns      int           // row h: Yields, and HandOvers
}

var perfModes = map[string]perfParams{
	"short": {warmup: 12 * time.Second, window: 30 * time.Second, handovers: 8, failovers: 3,
		scaleN: 200, scaleNs: []int{200}, scaleJSONNs: []int{200},
		scaleIdle: 15 * time.Second, scaleWarmup: 8 * time.Second, scaleWindow: 20 * time.Second, slopeWindow: 20 * time.Second, overheadN: 50,
		fleetNs: []int{200}, fleetJSONNs: []int{200}, fleetChanges: 3, stepDowns: 8},
	"full": {warmup: 20 * time.Second, window: 3 * time.Minute, handovers: 30, failovers: 12,
		scaleN: 200, scaleNs: []int{50, 200, 1000}, scaleJSONNs: []int{50, 200, 1000},
		scaleIdle: 90 * time.Second, scaleWarmup: 20 * time.Second, scaleWindow: 2 * time.Minute, slopeWindow: time.Minute, overheadN: 50,
		fleetNs: []int{3, 200, 1000}, fleetJSONNs: []int{200, 1000}, fleetInprocNs: []int{200, 1000}, fleetOffNs: []int{200, 1000},
		fleetChanges: 10, stepDowns: 30},
	"dev": {warmup: 12 * time.Second, window: 30 * time.Second, handovers: 8, failovers: 3,
		scaleN: 200, scaleNs: []int{50, 200, 1000}, scaleJSONNs: []int{200, 1000},
		scaleIdle: 15 * time.Second, scaleWarmup: 8 * time.Second, scaleWindow: 20 * time.Second, slopeWindow: 20 * time.Second, overheadN: 50,
		fleetNs: []int{200, 1000}, fleetJSONNs: []int{200, 1000}, fleetInprocNs: []int{1000}, fleetChanges: 4, stepDowns: 8},
}

// phaseRows are the rows each phase of TestPerformance measures.
var phaseRows = map[string][]string{
	"requests": {"a", "d", "d1", "d2"}, "handover": {"b"}, "stepdown": {"h"}, "failover": {"c"},
	"overhead": {"f"}, "scale": {"e"}, "fleet": {"g"},
}

// scaleWindowAt is row e's window at n candidates.
func (p perfParams) scaleWindowAt(n int) time.Duration {
	if n == p.scaleN {
		return p.scaleWindow
	}
	return p.slopeWindow
}

// implementations, in the table's column order.
var implementations = []string{modeRelect, modeClientGo}

// failoverTiming is row c's: short, so that a crash failover takes seconds.
var failoverTiming = leaseTiming{4 * time.Second, 3 * time.Second, time.Second}

// maxPoll is the longest pause between two acquisition tries of a
// client-go follower.
func maxPoll(lt leaseTiming) time.Duration { return lt.rp * 22 / 10 }

// electionTimeout bounds how long a Lease may go without a leader when
// nothing is broken: an expiry, two polls, and slack.
func electionTimeout(lt leaseTiming) time.Duration { return lt.ld + 2*maxPoll(lt) + 2*slack }

// TestPerformance runs every row of the benchmark and prints the table.
func TestPerformance(t *testing.T) {
	size := os.Getenv(envPerf)
	if size == "" {
		t.Skipf("%s is not set: skipping the benchmark (%s=short, dev or full)", envPerf, envPerf)
	}
	p, ok := perfModes[size]
	if !ok {
		t.Fatalf("%s=%q: want short, dev or full", envPerf, size)
	}
	c := requireCluster(t)
	candidateBinary(t)
	// Every goroutine the benchmark starts ends with it. Connections of
	// client-go's shared, cached transport for the admin config (the Lease
	// watches, the /metrics scrapes) stay open, idle, as they would in any
	// client-go program, so connection loops are not counted here; the
	// candidates' own connections are counted by their dialers and must
	// all be closed when they stop (reqLog.closeIdle).
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		goleak.VerifyNone(t, ignore,
			goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
			goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"))
	})

	res := &perfResults{size: size, p: p}
	start := time.Now()
	only := os.Getenv(envPerfRows)
	phase := func(name string, f func(t *testing.T)) {
		t.Helper()
		if only != "" && !slices.ContainsFunc(strings.Split(only, ","), func(row string) bool { return slices.Contains(phaseRows[name], row) }) {
			return
		}
		begin := time.Now()
		t.Run(name, f)
		t.Logf("%s took %v", name, time.Since(begin).Round(time.Second))
	}
	phase("requests", func(t *testing.T) { benchRequests(t, c, p, res) })
	phase("handover", func(t *testing.T) {
		for _, fresh := range []bool{false, true} {
			for _, mode := range implementations {
				name, s := mode, handoverLatency
				if fresh {
					name, s = name+"-fresh", freshLatency
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					res.addDurations(s, mode, benchHandover(t, c, mode, p.handovers, fresh))
				})
			}
		}
	})
	phase("stepdown", func(t *testing.T) {
		for _, kind := range []string{ctlYield, ctlHandOver} {
			t.Run(kind, func(t *testing.T) {
				t.Parallel()
				res.addStepDowns(kind, benchStepDown(t, c, kind, p.stepDowns))
			})
		}
	})
	phase("failover", func(t *testing.T) {
		for _, mode := range implementations {
			t.Run(mode, func(t *testing.T) {
				t.Parallel()
				res.addFailovers(mode, benchFailover(t, c, mode, p.failovers))
			})
		}
	})
	phase("overhead", func(t *testing.T) {
		for _, mode := range implementations {
			g, h := benchOverhead(t, c, mode, p.overheadN)
			res.add(followerGoroutines, mode, g)
			res.add(followerHeapKiB, mode, h)
		}
	})
	phase("scale", func(t *testing.T) { benchScale(t, c, p, res) })
	phase("fleet", func(t *testing.T) {
		for _, k := range fleetKeys(p) {
			t.Run(k.String(), func(t *testing.T) {
				bench := benchFleet
				if k.apart {
					bench = benchFleetApart
				}
				res.addFleet(k, bench(t, c, k, p.fleetChanges))
			})
		}
	})

	table := res.table(c.machine(t), time.Since(start))
	fmt.Print("\n" + table)
	if out := os.Getenv(envPerfOut); out != "" {
		if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
			t.Errorf("writing the table: %v", err)
		}
	}
	if out := os.Getenv(envPerfSVG); out != "" {
		if err := os.WriteFile(out, []byte(res.slopeSVG()), 0o644); err != nil {
			t.Errorf("writing the plot: %v", err)
		}
	}
}

// ---- rows a and d: requests per candidate, healthy and under faults ----

// The candidates of rows a and d, per implementation.
const (
	steadyCandidates = 6 // a: a leader and 5 followers
	faultCandidates  = 3 // d1, d2
)

// benchRequests runs rows a, d1 and d2 for both implementations at once, on
// six Leases, and counts every candidate's Lease requests in one window.
func benchRequests(t *testing.T, c *cluster, p perfParams, res *perfResults) {
	type group struct {
		row, mode, lease string
		rates            series // of each candidate (row a: of each follower)
		procs            []*proc
	}
	var groups []*group
	var all []*proc
	var thieves []*thief
	t.Cleanup(func() {
		for _, th := range thieves {
			if err := th.stop(); err != nil {
				t.Errorf("thief: %v", err)
			}
		}
		if err := stopProcs(all); err != nil {
			t.Error(err)
		}
	})
	for _, row := range []struct {
		name  string
		n     int
		rates series
	}{{"a", steadyCandidates, followerRates}, {"d1", faultCandidates, failingRates}, {"d2", faultCandidates, stolenRates}} {
		for _, mode := range implementations {
			g := &group{row: row.name, mode: mode, lease: fmt.Sprintf("%s-%s-%s", leaseName(t), row.name, mode), rates: row.rates}
			c.createReleasedLease(t, g.lease)
			ps, err := c.startProcs(row.n, row.name+"-"+mode, procOpts{mode: mode, lease: g.lease, timing: productionTiming})
			if err != nil {
				t.Fatal(err)
			}
			g.procs, all = ps, append(all, ps...)
			groups = append(groups, g)
		}
	}
	for _, g := range groups {
		if _, err := leaderOf(g.procs, electionTimeout(productionTiming)); err != nil {
			t.Fatalf("row %s, %s: %v", g.row, g.mode, err)
		}
	}
	// relect copies Options.Config: its clients must still count.
	for _, p := range all {
		if len(p.reqs.all()) == 0 {
			t.Fatalf("%s: its transport saw no Lease request: rest.Config.WrapTransport was lost", p.id)
		}
	}

	for _, g := range groups {
		switch g.row {
		case "d1":
			for _, p := range g.procs {
				p.reqs.fail.Store(true)
			}
		case "d2":
			th, err := c.startThief(g.lease, time.Second, productionTiming.ld)
			if err != nil {
				t.Fatal(err)
			}
			thieves = append(thieves, th)
		}
	}
	t.Logf("faults on: every Lease call of the d1 candidates answered 500; a thief steals each d2 Lease every second; warm-up %v, window %v", p.warmup, p.window)
	time.Sleep(p.warmup)

	ctx := context.Background()
	m0, err := c.scrapeMetrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w0 := time.Now()
	var leaders0 []*proc
	for _, g := range groups {
		leaders0 = append(leaders0, currentLeader(g.procs))
	}
	time.Sleep(p.window)
	w1 := time.Now()
	m1, err := c.scrapeMetrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	minutes := w1.Sub(w0).Minutes()

	counted := 0
	for _, th := range thieves {
		_, fwd := th.reqs.count(w0, w1)
		counted += fwd
		t.Logf("thief of %s stole it %d times", th.lease, th.steals.Load())
	}
	for gi, g := range groups {
		var perProc []string
		for _, p := range g.procs {
			sent, fwd := p.reqs.count(w0, w1)
			counted += fwd
			perMin := float64(sent) / minutes
			perProc = append(perProc, fmt.Sprintf("%s %.1f", p.id, perMin))
			rates := g.rates
			if g.row == "a" && p == leaders0[gi] {
				rates = leaderRates
			}
			res.add(rates, g.mode, perMin)
			if g.mode == modeRelect {
				res.add(budgetExcess, modeRelect, checkBudget(p.reqs.all(), productionTiming).excess)
			}
		}
		if l := currentLeader(g.procs); l != leaders0[gi] && g.row == "a" {
			t.Errorf("row a, %s: the leader changed during the window (%v → %v)", g.mode, procID(leaders0[gi]), procID(l))
		}
		t.Logf("row %s, %s: Lease requests per minute in the window: %s", g.row, g.mode, strings.Join(perProc, ", "))
	}
	res.add(requestsWindow, "", float64(w1.Sub(w0)))
	res.add(requestsCounted, "", float64(counted))
	res.add(requestsAPIServer, "", m1.total()-m0.total())
	t.Logf("cross-check: the transports counted %d lease requests sent to the apiserver in the window, the apiserver %0.f", counted, m1.total()-m0.total())
}

// createReleasedLease (re)creates the Lease as a release leaves it (no
// holder, leaseDurationSeconds 1), so that any candidate may take it at once:
// every election of the benchmark starts from there, not from a missing
// Lease.
func (c *cluster) createReleasedLease(t *testing.T, name string) {
	t.Helper()
	leases := c.client(t).CoordinationV1().Leases(namespace)
	ctx := context.Background()
	if err := leases.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("deleting lease %s: %v", name, err)
	}
	holder, secs, transitions := "", int32(1), int32(0)
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, LeaseTransitions: &transitions},
	}
	if _, err := leases.Create(ctx, l, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating lease %s: %v", name, err)
	}
}

// currentLeader is the candidate of ps that leads now, or nil.
func currentLeader(ps []*proc) *proc {
	for _, p := range ps {
		if p.leading.Load() {
			return p
		}
	}
	return nil
}

func procID(p *proc) string {
	if p == nil {
		return "nobody"
	}
	return p.id
}

// budgetUse is a use of relect's token bucket: the most requests beyond the
// sustained rate in any interval (a bucket of burst b allows b).
type budgetUse struct {
	rate   float64 // calls per second
	burst  int
	excess float64
}

// exceeded allows for the few milliseconds between the bucket granting a
// call and the transport seeing its request.
func (b budgetUse) exceeded() bool { return b.excess > float64(b.burst)+0.1 }

// defaultBudget is relect's bucket with Options.RateLimit and RateBurst
// left zero: 2 calls per RetryPeriod and defaults.RateBurst
// (options.go).
func defaultBudget(lt leaseTiming) budgetUse {
	return budgetUse{rate: 2 / lt.rp.Seconds(), burst: defaults.RateBurst}
}

// checkBudget measures a relect candidate's requests against its bucket
// (defaultBudget).
func checkBudget(reqs []request, lt leaseTiming) budgetUse {
	b := defaultBudget(lt)
	for i := range reqs {
		for j := i; j < len(reqs); j++ {
			n := float64(j-i+1) - b.rate*reqs[j].at.Sub(reqs[i].at).Seconds()
			b.excess = math.Max(b.excess, n)
		}
	}
	return b
}

// thief steals a Lease again and again: it writes itself as the holder with
// a fresh renew time, as a candidate with a broken clock or a stray process
// with the same Lease name would.
type thief struct {
	lease  string
	reqs   *reqLog
	steals atomic.Int64
	cancel context.CancelFunc
	done   chan struct{}
}

const thiefID = "thief"

func (c *cluster) startThief(lease string, every, ld time.Duration) (*thief, error) {
	th := &thief{lease: lease, reqs: &reqLog{}, done: make(chan struct{})}
	cs, err := kubernetes.NewForConfig(c.restConfig(th.reqs))
	if err != nil {
		return nil, err
	}
	leases := cs.CoordinationV1().Leases(namespace)
	ctx, cancel := context.WithCancel(context.Background())
	th.cancel = cancel
	go func() {
		defer close(th.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			th.steal(ctx, leases, ld)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return th, nil
}

// steal writes the thief's record: Get, then a conditional Update, again on
// a conflict with a renewal.
func (th *thief) steal(ctx context.Context, leases coordinationv1client.LeaseInterface, ld time.Duration) {
	for try := 0; try < 3; try++ {
		l, err := leases.Get(ctx, th.lease, metav1.GetOptions{})
		if err != nil {
			return
		}
		now := metav1.NowMicro()
		if ptrVal(l.Spec.HolderIdentity) != thiefID {
			id, transitions := thiefID, ptrVal(l.Spec.LeaseTransitions)+1
			l.Spec.HolderIdentity, l.Spec.LeaseTransitions, l.Spec.AcquireTime = &id, &transitions, &now
		}
		secs := int32(ld / time.Second)
		l.Spec.RenewTime, l.Spec.LeaseDurationSeconds = &now, &secs
		if _, err = leases.Update(ctx, l, metav1.UpdateOptions{}); err == nil {
			th.steals.Add(1)
			return
		}
		if !apierrors.IsConflict(err) {
			return
		}
	}
}

func (th *thief) stop() error {
	th.cancel()
	<-th.done
	return th.reqs.closeIdle()
}

// ---- row b: graceful handover ----

// freshHandover is when a fresh leader is cancelled, after it began to
// lead: its first renewal, sent at once, has returned by then.
const freshHandover = 100 * time.Millisecond

// benchHandover hands the lease over n times by cancelling the leader's Run
// and returns, for each, the time from the cancel to the next leader's
// OnStartedLeading. Three candidates, default durations; the cancelled one
// is replaced by a new one each time. The leader is cancelled between two
// renewals, at least RetryPeriod after it began to lead, or, if fresh,
// freshHandover after it began to lead (a leader stopped right after it was
// elected, as in a quick rolling restart: relect's token bucket may then
// still be empty from the acquisition).
func benchHandover(t *testing.T, c *cluster, mode string, n int, fresh bool) []time.Duration {
	terms := &termLog{}
	lease := leaseName(t)
	c.createReleasedLease(t, lease)
	var live []*proc
	t.Cleanup(func() {
		if err := stopProcs(live); err != nil {
			t.Error(err)
		}
	})
	seq := 0
	add := func() {
		p, err := c.startProc(termOpts(terms, procOpts{mode: mode, lease: lease, id: fmt.Sprintf("%s-%d", mode, seq), timing: productionTiming}))
		if err != nil {
			t.Fatal(err)
		}
		seq++
		live = append(live, p)
	}
	for i := 0; i < 3; i++ {
		add()
	}
	cur, err := terms.Next(time.Time{}, nil, electionTimeout(productionTiming))
	if err != nil {
		t.Fatalf("no leader: %v", err)
	}
	g := group{lease: lease, terms: terms, leave: func(leader *proc) (time.Time, error) {
		cancelled := time.Now()
		leader.cancel()
		return cancelled, nil
	}}
	var lat []time.Duration
	for len(lat) < n {
		leader := cur.Who
		var cancelled time.Time
		if fresh {
			time.Sleep(time.Until(cur.At.Add(freshHandover)))
			cancelled, _ = g.Leave(leader)
			cur, err = g.Next(cancelled, leader)
		} else {
			// Between two renewals: a renewal in flight at the cancel
			// is another scenario.
			cancelled, cur, err = bench.Change(g, cur, productionTiming.rp)
		}
		if err != nil {
			t.Fatalf("a handover from %s: %v", leader.id, err)
		}
		lat = append(lat, cur.At.Sub(cancelled))
		t.Logf("%s: handover %s → %s in %s; Lease requests meanwhile: %s", mode, leader.id, cur.Who.id, ms(lat[len(lat)-1]),
			requestsBetween(live, cancelled, cur.At))
		if err := leader.stop(); err != nil {
			t.Error(err)
		}
		live = removeProc(live, leader)
		add()
	}
	t.Logf("%s: handovers %v", mode, lat)
	return lat
}

// requestsBetween lists the Lease requests of ps sent in [from, to], in
// order, as "+offset id VERB".
func requestsBetween(ps []*proc, from, to time.Time) string {
	type sent struct {
		at   time.Time
		what string
	}
	var all []sent
	for _, p := range ps {
		for _, r := range p.reqs.all() {
			if !r.at.Before(from) && !r.at.After(to) {
				all = append(all, sent{r.at, p.id + " " + r.verb})
			}
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].at.Before(all[j].at) })
	var out []string
	for _, s := range all {
		out = append(out, "+"+ms(s.at.Sub(from))+" "+s.what)
	}
	return strings.Join(out, ", ")
}

func removeProc(ps []*proc, p *proc) []*proc {
	var out []*proc
	for _, x := range ps {
		if x != p {
			out = append(out, x)
		}
	}
	return out
}

// ---- row c: crash failover ----

// failoverRun is one SIGKILL of a leader, timed from its last renewal as the
// benchmark's watch on the Lease saw it.
type failoverRun struct {
	taken time.Duration // until the watch saw the new holder's acquisition
	leads time.Duration // until the new leader's history says it leads
	kill  time.Duration // from the SIGKILL until the new leader leads
}

// benchFailover kills the leader n times (candidate processes: the new
// leader takes over once the lease expired); three candidates, one new one
// started after each kill.
func benchFailover(t *testing.T, c *cluster, mode string, n int) []failoverRun {
	lt := failoverTiming
	lease := leaseName(t)
	c.createReleasedLease(t, lease)
	w := c.watchLease(t, lease)
	args := []string{"-lease-duration", lt.ld.String(), "-renew-deadline", lt.rd.String(), "-retry-period", lt.rp.String()}
	var live []*candidate
	seq := 0
	add := func() {
		live = append(live, c.startCandidate(t, fmt.Sprintf("%s-%d", mode, seq), candOpts{mode: mode, lease: lease, args: args}))
		seq++
	}
	for i := 0; i < 3; i++ {
		add()
	}
	leader := waitLeader(t, electionTimeout(lt), live...)
	var runs []failoverRun
	for len(runs) < n {
		// At least two renewals, so that every follower has seen the
		// leader's record, then at a random point between renewals.
		time.Sleep(2*lt.rp + rand.N(lt.rp))
		killed := leader.kill()
		live = others(leader, live...)
		next, on, _ := waitNewLeader(t, electionTimeout(lt), killed, live...)
		last, taken, ok := w.takeover(leader.id, killed, 2*time.Second)
		if !ok {
			t.Fatalf("the watch saw no takeover of %s's Lease by %s; changes: %v", leader.id, next.id, w.changes())
		}
		if taken.holder != next.id {
			t.Fatalf("the watch saw %s take over, the histories %s", taken.holder, next.id)
		}
		r := failoverRun{taken: taken.at.Sub(last.at), leads: on.Sub(last.at), kill: on.Sub(killed)}
		t.Logf("%s: SIGKILL %s; last renewal seen %s before the kill; %s took the Lease %s after it and leads %s after it (%s after the kill)",
			mode, leader.id, ms(killed.Sub(last.at)), next.id, ms(r.taken), ms(r.leads), ms(r.kill))
		runs = append(runs, r)
		add()
		leader = next
	}
	return runs
}

// ---- row e: N candidates on one Lease ----

// scaleImpl is one implementation of row e: relect (protobuf, its
// default), relect speaking JSON, or the loop.
type scaleImpl struct {
	impl string // what its samples are recorded under
	mode string
	json bool
}

var (
	scaleRelect     = scaleImpl{modeRelect, modeRelect, false}
	scaleRelectJSON = scaleImpl{implRelectJSON, modeRelect, true}
	scaleClientGo   = scaleImpl{modeClientGo, modeClientGo, false}
)

// scaleRun is one run of row e: n candidates of one implementation.
type scaleRun struct {
	n int
	scaleImpl
}

// scaleRuns are the runs of row e, in order: at each size, relect, relect
// speaking JSON if p asks for it there, and the loop.
func scaleRuns(p perfParams) []scaleRun {
	var runs []scaleRun
	for _, n := range p.scaleNs {
		impls := []scaleImpl{scaleRelect, scaleClientGo}
		if slices.Contains(p.scaleJSONNs, n) {
			impls = []scaleImpl{scaleRelect, scaleRelectJSON, scaleClientGo}
		}
		for _, im := range impls {
			runs = append(runs, scaleRun{n, im})
		}
	}
	return runs
}

// benchScale measures the apiserver and etcd with nobody campaigning, then
// with N in-process candidates of each implementation on one Lease, for
// each N of p.scaleNs.
func benchScale(t *testing.T, c *cluster, p perfParams, res *perfResults) {
	ctx := context.Background()
	sample := func() load {
		t.Helper()
		l, err := c.sampleLoad(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	window := func(a, b load, what string) loadRates {
		t.Helper()
		if a.apiPID != b.apiPID || a.etcdPID != b.etcdPID {
			t.Fatalf("%s: the apiserver or etcd restarted during the window", what)
		}
		r := rates(a, b)
		t.Logf("%s: %v", what, r)
		return r
	}
	// The idle baseline is measured before and after the candidates, and
	// their mean subtracted: the apiserver's own background work varies.
	idle := func(what string) loadRates {
		t.Helper()
		time.Sleep(5 * time.Second) // the previous candidates are gone
		s0 := sample()
		time.Sleep(p.scaleIdle)
		return window(s0, sample(), what)
	}
	before := idle("idle baseline, before")

	for _, run := range scaleRuns(p) {
		what := fmt.Sprintf("%d %s candidates", run.n, run.impl)
		lease := fmt.Sprintf("%s-%d-%s", leaseName(t), run.n, run.impl)
		c.createReleasedLease(t, lease)
		m0, err := c.scrapeMetrics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		started := time.Now()
		ps, err := c.startProcs(run.n, fmt.Sprintf("n%d-%s", run.n, run.impl), procOpts{mode: run.mode, lease: lease, timing: productionTiming, json: run.json, user: c.serviceAccountConfig(t)})
		if err != nil {
			t.Fatal(err)
		}
		stopped := false
		stop := func() {
			if !stopped {
				stopped = true
				if err := stopProcs(ps); err != nil {
					t.Error(err)
				}
			}
		}
		t.Cleanup(stop)
		if _, err := leaderOf(ps, electionTimeout(productionTiming)); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		t.Logf("%s started, one leads after %v", what, time.Since(started).Round(time.Millisecond))
		if run.mode == modeRelect {
			// Every registration is written: the start's storm of them
			// is over.
			for _, p := range ps {
				if err := p.reqs.waitSince("POST", time.Time{}, 60*time.Second); err != nil {
					t.Fatalf("%s: %s: %v", what, p.id, err)
				}
			}
			t.Logf("%s registered after %v", what, time.Since(started).Round(time.Millisecond))
		}
		time.Sleep(p.scaleWarmup)
		watchBytes := func() (n int64) {
			for _, p := range ps {
				n += p.reqs.watchBytes.Load()
			}
			return n
		}
		s0, wb0 := sample(), watchBytes()
		time.Sleep(p.scaleWindowAt(run.n))
		s1, wb1 := sample(), watchBytes()
		r := window(s0, s1, what)
		throttled := 0
		for _, p := range ps {
			throttled += int(p.reqs.throttled.Load())
		}
		t.Logf("%s: from their start to the window's end, the apiserver rejected %.0f requests with 429 (APF), their transports saw %d",
			what, s1.metrics.rejected-m0.rejected, throttled)
		res.add(scaleOf(run.n, scaleRejected), run.impl, s1.metrics.rejected-m0.rejected)
		counted := 0
		for _, p := range ps {
			_, fwd := p.reqs.count(s0.at, s1.at)
			counted += fwd
		}
		secs := s1.at.Sub(s0.at).Seconds()
		res.addLoad(scaleRunName(run.n), run.impl, r)
		res.add(scaleOf(run.n, scaleCounted), run.impl, float64(counted)/secs)
		res.add(scaleOf(run.n, scaleWatchBytesCounted), run.impl, float64(wb1-wb0)/secs)
		stop()
	}
	after := idle("idle baseline, after")
	res.addLoad("idle", "", before)
	res.addLoad("idle", "", after)
}

// ---- row f: what an idle follower costs its process ----

// benchOverhead starts a leader, then n followers of one implementation in
// this process, and returns the goroutines and KiB of live heap each
// follower adds once it is idle (relect's watches its Lease, client-go's
// polls).
func benchOverhead(t *testing.T, c *cluster, mode string, n int) (goroutines, heapKiB float64) {
	lease := leaseName(t) + "-" + mode
	c.createReleasedLease(t, lease)
	leader, err := c.startProc(procOpts{mode: mode, lease: lease, id: mode + "-leader", timing: productionTiming})
	if err != nil {
		t.Fatal(err)
	}
	var followers []*proc
	defer func() {
		if err := stopProcs(append(followers, leader)); err != nil {
			t.Error(err)
		}
	}()
	if _, err := leaderOf([]*proc{leader}, electionTimeout(productionTiming)); err != nil {
		t.Fatal(err)
	}
	// The leader has settled: it renews at its regular pace.
	if err := leader.reqs.waitSince("PUT", time.Now().Add(productionTiming.rp), 2*productionTiming.rp+slack); err != nil {
		t.Fatal(err)
	}
	g0, h0 := liveHeap()
	followers, err = c.startProcs(n, mode+"-follower", procOpts{mode: mode, lease: lease, timing: productionTiming})
	if err != nil {
		t.Fatal(err)
	}
	idle := "GET" // client-go's followers poll
	if mode == modeRelect {
		idle = "WATCH"
	}
	waitFor(t, electionTimeout(productionTiming), fmt.Sprintf("%d %s followers to %s the Lease", n, mode, idle), func() bool {
		for _, f := range followers {
			if !f.reqs.has(idle) {
				return false
			}
		}
		return true
	})
	time.Sleep(2 * productionTiming.rp)
	g1, h1 := liveHeap()
	goroutines = float64(g1-g0) / float64(n)
	heapKiB = float64(int64(h1)-int64(h0)) / float64(n) / 1024
	t.Logf("%s: %d followers: goroutines %d → %d, live heap %d → %d KiB", mode, n, g0, g1, h0>>10, h1>>10)
	return goroutines, heapKiB
}

// liveHeap returns the number of goroutines and the bytes of heap in use
// after a full collection.
func liveHeap() (goroutines int, heap uint64) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return runtime.NumGoroutine(), m.HeapAlloc
}
