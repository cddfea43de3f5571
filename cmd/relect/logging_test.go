package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The library's records reach stderr by default at Info and above (its
// notice of a missing Lease, its warnings), and at Debug with --verbose.
// (The library's logger was nil, discarding everything, unless --verbose.)
func TestLibraryLogsByDefault(t *testing.T) {
	for _, verbose := range []bool{false, true} {
		l := logFlags{format: "text", verbose: verbose}
		_, lib, err := l.loggers(io.Discard)
		require.NoError(t, err)
		require.NotNil(t, lib, "verbose %v", verbose)
		ctx := context.Background()
		assert.True(t, lib.Enabled(ctx, slog.LevelInfo), "verbose %v: Info", verbose)
		assert.True(t, lib.Enabled(ctx, slog.LevelWarn), "verbose %v: Warn", verbose)
		assert.Equal(t, verbose, lib.Enabled(ctx, slog.LevelDebug), "verbose %v: Debug", verbose)
	}
}

// A candidate that finds the Lease missing says so by default, once, with
// when the wait ends (LeaseDuration after the Lease was first seen
// missing). It said nothing for the whole wait unless -v was given; then
// it said it twice, the command's line adding "the first leader is
// elected then", wrong after a deletion.
func TestMissingLeaseWaitIsAnnounced(t *testing.T) {
	api := relecttest.NewLeaseAPI() // no Lease
	args := append(append([]string{"--identity=a", "--http-addr=" + freeAddr(t)}, testDurations...), "default/job")
	plan, _, err := parseSidecar(args, io.Discard)
	require.NoError(t, err)
	stderr := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan int, 1)
	started := time.Now()
	go func() {
		exited <- sidecarElection(ctx, plan, relect.Options{Client: api.Client("a").Clientset()}, stderr)
	}()
	defer func() {
		cancel()
		assert.Equal(t, exitOK, <-exited)
	}()
	const notice = "waiting for the missing Lease"
	eventually(t, "the notice", func() bool { return strings.Contains(stderr.String(), notice) })
	log := stderr.String()
	assert.Equal(t, 1, strings.Count(log, notice), "said once\n%s", log)
	assert.Equal(t, 1, strings.Count(log, "LeaseDuration"), "said once\n%s", log)
	assert.NotContains(t, log, "the first leader is elected then")
	line := log[strings.Index(log, notice):]
	line = line[:strings.IndexByte(line, '\n')]
	assert.Contains(t, line, "lease=default/job")
	_, after, ok := strings.Cut(line, "notBefore=")
	require.True(t, ok, line)
	until, err := time.Parse(time.RFC3339Nano, strings.Fields(after)[0])
	require.NoError(t, err, line)
	// Stamped when the Lease was seen missing, between the start and now.
	assert.False(t, until.Before(started.Add(4*time.Second).Truncate(time.Millisecond)), "until %v, started %v", until, started)
	assert.False(t, until.After(time.Now().Add(4*time.Second)), "until %v", until)
	assert.NotContains(t, log, "level=DEBUG")
}
