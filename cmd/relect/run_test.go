//go:build linux

package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// testRun is one relect run in-process, on an in-memory Lease API.
type testRun struct {
	cancel context.CancelFunc
	done   chan int
	log    *syncBuffer
}

// startRun starts relect run with args (flags, then the CMD after --) as
// candidate id of the Lease default/job on api.
func startRun(t *testing.T, api *relecttest.LeaseAPI, id string, args ...string) *testRun {
	t.Helper()
	flags := append(append([]string{"--identity=" + id, "--restart-delay=50ms"}, testDurations...), args...)
	i := indexOf(flags, "--")
	plan, _, err := parseRun(append(append(flags[:i:i], "default/job"), flags[i:]...), io.Discard)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	r := &testRun{cancel: cancel, done: make(chan int, 1), log: &syncBuffer{}}
	go func() {
		r.done <- runElection(ctx, plan, relect.Options{Client: api.Client(id).Clientset()}, os.Stderr, r.log)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		default:
			<-r.done
		}
		if t.Failed() {
			t.Logf("%s's log:\n%s", id, r.log)
		}
	})
	return r
}

func indexOf(s []string, x string) int {
	for i, v := range s {
		if v == x {
			return i
		}
	}
	return -1
}

// exitCode waits for the run to return.
func (r *testRun) exitCode(t *testing.T) int {
	t.Helper()
	select {
	case code := <-r.done:
		r.done <- code // for the cleanup
		return code
	case <-time.After(30 * time.Second):
		t.Fatal("relect run did not return")
		return -1
	}
}

func readLines(path string) []string {
	data, _ := os.ReadFile(path)
	return strings.Fields(string(data))
}

// --restart=never: CMD's exit ends the term, the lease is released, and
// relect exits with CMD's status. CMD sees its term, identity and Lease.
func TestRunNeverEndsWithCmdStatus(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	api.PutReleased("default", "job")
	out := filepath.Join(t.TempDir(), "out")
	r := startRun(t, api, "a", "--restart=never", "--",
		"sh", "-c", `echo "$RELECT_TERM $RELECT_IDENTITY $RELECT_LEASE $RELECT_FENCE" > `+out+`; exit 3`)
	assert.Equal(t, 3, r.exitCode(t))
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	fields := strings.Fields(string(data))
	require.Len(t, fields, 4, "%q", data)
	assert.Equal(t, []string{"1", "a", "default/job"}, fields[:3])
	_, err = relect.Fence(fields[3]).Uint64()
	assert.NoError(t, err, "RELECT_FENCE is the term's fence, an integer: %q", fields[3])
	assert.Equal(t, "", api.Holder("default", "job"), "the lease is released before relect exits")
}

// By default CMD runs once, as consul lock runs its child: its exit ends
// the term, the lease is released, and relect exits with CMD's status. (It
// ran 5 times in 4.5 s when the default was --restart=always.)
func TestRunDefaultRunsCmdOnce(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	api.PutReleased("default", "job")
	runs := filepath.Join(t.TempDir(), "runs")
	r := startRun(t, api, "a", "--", "sh", "-c", `echo "backup done" >> `+runs)
	assert.Equal(t, 0, r.exitCode(t))
	assert.Equal(t, []string{"backup", "done"}, readLines(runs), "CMD ran once")
	assert.Equal(t, "", api.Holder("default", "job"), "the lease is released before relect exits")
}

// --timeout: a candidate that does not lead within it exits 124 without
// running CMD, and leaves the Lease alone.
func TestRunTimeoutGivesUp(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	holder, hour, zero := "other", int32(3600), int32(0)
	now := metav1.NowMicro()
	api.Put(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "job"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &hour, LeaseTransitions: &zero,
			AcquireTime: &now, RenewTime: &now},
	})
	ran := filepath.Join(t.TempDir(), "ran")
	r := startRun(t, api, "a", "--timeout=300ms", "--", "sh", "-c", "touch "+ran)
	assert.Equal(t, exitTimedOut, r.exitCode(t))
	assert.NoFileExists(t, ran, "CMD must not run")
	assert.Equal(t, "other", api.Holder("default", "job"))
	assert.Contains(t, r.log.String(), "did not lead within --timeout")
}

