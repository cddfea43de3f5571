package e2e

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/relect/relect/e2e/internal/history"
)

// hashRange is a range of the 64-bit uid hash, read from the selector a
// holder logged: [lo, hi), or [lo, 2⁶⁴) if top. The test's own reading
// of the KEP's selector, not shardrange's.
type hashRange struct {
	lo, hi uint64
	top    bool
}

func (r hashRange) contains(h uint64) bool { return h >= r.lo && (r.top || h < r.hi) }

var selectorBounds = regexp.MustCompile(`^shardRange\(object\.metadata\.uid, '0x([0-9a-f]{1,16})', '0x([0-9a-f]{1,17})'\)$`)

// parseRange reads "shardRange(object.metadata.uid, '0x…', '0x…')".
func parseRange(sel string) (hashRange, error) {
	m := selectorBounds.FindStringSubmatch(sel)
	if m == nil {
		return hashRange{}, fmt.Errorf("not a uid range: %q", sel)
	}
	lo, err := strconv.ParseUint(m[1], 16, 64)
	if err != nil {
		return hashRange{}, err
	}
	if m[2] == "10000000000000000" {
		return hashRange{lo: lo, top: true}, nil
	}
	hi, err := strconv.ParseUint(m[2], 16, 64)
	if err != nil || hi <= lo {
		return hashRange{}, fmt.Errorf("bad upper bound in %q: %v", sel, err)
	}
	return hashRange{lo: lo, hi: hi}, nil
}

// holding is one range held by one process for one term (or, static,
// for the process's life): its interval (history.ShardIntervals: from the
// "on" to the "off" written once the informer stopped, or, open, to the
// process's death), its range, and its informer's events.
type holding struct {
	iv     history.Interval
	r      hashRange
	first  time.Time // the handler saw its first object (zero: never)
	synced time.Time // the informer synced (zero: never)
	atSync counts    // what it had received when it synced
	atEnd  counts    // what it had received when it stopped (zero if open)
}

// counts are what one range's informer received (history.Record's).
type counts struct{ objects, kept, bytes int64 }

func countsOf(r history.Record) counts { return counts{r.Objects, r.Kept, r.Bytes} }

func (c counts) add(d counts) counts {
	return counts{c.objects + d.objects, c.kept + d.kept, c.bytes + d.bytes}
}

// holdingsOf reads the holdings of one process's history; dead closes the
// open ones (zero: now).
func holdingsOf(t *testing.T, id string, recs []history.Record, dead time.Time) []holding {
	t.Helper()
	type key struct {
		shard string
		term  int64
	}
	ranges := map[string]hashRange{}
	first, synced, atSync, atEnd := map[key]time.Time{}, map[key]time.Time{}, map[key]counts{}, map[key]counts{}
	for _, r := range recs {
		k := key{r.Shard, r.Term}
		switch {
		case r.Kind == history.KindOn && r.View == history.ViewShard:
			hr, err := parseRange(r.Range)
			if err != nil {
				t.Fatalf("%s: %v", id, err)
			}
			ranges[r.Shard] = hr
		case r.Kind == history.KindOff && r.View == history.ViewShard:
			atEnd[k] = countsOf(r)
		case r.Kind == history.KindEvent && r.Event == "first":
			first[k] = r.Time()
		case r.Kind == history.KindEvent && r.Event == "synced":
			synced[k], atSync[k] = r.Time(), countsOf(r)
		}
	}
	var out []holding
	for sh, ivs := range history.ShardIntervals(id, recs, dead) {
		for _, iv := range ivs {
			k := key{sh, iv.Term}
			out = append(out, holding{iv: iv, r: ranges[sh], first: first[k], synced: synced[k], atSync: atSync[k], atEnd: atEnd[k]})
		}
	}
	return out
}

// coverage is what the holdings did to the objects in a window.
type coverage struct {
	window time.Duration
	// unowned and duplicate are object-seconds: the time each object
	// was held by no process, and by two or more at once, summed over
	// the objects.
	unowned, duplicate float64
	// overlaps are the pairs of holdings of different processes that
	// share an object and an instant (touching counts) in the window.
	overlaps []history.Overlap
	// starts are the holdings begun in the window: each a move (or a
	// process's start) after which the range's informer lists.
	starts int
}

