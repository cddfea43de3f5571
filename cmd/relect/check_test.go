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
	"sync/atomic"
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
// started, and the call returns at once, saying so. The context ends once
// the check has started its child (it ended after 300 ms, which a busy
// machine could take to start the shell: then no pid was written), and
// "at once" is within 10 s: the child sleeps 30.
func TestCheckCommandTimeout(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	c := newChecker(workCheck{command: `sleep 30 & echo $! > ` + pidFile + `.tmp; mv ` + pidFile + `.tmp ` + pidFile + `; wait`})
	c.setEnv("a", leaseRef{namespace: "default", name: "job"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cancelled atomic.Int64 // UnixNano
	go func() {
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if _, err := os.Stat(pidFile); err == nil {
				break
			}
		}
		cancelled.Store(time.Now().UnixNano())
		cancel()
	}()
	err := c.run(ctx)
	took := time.Since(time.Unix(0, cancelled.Load()))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--check: killed after")
	assert.Less(t, took, 10*time.Second, "the call returns once its context is done, not when the check's child ends")
	data, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	child, err := strconv.Atoi(strings.TrimSpace(string(data)))
	require.NoError(t, err)
	eventually(t, "the check's child killed", func() bool { return !alive(child) })
	t.Logf("the check returned %v after its context ended", took.Round(time.Millisecond))
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
	// Every call has 30 s (300 ms was a margin a busy machine could miss
	// on the answers that come), but the one that must time out: 300 ms.
	for _, tc := range []struct {
		name, url, want string
		timeout         time.Duration
	}{
		{"2xx", srv.URL + "/ok", "", 30 * time.Second},
		{"a redirect to 2xx", srv.URL + "/moved", "", 30 * time.Second},
		{"503 with its reason", srv.URL + "/down", "GET " + srv.URL + "/down: 503 Service Unavailable: database unreachable", 30 * time.Second},
		{"404", srv.URL + "/nothing", "404 Not Found", 30 * time.Second},
		{"hangs past the timeout", srv.URL + "/slow", "context deadline exceeded", 300 * time.Millisecond},
		{"nobody listens", gone.URL + "/ok", "connection refused", 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newChecker(workCheck{url: tc.url})
			ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
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
