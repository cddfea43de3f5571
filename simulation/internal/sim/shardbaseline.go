package sim

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/relect/relect/internal/clientgoloop"
	"github.com/relect/relect/internal/leadership"
	leasewire "github.com/relect/relect/internal/wire"
	"k8s.io/klog/v2"
)

// The shard baseline (issue 29): the alternative docs/design.md rejects as
// Knative's buckets — one client-go election per shard, every candidate
// campaigning for every shard (the work itself hashed onto the shards, as
// Knative hashes keys onto buckets). Played with ClientGoLoop, each
// non-standby process runs, beside its election, one client-go loop
// (internal/clientgoloop) per shard on that shard's Lease, through its
// shard handle (so the schedule's faults hit it as they hit relect's shard
// Electors, and a Kill is a crash: crashLock), and while it leads a shard
// writes to the shard's store every RetryPeriod as relect's holders do —
// without a token, which it has none of (StorePlain). ShardFiguresOf reads
// the same figures off relect's histories and the baseline's, so that
// TestSimulationShards can put them side by side.

// runClientGo is the baseline's shard: one client-go loop on shard's Lease
// until ctx is done.
func (st *shardState) runClientGo(ctx context.Context, p *clientGoProcess, shard string) {
	r := st.r
	ctx = klog.NewContext(ctx, logr.Discard())
	loop, err := clientgoloop.New(p.loopConfig(ctx, st.handles[p.sl.idx].Clientset(), leasewire.ShardLeaseName(LeaseName, shard), func(ctx context.Context, n int64) {
		r.mu.Lock()
		i := len(st.h.Terms)
		st.h.Terms = append(st.h.Terms, ShardTerm{Candidate: p.sl.idx, Run: p.runID, Identity: p.identity,
			Shard: shard, Number: n, Start: r.now(), End: -1})
		r.mu.Unlock()
		r.poke()
		p.sl.startWrites(ctx, i, []termToken{{ShardStore(shard), ""}})
		<-ctx.Done()
		r.mu.Lock()
		st.h.Terms[i].End = r.now()
		r.mu.Unlock()
		r.poke()
	}))
	if err != nil {
		panic("sim: clientgoloop.New: " + err.Error())
	}
	loop.Run(ctx)
}

// ShardFigures are the figures of one run's shards that TestSimulationShards
// compares between relect and the baseline (CompareShards).
type ShardFigures struct {
	Terms int
	// Overlaps are the pairs of terms of one shard whose contexts were
	// alive at one instant, and Overlapped their time in all (a term
	// alive at the end counts until the end).
	Overlaps   int
	Overlapped time.Duration
	// LateWrites are the writes a shard's store took from an older term
	// after a newer term's write had reached it (LateWrites); relect's
	// stores, guarded by the shard's fence, refuse them.
	LateWrites int
	// Moves are the terms begun on a candidate other than the one whose
	// term of the shard began last; Changes the membership changes (runs
	// started after the first instant, and runs ended before the end).
	Moves, Changes int
	// Judged: the balance at the end is judged (see CompareShards); then
	// Busiest is the most shards an eligible candidate held at the end
	// over ⌈S/N⌉ (N the eligible candidates; 1 is as even as whole shards
	// allow), Within whether every one held ⌊S/N⌋ to ⌈S/N⌉ (what relect
	// promises), and Unheld the shards nobody held.
	Judged  bool
	Busiest float64
	Within  bool
	Unheld  int
	// Gap is the longest time a shard went without a holder after the
	// faults, from when some candidate could hold it (see CompareShards).
	Gap time.Duration
	// Calls are the shard calls to the Lease API (ShardHistory.Calls),
	// over Span, the run's length.
	Calls int
	Span  time.Duration
}

