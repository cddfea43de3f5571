package main

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Short durations for elections in real time: a margin of 1 s, so a
// default grace of 500 ms. A leader steps down when it has not renewed for
// --renew-deadline: 3 s, which no stall of a busy machine reaches (with
// 1.5 s, one could end a term a test expected to last).
var testDurations = []string{"--lease-duration=4s", "--renew-deadline=3s", "--retry-period=200ms"}

// checkTimings are the work check's interval and timeout for tests in
// real time. A check is a shell that runs in a few milliseconds, but on a
// busy machine its start alone can take longer than the 50 ms that
// --check-interval=100ms left it (its default timeout is half the
// interval): the check then failed as timed out, a passing check counted
// as a failure, and TestRunStuckCheckHandsOver read another message. A
// second is more than a loaded machine takes to start a shell.
var checkTimings = []string{"--check-interval=1s", "--check-timeout=1s"}

// syncBuffer is a bytes.Buffer safe for concurrent writes (the log).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 20*time.Second, 5*time.Millisecond, what)
}
