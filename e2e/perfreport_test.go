package e2e

import (
	"fmt"
	"github.com/relect/relect/internal/bench"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// The benchmark's report. Each run of the benchmark records samples
// (perfResults.add and the typed recorders below); the table is a list of
// rows (perfResults.rows), each an id, what it measures, the series of
// samples it reads, and the format that turns them into a relect cell, a
// client-go loop cell and their ratio.

// series names one quantity that one run of the benchmark measured. It
// holds samples per implementation (modeRelect, modeClientGo), or, under
// the implementation "", what belongs to neither: the idle baseline, the
// window of rows a and d and its cross-check.
type series struct{ run, quantity string }

// implRelectJSON records the samples of relect candidates whose Lease
// client speaks JSON (procOpts.json), beside modeRelect's (protobuf, the
// default) and modeClientGo's.
const implRelectJSON = "relect-json"

// implRelectInProcess records the samples of row g's relect fleets with
// every candidate in the test process, the successors too (fleetKey).
const implRelectInProcess = "relect-in-process"

// The series the rows read; rows g and h have theirs in perffleet_test.go.
var (
	// a, d1, d2: Lease requests per minute, one sample per candidate.
	followerRates = series{"steady", "requests per minute of each follower"}
	leaderRates   = series{"steady", "requests per minute of the leader"}
	failingRates  = series{"HTTP 500", "calls per minute of each candidate"}
	stolenRates   = series{"stolen", "calls per minute of each candidate"}
	// d: relect's use of its token bucket, one sample per candidate
	// (budgetUse.excess).
	budgetExcess = series{"steady, HTTP 500, stolen", "calls beyond the sustained rate"}
	// Rows a and d's window (ns), and the lease requests in it counted by
	// the transports and by the apiserver; implementation "".
	requestsWindow    = series{"steady, HTTP 500, stolen", "window"}
	requestsCounted   = series{"steady, HTTP 500, stolen", "lease requests counted by the transports"}
	requestsAPIServer = series{"steady, HTTP 500, stolen", "lease requests counted by the apiserver"}
	// b: the cancel → the next OnStartedLeading (ns), one per handover.
	handoverLatency = series{"handover", "latency"}
	freshLatency    = series{"handover of a fresh leader", "latency"}
	// c: from the killed leader's last renewal (ns), one per kill.
	failoverTaken = series{"failover", "until the Lease was taken over"}
	failoverLeads = series{"failover", "until the new leader led"}
	// f: per idle follower.
	followerGoroutines = series{"overhead", "goroutines"}
	followerHeapKiB    = series{"overhead", "live heap KiB"}
	// e, with scaleOf: the lease requests per second that the candidates'
	// transports counted, and the bytes per second of their Lease watches'
	// bodies.
	scaleCounted           = "lease requests per second counted by the transports"
	scaleWatchBytesCounted = "watch bytes per second counted by the transports"
	scaleRejected          = "requests rejected with 429, from the start to the window's end"
)

// e: what a load window measures (loadRates), N candidates on one Lease
// ("scale", one sample per implementation) or none ("idle", implementation
// "": before and after the candidates).
const (
	loadLeaseRequests = "apiserver lease requests per second"
	loadAPIServerCPU  = "kube-apiserver CPU seconds per minute"
	loadEtcdCPU       = "etcd CPU seconds per minute"
	loadOwnCPU        = "the candidates' CPU seconds per minute"
	loadWatches       = "lease watches open at the end"
	loadWatchBytes    = "bytes of Lease watch events sent per second"
	loadWatchEvents   = "Lease watch events sent per second"
)

var loadQuantities = []struct {
	name string
	of   func(loadRates) float64
}{
	{loadLeaseRequests, func(l loadRates) float64 { return l.leaseReqs }},
	{loadAPIServerCPU, func(l loadRates) float64 { return l.apiCPU }},
	{loadEtcdCPU, func(l loadRates) float64 { return l.etcdCPU }},
	{loadOwnCPU, func(l loadRates) float64 { return l.selfCPU }},
	{loadWatches, func(l loadRates) float64 { return l.openWatches }},
	{loadWatchBytes, func(l loadRates) float64 { return l.watchBytes }},
	{loadWatchEvents, func(l loadRates) float64 { return l.watchEvents }},
}

// scaleRunName names the runs of row e with n candidates.
func scaleRunName(n int) string { return fmt.Sprintf("scale, N = %d", n) }

func scaleOf(n int, quantity string) series { return series{scaleRunName(n), quantity} }
func idleOf(quantity string) series         { return series{"idle", quantity} }

// perfResults holds every sample of one run of the benchmark. It is safe
// for concurrent use.
type perfResults struct {
	size string
	p    perfParams

	mu      sync.Mutex
	samples map[sampleKey][]float64 // guarded by mu, in the order added
}

type sampleKey struct {
	s    series
	impl string
}

// add appends samples of s for impl.
func (r *perfResults) add(s series, impl string, xs ...float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.samples == nil {
		r.samples = map[sampleKey][]float64{}
	}
	k := sampleKey{s, impl}
	r.samples[k] = append(r.samples[k], xs...)
}

// get returns the samples of s for impl, nil if there are none (the run
// failed, or never measured it).
func (r *perfResults) get(s series, impl string) []float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]float64(nil), r.samples[sampleKey{s, impl}]...)
}