// --timeout does not end a term that began within it: CMD, started, runs
// past it, and relect exits with its status. --timeout is 5 s, not the
// second it was: a machine that took longer to take the released Lease
// skipped the test, and one whose timer fired late passed it whatever
// the code did; now 5 s to lead is a failure, and the test waits a whole
// second past the timeout before it lets CMD end.
func TestRunTimeoutSparesATerm(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	api.PutReleased("default", "job")
	dir := t.TempDir()
	log, proceed := filepath.Join(dir, "log"), filepath.Join(dir, "proceed")
	const timeout = 5 * time.Second
	r := startRun(t, api, "a", "--timeout="+timeout.String(), "--",
		"sh", "-c", `echo started >> `+log+`; while [ ! -e `+proceed+` ]; do sleep 0.02; done; echo done >> `+log+`; exit 5`)
	for len(readLines(log)) == 0 {
		select {
		case code := <-r.done:
			r.done <- code // for the cleanup
			t.Fatalf("relect exited (%d) before CMD started: it did not take a released lease within --timeout (%v)\n%s", code, timeout, r.log)
		case <-time.After(5 * time.Millisecond):
		}
	}
	time.Sleep(timeout + time.Second) // the timer, started before CMD, is past; CMD still runs
	require.NoError(t, os.WriteFile(proceed, nil, 0o644))
	assert.Equal(t, 5, r.exitCode(t))
	assert.Equal(t, []string{"started", "done"}, readLines(log))
}

// --restart=on-failure: CMD runs again while it fails; its first success
// ends the term and relect exits 0.
func TestRunOnFailureRestartsUntilSuccess(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	api.PutReleased("default", "job")
	count := filepath.Join(t.TempDir(), "count")
	script := `n=$(cat ` + count + ` 2>/dev/null || echo 0); n=$((n+1)); echo $n > ` + count + `; [ $n -ge 3 ]`
	r := startRun(t, api, "a", "--restart=on-failure", "--", "sh", "-c", script)
	assert.Equal(t, 0, r.exitCode(t))
	assert.Equal(t, []string{"3"}, readLines(count))
	assert.Equal(t, "", api.Holder("default", "job"))
}

// --restart=always: CMD runs again in the same term, and relect keeps the
// lease until it is stopped.
func TestRunAlwaysRestartsInTheSameTerm(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	api.PutReleased("default", "job")
	runs := filepath.Join(t.TempDir(), "runs")
	r := startRun(t, api, "a", "--restart=always", "--", "sh", "-c", `echo "$RELECT_TERM" >> `+runs+`; exit 1`)
	eventually(t, "three runs", func() bool { return len(readLines(runs)) >= 3 })
	assert.Equal(t, "a", api.Holder("default", "job"))
	r.cancel()
	assert.Equal(t, 0, r.exitCode(t))
	for _, term := range readLines(runs) {
		assert.Equal(t, "1", term)
	}
	assert.Equal(t, "", api.Holder("default", "job"))
}

// On cancellation (SIGTERM) CMD gets --signal, exits, and only then is the
// lease released; relect exits 0.
func TestRunStopsCmdGracefully(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	api.PutReleased("default", "job")
	log := filepath.Join(t.TempDir(), "log")
	var (
		mu sync.Mutex
		// linesAtRelease is what CMD had written when the release was
		// sent to the API (nil until then).
		linesAtRelease []string
	)
	api.Observe(func(c relecttest.Call) {
		if c.Verb != relecttest.VerbUpdate || c.Err != nil || api.Holder("default", "job") != "" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if linesAtRelease == nil {
			linesAtRelease = append([]string{}, readLines(log)...)
		}
	})
	// A margin of 8 s and a grace of 7 s: CMD takes 100 ms to stop. (A
	// grace of 900 ms was a margin a loaded machine could miss: CMD, killed
	// before it wrote its line, failed the test.)
	r := startRun(t, api, "a", "--lease-duration=12s", "--renew-deadline=4s", "--grace=7s", "--signal=INT", "--",
		"sh", "-c", `trap 'sleep 0.1; echo stopped >> `+log+`; exit 0' INT; echo started >> `+log+`; while :; do sleep 0.05; done`)
	eventually(t, "CMD started", func() bool { return len(readLines(log)) > 0 })
	r.cancel()
	assert.Equal(t, 0, r.exitCode(t))
	assert.Equal(t, []string{"started", "stopped"}, readLines(log))
	assert.Equal(t, "", api.Holder("default", "job"))
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"started", "stopped"}, linesAtRelease, "the lease was released before CMD had stopped")
	assert.Contains(t, r.log.String(), `msg="CMD exited"`)
}

