package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// freeAddr returns a loopback address nobody listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// testSidecar is one relect sidecar in-process, on an in-memory Lease API.
type testSidecar struct {
	id, addr, file string
	control        string // --control-addr, with --beat-window
	cancel         context.CancelFunc
	exited         chan struct{} // closed when the sidecar returned code
	code           int
	log            *syncBuffer // its stderr

	mu sync.Mutex
	// latestValid is the latest valid_until this test was handed.
	latestValid time.Time
}

// startSidecar starts relect sidecar as candidate id of the Lease
// default/job on api, with the flags extra after the test's own.
func startSidecar(t *testing.T, api *relecttest.LeaseAPI, id string, extra ...string) *testSidecar {
	t.Helper()
	s := &testSidecar{id: id, addr: freeAddr(t), file: filepath.Join(t.TempDir(), "leader.json"), exited: make(chan struct{}), log: &syncBuffer{}}
	args := append([]string{"--identity=" + id, "--http-addr=" + s.addr, "--file=" + s.file}, testDurations...)
	if slices.ContainsFunc(extra, func(a string) bool { return strings.HasPrefix(a, "--beat-window=") }) &&
		!slices.ContainsFunc(extra, func(a string) bool { return strings.HasPrefix(a, "--control-addr=") }) {
		s.control = freeAddr(t)
		args = append(args, "--control-addr="+s.control)
	}
	args = append(args, extra...)
	plan, _, err := parseSidecar(append(args, "default/job"), io.Discard)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() {
		defer close(s.exited)
		s.code = sidecarElection(ctx, plan, relect.Options{Client: api.Client(id).Clientset()}, s.log)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.exited:
		case <-time.After(30 * time.Second):
			t.Errorf("sidecar %s did not stop", id)
		}
	})
	return s
}

