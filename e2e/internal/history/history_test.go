package history

import (
	"bytes"
	"reflect"
	"testing"
	"time"
)

func at(ms int64) int64 {
	return time.Unix(1000, 0).Add(time.Duration(ms) * time.Millisecond).UnixNano()
}

func TestWriterParseRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	in := []Record{
		{T: at(0), Kind: KindStart, Identity: "a", Mode: "relect", PID: 7},
		{T: at(1), Kind: KindOn, View: ViewRelect, Term: 3},
		{T: at(9), Kind: KindOff, View: ViewRelect, Term: 3, LastTrue: at(8)},
		{T: at(10), Kind: KindExit, Calls: map[string]uint64{"update/ok": 4}, BucketWait: 7},
	}
	for _, r := range in {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	// After the exit record: dropped (client-go's late OnNewLeader).
	if err := w.Write(Record{T: at(11), Kind: KindEvent, Event: "OnNewLeader"}); err != nil {
		t.Fatal(err)
	}
	buf.WriteString(`{"t":1,"kind":"on"`) // a record being written: ignored
	got, err := Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(in) {
		t.Fatalf("parsed %d records, want %d", len(got), len(in))
	}
	for i := range in {
		if !reflect.DeepEqual(got[i], in[i]) {
			t.Errorf("record %d: got %+v, want %+v", i, got[i], in[i])
		}
	}
}

func TestIntervalsAndOverlaps(t *testing.T) {
	a := []Record{
		{T: at(0), Kind: KindOn, View: ViewRelect, Term: 1},
		{T: at(100), Kind: KindOff, View: ViewRelect, Term: 1, LastTrue: at(99)},
		{T: at(500), Kind: KindOn, View: ViewRelect, Term: 3},
		{T: at(2000), Kind: KindOff, View: ViewRelect, Term: 3, LastTrue: at(700)}, // stopped from 700 to 2000
		{T: at(2500), Kind: KindOn, View: ViewRelect, Term: 5},                     // never closed: killed
	}
	b := []Record{
		{T: at(99), Kind: KindOn, View: ViewRelect, Term: 2}, // before a's first false sample
		{T: at(300), Kind: KindOff, View: ViewRelect, Term: 2, LastTrue: at(290)},
		{T: at(310), Kind: KindOn, View: ViewIsLeader}, // another view: ignored
	}
	dead := time.Unix(0, at(2600))
	ia := Intervals("a", a, ViewRelect, dead)
	ib := Intervals("b", b, ViewRelect, time.Time{})
	if len(ia) != 3 || !ia[2].Open || !ia[2].End.Equal(dead) || !ia[0].End.Equal(time.Unix(0, at(100))) ||
		!ia[1].End.Equal(time.Unix(0, at(700)).Add(MaxSampleGap)) {
		t.Fatalf("intervals of a: %v", ia)
	}
	if len(ib) != 1 || ib[0].Open {
		t.Fatalf("intervals of b: %v", ib)
	}
	ov := Overlaps(append(ia, ib...))
	if len(ov) != 1 || ov[0].Duration() != time.Millisecond {
		t.Fatalf("overlaps: %v", ov)
	}
	if got := TermRegressions(append(ia, ib...)); len(got) != 0 {
		t.Fatalf("term regressions: %v", got)
	}
}

func TestTermRegressions(t *testing.T) {
	iv := func(c string, term, start int64) Interval {
		return Interval{Candidate: c, Term: term, Start: time.Unix(0, at(start)), End: time.Unix(0, at(start+10))}
	}
	for _, tc := range []struct {
		name string
		ivs  []Interval
		bad  int
	}{
		{"growing", []Interval{iv("a", 0, 0), iv("b", 1, 20), iv("a", 2, 40)}, 0},
		{"same candidate keeps its term", []Interval{iv("a", 4, 0), iv("a", 4, 20)}, 0},
		{"new leader reuses the term", []Interval{iv("a", 4, 0), iv("b", 4, 20)}, 1},
		{"term goes back", []Interval{iv("a", 4, 0), iv("a", 3, 20)}, 1},
		{"unknown terms skipped", []Interval{iv("a", 4, 0), iv("c", -1, 10), iv("b", 5, 20)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := TermRegressions(tc.ivs); len(got) != tc.bad {
				t.Fatalf("got %d violations, want %d: %v", len(got), tc.bad, got)
			}
		})
	}
}