// A CMD that ignores the signal is killed, with its group, after the grace
// period, and the lease is released after that.
func TestRunKillsCmdAfterGrace(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	api.PutReleased("default", "job")
	pidFile := filepath.Join(t.TempDir(), "pid")
	r := startRun(t, api, "a", "--grace=300ms", "--",
		"sh", "-c", `trap '' TERM; echo $$ > `+pidFile+`; while :; do sleep 0.05; done`)
	var pid int
	eventually(t, "CMD started", func() bool {
		lines := readLines(pidFile)
		if len(lines) == 1 {
			pid, _ = strconv.Atoi(lines[0])
		}
		return pid > 0
	})
	cancelled := time.Now()
	r.cancel()
	assert.Equal(t, 0, r.exitCode(t))
	took := time.Since(cancelled)
	assert.GreaterOrEqual(t, took, 300*time.Millisecond, "killed before the grace period ended")
	assert.False(t, alive(pid), "CMD outlived relect run")
	assert.Contains(t, r.log.String(), "did not exit within the grace period")
	t.Logf("relect run returned %v after it was cancelled (grace 300ms)", took.Round(time.Millisecond))
}

// A CMD that cannot be started (removed after relect checked it) is a
// failure of CMD: with --restart=never relect exits 127.
func TestRunCmdGoneAtStart(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	api.PutReleased("default", "job")
	bin := filepath.Join(t.TempDir(), "cmd")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\nexit 0\n"), 0o755))
	flags := append(append([]string{"--identity=a", "--restart=never"}, testDurations...), "default/job", "--", bin)
	plan, _, err := parseRun(flags, io.Discard)
	require.NoError(t, err)
	require.NoError(t, os.Remove(bin))
	code := runElection(context.Background(), plan, relect.Options{Client: api.Client("a").Clientset()}, io.Discard, io.Discard)
	assert.Equal(t, exitNoCommand, code)
}

// A second stop signal while CMD is given its grace period kills CMD's
// group at once, and the lease is still released (it was left held until
// it expired: relect died of the second signal).
func TestRunSecondSignalKillsCmdAtOnce(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	api.PutReleased("default", "job")
	pidFile := filepath.Join(t.TempDir(), "pid")
	// A margin of 8 s and a grace of 7 s, which CMD, ignoring SIGTERM, would use up.
	plan, _, err := parseRun([]string{"--identity=a", "--lease-duration=12s", "--renew-deadline=4s", "--retry-period=500ms", "--grace=7s",
		"default/job", "--", "sh", "-c", `trap '' TERM; echo $$ > ` + pidFile + `; while :; do sleep 0.05; done`}, io.Discard)
	require.NoError(t, err)
	hurry := make(chan struct{})
	ctx, cancel := context.WithCancel(withHurry(context.Background(), hurry))
	defer cancel()
	log := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- runElection(ctx, plan, relect.Options{Client: api.Client("a").Clientset()}, os.Stderr, log)
	}()
	var pid int
	eventually(t, "CMD started", func() bool {
		lines := readLines(pidFile)
		if len(lines) == 1 {
			pid, _ = strconv.Atoi(lines[0])
		}
		return pid > 0
	})
	cancel() // the first signal
	eventually(t, "CMD signalled", func() bool { return strings.Contains(log.String(), "stopping CMD") })
	close(hurry) // the second
	var code int
	select {
	case code = <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("relect run did not return\n%s", log)
	}
	assert.Equal(t, exitOK, code)
	assert.False(t, alive(pid), "CMD outlived relect run")
	assert.Contains(t, log.String(), "second stop signal: killed CMD's process group")
	assert.Contains(t, log.String(), "killed by SIGKILL")
	assert.NotContains(t, log.String(), "did not exit within the grace period", "killed at once, not after the grace")
	assert.Equal(t, "", api.Holder("default", "job"), "the lease is still released")
}
