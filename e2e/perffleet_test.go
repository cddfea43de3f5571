package e2e

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/relect/relect/internal/bench"
	"github.com/relect/relect/internal/wire"
)

// Rows g and h of the benchmark: changes of leader in fleets of N
// in-process candidates, relect and the client-go loop side by side (g),
// and relect's Yield and HandOver (h). docs/performance.md says what each
// row measures.

// ---- terms: when each candidate of a group began and stopped leading ----

// termLog records the terms of a group of in-process candidates, through
// procOpts.onStarted and onStopped (termOpts): the benchmark's one term
// log, internal/bench's.
type termLog = bench.Terms[*proc]

// termMark is one candidate's term beginning or ending.
type termMark = bench.Mark[*proc]

// termOpts returns o with l's callbacks.
func termOpts(l *termLog, o procOpts) procOpts {
	o.onStarted = l.Started
	o.onStopped = l.Stopped
	return o
}

// currentTerm waits up to timeout until exactly one of ps leads, and
// returns the start of its term.
func currentTerm(l *termLog, ps []*proc, timeout time.Duration) (termMark, error) {
	var cur termMark
	n := 0
	if !bench.Await(timeout, time.Millisecond, func() bool {
		n = 0
		var leading *proc
		for _, p := range ps {
			if p.leading.Load() {
				leading = p
				n++
			}
		}
		if n != 1 {
			return false
		}
		m, ok := l.LastStart(leading)
		cur = m
		return ok
	}) {
		return termMark{}, fmt.Errorf("%d of %d candidates lead, after %v", n, len(ps), timeout)
	}
	return cur, nil
}

// ---- row g: a change of leader at fleet size ----

// fleetKey names one run of row g.
type fleetKey struct {
	mode        string // modeRelect or modeClientGo
	n           int    // candidates
	registryOff bool   // relect with Options.DisableRegistry
	json        bool   // relect speaking JSON (procOpts.json)
	apart       bool   // relect with its successors apart (perfapart_test.go)
}

func (k fleetKey) String() string {
	s := fmt.Sprintf("%s-%d", k.mode, k.n)
	if k.registryOff {
		s += "-registry-off"
	}
	if k.json {
		s += "-json"
	}
	if k.apart {
		s += "-apart"
	}
	return s
}

// How row g starts a fleet, and when it ends a change's window.
const (
	fleetBatch      = 100                    // candidates started at once,
	fleetBatchPause = 200 * time.Millisecond // then a pause
	// fleetSettle is how long after RetryPeriod into the new leader's
	// term a change's window ends: its first calls (client-go's resuming
	// write and first renewal, relect's list of the registry half a
	// RetryPeriod in) are in the window.
	fleetSettle = 200 * time.Millisecond
)

// fleetKeys are the runs of row g, in order: at each size, relect with its
// successors apart, the loop, then if p asks for them there relect
// speaking JSON (successors apart), relect with every candidate in the
// test process, and relect with its registry off (in the test process:
// nobody's turn comes first).
func fleetKeys(p perfParams) []fleetKey {
	var keys []fleetKey
	for _, n := range p.fleetNs {
		keys = append(keys, fleetKey{mode: modeRelect, n: n, apart: true}, fleetKey{mode: modeClientGo, n: n})
		if slices.Contains(p.fleetJSONNs, n) {
			keys = append(keys, fleetKey{mode: modeRelect, n: n, json: true, apart: true})
		}
		if slices.Contains(p.fleetInprocNs, n) {
			keys = append(keys, fleetKey{mode: modeRelect, n: n})
		}
		if slices.Contains(p.fleetOffNs, n) {
			keys = append(keys, fleetKey{mode: modeRelect, n: n, registryOff: true})
		}
	}
	return keys
}

// window is what the apiserver did between two samples.
type window struct {
	d       time.Duration
	reqs    float64 // lease requests, by its apiserver_request_total
	writes  float64 // of which PUT, POST, DELETE and PATCH
	apiCPU  time.Duration
	selfCPU time.Duration // the test process's, which hosts the candidates
	// watchBytes: bytes of Lease watch events the apiserver sent
	// (apiserver_watch_events_sizes_sum); rejected: requests its API
	// Priority and Fairness rejected (429), workloadLow: dispatched to
	// workload-low through the FlowSchema service-accounts.
	watchBytes, rejected, workloadLow float64
	// verbs: the lease requests by verb (byVerb), for the log.
	verbs string
}

func windowOf(a, b load) window {
	w := window{d: b.at.Sub(a.at), reqs: b.metrics.total() - a.metrics.total(), apiCPU: b.api - a.api, selfCPU: b.self - a.self,
		watchBytes: b.metrics.watchBytes - a.metrics.watchBytes, rejected: b.metrics.rejected - a.metrics.rejected,
		workloadLow: b.metrics.workloadLow - a.metrics.workloadLow, verbs: byVerb(a, b)}
	for _, verb := range []string{"PUT", "POST", "DELETE", "PATCH"} {
		w.writes += b.metrics.leaseRequests[verb] - a.metrics.leaseRequests[verb]
	}
	return w
}

// fleetRun is what one run of row g measured, change by change: the
// latency of each change, its window, and the quiet window paired with it
// (same length, same candidates, no change).
type fleetRun struct {
	latency       []time.Duration // the leader's Run cancelled → the next OnStartedLeading
	change, quiet []window
	// throttled: in each change window, the 429 answers the in-process
	// candidates' transports saw (the apiserver's count of the requests
	// it rejected is the window's rejected).
	throttled []int
}

