package work

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/relect/relect/internal/defaults"
	"github.com/relect/relect/internal/problem"
)

func TestResolveDefaults(t *testing.T) {
	check := func(context.Context) error { return nil }
	o := Options{Check: check}
	var r problem.Reports
	Resolve(&o, "Work", false, r.Bad)
	if len(r) > 0 {
		t.Fatalf("problems: %q", r)
	}
	want := Options{Check: check, CheckInterval: defaults.WorkCheckInterval, CheckTimeout: defaults.WorkCheckInterval / 2,
		CheckFailures: defaults.WorkCheckFailures, Cooldown: defaults.WorkCooldown, MaxCooldown: max(defaults.WorkMaxCooldown, defaults.WorkCooldown)}
	if fmt.Sprint(withoutCheck(o)) != fmt.Sprint(withoutCheck(want)) {
		t.Errorf("resolved %+v, want %+v", o, want)
	}

	off := Options{}
	Resolve(&off, "Work", true, r.Bad)
	if fmt.Sprint(off) != fmt.Sprint(Options{}) || len(r) > 0 {
		t.Errorf("off: resolved %+v with problems %q, want unchanged and none", off, r)
	}

	long := Options{BeatWindow: time.Second, Cooldown: 2 * defaults.WorkMaxCooldown}
	Resolve(&long, "Work", false, r.Bad)
	if long.MaxCooldown != long.Cooldown || len(r) > 0 {
		t.Errorf("a Cooldown over the default MaxCooldown: MaxCooldown %v, problems %q; want %v, none", long.MaxCooldown, r, long.Cooldown)
	}
}

// withoutCheck is o without its Check, which fmt would print as an address.
func withoutCheck(o Options) Options { o.Check = nil; return o }

func TestResolveProblems(t *testing.T) {
	for _, tc := range []struct {
		name    string
		o       Options
		field   string
		standby bool
		want    []string
	}{
		{"negatives", Options{BeatWindow: -1, CheckInterval: -2, CheckTimeout: -3, Cooldown: -4, MaxCooldown: -5, CheckFailures: -6}, "Shards.Work", false, []string{
			"Shards.Work.BeatWindow: is negative (-1ns)", "Shards.Work.CheckInterval: is negative (-2ns)",
			"Shards.Work.CheckTimeout: is negative (-3ns)", "Shards.Work.Cooldown: is negative (-4ns)",
			"Shards.Work.MaxCooldown: is negative (-5ns)", "Shards.Work.CheckFailures: is negative (-6)",
		}},
		{"overlap", Options{BeatWindow: time.Second, CheckInterval: time.Second, CheckTimeout: 2 * time.Second}, "Work", false, []string{
			"Work.CheckTimeout: 2s is longer than [Work.CheckInterval] 1s: calls of the check would overlap",
		}},
		{"max below", Options{BeatWindow: time.Second, Cooldown: time.Minute, MaxCooldown: time.Second}, "Shards.Work", false, []string{
			"Shards.Work.MaxCooldown: 1s is less than [Shards.Work.Cooldown] 1m0s",
		}},
		{"standby", Options{BeatWindow: time.Second}, "Work", true, []string{
			"Work: is set, but [Standby] is too: a standby never leads, so it has no work to watch",
		}},
		{"standby, shards", Options{BeatWindow: time.Second}, "Shards.Work", true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r problem.Reports
			Resolve(&tc.o, tc.field, tc.standby, r.Bad)
			if !slices.Equal(r, tc.want) {
				t.Errorf("problems:\n%q\nwant:\n%q", []string(r), tc.want)
			}
		})
	}
}
