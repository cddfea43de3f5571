package e2e

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/relect/relect/e2e/internal/history"
	"github.com/relect/relect/internal/bench"
)

// rangeReport is everything TestShardRangeMeasure prints.
type rangeReport struct {
	size        rangeSize
	mode        string
	off, on     received // the relect fleet settled, gate off and on
	static      received // the static fleet, gate on
	relect      []rangeCover
	partition   *partitionRun // nil: not run
	staticCover []rangeCover
	safety      coverage // relect, from settled to the end
	cold        moves
	warm        *warmRun // nil: not run
	took        time.Duration
}

// warmRun is what the fleet with warm takers measured.
type warmRun struct {
	on     received
	covers []rangeCover
	safety coverage
	moves  moves
}

// rangeCover is one scenario's coverage.
type rangeCover struct {
	rangeWindow
	coverage
}

func coversOf(hashes []uint64, hs []holding, ws []rangeWindow) []rangeCover {
	var out []rangeCover
	for _, w := range ws {
		out = append(out, rangeCover{w, coverOf(hashes, hs, w.from, w.to)})
	}
	return out
}

// received is what each process of a settled fleet had received when it
// settled (at): by process, the sum over the ranges it held since it
// started (their counts when they synced, or when they stopped).
type received struct {
	at     time.Time
	lt     leaseTiming   // the relect processes' durations
	took   time.Duration // from the first start to settled
	per    []counts
	ranges []int // ranges held at settled, by process
}

// settle starts size.procs processes, waits until the fleet is settled and
// measures what each received; it checks each held range's counts
// against the objects' uid hashes: kept exactly those in the range, and
// sent those only (filters) or all of them.
func (f *rangeFleet) settle(hashes []uint64, filters bool) received {
	f.t.Helper()
	start := time.Now()
	for slot := range f.size.procs {
		f.start(slot)
	}
	at := f.await(f.settleTime(), "the "+f.lease+" fleet settled", f.settled)
	rec := received{at: at, lt: f.lt, took: at.Sub(start)}
	if f.warm {
		// The leader names the takers once the holders run: measure once
		// every range is warm on two processes (its holder and its
		// taker), or when that has not happened within a settle time.
		if !bench.Await(f.settleTime(), 100*time.Millisecond, f.warmOnTwo) {
			f.t.Logf("warm: not every range warm on two processes within %v", f.settleTime())
		}
		at = time.Now()
	}
	for _, p := range f.live() {
		var sum counts
		held := 0
		for _, h := range holdingsOf(f.t, p.id, p.records(), time.Time{}) {
			switch {
			case h.iv.Start.After(at):
			case !h.iv.Open:
				sum = sum.add(h.atEnd)
			default:
				held++
				sum = sum.add(h.atSync)
				f.checkCounts(p.id, h, hashes, filters)
			}
		}
		if f.warm {
			sum = warmReceived(p.records(), at)
		}
		rec.per = append(rec.per, sum)
		rec.ranges = append(rec.ranges, held)
	}
	return rec
}

// warmOnTwo reports whether every range's Warm informer has synced on
// two running processes or more, and not stopped.
func (f *rangeFleet) warmOnTwo() bool {
	on := map[string]int{}
	for _, p := range f.live() {
		warm := map[string]bool{}
		for _, r := range p.records() {
			switch {
			case r.Kind != history.KindEvent:
			case r.Event == "warm-synced":
				warm[r.Shard] = true
			case r.Event == "warm-off":
				delete(warm, r.Shard)
			}
		}
		for sh := range warm {
			on[sh]++
		}
	}
	for sh := range f.size.shards {
		if on[fmt.Sprint(sh)] < 2 {
			return false
		}
	}
	return true
}

// warmReceived is what a process's Warm informers (of the ranges it held
// and of those it was the taker of) had received when they synced, of
// those that synced by at.
func warmReceived(recs []history.Record, at time.Time) counts {
	var sum counts
	for _, r := range recs {
		if r.Kind == history.KindEvent && r.Event == "warm-synced" && !r.Time().After(at) {
			sum = sum.add(countsOf(r))
		}
	}
	return sum
}

