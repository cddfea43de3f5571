package sim

import (
	"cmp"
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/relect/relect"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

func TestGenerate(t *testing.T) {
	seen := map[string]bool{}
	for seed := range uint64(500) {
		sch := Generate(seed)
		if !reflect.DeepEqual(sch, Generate(seed)) {
			t.Fatalf("seed %d: two different schedules", seed)
		}
		if err := ValidTiming(sch.Timing); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if err := validWork(sch.Work); err != nil {
			t.Fatalf("seed %d: %v: %v", seed, sch.Work, err)
		}
		tm := sch.Timing.withDefaults()
		if sch.Candidates < 2 || sch.Candidates > 7 {
			t.Errorf("seed %d: %d candidates", seed, sch.Candidates)
		}
		if sch.Span < sch.Quiet+LivenessBound(tm, tm.BackoffMax)+SuccessionAllowance(tm) {
			t.Errorf("seed %d: span %v too short to judge liveness", seed, sch.Span)
		}
		if !slices.IsSortedFunc(sch.Actions, func(a, b Action) int { return cmp.Compare(a.At, b.At) }) {
			t.Errorf("seed %d: actions out of order", seed)
		}
		if len(sch.Priority) != sch.Candidates || len(sch.Standby) != sch.Candidates {
			t.Fatalf("seed %d: %d priorities and %d standbys for %d candidates", seed, len(sch.Priority), len(sch.Standby), sch.Candidates)
		}
		// Each candidate: started first, then alternately down and up,
		// up at the end unless it left for good; every fault undone.
		up := make([]int, sch.Candidates) // 0 never started, 1 up, 2 down
		left := make([]bool, sch.Candidates)
		broken := map[int]int{}
		stuck := map[Kind]int{} // work faults not undone yet
		for _, a := range sch.Actions {
			seen[a.CoverageKey()] = true
			if a.At > sch.Quiet {
				t.Errorf("seed %d: %v after quiet %v", seed, a, sch.Quiet)
			}
			switch a.Kind {
			case Start:
				if a.Initial != (up[a.Target] == 0) || up[a.Target] == 1 {
					t.Errorf("seed %d: %v while state %d", seed, a, up[a.Target])
				}
				up[a.Target] = 1
			case Kill, Stop:
				if up[a.Target] != 1 {
					t.Errorf("seed %d: %v while not running", seed, a)
				}
				up[a.Target] = 2
				left[a.Target] = a.ForGood
			case HandOver:
				if a.Holder < -1 || a.Holder >= sch.Candidates {
					t.Errorf("seed %d: %v to no candidate", seed, a)
				}
			case FailNext, Fail, FailVerb, Latency, Partition:
				broken[a.Target]++
			case Heal:
				broken[a.Target] = 0
			case HangWork, FailCheck, FailDownstream:
				if !sch.Work.On() {
					t.Errorf("seed %d: %v without work liveness", seed, a)
				}
				stuck[a.Kind]++
			case UnhangWork, HealCheck, HealDownstream:
				for fault, undo := range workUndo {
					if undo == a.Kind {
						stuck[fault]--
					}
				}
			}
		}
		campaigner := false // someone can lead at the end
		for c, st := range up {
			if st != 1 && !left[c] {
				t.Errorf("seed %d: candidate %d ends in state %d", seed, c, st)
			}
			campaigner = campaigner || st == 1 && !sch.Standby[c]
		}
		if !campaigner {
			t.Errorf("seed %d: no candidate that may lead is up at the end", seed)
		}
		for c, n := range broken {
			if n != 0 {
				t.Errorf("seed %d: candidate %d's faults never healed", seed, c)
			}
		}
		for k, n := range stuck {
			if n != 0 {
				t.Errorf("seed %d: %d %v faults not undone", seed, n, k)
			}
		}
	}
	for _, k := range AllCoverageKeys() {
		if strings.HasPrefix(k, "handover-to-") {
			k = "handover" // the target's state is known only when applied
		}
		if !seen[k] {
			t.Errorf("500 schedules never inject %s", k)
		}
	}
}

func TestMinimize(t *testing.T) {
	sch := Generate(7)
	target := -1
	for i, a := range sch.Actions {
		if a.Kind == Kill || a.Kind == Stop {
			target = i
			break
		}
	}
	if target < 0 {
		t.Skip("seed 7 has no kill or stop")
	}
	want := sch.Actions[target]
	has := func(s *Schedule) bool {
		return slices.ContainsFunc(s.Actions, func(a Action) bool { return a.Kind == want.Kind && a.At == want.At })
	}
	m := Minimize(sch, has)
	if m.Candidates != 2 {
		t.Errorf("%d candidates left", m.Candidates)
	}
	var kinds []Kind
	for _, a := range m.Actions {
		if !a.Initial {
			kinds = append(kinds, a.Kind)
		}
	}
	if !slices.Equal(kinds, []Kind{want.Kind, Start}) {
		t.Errorf("minimised to %v, want the %v and its restart:\n%s", kinds, want.Kind, m)
	}
}

// validWork returns relect.New's verdict on w as the schedule's candidates
// get it.
func validWork(w Work) error {
	_, err := relect.New(relect.Options{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: Namespace, Name: LeaseName},
			LockConfig: resourcelock.ResourceLockConfig{Identity: "validation"},
		},
		OnStartedLeading: func(context.Context) {},
		Work:             w.options(func(context.Context) error { return nil }),
	})
	return err
}
