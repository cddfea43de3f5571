//go:build linux

package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fileLines returns the lines of the file at path (none if it is missing).
func fileLines(path string) []string {
	data, _ := os.ReadFile(path)
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

// touch creates an empty file at path.
func touch(t *testing.T, path string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, nil, 0o644))
}

// relect run's work check runs on the leader and on the successor in line,
// each with its own identity; when it fails on the leader, the term ends,
// CMD is stopped as at any term's end, the Lease goes to the other
// replica, whose CMD starts, and the stuck replica stays a candidate.
func TestRunStuckCheckHandsOver(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	api.PutReleased("default", "job")
	dir := t.TempDir()
	log, checks := filepath.Join(dir, "log"), filepath.Join(dir, "checks")
	check := `echo "$RELECT_IDENTITY" >> ` + checks + `; test ! -e ` + dir + `/fail-"$RELECT_IDENTITY"`
	args := append(slices.Clone(checkTimings), "--restart=always", "--check="+check, "--check-failures=2", "--",
		"sh", "-c", `trap 'echo "stop $RELECT_IDENTITY" >> `+log+`; exit 0' TERM; echo "start $RELECT_IDENTITY" >> `+log+`; while :; do sleep 0.05; done`)
	a := startRun(t, api, "a", args...)
	eventually(t, "a's CMD started", func() bool { return slices.Contains(fileLines(log), "start a") })
	b := startRun(t, api, "b", args...)
	eventually(t, "b's check runs while b is next in line", func() bool { return slices.Contains(fileLines(checks), "b") })
	require.Equal(t, "a", api.Holder("default", "job"))

	touch(t, filepath.Join(dir, "fail-a"))
	eventually(t, "b's CMD started", func() bool { return slices.Contains(fileLines(log), "start b") })
	assert.Equal(t, []string{"start a", "stop a", "start b"}, fileLines(log), "a's CMD stopped before b's started")
	assert.Equal(t, "b", api.Holder("default", "job"))
	select {
	case code := <-a.done:
		t.Fatalf("relect a exited (%d) after its work was stuck; it must stay a candidate", code)
	default:
	}
	assert.Contains(t, a.log.String(), "the leader's work is stuck: handing over")
	assert.Contains(t, a.log.String(), "the work check failed 2 times in a row: --check: exit status 1")
	eventually(t, "a follows b", func() bool { return strings.Contains(a.log.String(), "leader=b") })
	// That a stayed a candidate is seen, not only its exit not seen yet:
	// its work healed, it takes the lease b releases, and its CMD starts.
	require.NoError(t, os.Remove(filepath.Join(dir, "fail-a")))
	b.cancel()
	assert.Equal(t, 0, b.exitCode(t))
	eventually(t, "a leads again once b has left", func() bool { return api.Holder("default", "job") == "a" })
	eventually(t, "a's CMD started again", func() bool { return len(fileLines(log)) == 5 })
	assert.Equal(t, []string{"start a", "stop a", "start b", "stop b", "start a"}, fileLines(log))
}

