//go:build linux

package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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
	args := []string{"--restart=always", "--check=" + check, "--check-interval=100ms", "--check-failures=2", "--",
		"sh", "-c", `trap 'echo "stop $RELECT_IDENTITY" >> ` + log + `; exit 0' TERM; echo "start $RELECT_IDENTITY" >> ` + log + `; while :; do sleep 0.05; done`}
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
	b.cancel()
	assert.Equal(t, 0, b.exitCode(t))
}

// The sidecar's work check runs on a follower named in the line of
// succession too, and /leader counts its failures there; on the leader,
// failures in a row make the work stuck and it hands over.
func TestSidecarCheck(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	api.PutReleased("default", "job")
	dir := t.TempDir()
	flags := []string{"--check=test ! -e " + dir + `/fail-"$RELECT_IDENTITY"`, "--check-interval=100ms", "--check-failures=3"}
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
