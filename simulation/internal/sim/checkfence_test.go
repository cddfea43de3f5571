package sim

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// fenceHistory is a history of two terms, c0's (fence 100) then c1's
// (fence 200), with the given writes to the fence store.
func fenceHistory(writes ...Write) *History {
	h := history()
	h.Terms = []Term{{Candidate: 0, Number: 3, Start: 0, Cancelled: 10 * s}, {Candidate: 1, Number: 4, Start: 20 * s, Cancelled: -1}}
	for i := range writes {
		if writes[i].Store == "" {
			writes[i].Store = StoreFence
		}
	}
	h.Writes = writes
	h.FinalAt = 60 * s
	h.Final = map[Store]string{StoreFence: "200"}
	return h
}

// w is a write of term (c0's 0, c1's 1) with token, sent at sent, that
// reached the store as its order-th write at applied and was accepted or
// not, its outcome known to the writer at answered (−1: never).
func w(term int, token string, sent, applied time.Duration, order int, accepted bool, answered time.Duration) Write {
	return Write{Candidate: term, Term: term, Token: token, Sent: sent, Applied: applied, Order: order,
		Accepted: accepted, Answered: answered}
}

func TestLateWrites(t *testing.T) {
	for _, tc := range []struct {
		name          string
		writes        []Write
		late          int
		refusedNewest int
	}{
		{"each term in turn", []Write{
			w(0, "100", 1*s, 1*s+ms, 0, true, 1*s+ms),
			w(1, "200", 21*s, 21*s+ms, 1, true, 21*s+ms),
		}, 0, 0},
		{"a deposed term's late write refused", []Write{
			w(0, "100", 1*s, 1*s+ms, 0, true, 1*s+ms),
			w(1, "200", 21*s, 21*s+ms, 1, true, 21*s+ms),
			w(0, "100", 9*s, 22*s, 2, false, -1),
		}, 0, 0},
		{"a deposed term's late write accepted", []Write{
			w(0, "100", 1*s, 1*s+ms, 0, true, 1*s+ms),
			w(1, "200", 21*s, 21*s+ms, 1, true, 21*s+ms),
			w(0, "300", 9*s, 22*s, 2, true, -1),
		}, 1, 0},
		{"accepted after the newer term's was refused", []Write{
			w(0, "100", 1*s, 1*s+ms, 0, true, 1*s+ms),
			w(1, "50", 21*s, 21*s+ms, 1, false, 21*s+ms),
			w(0, "100", 9*s, 22*s, 2, true, 22*s),
		}, 1, 1},
		{"a lost write never reached the store", []Write{
			w(1, "200", 21*s, 21*s+ms, 0, true, 21*s+ms),
			w(0, "100", 9*s, -1, -1, false, -1),
		}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := fenceHistory(tc.writes...)
			late, refused := LateWrites(h, StoreFence)
			if len(late) != tc.late || refused != tc.refusedNewest {
				t.Errorf("%d late writes, %d of the newest term refused; want %d, %d", len(late), refused, tc.late, tc.refusedNewest)
			}
			vs := rules(CheckSafety(h))
			if want := slices.Repeat([]string{"safety/fence-late-write"}, tc.late); !slices.Equal(vs, want) {
				t.Errorf("CheckSafety: %v, want %v", vs, want)
			}
			// The same writes to the term-number store are counted, not
			// violations.
			for i := range h.Writes {
				h.Writes[i].Store = StoreTerm
			}
			if vs := CheckSafety(h); len(vs) != 0 {
				t.Errorf("the term-number store's late writes are violations: %v", vs)
			}
		})
	}
}