// throttledBetween counts the answers with HTTP 429 that the transports of
// ps saw to requests sent in [from, to).
func throttledBetween(ps []*proc, from, to time.Time) int {
	n := 0
	for _, p := range ps {
		for _, r := range p.reqs.all() {
			if r.status == http.StatusTooManyRequests && !r.at.Before(from) && r.at.Before(to) {
				n++
			}
		}
	}
	return n
}

// tallyBetween tallies the requests the transports of ps sent in
// [from, to) by verb, the Lease they name (election: lease, line: its
// line Lease, registry: the namespace's Leases, other: any other) and
// status ("-" while in flight or failed), largest first: what a window
// that cost more than it should was spent on.
func tallyBetween(ps []*proc, lease string, from, to time.Time) string {
	tally := map[string]int{}
	for _, p := range ps {
		for _, r := range p.reqs.all() {
			if r.at.Before(from) || !r.at.Before(to) {
				continue
			}
			which := "other"
			switch r.lease {
			case lease:
				which = "election"
			case wire.LineName(lease):
				which = "line"
			case "":
				which = "registry"
			}
			status := "-"
			if r.status != 0 {
				status = fmt.Sprint(r.status)
			}
			tally[fmt.Sprintf("%s %s %s", r.verb, which, status)]++
		}
	}
	keys := slices.Collect(maps.Keys(tally))
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(tally[b]-tally[a], strings.Compare(a, b)) })
	var out []string
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%s: %d", k, tally[k]))
	}
	return strings.Join(out, ", ")
}

// onLine counts the candidates of ps whose last watch is of lease's line
// Lease: the followers that follow the line, not the election's Lease.
func onLine(ps []*proc, lease string) int {
	n := 0
	for _, p := range ps {
		last := ""
		for _, r := range p.reqs.all() {
			if r.verb == "WATCH" && r.lease != "" {
				last = r.lease
			}
		}
		if last == wire.LineName(lease) {
			n++
		}
	}
	return n
}

// checkAPF fails the test if relect's change of leader cw, in which the
// transports of the in-process candidates saw throttled answers 429,
// had a request rejected by API Priority and Fairness: under the
// apiserver's default configuration a change of leader must not be shed.
// The loop's are only counted.
func checkAPF(t *testing.T, k fleetKey, cw window, throttled int) {
	t.Helper()
	if k.mode == modeRelect && (cw.rejected > 0 || throttled > 0) {
		t.Errorf("%s: a change of leader under the default APF configuration: the apiserver rejected %.0f requests (429), the candidates' transports saw %d",
			k, cw.rejected, throttled)
	}
}

// perChange is the mean, over the changes, of a change's window minus its
// quiet window — the lease requests, the writes among them, and the
// apiserver CPU milliseconds of one change beyond the background — with
// the standard error of each mean. Each window ends with one scrape of
// /metrics, and the quiet window's figures are scaled to the change
// window's length (the quiet one is longer by the time its closing scrape
// took: a sample is stamped after its scrape), so the background and the
// scrapes cancel out, but for their noise.
func (r fleetRun) perChange() (reqs, writes, cpuMS bench.MeanSE) {
	var dr, dw, dc []float64
	for i := range r.change {
		reqs, writes, cpuMS := r.beyond(i)
		dr, dw, dc = append(dr, reqs), append(dw, writes), append(dc, cpuMS)
	}
	return bench.MeanSEOf(dr), bench.MeanSEOf(dw), bench.MeanSEOf(dc)
}

// beyond is what change i cost beyond the background: its window minus
// its quiet window, scaled (see perChange).
func (r fleetRun) beyond(i int) (reqs, writes, cpuMS float64) {
	c, q := r.change[i], r.quiet[i]
	scale := c.d.Seconds() / q.d.Seconds()
	return c.reqs - q.reqs*scale, c.writes - q.writes*scale, msOf(c.apiCPU) - msOf(q.apiCPU)*scale
}

// background is the lease requests per second of the quiet windows.
func (r fleetRun) background() float64 {
	b := r.quietTotal()
	return b.reqs / b.d.Seconds()
}

// quietTotal adds up the quiet windows.
func (r fleetRun) quietTotal() window {
	var sum window
	for _, w := range r.quiet {
		sum.d, sum.reqs, sum.apiCPU, sum.selfCPU = sum.d+w.d, sum.reqs+w.reqs, sum.apiCPU+w.apiCPU, sum.selfCPU+w.selfCPU
	}
	return sum
}

// settledVerb is the request that shows a candidate of k has made its
// first calls: relect's registration (a Create), or with the registry off
// its watch; the loop's first poll.
func settledVerb(k fleetKey) string {
	switch {
	case k.mode == modeClientGo:
		return "GET"
	case k.registryOff:
		return "WATCH"
	}
	return "POST"
}

// fleet is the candidates of one run of row g.
type fleet struct {
	t     *testing.T
	c     *cluster
	k     fleetKey
	lease string
	terms *termLog
	opts  procOpts
	live  []*proc
	seq   int // the next candidate's number
}