// DoneBy and OnlyAfter judge by what the samples prove: a true sample that
// ended late (the sampler was starved after reading) does not count, one
// that began after the bound does.
func TestDoneByAndOnlyAfter(t *testing.T) {
	recs := []Record{
		{T: at(100), Kind: KindOn, View: ViewRelect, Term: 1, Until: at(180)},                    // read at 100..180
		{T: at(1000), Kind: KindOff, View: ViewRelect, LastTrue: at(990), LastTrueFrom: at(500)}, // last true read at 500..990
	}
	iv := Intervals("a", recs, ViewRelect, time.Time{})[0]
	deadline := time.Unix(0, at(600))
	if iv.End.Before(deadline) {
		t.Fatalf("the interval should end after the deadline as recorded: %v", iv)
	}
	if !iv.DoneBy(deadline) {
		t.Errorf("the last true sample began at 500, before the deadline 600: done by it")
	}
	if iv.DoneBy(time.Unix(0, at(499))) {
		t.Errorf("a true sample began at 500: not done by 499")
	}
	if !iv.OnlyAfter(time.Unix(0, at(150))) || iv.OnlyAfter(time.Unix(0, at(181))) {
		t.Errorf("the first true sample ended at 180: it surely led from 180 on, not before 150")
	}
	open := Intervals("a", recs[:1], ViewRelect, time.Time{})[0]
	if open.DoneBy(time.Now().Add(time.Hour)) {
		t.Errorf("an open interval is done by no deadline")
	}
}

func TestFenceRegressions(t *testing.T) {
	iv := func(who string, startMS int64, fence string) Interval {
		return Interval{Candidate: who, View: ViewRelect, Fence: fence, Start: time.Unix(0, at(startMS))}
	}
	for _, tc := range []struct {
		name string
		ivs  []Interval
		want int
	}{
		{"growing, one candidate's consecutive terms included", []Interval{iv("a", 0, "100"), iv("a", 10, "105"), iv("b", 20, "2000"), iv("a", 30, "2010")}, 0},
		{"given out of order", []Interval{iv("b", 20, "2000"), iv("a", 0, "100")}, 0},
		{"one term seen leading twice", []Interval{iv("a", 0, "100"), iv("a", 10, "100")}, 0},
		{"unknown fences skipped", []Interval{iv("a", 0, "100"), iv("cg", 5, ""), iv("b", 10, "101")}, 0},
		{"compared as integers, not strings", []Interval{iv("a", 0, "99"), iv("b", 10, "100")}, 0},
		{"shared by two candidates", []Interval{iv("a", 0, "100"), iv("b", 10, "100")}, 1},
		{"went back", []Interval{iv("a", 0, "100"), iv("b", 10, "90")}, 1},
		{"below an earlier term, not just the last", []Interval{iv("a", 0, "100"), iv("b", 10, "200"), iv("c", 20, "150")}, 1},
		{"the same fence again after another term", []Interval{iv("a", 0, "100"), iv("b", 10, "200"), iv("a", 20, "100")}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := FenceRegressions(tc.ivs)
			if len(got) != tc.want {
				t.Errorf("got %d violations, want %d: %q", len(got), tc.want, got)
			}
		})
	}
}

func TestShardIntervals(t *testing.T) {
	recs := []Record{
		{T: at(0), Kind: KindOn, View: ViewRelect, Term: 1}, // the election: not a shard
		{T: at(10), Kind: KindOn, View: ViewShard, Shard: "0", Term: 4, Fence: "100"},
		{T: at(20), Kind: KindOn, View: ViewShard, Shard: "1", Term: 2, Fence: "101"},
		{T: at(30), Kind: KindOff, View: ViewShard, Shard: "0", Term: 4, LastTrue: at(30)},
		{T: at(40), Kind: KindOn, View: ViewShard, Shard: "0", Term: 6, Fence: "120"}, // never closed: killed
	}
	dead := time.Unix(0, at(50))
	got := ShardIntervals("a", recs, dead)
	if len(got) != 2 || len(got["0"]) != 2 || len(got["1"]) != 1 {
		t.Fatalf("shard intervals: %v", got)
	}
	first, second := got["0"][0], got["0"][1]
	if first.Shard != "0" || first.Term != 4 || first.Fence != "100" || first.Open ||
		!first.Start.Equal(time.Unix(0, at(10))) || !first.End.Equal(time.Unix(0, at(30))) {
		t.Errorf("shard 0, first term: %v", first)
	}
	if !second.Open || !second.End.Equal(dead) || second.Term != 6 {
		t.Errorf("shard 0, second term: %v", second)
	}
	if iv := got["1"][0]; !iv.Open || iv.Shard != "1" || iv.Fence != "101" {
		t.Errorf("shard 1: %v", iv)
	}
}
