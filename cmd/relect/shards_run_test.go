//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/internal/wire"
	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shardLog reads the lines the shard CMDs of a test wrote ("start SHARD
// IDENTITY FENCE TERM" and "stop SHARD IDENTITY"), checking that each
// shard ran on one candidate at a time — a start only once the shard's
// last CMD had stopped — and that each shard's fence grew from start to
// start. It returns who runs each shard now.
func shardLog(t *testing.T, path string) (running map[string]string) {
	t.Helper()
	running = map[string]string{}
	last := map[string]relect.Fence{}
	for _, line := range fileLines(path) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch {
		case f[0] == "start" && len(f) == 5:
			sh, id, fence := f[1], f[2], relect.Fence(f[3])
			if other, ok := running[sh]; ok {
				t.Errorf("shard %s: %s started while %s still ran it\n%s", sh, id, other, strings.Join(fileLines(path), "\n"))
			}
			_, err := fence.Uint64()
			assert.NoError(t, err, "shard %s: RELECT_FENCE %q", sh, fence)
			if prev, ok := last[sh]; ok {
				assert.Equal(t, 1, fence.Compare(prev), "shard %s: fence %s after %s", sh, fence, prev)
			}
			last[sh], running[sh] = fence, id
		case f[0] == "stop" && len(f) == 3:
			sh, id := f[1], f[2]
			assert.Equal(t, id, running[sh], "shard %s: %s stopped a CMD it did not run", sh, id)
			delete(running, sh)
		default:
			t.Errorf("malformed line %q", line)
		}
	}
	return running
}

// count returns how many shards each candidate runs.
func count(running map[string]string) map[string]int {
	n := map[string]int{}
	for _, id := range running {
		n[id]++
	}
	return n
}

