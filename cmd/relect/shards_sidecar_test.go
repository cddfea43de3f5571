package main

import (
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/internal/wire"
	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heldNames are the shards of st.
func heldNames(st shardsState) []string {
	names := []string{}
	for _, h := range st.Shards {
		names = append(names, h.Shard)
	}
	return names
}

// shards asks GET /shards of the sidecar, retrying while it starts.
func (s *testSidecar) shards(t *testing.T) shardsState {
	t.Helper()
	var resp *http.Response
	var err error
	for range 100 {
		if resp, err = http.Get("http://" + s.addr + "/shards"); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var st shardsState
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	return st
}

// relect sidecar --shards answers GET /shards: the shards it holds, each
// with its term, fence and a valid_until at most half the margin
// (--lease-duration − --renew-deadline) after the answer; the shards
// spread over the sidecars; and a shard that moves — its sidecar stops —
// is taken by the next only after the last valid_until handed out for it
// has passed. Without shards, /shards answers 404.
func TestSidecarShards(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	api.PutReleased("default", "job")
	a := startSidecar(t, api, "a", "--shards=2")
	eventually(t, "a holds both shards", func() bool { return len(a.shards(t).Shards) == 2 })
	const shardValidFor = 500 * time.Millisecond // (4 s − 3 s) / 2, below --valid-for (3 s)
	before := time.Now()
	st := a.shards(t)
	answered := time.Now()
	assert.Equal(t, "default/job", st.Lease)
	assert.Equal(t, "a", st.Identity)
	assert.Equal(t, []string{"0", "1"}, heldNames(st))
	for _, h := range st.Shards {
		_, err := relect.Fence(h.Fence).Uint64()
		assert.NoError(t, err, "shard %s's fence %q", h.Shard, h.Fence)
		require.NotNil(t, h.ValidUntil, "shard %s", h.Shard)
		assert.False(t, h.ValidUntil.After(answered.Add(shardValidFor)), "shard %s: valid_until %v more than %v after the answer", h.Shard, h.ValidUntil, shardValidFor)
		assert.True(t, h.ValidUntil.After(before.Add(-time.Second)), "shard %s: valid_until %v", h.Shard, h.ValidUntil)
	}
	assert.True(t, a.leader(t).Leading, "a leads the election too")

	b := startSidecar(t, api, "b", "--shards=2")
	eventually(t, "one shard each", func() bool { return len(a.shards(t).Shards) == 1 && len(b.shards(t).Shards) == 1 })
	moving := heldNames(a.shards(t))[0]
	movingLease := wire.ShardLeaseName("job", moving)
	assert.Equal(t, "a", api.Holder("default", movingLease))

	// Keep asking a for its shards while it stops, as a program would;
	// note the latest valid_until it hands out for the moving shard.
	var mu sync.Mutex
	var latest time.Time
	asking, asked := make(chan struct{}), make(chan struct{})
	var once sync.Once
	go func() {
		defer close(asking)
		for {
			select {
			case <-a.exited:
				return
			default:
			}
			if resp, err := http.Get("http://" + a.addr + "/shards"); err == nil {
				var st shardsState
				if json.NewDecoder(resp.Body).Decode(&st) == nil {
					for _, h := range st.Shards {
						mu.Lock()
						if h.Shard == moving && h.ValidUntil != nil && h.ValidUntil.After(latest) {
							latest = *h.ValidUntil
							once.Do(func() { close(asked) })
						}
						mu.Unlock()
					}
				}
				resp.Body.Close()
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	// When a's release of the shard is sent: after that validity, too.
	var releasedAt time.Time
	stopObserving := api.Observe(func(c relecttest.Call) {
		if c.Client == "a" && c.Verb == relecttest.VerbUpdate && c.Name == movingLease && c.Err == nil && api.Holder("default", movingLease) == "" {
			mu.Lock()
			if releasedAt.IsZero() {
				releasedAt = c.Start
			}
			mu.Unlock()
		}
	})
	defer stopObserving()
	<-asked
	a.cancel()
	var bHolds time.Time
	eventually(t, "b holds both shards", func() bool {
		if bHolds.IsZero() && api.Holder("default", movingLease) == "b" {
			bHolds = time.Now()
		}
		return len(b.shards(t).Shards) == 2 && !bHolds.IsZero()
	})
	<-asking
	assert.Equal(t, exitOK, a.code)
	mu.Lock()
	defer mu.Unlock()
	require.False(t, latest.IsZero(), "a handed out a validity for shard %s", moving)
	assert.True(t, latest.Before(bHolds), "b took shard %s at %v, before the validity a handed out (%v) had passed", moving, bHolds, latest)
	require.False(t, releasedAt.IsZero(), "a released shard %s", moving)
	assert.False(t, releasedAt.Before(latest), "a released shard %s at %v, before the validity it handed out (%v) had passed", moving, releasedAt, latest)
	assert.Contains(t, a.log.String(), `msg="shard's term ended: keeping the shard until the validity handed out has passed" shard=`+moving)
	t.Logf("a's last validity handed out for shard %s ended %v before b was seen holding it", moving, bHolds.Sub(latest).Round(time.Millisecond))

	// Without shards: 404, saying so.
	c := startSidecar(t, relecttest.NewLeaseAPI(), "c")
	c.leader(t) // started
	code, body := get(t, "http://"+c.addr+"/shards")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, body, "started without --shards")
}

// fileShards reads the sidecar's --file and returns its "shards": nil if
// absent, or if the file is not written yet.
func (s *testSidecar) fileShards(t *testing.T) *[]heldShard {
	t.Helper()
	data, err := os.ReadFile(s.file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	var st fileState
	require.NoError(t, json.Unmarshal(data, &st), "%s", data)
	return st.Shards
}

// With --shards the sidecar's --file carries "shards", as GET /shards
// serves them: each with its fence and a valid_until at most the shard
// validity after it was written, renewed while the shard is held; a shard
// that moves leaves the file, and is taken by the next holder only after
// the last valid_until the file handed out for it. Without shards the file
// has no "shards".
func TestSidecarShardsFile(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	api.PutReleased("default", "job")
	a := startSidecar(t, api, "a", "--shards=2")
	eventually(t, "a's file lists both shards", func() bool { sh := a.fileShards(t); return sh != nil && len(*sh) == 2 })
	const shardValidFor = 500 * time.Millisecond // as TestSidecarShards
	read := time.Now()
	first := *a.fileShards(t)
	for _, h := range first {
		_, err := relect.Fence(h.Fence).Uint64()
		assert.NoError(t, err, "shard %s's fence %q", h.Shard, h.Fence)
		require.NotNil(t, h.ValidUntil, "shard %s", h.Shard)
		assert.False(t, h.ValidUntil.After(read.Add(shardValidFor)), "shard %s: valid_until %v more than %v after the file was read", h.Shard, h.ValidUntil, shardValidFor)
	}
	eventually(t, "the file's validity is renewed", func() bool {
		sh := *a.fileShards(t)
		return len(sh) == 2 && sh[0].ValidUntil.After(*first[0].ValidUntil)
	})

	b := startSidecar(t, api, "b", "--shards=2")
	eventually(t, "one shard in each file", func() bool {
		sa, sb := a.fileShards(t), b.fileShards(t)
		return sa != nil && sb != nil && len(*sa) == 1 && len(*sb) == 1
	})
	moving := (*a.fileShards(t))[0].Shard
	movingLease := wire.ShardLeaseName("job", moving)
	var latest time.Time
	var bHolds time.Time
	done, seen := make(chan struct{}), make(chan struct{})
	var once sync.Once
	go func() {
		defer close(done)
		for bHolds.IsZero() {
			var st fileState
			if data, err := os.ReadFile(a.file); err == nil && json.Unmarshal(data, &st) == nil && st.Shards != nil {
				for _, h := range *st.Shards {
					if h.Shard == moving && h.ValidUntil != nil && h.ValidUntil.After(latest) {
						latest = *h.ValidUntil
						once.Do(func() { close(seen) })
					}
				}
			}
			if api.Holder("default", movingLease) == "b" {
				bHolds = time.Now()
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	select { // a program read the shard in the file before the stop
	case <-seen:
	case <-time.After(10 * time.Second):
		t.Fatalf("a's file never listed shard %s with a validity", moving)
	}
	a.cancel()
	<-done
	<-a.exited
	require.False(t, latest.IsZero(), "a's file handed out a validity for shard %s", moving)
	assert.True(t, latest.Before(bHolds), "b took shard %s at %v, before the validity a's file handed out (%v) had passed", moving, bHolds, latest)
	t.Logf("the last validity a's file handed out for shard %s ended %v before b was seen holding it", moving, bHolds.Sub(latest).Round(time.Millisecond))

	c := startSidecar(t, relecttest.NewLeaseAPI(), "c")
	c.leader(t)
	eventually(t, "c's file is written", func() bool { return c.fileState(t).Identity == "c" })
	assert.Nil(t, c.fileShards(t), "a file without shards has no \"shards\"")
}

// The sidecar refuses what would do nothing with shards.
func TestSidecarShardFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" accepted
	}{
		{[]string{"--shards=3"}, ""},
		{[]string{"--shard-names=eu,us", "--check=true"}, ""},
		{[]string{"--shards=3", "--standby"}, "--standby and --shards (or --shard-names) are both given"},
		{[]string{"--shards=3", "--beat-window=10s"}, "--beat-window and --shards (or --shard-names) are both given"},
		{[]string{"--shard-weight=3"}, "--shard-weight is set, but there are no shards"},
	} {
		_, _, err := parseSidecar(append(tc.args, "default/job"), io.Discard)
		if tc.want == "" {
			assert.NoError(t, err, "%q", tc.args)
			continue
		}
		require.Error(t, err, "%q", tc.args)
		assert.Contains(t, err.Error(), tc.want, "%q", tc.args)
	}
	// The validity of a shard's answer: --valid-for, at most half the margin.
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{[]string{"--shards=2"}, 2500 * time.Millisecond}, // (15 s − 10 s) / 2
		{[]string{"--shards=2", "--valid-for=1s"}, time.Second},
		{[]string{"--shards=2", "--lease-duration=30s"}, 10 * time.Second}, // --valid-for's default, --renew-deadline
	} {
		p, _, err := parseSidecar(append(tc.args, "default/job"), io.Discard)
		require.NoError(t, err)
		assert.Equal(t, tc.want, p.shardValidFor, strings.Join(tc.args, " "))
	}
}

// With shards the sidecar's --check runs for each shard held, told which
// by RELECT_SHARD, as relect run's does (TestRunShardsCheckIsPerShard).
func TestSidecarShardsCheckIsPerShard(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	api.PutReleased("default", "job")
	checks := filepath.Join(t.TempDir(), "checks")
	a := startSidecar(t, api, "a", "--shards=2", `--check=echo "$RELECT_SHARD" >>`+checks, "--check-interval=1s")
	eventually(t, "a checks both shards", func() bool {
		seen := map[string]bool{}
		for _, l := range fileLines(checks) {
			seen[l] = true
		}
		return seen["0"] && seen["1"]
	})
	for _, l := range fileLines(checks) {
		assert.Contains(t, []string{"0", "1"}, l, "every check names its shard")
	}
	a.cancel()
	<-a.exited
	assert.Equal(t, 0, a.code)
}

// A shard whose work keeps failing shows it in the sidecar's view as in
// relect status: GET /shards and the --file give it "failures", its
// failures in a row as the shard table names them (WORK "failing(k)"),
// on the candidate that holds it next; a healthy shard has none.
func TestSidecarShardFailingShows(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	api.PutReleased("default", "job")
	dir := t.TempDir()
	// Each sidecar's check of shard X fails once dir/fail-ID-X exists.
	args := append(slices.Clone(checkTimings), "--shards=2", "--check-failures=2",
		`--check=test ! -e `+dir+`/fail-"$RELECT_IDENTITY"-"$RELECT_SHARD"`)
	a := startSidecar(t, api, "a", args...)
	eventually(t, "a holds both shards", func() bool { return len(a.shards(t).Shards) == 2 })
	b := startSidecar(t, api, "b", args...)
	eventually(t, "one shard each", func() bool { return len(a.shards(t).Shards) == 1 && len(b.shards(t).Shards) == 1 })
	failing, healthy := heldNames(a.shards(t))[0], heldNames(b.shards(t))[0]
	for _, h := range append(a.shards(t).Shards, b.shards(t).Shards...) {
		assert.Zero(t, h.Failures, "shard %s is healthy", h.Shard)
	}

	// a's work on the shard fails: a gives it up, passed over for it
	// (--work-cooldown, 1 min by default, doubling), and b runs it; the
	// table names it failing until a term of it lasts twice that.
	touch(t, filepath.Join(dir, "fail-a-"+failing))
	failures := func(hs []heldShard) map[string]int {
		out := map[string]int{}
		for _, h := range hs {
			out[h.Shard] = h.Failures
		}
		return out
	}
	eventually(t, "b shows the shard failing", func() bool { return failures(b.shards(t).Shards)[failing] > 0 })
	table := wire.TableOf(api.Lease("default", wire.ShardTableName("job")))
	require.NotNil(t, table)
	st := b.shards(t)
	t.Logf("b's GET /shards with shard %s failing: %+v; the table's failing: %v", failing, st.Shards, table.Failing)
	assert.Equal(t, map[string]int{failing: table.Failing[failing], healthy: 0}, failures(st.Shards), "failures as the table names them")
	assert.Equal(t, 1, table.Failing[failing], "one failure")
	eventually(t, "b's file shows it too", func() bool {
		fs := b.fileShards(t)
		return fs != nil && failures(*fs)[failing] == table.Failing[failing]
	})
}