// leader asks GET /leader, retrying while the server starts.
func (s *testSidecar) leader(t *testing.T) leaderState {
	t.Helper()
	var resp *http.Response
	var err error
	for range 100 {
		if resp, err = http.Get("http://" + s.addr + "/leader"); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var st leaderState
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	if st.ValidUntil != nil {
		s.mu.Lock()
		if st.ValidUntil.After(s.latestValid) {
			s.latestValid = *st.ValidUntil
		}
		s.mu.Unlock()
	}
	return st
}

func (s *testSidecar) fileState(t *testing.T) leaderState {
	t.Helper()
	data, err := os.ReadFile(s.file)
	require.NoError(t, err)
	var st leaderState
	require.NoError(t, json.Unmarshal(data, &st), "%s", data)
	return st
}

func ptr[T any](v T) *T { return &v }

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// Two sidecars: /leader and the file say who leads and with which term,
// /healthz and /metrics serve the library's, and on a graceful handover the
// next leader starts only after the validity handed out by the last one has
// passed.
func TestSidecarHandover(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	api.PutReleased("default", "job")
	a := startSidecar(t, api, "a")
	eventually(t, "a leads", func() bool { return a.leader(t).Leading })
	b := startSidecar(t, api, "b")
	eventually(t, "b sees a", func() bool { st := b.leader(t); return st.Leader == "a" && st.Term != nil })

	asked := time.Now()
	st := a.leader(t)
	answered := time.Now()
	aFence := relect.Fence(st.Fence)
	_, err := aFence.Uint64()
	require.NoError(t, err, "a leader's /leader carries its term's fence: %q", st.Fence)
	assert.Equal(t, leaderState{Lease: "default/job", Identity: "a", Leader: "a", Leading: true, Term: ptr(int64(1)), Fence: st.Fence, ValidUntil: st.ValidUntil}, st)
	require.NotNil(t, st.ValidUntil)
	// Valid after the answer, at most --renew-deadline (3 s) after it:
	// bounds taken on either side of the request, which a stall between
	// the answer and the test's clock cannot break.
	assert.True(t, st.ValidUntil.After(asked), "valid_until %v, asked at %v", st.ValidUntil, asked)
	assert.False(t, st.ValidUntil.After(answered.Add(3*time.Second)), "valid_until %v, answered by %v", st.ValidUntil, answered)
	assert.Equal(t, leaderState{Lease: "default/job", Identity: "b", Leader: "a", Term: ptr(int64(1))}, b.leader(t))
	eventually(t, "a's file says it leads", func() bool { return a.fileState(t).Leading })
	eventually(t, "b's file names a", func() bool { return b.fileState(t).Leader == "a" })
	fileValid := a.fileState(t).ValidUntil
	require.NotNil(t, fileValid)

	code, body := get(t, "http://"+a.addr+"/healthz")
	assert.Equal(t, http.StatusOK, code, body)
	code, body = get(t, "http://"+a.addr+"/metrics")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `relect_is_leader{lease="job",lease_namespace="default"} 1`)

	// Keep asking a while it hands over, as a program would.
	asking := make(chan struct{})
	go func() {
		defer close(asking)
		for {
			select {
			case <-a.exited:
				return
			default:
			}
			if resp, err := http.Get("http://" + a.addr + "/leader"); err == nil {
				var st leaderState
				if json.NewDecoder(resp.Body).Decode(&st) == nil && st.ValidUntil != nil {
					a.mu.Lock()
					if st.ValidUntil.After(a.latestValid) {
						a.latestValid = *st.ValidUntil
					}
					a.mu.Unlock()
				}
				resp.Body.Close()
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	a.cancel()
	var bLeads time.Time
	eventually(t, "b leads", func() bool {
		leading := b.leader(t).Leading
		if bLeads.IsZero() && api.Holder("default", "job") == "b" {
			bLeads = time.Now()
		}
		return leading && !bLeads.IsZero()
	})
	<-asking
	assert.Equal(t, 0, a.code)
	a.mu.Lock()
	latest := a.latestValid
	a.mu.Unlock()
	if fileValid.After(latest) {
		latest = *fileValid
	}
	assert.True(t, latest.Before(bLeads), "b took over at %v, before the validity a handed out (%v) had passed", bLeads, latest)
	t.Logf("a's last validity handed out ended %v before b was seen holding the lease", bLeads.Sub(latest).Round(time.Millisecond))

	st = b.leader(t)
	assert.Equal(t, ptr(int64(2)), st.Term)
	assert.Equal(t, "b", st.Leader)
	assert.Equal(t, 1, relect.Fence(st.Fence).Compare(aFence), "b's fence %q is above a's %q", st.Fence, aFence)
	eventually(t, "a's file says it stopped", func() bool { st := a.fileState(t); return !st.Leading && st.ValidUntil == nil })
	eventually(t, "b's file says it leads", func() bool { st := b.fileState(t); return st.Leading && *st.Term == 2 })
}

// --valid-for caps every validity handed out, over HTTP and in the file,
// at that long after the answer, and so the time a graceful stop keeps the
// lease for a program that may act until it: the handover left no leader
// for up to --renew-deadline (8 to 10 s with the defaults), without a way
// to shorten it.
func TestSidecarValidFor(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	api.PutReleased("default", "job")
	const validFor = 300 * time.Millisecond // --renew-deadline is 3 s
	a := startSidecar(t, api, "a", "--valid-for=300ms")
	eventually(t, "a leads", func() bool { return a.leader(t).Leading })
	b := startSidecar(t, api, "b")
	eventually(t, "b sees a", func() bool { return b.leader(t).Leader == "a" })
	for range 5 {
		st := a.leader(t)
		answered := time.Now()
		require.True(t, st.Leading)
		require.NotNil(t, st.ValidUntil)
		assert.False(t, st.ValidUntil.After(answered.Add(validFor)), "valid_until %v more than %v after the answer (%v)", st.ValidUntil, validFor, answered)
		time.Sleep(50 * time.Millisecond)
	}
	eventually(t, "a's file says it leads", func() bool { return a.fileState(t).Leading })
	st := a.fileState(t)
	assert.False(t, st.ValidUntil.After(time.Now().Add(validFor)), "the file's valid_until %v", st.ValidUntil)

	latest := a.leader(t).ValidUntil
	a.cancel()
	eventually(t, "b leads", func() bool { return b.leader(t).Leading })
	<-a.exited
	assert.Equal(t, exitOK, a.code)
	log := a.log.String()
	i := strings.Index(log, "keeping the lease until the validity handed out has passed")
	if i >= 0 { // else nothing handed out was valid any more when the term ended
		_, after, _ := strings.Cut(log[i:], "wait=")
		wait, err := time.ParseDuration(strings.Fields(after)[0])
		require.NoError(t, err, log[i:])
		assert.LessOrEqual(t, wait, validFor, "the stop kept the lease longer than --valid-for")
	}
	assert.True(t, latest.Before(time.Now()), "b leads before a validity a handed out has passed")
}

// The state file is replaced whole: readers see the old JSON or the new,
// never a mix, and no temporary file is left behind.
func TestStateFileIsReplacedAtomically(t *testing.T) {
	dir := t.TempDir()
	f := &stateFile{path: filepath.Join(dir, "leader.json")}
	require.NoError(t, f.write(leaderState{Lease: "default/job", Leader: "a"}))
	before, err := os.Stat(f.path)
	require.NoError(t, err)
	require.NoError(t, f.write(leaderState{Lease: "default/job", Leader: "a"}))
	after, err := os.Stat(f.path)
	require.NoError(t, err)
	assert.True(t, os.SameFile(before, after), "an unchanged state is not rewritten")
	require.NoError(t, f.write(leaderState{Lease: "default/job", Leader: strings.Repeat("b", 200)}))
	after, err = os.Stat(f.path)
	require.NoError(t, err)
	assert.False(t, os.SameFile(before, after), "a new state replaces the file")
	assert.Equal(t, os.FileMode(0o644), after.Mode().Perm())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1)

	bad := &stateFile{path: filepath.Join(dir, "missing-dir", "leader.json")}
	err = bad.write(leaderState{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--file")
}

// A state file that fails on every write is warned of once a minute, not
// at each write; its recovery is told once.
func TestStateFileFailuresAreNotAFlood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		log := slog.New(slog.NewTextHandler(&out, nil))
		var w fileWarnings
		gone := errors.New("--file: open /gone/.state.tmp: no such file or directory")
		for range 3000 { // 20 a second for 150 s
			w.report(log, gone)
			time.Sleep(50 * time.Millisecond)
		}
		w.report(log, nil)
		w.report(log, nil)
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		require.Len(t, lines, 4, "warned at 0, 60 and 120 s, then the recovery:\n%s", out.String())
		assert.Contains(t, lines[1], "not_warned_of_since=1199")
		assert.Contains(t, lines[3], "the state file is written again")
		assert.Contains(t, lines[3], "failures=3000")
		w.report(log, errors.New("--file: disk full"))
		assert.Contains(t, out.String(), "disk full", "a new failure is warned of at once")
	})
}
