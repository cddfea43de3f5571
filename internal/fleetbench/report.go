package fleetbench

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/relect/relect/internal/bench"
)

// The report: every table is a list of columns, each a measure of the
// changes of one implementation, and every cell the median and the maximum
// of that measure over the changes of its row.

// measure is one figure of a change.
type measure struct {
	name   string
	of     func(*Change) float64
	format func(float64) string
}

var (
	beyond = measure{"calls beyond the steady background",
		func(c *Change) float64 { return float64(c.Beyond()) }, count}
	total = measure{"all calls in the window",
		func(c *Change) float64 { return float64(c.Total()) }, count}
	peak = measure{"most calls in any 10 ms",
		func(c *Change) float64 { return float64(c.Peak(10 * time.Millisecond)) }, count}
	leaderless = measure{"no leader for",
		func(c *Change) float64 { return float64(c.Latency()) }, duration}
)

func count(v float64) string { return fmt.Sprintf("%.0f", v) }

func duration(v float64) string {
	d := time.Duration(v)
	if d < time.Second {
		return fmt.Sprintf("%d ms", d.Round(time.Millisecond).Milliseconds())
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// column is one column of a table: a measure of one implementation.
type column struct {
	m    measure
	impl bench.Impl
}

// stats returns the median and the maximum of m over changes (nearest
// rank: with an even count, the lower middle value); ok is false if there
// are none.
func stats(m measure, changes []*Change) (median, maximum float64, ok bool) {
	vs := make([]float64, 0, len(changes))
	for _, c := range changes {
		vs = append(vs, m.of(c))
	}
	median, ok = bench.Quantile(vs, 0.5)
	maximum, _ = bench.Quantile(vs, 1)
	return median, maximum, ok
}

// cell formats the median and the maximum of c over changes.
func (c column) cell(changes []*Change) string {
	med, maxi, ok := stats(c.m, changes)
	if !ok {
		return "–"
	}
	return c.m.format(med) + " / " + c.m.format(maxi)
}

// results indexes one run's results.
type results []*Result

// sizes returns the fleet sizes, in increasing order.
func (rs results) sizes() []int {
	var ns []int
	for _, r := range rs {
		if !slices.Contains(ns, r.N) {
			ns = append(ns, r.N)
		}
	}
	slices.Sort(ns)
	return ns
}

// find returns the result of impl at n, or nil.
func (rs results) find(impl bench.Impl, n int) *Result {
	for _, r := range rs {
		if r.Impl == impl && r.N == n {
			return r
		}
	}
	return nil
}

// changes returns the changes of impl at n in scenario sc.
func (rs results) changes(impl bench.Impl, n int, sc Scenario) []*Change {
	r := rs.find(impl, n)
	if r == nil {
		return nil
	}
	var out []*Change
	for _, c := range r.Changes {
		if c.Scenario == sc {
			out = append(out, c)
		}
	}
	return out
}

// scenarios returns the scenarios played, in report order.
func (rs results) scenarios() []Scenario {
	var out []Scenario
	for _, sc := range Scenarios {
		for _, r := range rs {
			if slices.ContainsFunc(r.Changes, func(c *Change) bool { return c.Scenario == sc }) {
				out = append(out, sc)
				break
			}
		}
	}
	return out
}

// The report's two tables.
var (
	changeColumns = []column{
		{beyond, bench.Relect}, {beyond, bench.ClientGoLoop},
		{peak, bench.Relect}, {peak, bench.ClientGoLoop},
		{leaderless, bench.Relect}, {leaderless, bench.ClientGoLoop},
	}
	windowColumns   = []column{{total, bench.Relect}, {total, bench.ClientGoLoop}}
	windowScenarios = []Scenario{{}, {Crash: true}}
)

// Report returns the markdown report of one run's results: the changes
// table, the steady background and whole windows, and the targets of
// issue 12 judged at the largest N.
func Report(rs []*Result) string {
	all := results(rs)
	var b strings.Builder
	b.WriteString("Each cell: median / maximum over the changes of its row.\n\n")
	header(&b, []string{"N", "change"}, changeColumns)
	for _, n := range all.sizes() {
		for _, sc := range all.scenarios() {
			fmt.Fprintf(&b, "| %d | %v |", n, sc)
			for _, c := range changeColumns {
				fmt.Fprintf(&b, " %s |", c.cell(all.changes(c.impl, n, sc)))
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("\nThe steady background (calls per second with nobody changing, over one LeaseDuration; the watches open at its end), and every call of a change's window, background included:\n\n")
	heads := []string{"N", "steady calls/s, relect", "steady calls/s, client-go loop", "watches on the election's Lease (line Lease), relect", "… client-go loop"}
	for _, sc := range windowScenarios {
		for _, c := range windowColumns {
			heads = append(heads, fmt.Sprintf("%s, %v, %v", c.m.name, sc, c.impl))
		}
	}
	bench.Header(&b, heads, 0)
	for _, n := range all.sizes() {
		cells := []string{fmt.Sprint(n), steady(all.find(bench.Relect, n)), steady(all.find(bench.ClientGoLoop, n)),
			watches(all.find(bench.Relect, n)), watches(all.find(bench.ClientGoLoop, n))}
		for _, sc := range windowScenarios {
			for _, c := range windowColumns {
				cells = append(cells, c.cell(all.changes(c.impl, n, sc)))
			}
		}
		bench.Row(&b, cells...)
	}
	b.WriteString("\n")
	b.WriteString(all.targets())
	return b.String()
}

func header(b *strings.Builder, first []string, cols []column) {
	heads := slices.Clone(first)
	for _, c := range cols {
		heads = append(heads, c.m.name+", "+c.impl.String())
	}
	bench.Header(b, heads, len(first))
}

func steady(r *Result) string {
	if r == nil {
		return "–"
	}
	return fmt.Sprintf("%.2f", r.Steady)
}

func watches(r *Result) string {
	if r == nil {
		return "–"
	}
	if r.LineWatches == 0 {
		return fmt.Sprint(r.Watches)
	}
	return fmt.Sprintf("%d (%d)", r.Watches, r.LineWatches)
}

// target is one of issue 12's targets for relect: the maximum of m over the
// changes of the scenarios named must not exceed limit.
type target struct {
	m         measure
	limit     float64
	scenarios []Scenario
}

var targets = []target{
	{beyond, 12, Scenarios},
	{peak, 6, Scenarios},
	{leaderless, float64(100 * time.Millisecond), []Scenario{{}}},
}

// targets judges relect's changes at the largest N against each target.
func (rs results) targets() string {
	ns := rs.sizes()
	if len(ns) == 0 {
		return ""
	}
	n := ns[len(ns)-1]
	var b strings.Builder
	fmt.Fprintf(&b, "Targets (issue 12), relect at N = %d, every change of the scenarios named:\n\n", n)
	for _, t := range targets {
		var changes []*Change
		var names []string
		for _, sc := range t.scenarios {
			if cs := rs.changes(bench.Relect, n, sc); len(cs) > 0 {
				changes = append(changes, cs...)
				names = append(names, sc.String())
			}
		}
		_, worst, ok := stats(t.m, changes)
		if !ok {
			continue
		}
		verdict := "met"
		if worst > t.limit {
			verdict = "MISSED"
		}
		fmt.Fprintf(&b, "- %s ≤ %s (%s): %s, at most %s\n", t.m.name, t.m.format(t.limit), strings.Join(names, "; "), verdict, t.m.format(worst))
	}
	return b.String()
}

// Missed returns relect's changes at the largest N that miss a target, for
// their call logs.
func Missed(rs []*Result) []*Change {
	all := results(rs)
	ns := all.sizes()
	if len(ns) == 0 {
		return nil
	}
	var out []*Change
	for _, t := range targets {
		for _, sc := range t.scenarios {
			for _, c := range all.changes(bench.Relect, ns[len(ns)-1], sc) {
				if t.m.of(c) > t.limit && !slices.Contains(out, c) {
					out = append(out, c)
				}
			}
		}
	}
	return out
}