// checkCounts checks what a synced range's informer received.
func (f *rangeFleet) checkCounts(id string, h holding, hashes []uint64, filters bool) {
	f.t.Helper()
	var in int64
	for _, x := range hashes {
		if h.r.contains(x) {
			in++
		}
	}
	sent := int64(len(hashes))
	if filters {
		sent = in
	}
	if h.atSync.kept != in || h.atSync.objects != sent {
		f.t.Errorf("%s, range %s: the informer kept %d of %d objects sent, want %d of %d (apiserver filters: %v)",
			id, h.iv.Shard, h.atSync.kept, h.atSync.objects, in, sent, filters)
	}
}

// moves are, for the range terms that ended after the fleet settled and
// whose range then ran on another process, the time from the end to the
// next holder's first object handled, by why the range moved: its holder
// was stopped (SIGTERM; its ranges go to their takers), it was rebalanced
// onto a joining process while its holder ran on, or its holder was
// killed (the end is its death as the test saw it); and, for the first
// two, to the next holder's term. A term that ended while its holder was
// cut off (the partition, reported apart) is left out.
type moves struct {
	stopped, rebalanced, killed []time.Duration
	gaps                        []time.Duration
}

// firstReconciles returns the moves since the fleet settled (since).
func (f *rangeFleet) firstReconciles(since time.Time) moves {
	var m moves
	hs := f.holdings()
	slices.SortFunc(hs, func(a, b holding) int { return a.iv.Start.Compare(b.iv.Start) })
	for i, h := range hs {
		if h.iv.End.Before(since) || f.liveOpen(h) || f.proc(h.iv.Candidate).cutOffAt(h.iv.End) {
			continue
		}
		for _, n := range hs[i+1:] {
			if n.iv.Shard != h.iv.Shard || n.iv.Candidate == h.iv.Candidate || !n.iv.Start.After(h.iv.Start) {
				continue
			}
			if !n.first.IsZero() {
				d := n.first.Sub(h.iv.End)
				switch sent := f.proc(h.iv.Candidate).stopped; {
				case h.iv.Open:
					m.killed = append(m.killed, d)
				case !sent.IsZero() && !sent.After(h.iv.End):
					m.stopped = append(m.stopped, d)
				default:
					m.rebalanced = append(m.rebalanced, d)
				}
				if !h.iv.Open {
					m.gaps = append(m.gaps, n.iv.Start.Sub(h.iv.End))
				}
			}
			break
		}
	}
	return m
}

// proc is the process of identity id.
func (f *rangeFleet) proc(id string) *rangeProc {
	for _, p := range f.procs {
		if p.id == id {
			return p
		}
	}
	f.t.Fatalf("no process %s", id)
	return nil
}

// liveOpen reports whether h is still held (open on a running process).
func (f *rangeFleet) liveOpen(h holding) bool {
	for _, p := range f.procs {
		if p.id == h.iv.Candidate {
			return h.iv.Open && !p.exited()
		}
	}
	return false
}