// addDurations appends durations to s, as nanoseconds.
func (r *perfResults) addDurations(s series, impl string, ds []time.Duration) {
	for _, d := range ds {
		r.add(s, impl, float64(d))
	}
}

// addLoad appends one window's rates to each quantity of run ("scale" or
// "idle").
func (r *perfResults) addLoad(run, impl string, l loadRates) {
	for _, q := range loadQuantities {
		r.add(series{run, q.name}, impl, q.of(l))
	}
}

// addFailovers appends the runs of row c.
func (r *perfResults) addFailovers(impl string, runs []failoverRun) {
	for _, f := range runs {
		r.add(failoverTaken, impl, float64(f.taken))
		r.add(failoverLeads, impl, float64(f.leads))
	}
}

// ---- formats ----

// format makes a row's cells from the samples of its series: relect's
// cell, the client-go loop's, and the ratio of the loop's figure to
// relect's ("client-go ÷ relect").
type format func(rel, cg []float64) (relCell, cgCell, ratio string)

// perMinute is a rate per candidate and minute: the mean over candidates.
// When relect's candidates sent nothing in the window w, the ratio is a
// lower bound, computed as if each had sent one request (footnote ¹).
func perMinute(w time.Duration) format {
	return func(rel, cg []float64) (string, string, string) {
		r, c := bench.Mean(rel), bench.Mean(cg)
		ratio := ratioOf(c, r)
		if win := w.Minutes(); len(rel) > 0 && r == 0 && win > 0 {
			ratio = fmt.Sprintf("> %s ¹", ratioOf(c, 1/win))
		}
		return fmt.Sprintf("%.1f", r), fmt.Sprintf("%.1f", c), ratio
	}
}

// quantile is the nearest-rank quantile q of durations.
func quantile(q float64) format {
	return func(rel, cg []float64) (string, string, string) {
		r, c := percentile(durations(rel), q), percentile(durations(cg), q)
		return fmtDur(r), fmtDur(c), ratioOf(c.Seconds(), r.Seconds())
	}
}

// twoQuantiles is "p50 / q" of durations; the ratio is of the medians.
func twoQuantiles(q float64) format {
	return func(rel, cg []float64) (string, string, string) {
		cell := func(xs []float64) (string, time.Duration) {
			ds := durations(xs)
			p50 := percentile(ds, 0.5)
			return fmtDur(p50) + " / " + fmtDur(percentile(ds, q)), p50
		}
		r, rp50 := cell(rel)
		c, cp50 := cell(cg)
		return r, c, ratioOf(cp50.Seconds(), rp50.Seconds())
	}
}

var (
	medianMax = twoQuantiles(1)    // p50 / max
	medianP99 = twoQuantiles(0.99) // p50 / p99
)

// within counts the durations no longer than limit: "k of n", no ratio.
func within(limit time.Duration) format {
	return func(rel, cg []float64) (string, string, string) {
		cell := func(xs []float64) string {
			k := 0
			for _, x := range xs {
				if time.Duration(x) <= limit {
					k++
				}
			}
			return fmt.Sprintf("%d of %d", k, len(xs))
		}
		return cell(rel), cell(cg), ""
	}
}

// share counts the samples that are 1 (a yes) among them: "k of n", no
// ratio.
func share(rel, cg []float64) (string, string, string) {
	cell := func(xs []float64) string {
		k := 0
		for _, x := range xs {
			if x == 1 {
				k++
			}
		}
		return fmt.Sprintf("%d of %d", k, len(xs))
	}
	return cell(rel), cell(cg), ""
}

// value is one sample, formatted with verb (zero if there is none).
func value(verb string) format {
	return func(rel, cg []float64) (string, string, string) {
		r, c := first(rel), first(cg)
		return fmt.Sprintf(verb, r), fmt.Sprintf(verb, c), ratioOf(c, r)
	}
}