// add starts one more candidate.
func (f *fleet) add() *proc {
	f.t.Helper()
	f.opts.id = fmt.Sprintf("%s-%d", f.k, f.seq)
	f.seq++
	p, err := f.c.startProc(f.opts)
	if err != nil {
		f.t.Fatal(err)
	}
	f.live = append(f.live, p)
	return p
}

// settled waits until each of ps has made its first calls (settledVerb).
func (f *fleet) settled(ps ...*proc) {
	f.t.Helper()
	for _, p := range ps {
		if err := p.reqs.waitSince(settledVerb(f.k), time.Time{}, 30*time.Second); err != nil {
			f.t.Fatalf("%s: %v", p.id, err)
		}
	}
}

func (f *fleet) sample() load {
	f.t.Helper()
	l, err := f.c.sampleLoad(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	return l
}

// benchFleet starts k.n candidates on one Lease, production durations, in
// batches, and makes changes graceful changes of leader (change).
func benchFleet(t *testing.T, c *cluster, k fleetKey, changes int) fleetRun {
	lt := productionTiming
	f := &fleet{t: t, c: c, k: k, lease: leaseName(t), terms: &termLog{}}
	f.opts = termOpts(f.terms, procOpts{mode: k.mode, lease: f.lease, timing: lt, disableRegistry: k.registryOff, json: k.json,
		user: c.serviceAccountConfig(t)})
	c.createReleasedLease(t, f.lease)
	t.Cleanup(func() {
		if err := stopProcs(f.live); err != nil {
			t.Error(err)
		}
	})
	begin := time.Now()
	for i := range k.n {
		f.add()
		if i%fleetBatch == fleetBatch-1 {
			time.Sleep(fleetBatchPause)
		}
	}
	f.settled(f.live...)
	// Two renewals more: relect's leader has listed the registrations and
	// names its successors in the Lease.
	time.Sleep(2 * lt.rp)
	cur, err := currentTerm(f.terms, f.live, electionTimeout(lt))
	if err != nil {
		describeFleet(t, c, f.lease, f.live)
		t.Fatal(err)
	}
	starts := 0
	for _, m := range f.terms.Between(begin, time.Now()) {
		if m.Start {
			starts++
		}
	}
	if k.mode == modeRelect && !k.registryOff {
		f.followLine()
	}
	t.Logf("%s: %d candidates started and settled in %v; %s leads, after %d terms", k, k.n, time.Since(begin).Round(time.Millisecond), cur.Who.id, starts)

	var run fleetRun
	for len(run.latency) < changes {
		before := slices.Clone(f.live)
		next, latency, cw, qw := f.change(cur)
		throttled := throttledBetween(before, next.At.Add(-latency), next.At.Add(productionTiming.rp+fleetSettle))
		checkAPF(t, k, cw, throttled)
		run.latency = append(run.latency, latency)
		run.change, run.quiet = append(run.change, cw), append(run.quiet, qw)
		run.throttled = append(run.throttled, throttled)
		cur = next
	}
	reqs, writes, cpu := run.perChange()
	q := run.quietTotal()
	t.Logf("%s: per change beyond the background: %v lease requests (%v writes), %v apiserver CPU ms; background: %.2f lease requests/s, "+
		"CPU of kube-apiserver %.2f cores, of the test process (the %d candidates) %.2f cores",
		k, reqs, writes, cpu, run.background(), q.apiCPU.Seconds()/q.d.Seconds(), k.n, q.selfCPU.Seconds()/q.d.Seconds())
	return run
}

// group is in-process candidates on one Lease and their terms: the
// bench.Fleet that bench.Change drives in rows g and h, leave making the
// leader go.
type group struct {
	lease string
	terms *termLog
	leave func(leader *proc) (time.Time, error)
}

// Renewal waits up to two RetryPeriods and slack for a renewal of the
// Lease by leader sent at or after from to be answered. Both windows of a
// change of row g begin a quarter RetryPeriod after one (bench.AfterRenewal):
// the same phase of the renewals, long after the last sample (a scrape of
// /metrics stalls the requests in flight, which then complete in the next
// window).
func (g group) Renewal(leader *proc, from time.Time) (time.Time, error) {
	at, err := leader.reqs.answeredSince("PUT", g.lease, from, 2*productionTiming.rp+slack)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: %w", leader.id, err)
	}
	return at, nil
}

func (g group) Leave(leader *proc) (time.Time, error) { return g.leave(leader) }

// Next waits for the next term; one of the candidate that went is an
// error.
func (g group) Next(from time.Time, gone *proc) (termMark, error) {
	next, err := g.terms.Next(from, nil, electionTimeout(productionTiming))
	if err == nil && next.Who == gone {
		err = fmt.Errorf("%s led again", gone.id)
	}
	return next, err
}