// table is the report, in markdown.
func (r *rangeReport) table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d ConfigMaps; %d processes; relect: %d range shards of the uid; static: range i of %d; %s=%s, %s in all\n\n",
		r.size.objects, r.size.procs, r.size.shards, r.size.procs, envRanges, r.mode, ms(r.took))
	bench.Header(&b, []string{"fleet, settled", "apiserver filters", "ranges per process", "objects sent per process: mean, max ÷ mean",
		"bytes per process: mean, max ÷ mean", "settled after"}, 2)
	type recRow struct {
		name, gate string
		rec        received
	}
	rows := []recRow{{"relect, " + r.off.lt.String(), "no (gate off)", r.off}, {"relect, " + r.on.lt.String(), "yes (gate on)", r.on},
		{"static", "yes (gate on)", r.static}}
	if r.warm != nil {
		rows = append(rows, recRow{"relect, warm takers (Warm's informers: ranges held and taken)", "yes (gate on)", r.warm.on})
	}
	for _, row := range rows {
		objs, bytes := make([]float64, len(row.rec.per)), make([]float64, len(row.rec.per))
		for i, c := range row.rec.per {
			objs[i], bytes[i] = float64(c.objects), float64(c.bytes)
		}
		bench.Row(&b, row.name, row.gate, fmt.Sprintf("%d–%d", slices.Min(row.rec.ranges), slices.Max(row.rec.ranges)),
			fmt.Sprintf("%.0f, %.2f", bench.Mean(objs), slices.Max(objs)/bench.Mean(objs)),
			fmt.Sprintf("%.0f KiB, %.2f", bench.Mean(bytes)/1024, slices.Max(bytes)/bench.Mean(bytes)), ms(row.rec.took))
	}
	b.WriteString("\n")
	bench.Header(&b, []string{"scheme", "scenario (gate on, " + r.on.lt.String() + ")", "window", "range terms begun", "object pairs held twice at one instant", "duplicate object-s", "unowned object-s"}, 2)
	for _, c := range r.relect {
		coverRow(&b, "relect", c)
	}
	if r.warm != nil {
		for _, c := range r.warm.covers {
			coverRow(&b, "relect, warm takers", c)
		}
	}
	for _, c := range r.staticCover {
		coverRow(&b, "static", c)
	}
	fmt.Fprintf(&b, "\nrelect, from settled to the end: %d object pairs held twice at one instant; %.1f unowned object-s in %s.\n",
		len(r.safety.overlaps), r.safety.unowned, ms(r.safety.window))
	if r.partition != nil {
		fmt.Fprintf(&b, "%s.\n", r.partition)
	}
	if i := slices.IndexFunc(r.relect, func(c rangeCover) bool { return c.name == rollingName(false) }); i >= 0 && len(r.staticCover) >= 1 && r.staticCover[0].unowned > 0 {
		rel, st := r.relect[i], r.staticCover[0]
		fmt.Fprintf(&b, "rolling restart, maxSurge 0: relect's unowned object-s ÷ static's = %.3f (target ≤ 0.01).\n", rel.unowned/st.unowned)
		// The static scheme's unowned object-seconds are each restart's
		// gap (old process gone → new one holding) times the objects of
		// its range, N × (objects ÷ N) × gap in all; relect's do not
		// grow with the gap (its ranges move between running processes).
		perGap := float64(r.size.objects) // the static scheme's object-s per second of gap per restart
		fmt.Fprintf(&b, "the static scheme's gap per restart here: %s (a process exec'd at once); relect's unowned object-s would be 1/100 of its at a gap of %.1f s per restart (a pod's replacement scheduled and started), and equal at %s.\n",
			ms(time.Duration(st.unowned/perGap*float64(time.Second))), 100*rel.unowned/perGap, ms(time.Duration(rel.unowned/perGap*float64(time.Second))))
	}
	fmt.Fprintf(&b, "a moved range, cold (its next holder lists when its term starts): %s.\n", r.cold)
	if r.warm != nil {
		fmt.Fprintf(&b, "a moved range, warm takers (Warm's informer; target p99 ≤ 100 ms after a stop): %s; from settled to the end: %d object pairs held twice at one instant.\n",
			r.warm.moves, len(r.warm.safety.overlaps))
	}
	return b.String()
}

func coverRow(b *strings.Builder, scheme string, c rangeCover) {
	bench.Row(b, scheme, c.name, ms(c.window), fmt.Sprint(c.starts), fmt.Sprint(len(c.overlaps)), fmt.Sprintf("%.1f", c.duplicate), fmt.Sprintf("%.1f", c.unowned))
}

func (m moves) String() string {
	return fmt.Sprintf("its holder stopped → the next holder's first object handled %s; rebalanced onto a joining process, the same %s; "+
		"holder killed, its death → first object %s; a graceful end → the next term %s",
		quantiles(m.stopped), quantiles(m.rebalanced), quantiles(m.killed), quantiles(m.gaps))
}

// quantiles is "p50 / p99 / max (n)".
func quantiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	p50, _ := bench.Quantile(ds, 0.5)
	p99, _ := bench.Quantile(ds, 0.99)
	return fmt.Sprintf("p50 %s / p99 %s / max %s (%d)", ms(p50), ms(p99), ms(slices.Max(ds)), len(ds))
}
