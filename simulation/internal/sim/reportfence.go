package sim

import (
	"fmt"
	"strings"
)

// fenceTotals is what Totals keeps of one store's writes (store.go).
type fenceTotals struct {
	writes, accepted, refused int
	maybe, lost               int // outcome unknown to the writer; of all writes, never applied
	late, lateSchedules       int // LateWrites, and schedules with any
	refusedNewest             int // refused, though no newer term had written
	checked                   bool
	lin                       map[string]int // porcupine's verdicts
}

// add adds the writes in h to the store of r, and what r found of them.
func (ft *fenceTotals) add(h *History, r StoreResult) {
	for _, w := range h.Writes {
		if w.Store != r.Store {
			continue
		}
		ft.writes++
		switch {
		case w.Answered < 0:
			ft.maybe++
		case w.Accepted:
			ft.accepted++
		default:
			ft.refused++
		}
		if w.Applied < 0 {
			ft.lost++
		}
	}
	ft.refusedNewest += r.RefusedNewest
	if n := len(r.Late); n > 0 {
		ft.late += n
		ft.lateSchedules++
	}
	if r.Lin != nil {
		ft.checked = true
		if ft.lin == nil {
			ft.lin = map[string]int{}
		}
		ft.lin[r.Lin.Result]++
	}
}

// StoreResult is what Add learnt of one store of a history: its late
// writes, and porcupine's verdict (nil if not checked: StorePlain, a
// register every write may overwrite, cannot be other than linearizable).
type StoreResult struct {
	Store         Store
	Late          []LateWrite
	RefusedNewest int // see LateWrites
	Lin           *Linearizability
}

// checkStores checks every store of h: the fencing property and, but for
// StorePlain, linearizability (porcupine, outside any synctest bubble).
func checkStores(h *History) []StoreResult {
	var out []StoreResult
	for _, s := range Stores(h) {
		r := StoreResult{Store: s}
		r.Late, r.RefusedNewest = LateWrites(h, s)
		if s != StorePlain {
			l := CheckLinearizable(h, s, LinearizabilityTimeout)
			r.Lin = &l
		}
		out = append(out, r)
	}
	return out
}

// fenceColumns are the columns of FencingTable: a label, and the cell of one
// store's totals.
var fenceColumns = []struct {
	label string
	cell  func(ft *fenceTotals) string
}{
	{"writes", func(ft *fenceTotals) string { return fmt.Sprint(ft.writes) }},
	{"accepted", func(ft *fenceTotals) string { return fmt.Sprint(ft.accepted) }},
	{"refused", func(ft *fenceTotals) string { return fmt.Sprint(ft.refused) }},
	{"maybe applied (outcome unknown; lost)", func(ft *fenceTotals) string { return fmt.Sprintf("%d (%d)", ft.maybe, ft.lost) }},
	{"refused, no newer term had written", func(ft *fenceTotals) string { return fmt.Sprint(ft.refusedNewest) }},
	{"late writes accepted (schedules)", func(ft *fenceTotals) string {
		return fmt.Sprintf("%d (%d)", ft.late, ft.lateSchedules)
	}},
	{"porcupine: linearizable / not / unknown", func(ft *fenceTotals) string {
		if !ft.checked {
			return "—"
		}
		return fmt.Sprintf("%d / %d / %d", ft.lin[Linearizable], ft.lin[NotLinearizable], ft.lin[LinUnknown])
	}},
}

// FencingTable formats the leaders' writes to the stores (store.go), per
// implementation and store, as a markdown table: how many were sent,
// accepted, refused, of unknown outcome (and of those, lost); the refused
// writes of the newest term, and the late writes accepted — from an older
// term after a newer term's had reached the store (LateWrites): violations
// for relect's fence, counted for the others — and porcupine's verdicts on
// the histories.
func FencingTable(impls []Impl, totals map[Impl]*Totals) string {
	var b strings.Builder
	b.WriteString("| implementation | token |")
	for _, c := range fenceColumns {
		fmt.Fprintf(&b, " %s |", c.label)
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---:|", len(fenceColumns)) + "\n")
	for _, impl := range impls {
		for _, s := range storesOf(impl) {
			ft := totals[impl].fenceTotals(s)
			fmt.Fprintf(&b, "| %s | %s |", impl, s)
			for _, c := range fenceColumns {
				fmt.Fprintf(&b, " %s |", c.cell(&ft))
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// fenceTotals returns a copy of the totals of store s.
func (t *Totals) fenceTotals(s Store) fenceTotals {
	t.mu.Lock()
	defer t.mu.Unlock()
	ft, ok := t.fencing[s]
	if !ok {
		return fenceTotals{}
	}
	c := *ft
	c.lin = map[string]int{}
	for k, v := range ft.lin {
		c.lin[k] = v
	}
	return c
}