// getShards asks GET /shards.
func getShards(t *testing.T, addr string) shardsState {
	t.Helper()
	var resp *http.Response
	var err error
	for range 100 {
		if resp, err = http.Get("http://" + addr + "/shards"); err == nil {
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

// shardCmd is the CMD of the shard tests: it logs its start (with
// RELECT_SHARD, RELECT_IDENTITY, RELECT_FENCE, RELECT_TERM) and, on
// SIGTERM, its stop.
//
// It sleeps in the background and waits for it, so that the shell runs
// its trap as soon as SIGTERM comes, not when a foreground sleep ends: on
// a busy machine a CMD sleeping in the foreground once took 931 ms to
// stop, past its 500 ms grace, was killed without writing "stop", and the
// next holder's start read as an overlap. With shardDurations the grace
// is 2.5 s.
func shardCmd(log string) []string {
	return []string{"sh", "-c", `trap 'echo "stop $RELECT_SHARD $RELECT_IDENTITY" >> ` + log + `; exit 0' TERM; ` +
		`echo "start $RELECT_SHARD $RELECT_IDENTITY $RELECT_FENCE $RELECT_TERM" >> ` + log + `; while :; do sleep 0.05 & wait $!; done`}
}

// shardDurations, after testDurations, give the tests of shardCmd a margin
// of 5 s, so a grace of 2.5 s to write "stop" (a loaded machine cannot
// miss it), and keep JoinDelay at 4 s. A first deployment's shards wait
// LeaseDuration + RetryPeriod/2: 8.1 s.
var shardDurations = []string{"--lease-duration=8s", "--shard-join-delay=4s"}

// relect run --shards runs CMD once per shard it holds, with the shard and
// its fence in CMD's environment; the shards spread over the candidates;
// a shard moves only once its CMD has stopped, and a candidate that stops
// stops its CMDs before its shards run elsewhere. GET /shards says which
// it holds, with the fences CMD saw; the leader runs no CMD of its own.
func TestRunShards(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	api.PutReleased("default", "job")
	log := filepath.Join(t.TempDir(), "log")
	aAddr, bAddr := freeAddr(t), freeAddr(t)
	cmd := shardCmd(log)
	a := startRun(t, api, "a", append(append(slices.Clone(shardDurations), "--shards=4", "--restart=always", "--http-addr="+aAddr, "--"), cmd...)...)
	eventually(t, "a runs the 4 shards", func() bool { return count(shardLog(t, log))["a"] == 4 })
	b := startRun(t, api, "b", append(append(slices.Clone(shardDurations), "--shards=4", "--restart=always", "--http-addr="+bAddr, "--"), cmd...)...)
	eventually(t, "2 shards each", func() bool {
		n := count(shardLog(t, log))
		return n["a"] == 2 && n["b"] == 2
	})
	assert.Equal(t, "a", api.Holder("default", "job"), "a leads the election, and runs no CMD of its own: 4 CMDs in all")

	// GET /shards: what each holds, with the fences CMD was given.
	fences := map[string]string{}
	for _, line := range fileLines(log) {
		if f := strings.Fields(line); len(f) == 5 && f[0] == "start" {
			fences[f[1]] = f[3]
		}
	}
	running := shardLog(t, log)
	for id, addr := range map[string]string{"a": aAddr, "b": bAddr} {
		st := getShards(t, addr)
		assert.Equal(t, "default/job", st.Lease)
		assert.Equal(t, id, st.Identity)
		var names []string
		for _, h := range st.Shards {
			names = append(names, h.Shard)
			assert.Equal(t, fences[h.Shard], h.Fence, "shard %s's fence", h.Shard)
			assert.Nil(t, h.ValidUntil, "run hands out no validity: relect stops CMD")
			assert.Positive(t, h.Term)
		}
		var want []string
		for sh, holder := range running {
			if holder == id {
				want = append(want, sh)
			}
		}
		slices.Sort(want)
		assert.Equal(t, want, names, "%s's /shards", id)
	}
	code, body := get(t, "http://"+aAddr+"/leader")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `"leading":true`, "with shards the leader's term still shows in /leader")

	// b stops: its CMDs stop, then its shards run on a.
	b.cancel()
	assert.Equal(t, 0, b.exitCode(t))
	eventually(t, "a runs the 4 shards again", func() bool { return count(shardLog(t, log))["a"] == 4 })
	assert.Contains(t, b.log.String(), `msg="term ended: stopping CMD" shard=`)

	a.cancel()
	assert.Equal(t, 0, a.exitCode(t))
	assert.Empty(t, shardLog(t, log), "every CMD stopped")
	t.Logf("the shard CMDs' log:\n%s", strings.Join(fileLines(log), "\n"))
	for i := range 4 {
		assert.Equal(t, "", api.Holder("default", wire.ShardLeaseName("job", fmt.Sprint(i))), "shard %d released", i)
	}
}

// With shards, CMD's exit never ends relect: with --restart=never it ends
// the shard's term (the shard is released, and runs again, here on the
// only candidate), and relect goes on.
func TestRunShardsCmdExitEndsOnlyTheShardsTerm(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	api.PutReleased("default", "job")
	runs := filepath.Join(t.TempDir(), "runs")
	r := startRun(t, api, "a", "--shard-names=alpha", "--", "sh", "-c", `echo "$RELECT_SHARD $RELECT_TERM" >> `+runs+`; exit 3`)
	eventually(t, "CMD ran twice", func() bool { return len(fileLines(runs)) >= 2 })
	select {
	case code := <-r.done:
		t.Fatalf("relect run exited (%d): with shards CMD's exit ends only the shard's term", code)
	default:
	}
	for _, line := range fileLines(runs)[:2] {
		assert.True(t, strings.HasPrefix(line, "alpha "), "RELECT_SHARD: %q", line)
	}
	assert.Contains(t, r.log.String(), "ending the shard's term: CMD exited")
	r.cancel()
	assert.Equal(t, 0, r.exitCode(t), "stopped by its signal, relect exits 0")
}

// The shard flags are checked with the others, and what would do nothing
// with shards is refused.
func TestRunShardFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" accepted
	}{
		{[]string{"--shards=3"}, ""},
		{[]string{"--shard-names=eu,us,ap", "--shard-weight=2", "--shard-join-delay=1m"}, ""},
		{[]string{"--shards=3", "--check=true", "--check-interval=1s", "--work-cooldown=10s"}, ""},
		{[]string{"--shard-weight=2"}, "--shard-weight is set, but there are no shards"},
		{[]string{"--shard-join-delay=1m"}, "--shard-join-delay is set, but there are no shards"},
		{[]string{"--shard-ranges=uid"}, "--shard-ranges is set, but there are no shards"},
		{[]string{"--shards=8", "--shard-ranges=namespace"}, ""},
		{[]string{"--shards=3", "--timeout=1m"}, "--timeout and --shards (or --shard-names) are both given"},
		{[]string{"--shards=3", "--check=true", "--work-stuck-timeout=1m"}, "--work-stuck-timeout is set, but with --shards"},
	} {
		_, _, err := parseRun(append(tc.args, "default/job", "--", "true"), io.Discard)
		if tc.want == "" {
			assert.NoError(t, err, "%q", tc.args)
			continue
		}
		require.Error(t, err, "%q", tc.args)
		assert.Contains(t, err.Error(), tc.want, "%q", tc.args)
	}
	// The library's own checks, named by flag (before the kubeconfig).
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--shards=2", "--shard-names=a,b"}, "--shards is 2 and --shard-names has 2 names: set one of them"},
		{[]string{"--shard-names=a,Not_A_Label"}, `--shard-names "Not_A_Label" is not a DNS label`},
		{[]string{"--shard-names=a,a"}, `--shard-names "a" is named twice`},
		{[]string{"--shards=1001"}, "--shards 1001 is more than 1000 shards"},
		{[]string{"--shards=-1"}, "--shards is negative (-1)"},
		{[]string{"--shards=2", "--shard-ranges=name"}, `--shard-ranges is "name": set "uid", "namespace", or nothing`},
		{[]string{"--shard-names=a,b", "--shard-ranges=uid"}, `--shard-ranges is "uid" and --shard-names is set: range shards are numbered, set --shards instead`},
		{[]string{"--shard-weight=-1", "--shards=2"}, "--shard-weight is negative (-1)"},
		{[]string{"--shards=2", "--disable-registry"}, "--shards (or --shard-names) is set, but --disable-registry is too"},
		{[]string{"--shards=2", "--check=true", "--check-interval=1s", "--check-timeout=2s"}, "--check-timeout 2s is longer than --check-interval 1s"},
	} {
		r := runCLIWith(t, writeKubeconfig(t), append(append([]string{"run"}, tc.args...), "default/job", "--", "true")...)
		assert.Equal(t, exitUsage, r.code, "%q: %s", tc.args, r.stderr)
		assert.Contains(t, r.stderr, tc.want, "%q", tc.args)
	}
}

