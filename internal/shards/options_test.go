package shards

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relect/relect/internal/problem"
	"github.com/relect/relect/internal/work"
	"github.com/relect/relect/shardrange"
)

// settings returns valid Settings of count shards, defaults not applied.
func settings(count int, names ...string) (Settings, *int32, *time.Duration, *work.Options) {
	var weight int32
	var join time.Duration
	var w work.Options
	return Settings{
		Count: count, Names: names, HasRun: true, Weight: &weight, JoinDelay: &join, Work: &w,
		LeaseDuration: 15 * time.Second, DurationsOK: true, Identity: "a",
		DefaultIdentityLen: func() int { return 30 },
	}, &weight, &join, &w
}

func TestCheckOptionsDefaults(t *testing.T) {
	s, weight, join, _ := settings(3)
	var r problem.Reports
	CheckOptions(s, r.Bad)
	if len(r) > 0 || *weight != 1 || *join != 15*time.Second {
		t.Errorf("problems %q, Weight %d, JoinDelay %v; want none, 1, 15s", r, *weight, *join)
	}
	s, _, join, _ = settings(3)
	s.DurationsOK = false
	CheckOptions(s, r.Bad)
	if *join != 0 {
		t.Errorf("JoinDelay %v from an invalid LeaseDuration, want it left 0", *join)
	}
	if got := Names(3, nil); !slices.Equal(got, []string{"0", "1", "2"}) {
		t.Errorf("Names(3, nil) = %q", got)
	}
	if got := Names(0, []string{"x", "y"}); !slices.Equal(got, []string{"x", "y"}) {
		t.Errorf("Names(0, x y) = %q", got)
	}
	if got := Names(-1, nil); got != nil {
		t.Errorf("Names(-1, nil) = %q, want nil", got)
	}
}

func TestCheckOptionsProblems(t *testing.T) {
	long := strings.Repeat("i", 200)
	for _, tc := range []struct {
		name string
		edit func(s *Settings)
		want []string
	}{
		{"count and names", func(s *Settings) { s.Names = []string{"a"} }, []string{"Shards.Count: is 3 and [Shards.Names] has 1 names: set one of them"}},
		{"neither", func(s *Settings) { s.Count = 0 }, []string{"Shards.Count: is 0 and [Shards.Names] is empty: set one of them to take part in shards"}},
		{"negative", func(s *Settings) { s.Count = -1 }, []string{"Shards.Count: is negative (-1)"}},
		{"too many", func(s *Settings) { s.Count = MaxShards + 1 }, []string{"Shards.Count: 1001 is more than 1000 shards"}},
		{"bad names", func(s *Settings) { s.Count, s.Names = 0, []string{"a", "B", "a"} }, []string{
			`Shards.Names[1]: "B" is not a DNS label: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
			`Shards.Names[2]: "a" is named twice`,
		}},
		{"no run, negatives", func(s *Settings) { s.HasRun = false; *s.Weight = -2; *s.JoinDelay = -time.Second }, []string{
			"Shards.Run: is nil", "Shards.Weight: is negative (-2)", "Shards.JoinDelay: is negative (-1s)",
		}},
		{"lock", func(s *Settings) { s.Lock, s.DisableRegistry = true, true }, []string{
			"Shards: is set, but [Lock] is too: shards need the candidate registry, which a [Lock] has not",
		}},
		{"no registry", func(s *Settings) { s.DisableRegistry = true }, []string{
			"Shards: is set, but [DisableRegistry] is too: the leader assigns shards to the registered candidates",
		}},
		{"work", func(s *Settings) { s.Work.Cooldown = -1 }, []string{"Shards.Work.Cooldown: is negative (-1ns)"}},
		{"table", func(s *Settings) { s.Count, s.Identity = 1000, long }, []string{
			fmt.Sprintf("Shards.Count: makes a shard table of about %d KiB with identities of 200 bytes as JSON ([Identity]), more than the 240 KiB of the Lease's annotations it may use (the apiserver allows 256 KiB): fewer shards, shorter shard names or a shorter identity",
				(TableSize(Names(1000, nil), 200)+1023)>>10),
		}},
		{"table, default identity", func(s *Settings) { s.Count, s.Identity, s.DefaultIdentityLen = 1000, "", func() int { return 200 } }, []string{
			fmt.Sprintf("Shards.Count: makes a shard table of about %d KiB with identities of 200 bytes as JSON ([Identity left empty: the host name and 16 hex digits]), more than the 240 KiB of the Lease's annotations it may use (the apiserver allows 256 KiB): fewer shards, shorter shard names or a shorter identity",
				(TableSize(Names(1000, nil), 200)+1023)>>10),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, _, _ := settings(3)
			tc.edit(&s)
			var r problem.Reports
			CheckOptions(s, r.Bad)
			if !slices.Equal(r, tc.want) {
				t.Errorf("problems:\n%q\nwant:\n%q", []string(r), tc.want)
			}
		})
	}
}

// TestCheckOptionsRanges: range shards need Count and a field shardrange
// knows; each refusal names Shards.Ranges.
func TestCheckOptionsRanges(t *testing.T) {
	for _, c := range []struct {
		count  int
		names  []string
		ranges shardrange.Field
		want   string // "" for no problem
	}{
		{8, nil, shardrange.UID, ""},
		{1, nil, shardrange.Namespace, ""},
		{8, nil, "name", `Shards.Ranges: is "name": set "uid", "namespace", or nothing`},
		{0, []string{"a", "b"}, shardrange.UID, `Shards.Ranges: is "uid" and [Shards.Names] is set: range shards are numbered, set [Shards.Count] instead`},
		{0, nil, shardrange.UID, `Shards.Ranges: is "uid" and [Shards.Count] is 0`},
		{-2, nil, shardrange.UID, `Shards.Ranges: is "uid" and [Shards.Count] is -2`},
	} {
		s, _, _, _ := settings(c.count, c.names...)
		s.Ranges = c.ranges
		var r problem.Reports
		CheckOptions(s, r.Bad)
		var ranges []string
		for _, p := range r {
			if strings.HasPrefix(p, "Shards.Ranges") {
				ranges = append(ranges, p)
			}
		}
		switch {
		case c.want == "" && len(ranges) > 0:
			t.Errorf("%+v: problems %q, want none", c, ranges)
		case c.want != "" && (len(ranges) != 1 || !strings.HasPrefix(ranges[0], c.want)):
			t.Errorf("%+v: problems %q, want one starting %q", c, ranges, c.want)
		}
	}
}