// change makes one change of leader (bench.Change): the Run of cur's
// candidate is cancelled between two renewals, at least RetryPeriod into
// its term, as in row b. The change's window (cw) runs from a sample just
// before the cancel to fleetSettle after RetryPeriod into the next
// leader's term, once the cancelled Run returned; then the stopped
// candidate is replaced, and once the new one made its first calls, a
// quiet window as long (qw) is measured, from the same phase of the new
// leader's renewals. It returns the next leader's term and the change's
// latency: the cancel → the next OnStartedLeading.
func (f *fleet) change(cur termMark) (next termMark, latency time.Duration, cw, qw window) {
	t, lt, leader := f.t, productionTiming, cur.Who
	var a load
	g := group{lease: f.lease, terms: f.terms, leave: func(leader *proc) (time.Time, error) {
		if !leader.leading.Load() {
			return time.Time{}, fmt.Errorf("%s stopped leading by itself", leader.id)
		}
		a = f.sample()
		cancelled := time.Now()
		leader.cancel()
		return cancelled, nil
	}}
	cancelled, next, err := bench.Change(g, cur, lt.rp)
	if err != nil {
		describeFleet(t, f.c, f.lease, f.live)
		t.Fatalf("a change from %s: %v", leader.id, err)
	}
	<-leader.done
	time.Sleep(time.Until(next.At.Add(lt.rp + fleetSettle)))
	b := f.sample()
	path := pathOf(f.lease, leader, next.Who, cancelled, next.At)
	fan := ""
	if rel, ok := leader.reqs.firstSince("PUT", f.lease, cancelled); ok && f.k.mode == modeRelect {
		p50, last, n := fanOut(f.lease, removeProc(f.live, leader), rel.at)
		fan = fmt.Sprintf("; the release reached half of %d followers' watches %s after it was sent, all %s after", n, ms(p50), ms(last))
	}
	if err := leader.stop(); err != nil {
		t.Error(err)
	}
	f.live = removeProc(f.live, leader)
	f.settled(f.add())
	cw, qw = windows(f, g, next, a, b)
	latency = next.At.Sub(cancelled)
	t.Logf("%s: %s → %s in %s (%s%s; their requests: %s); lease requests in the %v window %.0f (%s), in the %v quiet one %.0f (%s); apiserver CPU %v and %v; watch bytes %.0f and %.0f",
		f.k, leader.id, next.Who.id, ms(latency), path, fan, requestsBetween([]*proc{leader, next.Who}, cancelled, next.At),
		cw.d.Round(time.Millisecond), cw.reqs, cw.verbs, qw.d.Round(time.Millisecond), qw.reqs, qw.verbs, cw.apiCPU, qw.apiCPU, cw.watchBytes, qw.watchBytes)
	return next, latency, cw, qw
}

// windows returns a change's window, from the sample a to the sample b,
// and its quiet window: as long, from a quarter RetryPeriod after a
// renewal by the next leader (bench.AfterRenewal on fl), once the fleet f
// is whole again.
func windows[C comparable](f *fleet, fl bench.Fleet[C], next bench.Mark[C], a, b load) (cw, qw window) {
	f.t.Helper()
	if err := bench.AfterRenewal(fl, next.Who, next.At, productionTiming.rp); err != nil {
		f.t.Fatal(err)
	}
	q0 := f.sample()
	time.Sleep(b.at.Sub(a.at))
	q1 := f.sample()
	if a.apiPID != q1.apiPID {
		f.t.Fatal("the apiserver restarted during the run")
	}
	return windowOf(a, b), windowOf(q0, q1)
}

// handoverPath is when the steps of one change of leader happened, from
// the cancel of the old leader's Run, as the candidates' transports saw
// them (a negative duration: not seen).
type handoverPath struct {
	releaseSent, releaseAnswered time.Duration // the old leader's release (a PUT of the Lease)
	// observed: the successor's first read of its watch on the Lease
	// after the release was sent (relect), or the winner's last poll
	// before its acquiring write was sent (the loop: its GET).
	observed                     time.Duration
	acquireSent, acquireAnswered time.Duration // the successor's acquiring write
	started                      time.Duration // its OnStartedLeading
}

// pathOf works out the handover path of a change from old to next,
// cancelled at cancelled.
func pathOf(lease string, old, next *proc, cancelled, started time.Time) handoverPath {
	since := func(t time.Time) time.Duration {
		if t.IsZero() {
			return -1
		}
		return t.Sub(cancelled)
	}
	p := handoverPath{releaseSent: -1, releaseAnswered: -1, observed: -1, acquireSent: -1, acquireAnswered: -1, started: started.Sub(cancelled)}
	rel, ok := old.reqs.firstSince("PUT", lease, cancelled)
	if ok {
		p.releaseSent, p.releaseAnswered = since(rel.at), since(rel.answered)
	}
	acq, ok := next.reqs.firstSince("PUT", lease, cancelled)
	if !ok {
		return p
	}
	p.acquireSent, p.acquireAnswered = since(acq.at), since(acq.answered)
	if next.mode == modeClientGo {
		var poll time.Time
		for _, r := range next.reqs.all() {
			if r.verb == "GET" && r.lease == lease && r.at.Before(acq.at) {
				poll = r.at
			}
		}
		p.observed = since(poll)
	} else if at, ok := next.reqs.firstReadSince(lease, rel.at); ok && !rel.at.IsZero() {
		p.observed = since(at)
	}
	return p
}

// fanOut is when the reads of the followers' watches on lease first
// returned bytes after since (the release was sent then): its median and
// its maximum over the followers, from since, and how many read.
func fanOut(lease string, ps []*proc, since time.Time) (p50, last time.Duration, n int) {
	var ds []time.Duration
	for _, p := range ps {
		if at, ok := p.reqs.firstReadSince(lease, since); ok {
			ds = append(ds, at.Sub(since))
		}
	}
	if len(ds) == 0 {
		return -1, -1, 0
	}
	return percentile(ds, 0.5), percentile(ds, 1), len(ds)
}