// aboveIdle is one sample less the idle baseline: the mean of the two idle
// windows' samples. When relect's figure is within the difference between
// the two idle windows, there is no ratio: it is noise.
func aboveIdle(idle []float64, verb string) format {
	before, after := first(idle), second(idle)
	base, noise := (before+after)/2, math.Abs(before-after)
	return func(rel, cg []float64) (string, string, string) {
		r, c := first(rel)-base, first(cg)-base
		ratio := ratioOf(c, r)
		if r <= noise {
			ratio = fmt.Sprintf("— (relect within the idle noise, %s)", fmt.Sprintf(verb, noise))
		}
		return fmt.Sprintf(verb, r), fmt.Sprintf(verb, c), ratio
	}
}

// meanWithError is the mean of the samples ± its standard error; the
// ratio is of the means.
func meanWithError(rel, cg []float64) (string, string, string) {
	r, c := bench.MeanSEOf(rel), bench.MeanSEOf(cg)
	return r.String(), c.String(), ratioOf(c.Mean, r.Mean)
}

// relectOnly is f's relect cell, with cg in the loop's and no ratio: a
// row the loop has no counterpart for.
func relectOnly(f format, cg string) format {
	return func(rel, _ []float64) (string, string, string) {
		r, _, _ := f(rel, nil)
		return r, cg, ""
	}
}

// budget is relect's worst use of its bucket b: the most calls beyond the
// sustained rate of any candidate, against the burst.
func budget(b budgetUse) format {
	return func(rel, cg []float64) (string, string, string) {
		worst := b
		for _, x := range rel {
			worst.excess = max(worst.excess, x)
		}
		verdict := "never exceeded"
		if worst.exceeded() {
			verdict = "**EXCEEDED**"
		}
		return fmt.Sprintf("%.1f of %d: %s", worst.excess, worst.burst, verdict), "", ""
	}
}

// ---- the table ----

// perfRow is one row of the table: its id (the benchmark's row letter),
// what it measures, the series it reads, and how.
type perfRow struct {
	id, what string
	s        series
	f        format
}

// rows returns the table's rows, in order. Their texts name the run's
// parameters and what it measured (the window, the idle baseline).
func (r *perfResults) rows() []perfRow {
	p, prod, ft := r.p, productionTiming.String(), failoverTiming
	window := time.Duration(first(r.get(requestsWindow, "")))
	bu := defaultBudget(productionTiming)
	idle := func(q string) []float64 { return r.get(idleOf(q), "") }
	idleMean := func(q string) float64 { return (first(idle(q)) + second(idle(q))) / 2 }
	rows := []perfRow{
		{"a", fmt.Sprintf("Lease API requests per follower per minute, steady state (%d followers + 1 leader; %s; %s window)",
			steadyCandidates-1, prod, roundDur(window)), followerRates, perMinute(window)},
		{"a", "the leader's Lease API requests per minute", leaderRates, perMinute(window)},
		{"b", fmt.Sprintf("graceful handover: leader's Run cancelled (between renewals, ≥ RP into its term) → next OnStartedLeading, p50 (%d handovers each, 3 candidates; %s)",
			p.handovers, prod), handoverLatency, quantile(0.5)},
		{"b", "the same, p99 (nearest rank: with fewer than 100 handovers, the maximum)", handoverLatency, quantile(0.99)},
		{"b", fmt.Sprintf("the same for a fresh leader, cancelled %v after it began to lead, p50", freshHandover), freshLatency, quantile(0.5)},
		{"b", "the same for a fresh leader, p99", freshLatency, quantile(0.99)},
		{"c", fmt.Sprintf("crash failover (SIGKILL of the leader's process): the killed leader's last renewal → the Lease taken over, both as a watch saw them, p50 / max (%d runs each, 3 candidates; %s)",
			p.failovers, ft), failoverTaken, medianMax},
		{"c", "runs taken over within LD + 100 ms of the last renewal", failoverTaken, within(ft.ld + 100*time.Millisecond)},
		{"c", "last renewal → the new leader's own OnStartedLeading / IsLeader, p50 / max", failoverLeads, medianMax},
		{"d1", fmt.Sprintf("Lease API calls per candidate per minute, every Lease call answered HTTP 500 (%d candidates each; %s; %s window)",
			faultCandidates, prod, roundDur(window)), failingRates, perMinute(window)},
		{"d2", "the same, the Lease stolen every second by a thief writing a fresh renewTime", stolenRates, perMinute(window)},
		{"d", fmt.Sprintf("relect's budget (its defaults: %.3g/s sustained, burst %d): most calls beyond the sustained rate in any interval, over rows a and d",
			bu.rate, bu.burst), budgetExcess, relectOnly(budget(bu), "no budget")},
		{"e", fmt.Sprintf("apiserver lease requests per second, N = %d candidates on one Lease (%s; %s windows), raw",
			p.scaleN, prod, roundDur(p.scaleWindow)), scaleOf(p.scaleN, loadLeaseRequests), value("%.2f")},
		{"e", fmt.Sprintf("the same, above the idle baseline (%.2f/s) ²", idleMean(loadLeaseRequests)),
			scaleOf(p.scaleN, loadLeaseRequests), aboveIdle(idle(loadLeaseRequests), "%.2f")},
		{"e", "kube-apiserver CPU seconds per minute, raw", scaleOf(p.scaleN, loadAPIServerCPU), value("%.2f")},
		{"e", fmt.Sprintf("the same, above the idle baseline (%.2f s/min) ²", idleMean(loadAPIServerCPU)),
			scaleOf(p.scaleN, loadAPIServerCPU), aboveIdle(idle(loadAPIServerCPU), "%.2f")},
		{"e", "etcd CPU seconds per minute, raw", scaleOf(p.scaleN, loadEtcdCPU), value("%.2f")},
		{"e", fmt.Sprintf("the same, above the idle baseline (%.2f s/min) ²", idleMean(loadEtcdCPU)),
			scaleOf(p.scaleN, loadEtcdCPU), aboveIdle(idle(loadEtcdCPU), "%.2f")},
		{"e", fmt.Sprintf("the %d candidates' own CPU seconds per minute (the test process)", p.scaleN), scaleOf(p.scaleN, loadOwnCPU), value("%.2f")},
		{"f", fmt.Sprintf("goroutines per idle follower (%d followers in one process; %s)", p.overheadN, prod), followerGoroutines, value("%.1f")},
		{"f", "live heap KiB per idle follower (after GC)", followerHeapKiB, value("%.1f")},
	}
	return append(append(rows, r.fleetRows()...), r.stepDownRows()...)
}

