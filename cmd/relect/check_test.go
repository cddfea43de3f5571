//go:build linux

package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A check command is healthy when it exits 0; a failure says its status
// and the last line it printed; it sees the candidate's identity and
// Lease.
func TestCheckCommand(t *testing.T) {
	for _, tc := range []struct {
		name, command string
		want          string // "" for healthy, else a part of the error
	}{
		{"exit 0", "true", ""},
		{"exit 1", "false", "--check: exit status 1"},
		{"the last line", `echo "connecting"; echo "db:5432 - no response" >&2; exit 2`, "--check: exit status 2: db:5432 - no response"},
		{"the environment", `test "$RELECT_IDENTITY $RELECT_LEASE" = "a default/job"`, ""},
		{"a long line", `printf '%0300d\n' 0; exit 1`, strings.Repeat("0", maxReported) + "…"},
		{"no such command", "relect-no-such-check", "exit status 127"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newChecker(workCheck{command: tc.command})
			c.setEnv("a", leaseRef{namespace: "default", name: "job"})
			err := c.run(context.Background())
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// A check that outlives its context is killed with everything it
// started, and the call returns at once, saying so.
func TestCheckCommandTimeout(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	c := newChecker(workCheck{command: `sleep 30 & echo $! > ` + pidFile + `; wait`})
	c.setEnv("a", leaseRef{namespace: "default", name: "job"})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.run(ctx)
	took := time.Since(start)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--check: killed after")
	assert.Less(t, took, 300*time.Millisecond+checkWaitDelay, "the call returns once its context is done")
	data, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	child, err := strconv.Atoi(strings.TrimSpace(string(data)))
	require.NoError(t, err)
	eventually(t, "the check's child killed", func() bool { return !alive(child) })
}

// A check URL is healthy on a 2xx answer; another answer, or none, is a
// failure that says what came back.
func TestCheckURL(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.WriteHeader(http.StatusNoContent)
		case "/moved":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/down":
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("database unreachable\nmore detail\n"))
		case "/slow":
			<-r.Context().Done()
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	for _, tc := range []struct {
		name, url, want string
	}{
		{"2xx", srv.URL + "/ok", ""},
		{"a redirect to 2xx", srv.URL + "/moved", ""},
		{"503 with its reason", srv.URL + "/down", "GET " + srv.URL + "/down: 503 Service Unavailable: database unreachable"},
		{"404", srv.URL + "/nothing", "404 Not Found"},
		{"hangs past the timeout", srv.URL + "/slow", "context deadline exceeded"},
		{"nobody listens", gone.URL + "/ok", "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newChecker(workCheck{url: tc.url})
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			err := c.run(ctx)
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.True(t, strings.HasPrefix(err.Error(), "--check-url: "), err.Error())
		})
	}
}

func TestNoCheckConfigured(t *testing.T) {
	assert.Nil(t, newChecker(workCheck{}))
	var c *checker
	c.setEnv("a", leaseRef{}) // does nothing
}