// coverOf computes the coverage of the objects (their uid hashes) by hs in
// [from, to]. The hash space is cut at every range bound into segments
// that each holding covers whole or not at all; each segment's objects
// share its holders.
func coverOf(hashes []uint64, hs []holding, from, to time.Time) coverage {
	cut := []uint64{0}
	for _, h := range hs {
		cut = append(cut, h.r.lo)
		if !h.r.top {
			cut = append(cut, h.r.hi)
		}
	}
	slices.Sort(cut)
	cut = slices.Compact(cut)
	objects := make([]int, len(cut)) // segment k is [cut[k], cut[k+1])
	for _, x := range hashes {
		objects[sort.Search(len(cut), func(i int) bool { return cut[i] > x })-1]++
	}
	c := coverage{window: to.Sub(from)}
	for _, h := range hs {
		if !h.iv.Start.Before(from) && !h.iv.Start.After(to) {
			c.starts++
		}
	}
	seen := map[[2]string]bool{}
	for k, n := range objects {
		if n == 0 {
			continue
		}
		var ivs []history.Interval
		for _, h := range hs {
			if h.r.contains(cut[k]) && !h.iv.End.Before(from) && !h.iv.Start.After(to) {
				ivs = append(ivs, h.iv)
			}
		}
		none, two := sweep(ivs, from, to)
		c.unowned += float64(n) * none.Seconds()
		c.duplicate += float64(n) * two.Seconds()
		for _, o := range history.Overlaps(ivs) {
			id := [2]string{o.A.String(), o.B.String()}
			if !seen[id] {
				seen[id] = true
				c.overlaps = append(c.overlaps, o)
			}
		}
	}
	return c
}

// sweep returns how long in [from, to] none of ivs, and two or more of
// them, were open.
func sweep(ivs []history.Interval, from, to time.Time) (none, two time.Duration) {
	type edge struct {
		at time.Time
		d  int
	}
	var edges []edge
	for _, iv := range ivs {
		edges = append(edges, edge{maxTime(iv.Start, from), +1}, edge{minTime(iv.End, to), -1})
	}
	edges = append(edges, edge{to, 0})
	slices.SortStableFunc(edges, func(a, b edge) int { return a.at.Compare(b.at) })
	open, last := 0, from
	for _, e := range edges {
		switch d := e.at.Sub(last); {
		case open == 0:
			none += d
		case open >= 2:
			two += d
		}
		open, last = open+e.d, e.at
	}
	return none, two
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// TestRangeCoverage checks TestShardRangeMeasure's arithmetic on a
// history worked out by hand (no control plane): the lower half of the
// hash space holds 3 objects, the upper 1; a holds the lower half for
// 0–100 ms, b from 150 ms and d from 250 ms to the end (300 ms), c the
// upper half throughout.
func TestRangeCoverage(t *testing.T) {
	lower, err := parseRange("shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')")
	if err != nil {
		t.Fatal(err)
	}
	upper, err := parseRange("shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	held := func(who string, r hashRange, from, to int) holding {
		return holding{r: r, iv: history.Interval{Candidate: who, View: history.ViewShard, Shard: who, Start: at(from), End: at(to)}}
	}
	hs := []holding{held("a", lower, 0, 100), held("b", lower, 150, 300), held("c", upper, 0, 300), held("d", lower, 250, 300)}
	hashes := []uint64{1, 1 << 62, 1<<63 - 1, 1 << 63}
	c := coverOf(hashes, hs, at(0), at(300))
	if c.window != 300*time.Millisecond || !near(c.unowned, 3*0.05) || !near(c.duplicate, 3*0.05) || len(c.overlaps) != 1 || c.starts != 4 {
		t.Errorf("coverage: window %v, unowned %.3f object-s (want 0.150), duplicate %.3f (want 0.150), overlaps %v (want b and d), %d begun (want 4)",
			c.window, c.unowned, c.duplicate, c.overlaps, c.starts)
	}
	if c := coverOf(hashes, hs, at(50), at(200)); !near(c.unowned, 0.15) || c.duplicate != 0 || len(c.overlaps) != 0 {
		t.Errorf("in 50–200 ms: unowned %.3f (want 0.150), duplicate %.3f, overlaps %v", c.unowned, c.duplicate, c.overlaps)
	}
	if _, err := parseRange("shardRange(object.metadata.namespace, '0x0', '0x1')"); err == nil {
		t.Error("a namespace range read as a uid range")
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