// post sends POST url and returns the status and the state answered.
func post(t *testing.T, url string) (int, leaderState) {
	t.Helper()
	resp, err := http.Post(url, "", nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	var st leaderState
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusConflict {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	}
	return resp.StatusCode, st
}

// POST /beat keeps a sidecar's term alive under --beat-window; a leader
// whose program stops beating is stuck: alone, it leads on and says so in
// /leader and the file, /healthz fails after --work-stuck-timeout, and a
// beat ends it; with another candidate it hands over, and its /beat
// answers 409. A follower never counts a beat. The window is 1 s and the
// beats 100 ms apart: 900 ms a loaded machine can stall for without a
// beat seen late (the window was 400 ms); times the sidecars report are
// checked between clock readings taken on either side of what set them.
func TestSidecarBeats(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	api.PutReleased("default", "job")
	const window = time.Second
	a := startSidecar(t, api, "a", "--beat-window="+window.String(), "--work-stuck-timeout=300ms")
	eventually(t, "a leads", func() bool { return a.leader(t).Leading })
	var lastBeat time.Time
	for range 15 { // 1.5 s of beats: longer than the window
		lastBeat = time.Now()
		code, st := post(t, "http://"+a.control+"/beat")
		require.Equal(t, http.StatusOK, code)
		require.True(t, st.Leading, "the answer is the state after the beat")
		require.False(t, st.WorkStuck)
		time.Sleep(100 * time.Millisecond)
	}
	code, _ := get(t, "http://"+a.control+"/beat")
	assert.Equal(t, http.StatusMethodNotAllowed, code, "a beat is a POST")

	// Alone, a leader that stops beating leads on, stuck.
	eventually(t, "a stuck", func() bool { return a.leader(t).WorkStuck })
	st := a.leader(t)
	assert.True(t, st.Leading, "nobody to hand over to: a leads on")
	require.NotNil(t, st.WorkStuckSince)
	// (The answer's times are in whole milliseconds.)
	assert.False(t, st.WorkStuckSince.Before(lastBeat.Add(window).Truncate(time.Millisecond)), "stuck since %v, a window after the last beat (sent at %v)", st.WorkStuckSince, lastBeat)
	assert.False(t, st.WorkStuckSince.After(time.Now()), "stuck since %v, in the future", st.WorkStuckSince)
	eventually(t, "the file says stuck", func() bool { return a.fileState(t).WorkStuck })
	eventually(t, "/healthz fails after --work-stuck-timeout", func() bool {
		code, body := get(t, "http://"+a.addr+"/healthz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "stuck")
	})
	code, st = post(t, "http://"+a.control+"/beat")
	require.Equal(t, http.StatusOK, code)
	eventually(t, "a beat ends it", func() bool { return !a.leader(t).WorkStuck && !a.fileState(t).WorkStuck })
	code, body := get(t, "http://"+a.addr+"/healthz")
	assert.Equal(t, http.StatusOK, code, body)

	// With another candidate: a follower's beat counts for nothing, and a
	// leader that stops beating hands over.
	stopBeating, beating := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(beating)
		for {
			select {
			case <-stopBeating:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if resp, err := http.Post("http://"+a.control+"/beat", "", nil); err == nil {
				resp.Body.Close()
			}
		}
	}()
	b := startSidecar(t, api, "b", "--beat-window="+window.String())
	eventually(t, "b follows a", func() bool { return b.leader(t).Leader == "a" })
	code, st = post(t, "http://"+b.control+"/beat")
	assert.Equal(t, http.StatusConflict, code, "a follower's beat")
	assert.False(t, st.Leading)
	stoppedBeating := time.Now()
	close(stopBeating)
	<-beating
	eventually(t, "b leads", func() bool { return b.leader(t).Leading })
	code, st = post(t, "http://"+a.control+"/beat")
	assert.Equal(t, http.StatusConflict, code, "a beat after the stuck handover")
	assert.False(t, st.Leading)
	eventually(t, "a follows b", func() bool { return a.leader(t).Leader == "b" })
	assert.Contains(t, a.log.String(), "no beat for")
	// b does not beat either, but it must hold for --work-cooldown (1
	// minute by default) after a stuck handover: it leads on, stuck.
	eventually(t, "b stuck, holding", func() bool { st := b.leader(t); return st.Leading && st.WorkStuck })
	// Its answer says so: the streak it took over, and when its hold ends:
	// the default --work-cooldown (1 minute) after the first stuck handover,
	// which came after the beats stopped and before this answer.
	st = b.leader(t)
	assert.Equal(t, 1, st.WorkStreak)
	require.NotNil(t, st.WorkHoldUntil, "a holding leader's /leader says until when it holds")
	inMinute := func(what string, at time.Time) {
		t.Helper()
		assert.False(t, at.Before(stoppedBeating.Add(time.Minute).Truncate(time.Millisecond)), "%s %v: before a minute after the beats stopped (%v)", what, at, stoppedBeating)
		assert.False(t, at.After(time.Now().Add(time.Minute)), "%s %v: more than a minute from now", what, at)
	}
	inMinute("hold until", *st.WorkHoldUntil)
	eventually(t, "b's file says it holds", func() bool { return b.fileState(t).WorkStreak == 1 })
	// Both say who cools, and until when: a, after its stuck handover.
	for _, s := range []*testSidecar{a, b} {
		st := s.leader(t)
		require.Len(t, st.WorkCooling, 1, "%+v", st)
		assert.Equal(t, "a", st.WorkCooling[0].Identity)
		inMinute("cooling until", st.WorkCooling[0].Until)
	}
	st = a.leader(t)
	assert.Zero(t, st.WorkStreak, "a follower holds nothing")
	assert.Nil(t, st.WorkHoldUntil)
}

// The sidecar's work check runs on a follower named in the line of
// succession too, and /leader counts its failures there; on the leader,
// failures in a row make the work stuck and it hands over.
func TestSidecarCheck(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	api.PutReleased("default", "job")
	dir := t.TempDir()
	flags := append(slices.Clone(checkTimings), "--check=test ! -e "+dir+`/fail-"$RELECT_IDENTITY"`, "--check-failures=3")
	a := startSidecar(t, api, "a", flags...)
	eventually(t, "a leads", func() bool { return a.leader(t).Leading })
	b := startSidecar(t, api, "b", flags...)
	touch(t, filepath.Join(dir, "fail-b"))
	eventually(t, "b's failures counted while it follows", func() bool { st := b.leader(t); return !st.Leading && st.WorkCheckFailures >= 3 })
	assert.True(t, a.leader(t).Leading, "a follower's failing check leaves the leader alone")
	require.NoError(t, os.Remove(filepath.Join(dir, "fail-b")))
	eventually(t, "b's check passes again", func() bool { return b.leader(t).WorkCheckFailures == 0 })

	touch(t, filepath.Join(dir, "fail-a"))
	eventually(t, "b leads", func() bool { return b.leader(t).Leading })
	st := a.leader(t)
	assert.False(t, st.Leading)
	assert.GreaterOrEqual(t, st.WorkCheckFailures, 3)
	assert.Contains(t, a.log.String(), "the work check failed 3 times in a row")
}

// POST /beat is served on the loopback --control-addr only. --http-addr
// (every interface by default, for the kubelet's probes on the pod IP)
// answers the probes and refuses a beat; the control address cannot be
// reached on another address at all. 127.0.0.2 stands for the pod IP: a
// listener on every interface answers there, one bound to 127.0.0.1 does
// not. Before, the sidecar served POST /beat on --http-addr, and a loop of
// beats from another host kept a leader whose program never beat leading.
func TestBeatsOnlyOnTheLoopbackControlAddr(t *testing.T) {
	l, err := net.Listen("tcp", ":0")
	require.NoError(t, err)
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	require.NoError(t, l.Close())
	api := relecttest.NewLeaseAPI()
	api.PutReleased("default", "job")
	a := startSidecar(t, api, "a", "--http-addr=:"+port, "--beat-window=400ms")
	a.addr = "127.0.0.1:" + port
	eventually(t, "a leads", func() bool { return a.leader(t).Leading })
	_, controlPort, err := net.SplitHostPort(a.control)
	require.NoError(t, err)
	podIP := "127.0.0.2"

	for _, path := range []string{"/healthz", "/leader", "/metrics"} {
		code, body := get(t, "http://"+podIP+":"+port+path)
		assert.Equal(t, http.StatusOK, code, "GET %s on the pod IP: %s", path, body)
	}
	for _, host := range []string{podIP, "127.0.0.1"} {
		resp, err := http.Post("http://"+host+":"+port+"/beat", "", nil)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, "POST /beat on --http-addr (%s)", host)
		assert.Contains(t, string(body), "served on --control-addr "+a.control+" only")
	}
	_, err = http.Post("http://"+podIP+":"+controlPort+"/beat", "", nil)
	require.Error(t, err, "the control address answers on another address than loopback")
	assert.Contains(t, err.Error(), "connection refused")
	code, st := post(t, "http://"+a.control+"/beat")
	assert.Equal(t, http.StatusOK, code)
	assert.True(t, st.Leading)

	// The finding's loop: beats sent to the pod's address do not keep a
	// leader whose program does not beat from being stuck.
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if resp, err := http.Post("http://"+podIP+":"+port+"/beat", "", nil); err == nil {
				resp.Body.Close()
			}
		}
	}()
	eventually(t, "a stuck, whatever reaches its --http-addr", func() bool { return a.leader(t).WorkStuck })
	close(stop)
	<-stopped
}