func (p handoverPath) String() string {
	f := func(d time.Duration) string {
		if d < 0 {
			return "—"
		}
		return ms(d)
	}
	return fmt.Sprintf("release sent +%s, answered +%s; successor observed +%s; acquiring write sent +%s, answered +%s; OnStartedLeading +%s",
		f(p.releaseSent), f(p.releaseAnswered), f(p.observed), f(p.acquireSent), f(p.acquireAnswered), f(p.started))
}

// describeFleet logs, for a run that went wrong, the Lease as stored and
// what relect's candidates know: the leader they observed, their calls by
// verb and result, and the successors they know of.
func describeFleet(t *testing.T, c *cluster, lease string, ps []*proc) {
	t.Helper()
	if l := c.getLease(t, lease); l != nil {
		t.Logf("the Lease: holder %q, transitions %d, duration %ds, renewed %v; annotations %v",
			ptrVal(l.Spec.HolderIdentity), ptrVal(l.Spec.LeaseTransitions), ptrVal(l.Spec.LeaseDurationSeconds), l.Spec.RenewTime, l.Annotations)
	}
	leaders := map[string]int{}
	calls := map[string]uint64{}
	for i, p := range ps {
		if p.e == nil {
			continue
		}
		st := p.e.Stats()
		leaders[st.Leader]++
		for k, n := range st.Calls {
			calls[k.Verb+"/"+k.Result] += n
		}
		if i < 5 {
			var line []string
			for _, cand := range p.e.Candidates() {
				line = append(line, fmt.Sprintf("%s(leader %v, successor %d)", cand.Identity, cand.Leader, cand.Successor))
			}
			t.Logf("%s: leader %q, failures in a row %d, degraded %v, backoffs %d; candidates: %s",
				p.id, st.Leader, st.ConsecutiveFailures, st.Degraded, st.Backoffs, strings.Join(line, ", "))
		}
	}
	t.Logf("leaders observed by the relect candidates: %v; their calls: %v", leaders, calls)
}