func TestCheckLinearizable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		writes []Write
		final  string
		want   string
	}{
		{"in order", []Write{
			w(0, "100", 1*s, 1*s+ms, 0, true, 1*s+ms),
			w(1, "200", 21*s, 21*s+ms, 1, true, 21*s+ms),
			w(0, "100", 22*s, 22*s+ms, 2, false, 22*s+ms),
		}, "200", Linearizable},
		{"an older token accepted after a newer one was answered", []Write{
			w(1, "200", 21*s, 21*s+ms, 0, true, 21*s+ms),
			w(0, "100", 22*s, 22*s+ms, 1, true, 22*s+ms),
		}, "100", NotLinearizable},
		{"refused with no higher token written", []Write{
			w(0, "100", 1*s, 1*s+ms, 0, true, 1*s+ms),
			w(1, "200", 21*s, 21*s+ms, 1, false, 21*s+ms),
		}, "100", NotLinearizable},
		{"concurrent: either order", []Write{
			w(1, "200", 21*s, 21*s+2*ms, 1, true, 21*s+2*ms),
			w(0, "100", 21*s, 21*s+ms, 0, true, 21*s+3*ms),
		}, "200", Linearizable},
		{"maybe applied explains a refusal", []Write{
			w(1, "200", 21*s, 40*s, 0, true, -1),
			w(0, "100", 22*s, 22*s+ms, 1, false, 22*s+ms),
		}, "200", Linearizable},
		{"maybe applied, lost", []Write{
			w(1, "200", 21*s, -1, -1, false, -1),
			w(0, "100", 22*s, 22*s+ms, 0, true, 22*s+ms),
		}, "100", Linearizable},
		{"the final read sees what no write wrote", []Write{
			w(0, "100", 1*s, 1*s+ms, 0, true, 1*s+ms),
			w(1, "200", 21*s, -1, -1, false, -1),
		}, "300", NotLinearizable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := fenceHistory(tc.writes...)
			h.Final[StoreFence] = tc.final
			l := CheckLinearizable(h, StoreFence, time.Minute)
			if l.Result != tc.want {
				t.Errorf("porcupine: %s, want %s", l.Result, tc.want)
			}
			if tc.want != NotLinearizable {
				return
			}
			path := filepath.Join(t.TempDir(), "vis.html")
			if err := l.Visualize(path); err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(path); err != nil || !strings.Contains(string(b), "write(") {
				t.Errorf("visualization: %v, %d bytes without the operations", err, len(b))
			}
		})
	}
}

// A leader paused past its lease's expiry sends its write once resumed,
// with its old token: relect's fence store refuses it, the client-go
// loop's store applies it after the new leader's.
func TestPlayPausedLeaderWrites(t *testing.T) {
	sch := &Schedule{Seed: 1, Candidates: 2, Priority: []int32{0, 0}, Standby: []bool{false, false},
		Timing: Timing{LeaseDuration: 4 * s, RenewDeadline: 2 * s, RetryPeriod: 500 * ms},
		Actions: []Action{
			{At: 0, Kind: Start, Target: 0, Initial: true},
			{At: 100 * ms, Kind: Start, Target: 1, Initial: true},
			{At: 6 * s, Kind: Pause, Target: 0}, // c0 leads from 4 s (relect waits for a missing Lease)
			{At: 15 * s, Kind: Resume, Target: 0},
		}, Quiet: 15 * s, Span: 21 * s}
	for _, impl := range Impls {
		t.Run(impl.String(), func(t *testing.T) {
			var h *History
			synctest.Test(t, func(t *testing.T) { h = Play(sch, impl) })
			store := storesOf(impl)[0]
			late, _ := LateWrites(h, store)
			resumed := slices.ContainsFunc(h.Writes, func(w Write) bool {
				return w.Candidate == 0 && w.Store == store && w.Sent == 15*s && h.Terms[w.Term].Start < 6*s
			})
			if !resumed {
				t.Fatalf("no write of c0's first term sent at the resume:\n%s", h.Timeline(false))
			}
			switch impl {
			case Relect:
				if len(late) != 0 {
					t.Errorf("the fence store accepted late writes: %+v", late)
				}
				if l := CheckLinearizable(h, StoreFence, time.Minute); l.Result != Linearizable {
					t.Errorf("porcupine: %s", l.Result)
				}
			case ClientGoLoop:
				if len(late) == 0 {
					t.Errorf("the plain store applied no late write:\n%s", h.Timeline(false))
				}
			}
		})
	}
}