// footnotes returns the table's footnotes, in order: those of the rows
// that ran (RELECT_PERF_ROWS may have left some out).
func (r *perfResults) footnotes() []string {
	window := time.Duration(first(r.get(requestsWindow, "")))
	idle := func(q string) (before, after float64) { xs := r.get(idleOf(q), ""); return first(xs), second(xs) }
	reqs0, reqs1 := idle(loadLeaseRequests)
	api0, api1 := idle(loadAPIServerCPU)
	etcd0, etcd1 := idle(loadEtcdCPU)
	watches0, watches1 := idle(loadWatches)
	at := func(s series, impl string) float64 { return first(r.get(s, impl)) }
	n := r.p.scaleN
	ranA := len(r.get(requestsWindow, "")) > 0
	ranE := len(r.get(idleOf(loadAPIServerCPU), "")) > 0
	ranG := false
	for _, k := range fleetKeys(r.p) {
		ranG = ranG || len(r.get(fleetSeries(k.n, k.registryOff, "latency"), k.impl())) > 0
	}
	ranH := len(r.get(yieldLatency, modeRelect)) > 0
	notes := []struct {
		ran  bool
		text string
	}{
		{ranA, "¹ relect sent no request in the window: the ratio is a lower bound, computed as if each of its candidates had sent one."},
		{ranA, fmt.Sprintf("Cross-check of rows a and d (one %s window): the benchmark's transports counted %.0f lease requests sent to the apiserver; the apiserver's apiserver_request_total{resource=\"leases\"} grew by %.0f, of which its own lease traffic at the idle rate of row e accounts for %.0f.",
			roundDur(window), at(requestsCounted, ""), at(requestsAPIServer, ""), (reqs0+reqs1)/2*window.Seconds())},
		{ranE, fmt.Sprintf("² The idle baseline is the mean of two %s windows without candidates, before and after: kube-apiserver %.2f and %.2f CPU s/min, etcd %.2f and %.2f, lease requests %.2f/s and %.2f/s.",
			roundDur(r.p.scaleIdle), api0, api1, etcd0, etcd1, reqs0, reqs1)},
		{ranE, fmt.Sprintf("Row e: lease requests per second counted by the candidates' transports: relect %.2f, client-go loop %.2f; lease watches open at the end of the window: relect %.0f, client-go loop %.0f, idle %.0f.",
			at(scaleOf(n, scaleCounted), modeRelect), at(scaleOf(n, scaleCounted), modeClientGo), at(scaleOf(n, loadWatches), modeRelect), at(scaleOf(n, loadWatches), modeClientGo), max(watches0, watches1))},
		{ranG, fleetFootnote},
		{ranH, stepDownFootnote},
		{ranG, r.apartFootnote()},
	}
	var out []string
	for _, f := range notes {
		if f.ran {
			out = append(out, f.text)
		}
	}
	return out
}