// byVerb lists the apiserver's lease requests between two samples by verb.
func byVerb(a, b load) string {
	var out []string
	for v, n := range b.metrics.leaseRequests {
		if d := n - a.metrics.leaseRequests[v]; d > 0 {
			out = append(out, fmt.Sprintf("%s %.0f", v, d))
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// ---- row h: Yield and HandOver ----

// Leadership controls of row h.
const (
	ctlYield    = "yield"
	ctlHandOver = "handover"
)

// stepDownRun is what row h measured of one control.
type stepDownRun struct {
	latency []time.Duration // the call → the next OnStartedLeading
	// clean, for each HandOver: whether the named candidate led next,
	// nobody else led or held the Lease in between, and the old leader's
	// work had returned before the new term started.
	clean []bool
}

// tokensNeeded is what a successor's token bucket must hold for its
// acquisition not to wait: the calls of the acquisition and the first
// renewal (relect's minRateBurst), and one more for the milliseconds
// between a token and the request the transport stamps.
const tokensNeeded = 5

// untilTokens returns how long until the token bucket of a relect candidate
// with the defaults (defaultBudget: burst defaults.RateBurst, 2 calls per
// RetryPeriod) holds n tokens, as worked out from its Lease requests: one
// token each, the bucket full at the start.
func untilTokens(reqs []request, lt leaseTiming, n float64) time.Duration {
	b := defaultBudget(lt)
	rate, burst := b.rate, float64(b.burst)
	tokens, last := burst, time.Now()
	for i, r := range reqs {
		if i > 0 {
			tokens = min(burst, tokens+rate*r.at.Sub(last).Seconds())
		}
		tokens, last = tokens-1, r.at
	}
	tokens = min(burst, tokens+rate*time.Since(last).Seconds())
	return time.Duration(max(0, n-tokens) / rate * float64(time.Second))
}

// refillTime is how long an empty token bucket of relect's defaults takes
// to fill.
func refillTime(lt leaseTiming) time.Duration {
	b := defaultBudget(lt)
	return time.Duration(float64(b.burst) / b.rate * float64(time.Second))
}

// benchStepDown makes n changes of leader among three relect candidates
// with Yield or HandOver (kind), production durations, BackoffMax =
// RetryPeriod so that a candidate that just led follows again within a
// RetryPeriod. Each call comes between two renewals, at least RetryPeriod
// into the term, in a settled fleet: every other candidate follows the
// Lease (it has sent a watch since its last term ended), the leader has
// listed the registry (it knows every candidate), and the successor's
// token bucket holds what its acquisition takes (tokensNeeded). A term
// costs a candidate about as many calls as its bucket holds, the first in
// line at a Yield is, with equal priorities and three candidates, the
// candidate that led before, and a leader lists the registry only with
// tokens to spare: changes in quicker succession wait for tokens, and
// pass on lines of succession that leave out the leaders before (the
// runs that showed it: `git log -p docs/performance.md`). HandOver names
// the candidate that did not lead last.
func benchStepDown(t *testing.T, c *cluster, kind string, n int) stepDownRun {
	lt := productionTiming
	lease := leaseName(t)
	c.createReleasedLease(t, lease)
	w := c.watchLease(t, lease)
	terms := &termLog{}
	ps, err := c.startProcs(3, kind, termOpts(terms, procOpts{mode: modeRelect, lease: lease, timing: lt, backoffMax: lt.rp}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stopProcs(ps); err != nil {
			t.Error(err)
		}
	})
	for _, p := range ps {
		if err := p.reqs.waitSince("POST", time.Time{}, 30*time.Second); err != nil {
			t.Fatalf("%s did not register: %v", p.id, err)
		}
	}
	time.Sleep(2 * lt.rp)
	cur, err := currentTerm(terms, ps, electionTimeout(lt))
	if err != nil {
		t.Fatal(err)
	}

	var run stepDownRun
	var prev *proc
	ctx := context.Background()
	for len(run.latency) < n {
		leader := cur.Who
		target := settledFleet(t, terms, leader, prev, ps, kind)
		var term int64
		var called, returned time.Time
		g := group{lease: lease, terms: terms, leave: func(leader *proc) (time.Time, error) {
			var leading bool
			if term, leading = leader.e.Term(); !leading {
				return time.Time{}, fmt.Errorf("%s stopped leading by itself", leader.id)
			}
			called = time.Now()
			var err error
			if kind == ctlYield {
				err = leader.e.Yield(ctx)
			} else {
				err = leader.e.HandOver(ctx, target.id, nil)
			}
			returned = time.Now()
			if err != nil {
				return time.Time{}, fmt.Errorf("%s: %s: %w", leader.id, kind, err)
			}
			return called, nil
		}}
		_, next, err := bench.Change(g, cur, lt.rp)
		if err != nil {
			t.Fatalf("a %s from %s: %v", kind, leader.id, err)
		}
		d := next.At.Sub(called)
		run.latency = append(run.latency, d)
		t.Logf("%s: %s → %s in %s (the call returned after %s); Lease requests meanwhile: %s",
			kind, leader.id, next.Who.id, ms(d), ms(returned.Sub(called)), requestsBetween(ps, called, next.At))
		if kind == ctlHandOver {
			run.clean = append(run.clean, handedOverCleanly(t, w, terms, leader, target, next, called, term))
		}
		prev, cur = leader, next
	}
	return run
}

// settledFleet waits until, among ps, every candidate but the leader
// follows the Lease, the leader knows every candidate, and the successor's
// token bucket holds tokensNeeded (see benchStepDown). It returns the
// candidate a HandOver names: one that did not lead last (prev).
func settledFleet(t *testing.T, terms *termLog, leader, prev *proc, ps []*proc, kind string) (target *proc) {
	t.Helper()
	lt := productionTiming
	for _, p := range removeProc(ps, leader) {
		if err := p.reqs.waitSince("WATCH", terms.LastStop(p), 2*lt.rp+slack); err != nil {
			t.Fatalf("%s does not follow the Lease again: %v", p.id, err)
		}
		if p != prev {
			target = p
		}
	}
	// The leader has listed the registry: it knows every candidate, and
	// names its successors from that list.
	waitFor(t, refillTime(lt)+2*lt.rp+slack, leader.id+" to know every candidate", func() bool {
		return len(leader.e.Candidates()) == len(ps)
	})
	successor := target
	if kind == ctlYield {
		successor = firstInLine(t, leader, ps)
	}
	time.Sleep(untilTokens(successor.reqs.all(), lt, tokensNeeded))
	return target
}

// firstInLine is the candidate of ps the leader names first in its line of
// succession.
func firstInLine(t *testing.T, leader *proc, ps []*proc) *proc {
	t.Helper()
	for _, c := range leader.e.Candidates() {
		if c.Successor != 1 {
			continue
		}
		for _, p := range ps {
			if p.id == c.Identity {
				return p
			}
		}
	}
	t.Fatalf("%s names no successor among %d candidates: %v", leader.id, len(ps), leader.e.Candidates())
	return nil
}

// handedOverCleanly checks what HandOver promises (an error otherwise):
// the named candidate leads next; nobody else began a term, nor held the
// Lease, between the call and its term; the old leader's work returned
// before that term began. term is the old leader's term number.
func handedOverCleanly(t *testing.T, w *leaseWatch, terms *termLog, leader, target *proc, next termMark, called time.Time, term int64) bool {
	t.Helper()
	ok := true
	if next.Who != target {
		t.Errorf("HandOver from %s to %s: %s led next", leader.id, target.id, next.Who.id)
		ok = false
	}
	if stop := terms.LastStop(leader); stop.Before(called) || !stop.Before(next.At) {
		t.Errorf("HandOver from %s: its work returned at %s, not between the call (%s) and %s's term (%s)",
			leader.id, stop.Format("15:04:05.000000"), called.Format("15:04:05.000000"), next.Who.id, next.At.Format("15:04:05.000000"))
		ok = false
	}
	// The Lease: from the call on, only the old leader and the named
	// candidate, until the named candidate's acquiring write.
	acquired := w.await(t, called, 5*time.Second, target.id+"'s acquisition", func(o leaseObs) bool {
		return o.holder == target.id && int64(o.transitions) > term
	})
	for _, o := range w.changes() {
		if !o.at.Before(called) && !o.at.After(acquired.at) && o.holder != leader.id && o.holder != target.id {
			t.Errorf("HandOver from %s to %s: the Lease was seen held by %q in between (%v)", leader.id, target.id, o.holder, o)
			ok = false
		}
	}
	return ok
}

// ---- the table's rows g and h ----

// fleetSeries is quantity of the fleets of n candidates (relect with its
// registry off if registryOff): per change of leader, "lease requests",
// "writes" and "CPU ms" beyond the background (fleetRun.perChange) and the
// "latency" (ns); once, the "background" (fleetRun.background).
func fleetSeries(n int, registryOff bool, quantity string) series {
	run := fmt.Sprintf("fleet of %d", n)
	if registryOff {
		run += ", registry off"
	}
	return series{run, quantity}
}

// impl is the implementation the samples of k are recorded under:
// implRelectJSON for relect speaking JSON, implRelectInProcess for relect
// with every candidate in the test process, else k.mode (relect: with its
// successors apart, or its registry off, whose series are apart).
func (k fleetKey) impl() string {
	switch {
	case k.json:
		return implRelectJSON
	case k.mode == modeRelect && !k.apart && !k.registryOff:
		return implRelectInProcess
	}
	return k.mode
}

// addFleet appends what run measured of the fleet k.
func (r *perfResults) addFleet(k fleetKey, run fleetRun) {
	s := func(q string) series { return fleetSeries(k.n, k.registryOff, q) }
	impl := k.impl()
	for i := range run.change {
		reqs, writes, cpuMS := run.beyond(i)
		r.add(s("lease requests"), impl, reqs)
		r.add(s("writes"), impl, writes)
		r.add(s("CPU ms"), impl, cpuMS)
	}
	r.addDurations(s("latency"), impl, run.latency)
	r.add(s("background"), impl, run.background())
	for i := range run.change {
		r.add(s("watch bytes"), impl, run.change[i].watchBytes-run.quiet[i].watchBytes*run.change[i].d.Seconds()/run.quiet[i].d.Seconds())
		r.add(s("rejected"), impl, run.change[i].rejected)
		r.add(s("workload-low"), impl, run.change[i].workloadLow)
	}
	for _, n := range run.throttled {
		r.add(s("throttled"), impl, float64(n))
	}
}

// The series of row h: the call → the next OnStartedLeading (ns), one per
// call; whether each HandOver was clean (1) or not (0).
var (
	yieldLatency    = series{"yield", "latency"}
	handOverLatency = series{"handover call", "latency"}
	handOverClean   = series{"handover call", "clean"}
)

// addStepDowns appends what row h measured of one control (kind).
func (r *perfResults) addStepDowns(kind string, run stepDownRun) {
	if kind == ctlYield {
		r.addDurations(yieldLatency, modeRelect, run.latency)
		return
	}
	r.addDurations(handOverLatency, modeRelect, run.latency)
	for _, clean := range run.clean {
		yes := 0.0
		if clean {
			yes = 1
		}
		r.add(handOverClean, modeRelect, yes)
	}
}

// fleetRows are the rows of row g, for each fleet size.
func (r *perfResults) fleetRows() []perfRow {
	prod := productionTiming.String()
	var rows []perfRow
	for i, n := range r.p.fleetNs {
		s := func(q string) series { return fleetSeries(n, false, q) }
		what := fmt.Sprintf("N = %d: apiserver lease requests per change of leader, beyond the background ³", n)
		if i == 0 {
			what = fmt.Sprintf("change of leader among N candidates on one Lease (the leader's Run cancelled between renewals; %d changes each; %s). %s",
				r.p.fleetChanges, prod, what)
		}
		rows = append(rows,
			perfRow{"g", what, s("lease requests"), meanWithError},
			perfRow{"g", fmt.Sprintf("N = %d: of which writes (PUT, POST, DELETE), beyond the background ³", n), s("writes"), meanWithError},
			perfRow{"g", fmt.Sprintf("N = %d: kube-apiserver CPU ms per change, beyond the background ³", n), s("CPU ms"), meanWithError},
			perfRow{"g", fmt.Sprintf("N = %d: the background, apiserver lease requests per second in the quiet windows", n), s("background"), value("%.2f")},
			perfRow{"g", fmt.Sprintf("N = %d: handover, the leader's Run cancelled → the next OnStartedLeading, p50 / p99 (relect: successors apart ⁵)", n), s("latency"), medianP99},
			perfRow{"g", fmt.Sprintf("N = %d: requests rejected with HTTP 429 in the change windows, by the apiserver's API Priority and Fairness / at the in-process candidates' transports (candidates as a ServiceAccount ⁵)", n),
				s("rejected"), r.rejectedCells(n)})
		if len(r.get(s("latency"), implRelectInProcess)) > 0 {
			rows = append(rows, perfRow{"g", fmt.Sprintf("N = %d, relect with every candidate in the test process, the successor too: handover p50 / p99; CPU ms per change", n),
				s("latency"), r.inProcessCells(n)})
		}
		if off := fleetSeries(n, true, "latency"); len(r.get(off, modeRelect)) > 0 {
			rows = append(rows, perfRow{"g", fmt.Sprintf("N = %d, relect with DisableRegistry (no line of succession: every follower tries at once): lease requests per change; CPU ms per change; handover p50 / p99", n),
				fleetSeries(n, true, "lease requests"), r.registryOff(n)})
		}
	}
	return rows
}

// registryOff is the relect cell of the fleet of n with its registry off:
// its lease requests (the row's series) and CPU ms per change, and its
// handover latency.
func (r *perfResults) registryOff(n int) format {
	cpu, latency := r.get(fleetSeries(n, true, "CPU ms"), modeRelect), r.get(fleetSeries(n, true, "latency"), modeRelect)
	return func(rel, _ []float64) (string, string, string) {
		p50p99, _, _ := medianP99(latency, nil)
		return fmt.Sprintf("%v; %v; %s", bench.MeanSEOf(rel), bench.MeanSEOf(cpu), p50p99), "—", ""
	}
}

// rejectedCells are the cells of the 429 row of the fleets of n: the
// requests the apiserver rejected in the change windows, and the answers
// 429 the in-process candidates' transports saw, summed over the changes.
func (r *perfResults) rejectedCells(n int) format {
	return func(rel, cg []float64) (string, string, string) {
		throttled := func(impl string) float64 { return sum(r.get(fleetSeries(n, false, "throttled"), impl)) }
		cell := func(xs []float64, impl string) string {
			if len(xs) == 0 {
				return "—"
			}
			return fmt.Sprintf("%.0f / %.0f", sum(xs), throttled(impl))
		}
		return cell(rel, modeRelect), cell(cg, modeClientGo), ""
	}
}

// inProcessCells is the relect cell of the fleet of n with every
// candidate in the test process: its handover latency (the row's series)
// and CPU ms per change.
func (r *perfResults) inProcessCells(n int) format {
	latency := r.get(fleetSeries(n, false, "latency"), implRelectInProcess)
	cpu := r.get(fleetSeries(n, false, "CPU ms"), implRelectInProcess)
	return func(_, _ []float64) (string, string, string) {
		p50p99, _, _ := medianP99(latency, nil)
		return fmt.Sprintf("%s; %v", p50p99, bench.MeanSEOf(cpu)), "—", ""
	}
}

func sum(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s
}

// stepDownRows are the rows of row h.
func (r *perfResults) stepDownRows() []perfRow {
	prod := productionTiming.String()
	yields, handOvers := len(r.get(yieldLatency, modeRelect)), len(r.get(handOverLatency, modeRelect))
	return []perfRow{
		{"h", fmt.Sprintf("Yield: the call → the next leader's OnStartedLeading, p50 / p99 (%d yields; 3 candidates; %s; BackoffMax = RP; each call in a settled fleet ⁴)", yields, prod),
			yieldLatency, relectOnly(medianP99, "no such call")},
		{"h", fmt.Sprintf("HandOver to a candidate that follows the Lease: the call → its OnStartedLeading, p50 / p99 (%d handovers, the same setup)", handOvers),
			handOverLatency, relectOnly(medianP99, "no such call")},
		{"h", "HandOver: the named candidate led next, nobody else led or held the Lease in between, the old leader's work had returned (asserted)",
			handOverClean, relectOnly(share, "no such call")},
	}
}

// apartFootnote is footnote ⁵: how row g runs relect, and as whom every
// candidate of rows e and g runs, with the requests APF dispatched to
// workload-low in row g's change windows.
func (r *perfResults) apartFootnote() string {
	dispatched := 0.0
	for _, k := range fleetKeys(r.p) {
		dispatched += sum(r.get(fleetSeries(k.n, k.registryOff, "workload-low"), k.impl()))
	}
	return fmt.Sprintf("⁵ Row g runs relect's leader and the two successors it names first as candidate processes of their own (e2e/cmd/candidate, straight to the apiserver, "+
		"with Priority %d, so that the line of succession names them first), the other N − %d candidates in the test process: the successor decodes one watch, as on a node "+
		"of its own, instead of sharing one Go runtime with N − 1 decoders of every watch event. The loop's candidates are all in the test process (its followers poll; "+
		"the first to poll after the release wins). Every candidate of rows e and g authenticates as ServiceAccount %s/%s (a client certificate), so that the apiserver's "+
		"default API Priority and Fairness configuration puts its requests in the FlowSchema service-accounts, priority level workload-low, one flow: it dispatched %.0f "+
		"requests there in row g's change windows.", apartPriority, apartCandidates, namespace, perfServiceAccount, dispatched)
}

// The footnotes of rows g and h.
const (
	fleetFootnote = "³ Row g: each change's window runs from a sample just before the leader's Run is cancelled to RetryPeriod + 200 ms after the next " +
		"leader's OnStartedLeading (and after the cancelled Run returned). The stopped candidate is then replaced, and once the new one made its first " +
		"calls, a quiet window as long as the change's is measured with the same candidates and no change. Both windows begin a quarter RetryPeriod " +
		"after a renewal of the leader, and end with one scrape of /metrics. The figure is the mean over changes of (change window − quiet window " +
		"scaled to the change window's length), ± its standard error: the background and the scrapes cancel out, but for their noise (the loop's " +
		"background is its followers' polls)."
	stepDownFootnote = "⁴ Row h: each call comes between two renewals, at least RetryPeriod into the term, once the other candidates follow the Lease again " +
		"(with BackoffMax = RetryPeriod, within a RetryPeriod of their term's end), the leader has listed the registry (it knows all three " +
		"candidates) and the successor's token bucket, worked out from its requests, holds the 5 calls its acquisition and first renewal take. " +
		"HandOver names the candidate that did not lead last; Yield's successor is the leader's first in line."
)

// msOf is d in milliseconds.
func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