// With shards, --check checks each shard's work: a candidate whose check
// fails gives its shards up — each stopped as at any term's end, then
// released — and they run on the other, whose check passes.
func TestRunShardsStuckCheckGivesShardsUp(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	api.PutReleased("default", "job")
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	check := `test ! -e ` + dir + `/fail-"$RELECT_IDENTITY"`
	// A cooldown of 10 s: long beside the second below in which a must
	// take nothing back, short enough that a takes its shard back, once b
	// has left, within eventually's 20 s (the only candidate left is
	// passed over for it until then, and the shard waits).
	args := append(append(slices.Concat(checkTimings, shardDurations), "--shards=2", "--restart=always", "--check="+check, "--check-failures=2",
		"--work-cooldown=10s", "--"), shardCmd(log)...)
	a := startRun(t, api, "a", args...)
	eventually(t, "a runs both shards", func() bool { return count(shardLog(t, log))["a"] == 2 })
	b := startRun(t, api, "b", args...)
	eventually(t, "one shard each", func() bool {
		n := count(shardLog(t, log))
		return n["a"] == 1 && n["b"] == 1
	})

	touch(t, filepath.Join(dir, "fail-a"))
	eventually(t, "b runs both shards", func() bool { return count(shardLog(t, log))["b"] == 2 })
	time.Sleep(time.Second) // a, passed over for --work-cooldown (10 s), takes none back
	assert.Equal(t, map[string]int{"b": 2}, count(shardLog(t, log)))
	assert.Contains(t, a.log.String(), "the work check failed 2 times in a row")
	select {
	case code := <-a.done:
		t.Fatalf("relect a exited (%d); it must stay a candidate", code)
	default:
	}
	// That a stayed a candidate is seen, not only its exit not seen yet:
	// its work healed, it runs both shards once b has left.
	require.NoError(t, os.Remove(filepath.Join(dir, "fail-a")))
	b.cancel()
	assert.Equal(t, 0, b.exitCode(t))
	eventually(t, "a runs both shards again once b has left", func() bool { return count(shardLog(t, log))["a"] == 2 })
	t.Logf("the shard CMDs' log:\n%s", strings.Join(fileLines(log), "\n"))
}

// With shards the work check runs for each shard held, told which by
// RELECT_SHARD, as the shard's CMD is.
func TestRunShardsCheckIsPerShard(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	api.PutReleased("default", "job")
	dir := t.TempDir()
	log, checks := filepath.Join(dir, "log"), filepath.Join(dir, "checks")
	args := append(append(slices.Concat(checkTimings, shardDurations), "--shards=2", "--restart=always", `--check=echo "$RELECT_SHARD" >>`+checks, "--"),
		shardCmd(log)...)
	a := startRun(t, api, "a", args...)
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
	assert.Equal(t, 0, a.exitCode(t))
}

// relect run --shard-ranges gives each shard's CMD its range of the data
// as RELECT_SHARD_RANGE — the ShardSelector strings of metav1.ListOptions'
// own 2-shard example — and GET /shards says it too.
func TestRunShardRanges(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	api.PutReleased("default", "job")
	log := filepath.Join(t.TempDir(), "log")
	addr := freeAddr(t)
	r := startRun(t, api, "a", "--shards=2", "--shard-ranges=uid", "--restart=always", "--http-addr="+addr, "--",
		"sh", "-c", `echo "$RELECT_SHARD $RELECT_SHARD_RANGE" >> `+log+`; while :; do sleep 0.05; done`)
	eventually(t, "both shards' CMDs ran", func() bool { return len(fileLines(log)) >= 2 })
	want := map[string]string{
		"0": "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
		"1": "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')",
	}
	got := map[string]string{}
	for _, line := range fileLines(log) {
		sh, rng, _ := strings.Cut(line, " ")
		got[sh] = rng
	}
	assert.Equal(t, want, got, "RELECT_SHARD_RANGE by RELECT_SHARD")
	served := map[string]string{}
	for _, h := range getShards(t, addr).Shards {
		served[h.Shard] = h.Range
	}
	assert.Equal(t, want, served, "GET /shards' range")
	r.cancel()
	assert.Equal(t, 0, r.exitCode(t))
}