// table returns the markdown report: a line on the run, the rows, the
// footnotes.
func (r *perfResults) table(machine string, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "relect vs the client-go loop (elastic-agent PR #4542), one run of `%s=%s` in %v on %s.\n\n",
		envPerf, r.size, took.Round(time.Second), machine)
	r.writeRows(&b, r.rows(), [2]string{modeRelect, modeClientGo}, "row", "measure", "relect", "client-go loop", "client-go ÷ relect")
	for _, f := range r.footnotes() {
		b.WriteString(f + "\n\n")
	}
	if rows := r.jsonRows(); len(rows) > 0 {
		b.WriteString("relect's Lease client speaking protobuf (its default with Options.Config) and JSON (Options.Client built from a JSON rest.Config: " +
			"every Lease and registry call in JSON, as relect sent them before it spoke protobuf), side by side in the same run:\n\n")
		r.writeRows(&b, rows, [2]string{modeRelect, implRelectJSON}, "row", "measure", "relect, protobuf", "relect, JSON", "JSON ÷ protobuf")
	}
	if len(r.p.scaleNs) > 1 {
		b.WriteString(r.slopeSection())
	}
	return b.String()
}

// writeRows writes rows as a markdown table under heads, its two value
// columns reading the samples of impls. A row with no sample in either
// column was not run (RELECT_PERF_ROWS) and is left out.
func (r *perfResults) writeRows(b *strings.Builder, rows []perfRow, impls [2]string, heads ...string) {
	bench.Header(b, heads, 2)
	for _, row := range rows {
		xs, ys := r.get(row.s, impls[0]), r.get(row.s, impls[1])
		if len(xs) == 0 && len(ys) == 0 {
			continue
		}
		x, y, ratio := row.f(xs, ys)
		bench.Row(b, row.id, row.what, x, y, ratio)
	}
	b.WriteString("\n")
}

// machine describes where the benchmark ran.
func (c *cluster) machine(t *testing.T) string {
	t.Helper()
	cpu := "?"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := "?"
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb float64
		if _, err := fmt.Sscanf(string(data), "MemTotal: %f kB", &kb); err == nil {
			mem = fmt.Sprintf("%.1f GiB", kb/(1<<20))
		}
	}
	apiVersion := "?"
	if v, err := c.client(t).Discovery().ServerVersion(); err == nil {
		apiVersion = v.GitVersion
	}
	etcdVersion := "?"
	if out, err := exec.Command(filepath.Join(os.Getenv(envAssets), "etcd"), "--version").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(line, "etcd Version: "); ok {
				etcdVersion = "v" + strings.TrimSpace(v)
			}
		}
	}
	race := ""
	if raceEnabled {
		race = " — built with -race: the figures are distorted"
	}
	return fmt.Sprintf("%d CPUs (%s), %s memory; %s %s/%s; kube-apiserver %s, etcd %s%s",
		runtime.NumCPU(), cpu, mem, runtime.Version(), runtime.GOOS, runtime.GOARCH, apiVersion, etcdVersion, race)
}

// ---- numbers ----

// first and second are xs[0] and xs[1], zero if xs is shorter.
func first(xs []float64) float64 {
	if len(xs) < 1 {
		return 0
	}
	return xs[0]
}

func second(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	return xs[1]
}

// durations are samples in nanoseconds, as durations.
func durations(xs []float64) []time.Duration {
	ds := make([]time.Duration, len(xs))
	for i, x := range xs {
		ds[i] = time.Duration(x)
	}
	return ds
}

// percentile is the nearest-rank percentile q (0 < q ≤ 1) of ds: with
// fewer than 100 values, p99 is the maximum.
func percentile(ds []time.Duration, q float64) time.Duration {
	if d, ok := bench.Quantile(ds, q); ok {
		return d
	}
	return -1
}

// ratioOf formats cg ÷ rel.
func ratioOf(cg, rel float64) string {
	switch r := cg / rel; {
	case math.IsNaN(r) || math.IsInf(r, 0) || rel <= 0 || cg < 0:
		return "—"
	case r >= 10:
		return fmt.Sprintf("%.0f×", r)
	default:
		return fmt.Sprintf("%.1f×", r)
	}
}

func fmtDur(d time.Duration) string {
	switch {
	case d < 0:
		return "—"
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.3f s", d.Seconds())
	}
}

func roundDur(d time.Duration) time.Duration { return d.Round(time.Second) }