// CompareShards reads the ShardFigures of relect's history h and of the
// baseline's history base, of the same schedule, by the same rules: the
// balance at the end is judged for both only where relect's own checker
// judged it (SettledBalance) with no uncertain candidate and its eligible
// candidates are the very ones running in the baseline at the end (not a
// candidate whose registration relect's leader could not count on, by a
// 403 or a hand edit: it holds nothing by design); the unheld time is
// counted for both from ShardsAvailable(h) on.
func CompareShards(h, base *History) (rel, bas ShardFigures) {
	bal := SettledBalance(h)
	from, ok := ShardsAvailable(h)
	judged := bal.Excused == "" && len(bal.Uncertain) == 0 && slices.Equal(bal.Eligible, running(base, base.End-1))
	return shardFiguresOf(h, judged, bal.Eligible, from, ok), shardFiguresOf(base, judged, bal.Eligible, from, ok)
}

// running lists the non-standby candidates with a run alive at at.
func running(h *History, at time.Duration) []int {
	var out []int
	for c := range h.Candidates {
		if c < len(h.Standby) && h.Standby[c] {
			continue
		}
		for _, r := range h.Runs {
			if r.Candidate == c && r.Start <= at && at < r.Cancelled {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// shardFiguresOf reads h's ShardFigures: the balance at the end over
// eligible if judged, the unheld time from from if available.
func shardFiguresOf(h *History, judged bool, eligible []int, from time.Duration, available bool) ShardFigures {
	sh := h.Shards
	f := ShardFigures{Terms: len(sh.Terms), Calls: len(sh.Calls), Span: h.End}
	for _, name := range sh.Names {
		var terms []leadership.Span[holderRun, time.Duration]
		last := -1
		for _, t := range sh.Terms {
			if t.Shard != name {
				continue
			}
			terms = append(terms, leadership.Span[holderRun, time.Duration]{Who: holderRun{t.Candidate, t.Run}, From: t.Start, To: termEnd(h, t)})
			if last >= 0 && t.Candidate != last {
				f.Moves++
			}
			last = t.Candidate
		}
		for _, o := range leadership.Overlaps(terms, leadership.HalfOpen) {
			f.Overlaps++
			to := o.To
			if to == math.MaxInt64 {
				to = h.End
			}
			f.Overlapped += to - o.From
		}
		late, _ := LateWrites(shardStoreHistory(h, name), StoreFence)
		f.LateWrites += len(late)
	}
	var first time.Duration = math.MaxInt64
	for _, r := range h.Runs {
		first = min(first, r.Start)
	}
	for _, r := range h.Runs {
		if r.Start > first {
			f.Changes++
		}
		if r.Cancelled < h.End {
			f.Changes++
		}
	}
	if judged && len(eligible) > 0 {
		f.Judged = true
		at := h.End - 1
		held := map[int]int{}
		holders := map[string]bool{}
		for _, t := range sh.Terms {
			if t.Start <= at && at < termEnd(h, t) {
				held[t.Candidate]++
				holders[t.Shard] = true
			}
		}
		s, n := len(sh.Names), len(eligible)
		f.Unheld = s - len(holders)
		f.Within = f.Unheld == 0
		most := 0
		for _, c := range eligible {
			most = max(most, held[c])
			if k := held[c]; k < s/n || k > (s+n-1)/n {
				f.Within = false
			}
		}
		f.Busiest = float64(most) / float64((s+n-1)/n)
	}
	if available {
		for _, name := range sh.Names {
			for _, g := range unheld(h, name, from, h.End) {
				f.Gap = max(f.Gap, g[1]-g[0])
			}
		}
	}
	return f
}

// ShardComparison aggregates the ShardFigures of many runs per
// implementation. It is safe for concurrent use.
type ShardComparison struct {
	mu   sync.Mutex
	runs map[string][]ShardFigures
}

// Add records the figures of relect's run h and of the baseline's run
// base, of one schedule (CompareShards).
func (c *ShardComparison) Add(h, base *History) {
	rel, bas := CompareShards(h, base)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runs == nil {
		c.runs = map[string][]ShardFigures{}
	}
	c.runs[Relect.String()] = append(c.runs[Relect.String()], rel)
	c.runs[ClientGoLoop.String()] = append(c.runs[ClientGoLoop.String()], bas)
}

// Runs returns the figures recorded for impl.
func (c *ShardComparison) Runs(impl Impl) []ShardFigures {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.runs[impl.String()])
}

// Report is the side-by-side table of relect and the baseline.
func (c *ShardComparison) Report() string {
	type col struct {
		name                                   string
		runs, terms, overlaps, withOverlap     int
		late, withLate, moves, changes, judged int
		within, unheld, calls                  int
		overlapped, span                       time.Duration
		busiest                                []float64
		gaps                                   []time.Duration
	}
	var cols []col
	for _, impl := range Impls {
		k := col{name: impl.String()}
		if impl == ClientGoLoop {
			k.name = "client-go per shard"
		}
		for _, f := range c.Runs(impl) {
			k.runs++
			k.terms += f.Terms
			k.overlaps += f.Overlaps
			k.overlapped += f.Overlapped
			if f.Overlaps > 0 {
				k.withOverlap++
			}
			k.late += f.LateWrites
			if f.LateWrites > 0 {
				k.withLate++
			}
			k.moves += f.Moves
			k.calls += f.Calls
			k.span += f.Span
			k.changes += f.Changes
			k.gaps = append(k.gaps, f.Gap)
			if f.Judged {
				k.judged++
				k.busiest = append(k.busiest, f.Busiest)
				k.unheld += f.Unheld
				if f.Within {
					k.within++
				}
			}
		}
		sort.Float64s(k.busiest)
		slices.Sort(k.gaps)
		cols = append(cols, k)
	}
	q := func(xs []float64, p float64) string {
		if len(xs) == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", xs[int(p*float64(len(xs)-1))])
	}
	qd := func(xs []time.Duration, p float64) string {
		if len(xs) == 0 {
			return "-"
		}
		return xs[int(p*float64(len(xs)-1))].Round(10 * time.Millisecond).String()
	}
	rows := [][]string{{"", cols[0].name, cols[1].name}}
	row := func(label string, f func(k col) string) {
		r := []string{label}
		for _, k := range cols {
			r = append(r, f(k))
		}
		rows = append(rows, r)
	}
	row("runs", func(k col) string { return fmt.Sprint(k.runs) })
	row("shard terms", func(k col) string { return fmt.Sprint(k.terms) })
	row("two holders at once: pairs (runs)", func(k col) string { return fmt.Sprintf("%d (%d)", k.overlaps, k.withOverlap) })
	row("two holders at once: time in all", func(k col) string { return k.overlapped.Round(time.Millisecond).String() })
	row("late writes accepted (runs)", func(k col) string { return fmt.Sprintf("%d (%d)", k.late, k.withLate) })
	row("moves (per membership change)", func(k col) string {
		return fmt.Sprintf("%d (%.2f)", k.moves, float64(k.moves)/float64(max(k.changes, 1)))
	})
	row("settled runs judged", func(k col) string { return fmt.Sprint(k.judged) })
	row("busiest ÷ ⌈S/N⌉ at the end: median", func(k col) string { return q(k.busiest, 0.5) })
	row("busiest ÷ ⌈S/N⌉ at the end: p90", func(k col) string { return q(k.busiest, 0.9) })
	row("busiest ÷ ⌈S/N⌉ at the end: max", func(k col) string { return q(k.busiest, 1) })
	row("every candidate ⌊S/N⌋–⌈S/N⌉", func(k col) string {
		return fmt.Sprintf("%d (%.0f%%)", k.within, 100*float64(k.within)/float64(max(k.judged, 1)))
	})
	row("shards unheld at the end", func(k col) string { return fmt.Sprint(k.unheld) })
	row("longest unheld after the faults: median", func(k col) string { return qd(k.gaps, 0.5) })
	row("longest unheld after the faults: max", func(k col) string { return qd(k.gaps, 1) })
	row("shard Lease calls per simulated minute", func(k col) string {
		return fmt.Sprintf("%.0f", float64(k.calls)/max(k.span.Minutes(), 1e-9))
	})
	widths := make([]int, 3)
	for _, r := range rows {
		for i, x := range r {
			widths[i] = max(widths[i], len([]rune(x)))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		for i, x := range r {
			pad := strings.Repeat(" ", widths[i]-len([]rune(x)))
			if i == 0 {
				b.WriteString(x + pad)
			} else {
				b.WriteString("  " + pad + x)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}
